// The run history: every form run and comparison is added (never replacing the last), named
// by its variant(s), shape, runtime, adapter and time; one is shown at a time. Each can be
// downloaded as JSON, copied, or turned into the command line that reruns it.

import { recordEntry, shownEntry } from "./demo-entries.js";
import { renderCompare, renderPictures, renderResult, setupPicks } from "./demo-result.js";
import { $, VERDICTS, copyText, downloadJson, esc, slug, verdictOf } from "./demo-util.js";

export function addEntry(state, entry, what) {
  show(state, recordEntry(state, entry, what));
}

export function show(state, id) {
  state.selected = id;
  const e = shownEntry(state);
  renderHistory(state);
  $("#result-card").hidden = e?.kind !== "run";
  $("#compare-card").hidden = e?.kind !== "compare";
  if (!e) {
    $("#pictures").hidden = true;
    return;
  }
  if (e.kind === "run") renderResult(e);
  else renderCompare(e);
  setupPicks(e.config);
  renderPictures(state);
}

function remove(state, id) {
  const i = state.history.findIndex((e) => e.id === id);
  if (i < 0) return;
  state.history.splice(i, 1);
  if (state.lastRun?.id === id) state.lastRun = null;
  if (state.selected === id) {
    // The next newer, else the next older, else nothing.
    const next = state.history[Math.max(0, i - 1)] ?? null;
    show(state, next?.id ?? null);
  } else {
    renderHistory(state);
  }
}

function renderHistory(state) {
  $("#history-card").hidden = state.history.length === 0;
  $("#history").replaceChildren(
    ...state.history.map((e) => {
      const li = document.createElement("li");
      li.dataset.id = e.id;
      li.dataset.kind = e.kind;
      const sel = e.id === state.selected;
      li.classList.toggle("selected", sel);
      const verdicts = (e.kind === "compare" ? [e.a, e.b] : [e]).map((r) => {
        const st = verdictOf(r);
        return `<span class="pill ${VERDICTS[st].cls}" data-status="${st}">${VERDICTS[st].label}</span>`;
      });
      li.innerHTML =
        `<button type="button" class="pick" data-act="show" aria-pressed="${sel}" title="Show this result">` +
        `<span class="h-name">${esc(e.name)}</span><span class="h-meta muted small">${esc(e.meta)}</span></button>` +
        `<span class="h-verdicts">${verdicts.join(" ")}</span>` +
        `<button type="button" class="remove secondary" data-act="remove" title="Remove this entry" aria-label="Remove ${esc(e.name)}">×</button>`;
      return li;
    }),
  );
}

// ---- getting an entry out -----------------------------------------------------------------

const verdictFields = (r) => ({
  status: r.status,
  passed: r.passed,
  covered: r.covered,
  reports: r.reports,
  timings_ms: r.timings_ms,
  timing_source: r.timing_source,
  compile_ms: r.compile_ms,
});

// The entry as JSON: everything but the tensors (the config, mask preset and input seed
// regenerate them; the rerun URL says so).
export function entryJson(state, e) {
  const common = {
    kind: e.kind,
    id: e.id,
    name: e.name,
    created: e.created.toISOString(),
    runtime: e.runtime,
    adapter: e.adapter,
    user_agent: e.user_agent,
    config: e.config,
    mask: e.mask,
    input_seed: e.inputSeed,
    rerun: command(state, e),
  };
  if (e.kind === "compare") {
    return {
      ...common,
      a: { variant: e.a.variant, ...verdictFields(e.a) },
      b: { variant: e.b.variant, ...verdictFields(e.b) },
      max_abs_diff: e.maxDiff,
    };
  }
  return {
    ...common,
    variant: e.variant,
    ...verdictFields(e),
    judge_ms: e.judge_ms,
    repeats: e.repeats,
  };
}

// The page URL that reruns the entry on load (every field, run=1), after `py-harness serve`.
function rerunUrl(e, variant) {
  const q = new URLSearchParams(e.query);
  q.set("variant", variant);
  q.set("run", "1");
  return `${location.origin}${location.pathname}?${q}`;
}

export function command(state, e) {
  const head = "py-harness serve   # then open, in a browser with WebGPU (the link runs on load):";
  if (e.kind === "compare") return [head, rerunUrl(e, e.a.variant), rerunUrl(e, e.b.variant)].join("\n");
  return [head, rerunUrl(e, e.variant)].join("\n");
}

const fileName = (e) => `py-harness-${e.kind}-${e.id}-${slug(e.kind === "compare" ? `${e.a.variant}-vs-${e.b.variant}` : e.variant)}.json`;

function copied(button, ok, label) {
  button.textContent = ok ? "Copied" : "Copy failed";
  setTimeout(() => (button.textContent = label), 1500);
}

export function wireHistory(state) {
  $("#history").addEventListener("click", (ev) => {
    const button = ev.target.closest("button[data-act]");
    if (!button) return;
    const id = Number(button.closest("li").dataset.id);
    if (button.dataset.act === "remove") remove(state, id);
    else show(state, id);
  });
  $("#history-clear").addEventListener("click", () => {
    state.history.splice(0);
    state.lastRun = null;
    show(state, null);
  });
  const shown = () => shownEntry(state);
  for (const prefix of ["result", "compare"]) {
    $(`#${prefix}-download`).addEventListener("click", () => {
      const e = shown();
      if (e) downloadJson(fileName(e), entryJson(state, e));
    });
    $(`#${prefix}-command`).addEventListener("click", async (ev) => {
      const button = ev.currentTarget; // null once the handler awaits
      const e = shown();
      if (!e) return;
      const text = command(state, e);
      const pre = $(`#${prefix}-command-text`);
      pre.textContent = text;
      pre.hidden = false;
      copied(button, await copyText(text), "Copy command line");
    });
  }
  $("#result-copy-json").addEventListener("click", async (ev) => {
    const button = ev.currentTarget;
    const e = shown();
    if (e) copied(button, await copyText(JSON.stringify(entryJson(state, e), null, 1)), "Copy JSON");
  });
}
