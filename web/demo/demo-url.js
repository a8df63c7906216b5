// The page's URL: which parameters it reads, each checked on its own, and the URL it writes.
//
// A link is user input. Every lookup of a parameter's name or value goes through
// Object.hasOwn or a Map, never `in` or a bare obj[name] on a plain object: `constructor`,
// `__proto__` or `toString` are names like any other, and `variant=constructor` once matched
// Object.prototype.constructor and stopped start-up. A bad value is refused like a bad form
// field (the field marked, the message in #form-error, run=1 ignored); an unknown parameter
// is listed and otherwise ignored.

// The form's fields, by kind: what a link may carry for each.
export const INT_FIELDS = [
  "batch",
  "num_heads",
  "num_kv_heads",
  "seq_q",
  "seq_k",
  "head_dim",
  "causal_offset",
  "window",
  "window_left",
  "window_right",
  "seed",
  "input_seed",
  "repeats",
];
export const FLOAT_FIELDS = ["dropout_p", "softcap"];
export const CHECK_FIELDS = ["causal"];
export const SELECT_FIELDS = ["mask", "alibi", "variant"];
// Free text the form parses itself (demo-data.js's parseSeqlens checks it).
export const TEXT_FIELDS = ["seqlens"];
export const FIELDS = [
  ...INT_FIELDS,
  ...FLOAT_FIELDS,
  ...CHECK_FIELDS,
  ...SELECT_FIELDS,
  ...TEXT_FIELDS,
];
// Not form fields: run=1 runs on load; case=ID selects a matrix case (and with run=1 runs it).
export const OTHER_PARAMS = ["run", "case"];
const KNOWN = new Set([...FIELDS, ...OTHER_PARAMS]);

const INT_TEXT = /^[+-]?\d+$/;
const FLOAT_TEXT = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;
const TRUE_TEXT = ["1", "true", "on"];
const FALSE_TEXT = ["0", "false", "off"];
// How much of a refused value the message quotes.
const QUOTE_CHARS = 40;

const quote = (v) => JSON.stringify(v.length > QUOTE_CHARS ? `${v.slice(0, QUOTE_CHARS)}…` : v);

// What a query string asks for: {values: Map(field -> text), checked: Map(field -> bool),
// errors: Map(param -> message), ignored: [names], run, caseId}. Values are not checked
// against each other or against the harness here (the form's validation does that); only
// that each is the kind of text its field holds.
export function readUrl(search) {
  const q = new URLSearchParams(search);
  const values = new Map();
  const checked = new Map();
  const errors = new Map();
  const ignored = [];
  for (const name of new Set(q.keys())) {
    if (!KNOWN.has(name)) {
      ignored.push(name);
      continue;
    }
    const all = q.getAll(name);
    if (all.length > 1) {
      errors.set(name, `${name}: the link gives it ${all.length} times (${all.map(quote).join(", ")})`);
      continue;
    }
    const v = all[0];
    const t = v.trim();
    if (INT_FIELDS.includes(name)) {
      values.set(name, v);
      if (!INT_TEXT.test(t)) errors.set(name, `${name}: the link's value ${quote(v)} is not an int`);
    } else if (FLOAT_FIELDS.includes(name)) {
      values.set(name, v);
      // "1e999" has a number's syntax but is Infinity, which no float field takes.
      if (!FLOAT_TEXT.test(t) || !Number.isFinite(Number(t)))
        errors.set(name, `${name}: the link's value ${quote(v)} is not a finite number`);
    } else if (CHECK_FIELDS.includes(name)) {
      if (TRUE_TEXT.includes(t.toLowerCase())) checked.set(name, true);
      else if (FALSE_TEXT.includes(t.toLowerCase())) checked.set(name, false);
      else errors.set(name, `${name}: the link's value ${quote(v)} is not 1 or 0`);
    } else if (TEXT_FIELDS.includes(name)) {
      values.set(name, v); // parsed, and refused with the field marked, by the form
    } else if (SELECT_FIELDS.includes(name)) {
      // Known or not, the select shows it: the form's validation refuses an unknown one with
      // the list of known ones.
      values.set(name, v);
    } else if (name === "run") {
      if (t !== "1") errors.set(name, `run: the link's value ${quote(v)} is not 1; nothing is run`);
    } else if (name === "case") {
      values.set(name, v);
    }
  }
  return {
    values,
    checked,
    errors,
    ignored,
    run: q.get("run")?.trim() === "1" && !errors.has("run"),
    caseId: values.get("case") ?? null,
  };
}

// The query string for the form's current fields (and the selected matrix case).
export function formQuery(form, extra = {}) {
  const q = new URLSearchParams();
  for (const name of FIELDS) {
    const el = form.elements[name];
    q.set(name, el.type === "checkbox" ? (el.checked ? "1" : "0") : el.value);
  }
  for (const [k, v] of Object.entries(extra)) if (v !== null && v !== undefined) q.set(k, v);
  return q;
}
