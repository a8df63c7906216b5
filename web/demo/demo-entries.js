// The run history's entries in the page's state: adding one, and which one is shown. A
// module of its own, imported by the history's view, the job life cycle and the pictures
// alike, so that none of them imports another for it (tests/test_web_imports.py: web/ has
// no import cycle).

import { clock } from "./demo-util.js";

// Each entry keeps its tensors (for the pictures): a few MB for the form's default case,
// more for big ones. The oldest go first.
const MAX_HISTORY = 12;
let nextId = 1;

// Names the entry and puts it first (the oldest beyond MAX_HISTORY go); returns its id.
export function recordEntry(state, entry, what) {
  entry.id = nextId++;
  entry.name = `#${entry.id} ${what}`;
  entry.meta = `${entry.runtime} · ${entry.adapter || "unknown adapter"} · ${clock(entry.created)}`;
  state.history.unshift(entry);
  state.history.splice(MAX_HISTORY);
  return entry.id;
}

export function shownEntry(state) {
  return state.history.find((e) => e.id === state.selected) ?? null;
}
