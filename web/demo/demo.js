// The demo page (web/demo/index.html): boot, the case form and its URL. Start-up stages, the
// WebGPU check and the adapter card are in demo-startup.js; the URL's parameters in
// demo-url.js; a form run in demo-run.js, A vs B in demo-compare.js, the job life cycle both
// share in demo-job.js, the history in demo-history.js (its entries in demo-entries.js), how
// an entry is shown in demo-result.js, the case matrix in demo-matrix.js.
//
// State for tests and the console: window.demo; document.body.dataset.state is
// loading | ready | no-webgpu | error, dataset.run (a form run or a comparison) and
// dataset.smoke (the matrix view) are running | done | error | cancelled.

import { call, getJSON, variantRefusal } from "./demo-api.js";
import { runCompare } from "./demo-compare.js";
import { ALIBI_PRESETS, MASK_PRESETS, cuSeqlens, parseSeqlens } from "./demo-data.js";
import { wireHistory } from "./demo-history.js";
import { initMatrix, runMatrix, selectCase, wireMatrix } from "./demo-matrix.js";
import { renderPictures } from "./demo-result.js";
import { runCase } from "./demo-run.js";
import {
  STAGES,
  Stages,
  checkWebGPU,
  downloaded,
  pythonStarted,
  renderAdapter,
  secs,
  showFatal,
  showNoGpu,
} from "./demo-startup.js";
import { FIELDS, FLOAT_FIELDS, INT_FIELDS, formQuery, readUrl } from "./demo-url.js";
import { $ } from "./demo-util.js";

const form = $("#case-form");
// Timing repeats (time_case's runs): enough for a median and a spread, few enough that a
// big case on a CPU adapter still finishes.
const MAX_REPEATS = 50;
// ConfigError.argument -> the form fields to mark.
const ARG_FIELDS = new Map([
  ["batch * num_heads", ["batch", "num_heads"]],
  ["q / d_out", ["batch", "seq_q", "num_heads", "head_dim"]],
  ["k / v", ["batch", "seq_k", "num_kv_heads", "head_dim"]],
  ["stats", ["batch", "num_heads", "seq_q"]],
  ["case", ["batch", "num_heads", "seq_q", "seq_k", "head_dim"]],
  // Too many slopes: one per batch element and head, over what the kernels read.
  ["alibi_slopes", ["alibi", "batch", "num_heads"]],
  // A variable-length batch: the lengths field sets all of these.
  ["cu_seqlens_q", ["seqlens"]],
  ["cu_seqlens_k", ["seqlens"]],
  ["seqlens", ["seqlens"]],
]);
// A variant's refusal (variant.features_used's feature) -> the form fields that set it.
const FEATURE_FIELDS = new Map([
  ["causal", ["causal"]],
  ["causal_offset", ["causal_offset"]],
  ["bottom_right", ["causal_offset"]],
  ["window", ["window"]],
  ["window_lr", ["window_left", "window_right"]],
  ["softcap", ["softcap"]],
  ["alibi", ["alibi"]],
  ["mask", ["mask"]],
  ["dropout", ["dropout_p"]],
  ["gqa", ["num_kv_heads"]],
  ["varlen", ["seqlens"]],
]);

// The fields to mark for an error: its argument's, those of the feature a variant refuses,
// and window_left / window_right beside window when the error is that both were given.
function errorFields(e, config) {
  const names = [...(ARG_FIELDS.get(e.argument) ?? [e.argument])];
  if (e.feature && FEATURE_FIELDS.has(e.feature)) {
    const all = FEATURE_FIELDS.get(e.feature);
    // window_lr: the side(s) given
    const given = all.filter((n) => !n.startsWith("window_") || config[n] !== -1);
    names.push(...(given.length ? given : all));
  }
  if (e.argument === "window" && /not both/.test(e.message)) {
    names.push(...["window_left", "window_right"].filter((n) => config[n] !== -1));
  }
  return names;
}

// Shared with the other modules, which get the form functions through it (no import cycle).
const state = {
  ready: false,
  busy: false,
  valid: false,
  info: null,
  adapter: null,
  gpu: null,
  variants: null, // {name: description}, from the adapter call
  compiled: new Map(), // variant -> compile ms: compiled on this page's device already
  history: [], // demo-history.js
  selected: null, // the history entry shown
  lastRun: null, // the newest form run (tests read it)
  job: null, // demo-util.js's Job while one runs
  smoke: null, // the last matrix run
  cases: null, // Map id -> /api/cases?set=all entry
  selectedCase: null,
  urlErrors: new Map(), // field -> the link's refusal, until that field is edited
  stageTimes: {},
  validateForm,
  syncButtons,
  readForm,
  updateUrl,
  pageUrl,
};
window.demo = state;

// ---- the case form and its URL ------------------------------------------------------------

function buildSelect(select, options, keep) {
  select.replaceChildren(...[...options].map(([value, label]) => new Option(label, value)));
  if (keep !== undefined && keep !== null) {
    if (![...select.options].some((o) => o.value === keep)) select.append(new Option(keep, keep));
    select.value = keep;
  }
}

// The selects whose options are presets (demo-data.js): a preset gives the config a shape.
const PRESET_SELECTS = new Map([
  ["mask", MASK_PRESETS],
  ["alibi", ALIBI_PRESETS],
]);

// The fields as the HTML gives them: what a re-read URL starts from.
const DEFAULTS = new Map(
  FIELDS.map((n) => {
    const el = form.elements[n];
    return [n, el.type === "checkbox" ? el.checked : el.value];
  }),
);

// Fill the form from a query string (on load, and on back / forward). Returns what was read.
function applyUrl(search) {
  const url = readUrl(search);
  for (const name of FIELDS) {
    const el = form.elements[name];
    const keep = url.values.has(name) ? url.values.get(name) : DEFAULTS.get(name);
    if (el.type === "checkbox") el.checked = url.checked.get(name) ?? DEFAULTS.get(name);
    else if (el.tagName === "SELECT")
      buildSelect(el, [...el.options].map((o) => [o.value, o.text]), keep);
    else el.value = keep;
  }
  state.urlErrors = new Map([...url.errors].filter(([n]) => FIELDS.includes(n)));
  const notes = [...url.errors].filter(([n]) => !FIELDS.includes(n)).map(([, m]) => m);
  if (url.ignored.length) {
    const names = url.ignored.map((n) => JSON.stringify(n.slice(0, 40))).join(", ");
    notes.push(`Ignored link parameters (this page does not read them): ${names}.`);
  }
  state.urlNotes = notes;
  state.urlCase = url.caseId;
  showUrlNotes();
  return url;
}

function showUrlNotes() {
  const el = $("#url-note");
  el.textContent = (state.urlNotes ?? []).join("\n");
  el.hidden = !el.textContent;
}

// The page's URL for the form's fields (and the selected matrix case), plus `extra`.
function pageUrl(extra = {}) {
  const q = formQuery(form, { case: state.selectedCase, ...extra });
  return `${location.origin}${location.pathname}?${q}`;
}

function updateUrl() {
  history.replaceState(null, "", pageUrl());
}

// A field's text as JSON would carry it: ints stay ints and anything else goes to Python as
// it is, so its validation gives the message (e.g. "must be an int, got float 1.5").
function parseValue(text) {
  const t = String(text).trim();
  if (t !== "" && Number.isFinite(Number(t))) return Number(t);
  return t;
}

function readForm() {
  const f = form.elements;
  const config = {};
  for (const n of INT_FIELDS) if (n !== "input_seed" && n !== "repeats") config[n] = parseValue(f[n].value);
  config.causal = f.causal.checked;
  for (const n of FLOAT_FIELDS) config[n] = parseValue(f[n].value);
  const mask = f.mask.value;
  const alibi = f.alibi.value;
  config.mask_shape = presetShape(MASK_PRESETS, mask, config);
  let seqlensError = null;
  try {
    const lens = parseSeqlens(f.seqlens.value);
    if (lens) {
      // the batch and its longest sequences (max_seqlen) follow from the lengths
      const [lensQ, lensK] = lens;
      config.batch = lensQ.length;
      config.seq_q = Math.max(...lensQ);
      config.seq_k = Math.max(...lensK);
      config.cu_seqlens_q = cuSeqlens(lensQ);
      config.cu_seqlens_k = cuSeqlens(lensK);
    }
  } catch (err) {
    seqlensError = { argument: "seqlens", message: err.message };
  }
  config.alibi_shape = presetShape(ALIBI_PRESETS, alibi, config);
  config.scale = null;
  return {
    seqlensError,
    config,
    mask,
    alibi,
    inputSeed: parseValue(f.input_seed.value),
    variant: f.variant.value,
    repeats: parseValue(f.repeats.value),
    query: formQuery(form).toString(),
  };
}

// Elements of a tensor of `shape` (null: absent, 0).
const elems = (shape) => (shape ?? []).reduce((a, b) => a * b, shape ? 1 : 0);

// Bytes of the POST /api/judge body: 8 tensors (+ mask, + ALiBi slopes) as base64.
function judgeBodyBytes(c) {
  const rowsQ = c.cu_seqlens_q ? c.cu_seqlens_q[c.batch] : c.batch * c.seq_q;
  const rowsK = c.cu_seqlens_k ? c.cu_seqlens_k[c.batch] : c.batch * c.seq_k;
  const q = rowsQ * c.num_heads * c.head_dim;
  const kv = rowsK * c.num_kv_heads * c.head_dim;
  const extra = elems(c.mask_shape) + elems(c.alibi_shape);
  return Math.ceil(((4 * q + 4 * kv + rowsQ * c.num_heads + extra) * 4 * 4) / 3) + 4096;
}

const known = (obj, key) => Boolean(obj) && Object.hasOwn(obj, key);
const knownList = (obj) => Object.keys(obj).join(", ");
// A preset's shape for the config; null for an unknown name (selectChecks refuses it).
const presetShape = (presets, name, config) => (known(presets, name) ? presets[name].shape(config) : null);

// The selects' values: a link may name a preset or variant that does not exist (the select
// shows it). Checked whatever else is wrong, so every refused parameter of a link is marked.
function selectChecks(f) {
  const errors = [];
  for (const [name, presets] of PRESET_SELECTS) {
    if (!known(presets, f[name])) {
      errors.push({
        argument: name,
        message: `${name}: unknown preset ${JSON.stringify(f[name])}; known: ${knownList(presets)}`,
      });
    }
  }
  if (state.variants && !known(state.variants, f.variant)) {
    errors.push({
      argument: "variant",
      message: `variant: unknown ${JSON.stringify(f.variant)}; known: ${knownList(state.variants)}`,
    });
  }
  return errors;
}

// The page's own checks of the fields Python does not see (the config's are Python's).
function pageChecks(f) {
  const seed = f.inputSeed;
  if (!(Number.isInteger(seed) && seed >= 0 && seed <= 4294967295)) {
    const why = Number.isInteger(seed)
      ? `must be in [0, 4294967295], got ${seed}`
      : `must be an int, got ${JSON.stringify(seed)}`;
    return { argument: "input_seed", message: `input_seed: ${why}` };
  }
  const n = f.repeats;
  if (!(Number.isInteger(n) && n >= 1 && n <= MAX_REPEATS)) {
    return {
      argument: "repeats",
      message: `repeats: must be an int in [1, ${MAX_REPEATS}], got ${JSON.stringify(n)}`,
    };
  }
  const limit = state.info?.max_body_bytes;
  if (limit && judgeBodyBytes(f.config) > limit) {
    const mib = (b) => (b / 2 ** 20).toFixed(1);
    return {
      argument: "q / d_out",
      message: `case: judging it sends ${mib(judgeBodyBytes(f.config))} MiB to the server, over its limit of ${mib(limit)} MiB (start it with py-harness serve --max-body-mb N)`,
    };
  }
  return null;
}

let validation = 0;
// The link's refusals, Python's validate (through validate_config, with the server's
// reference limits), the variant's refusal (Variant.refusal: a feature it does not support,
// as run_case would refuse it), then the page's own checks. Returns the form when it is
// valid, else null; shows the messages either way.
async function validateForm() {
  const ticket = ++validation;
  const f = readForm();
  const errors = [...state.urlErrors].map(([argument, message]) => ({ argument, message }));
  errors.push(...selectChecks(f).filter((e) => !state.urlErrors.has(e.argument)));
  if (f.seqlensError && !state.urlErrors.has("seqlens")) errors.push(f.seqlensError);
  if (!errors.length && state.pythonReady) {
    const request = { config: f.config };
    if (state.info?.reference_limits) request.limits = state.info.reference_limits;
    const r = await call("validate_config", request);
    if (ticket !== validation) return null; // a newer edit is being checked
    if (!r.ok) errors.push(r);
  }
  if (!errors.length && state.pythonReady && known(state.variants, f.variant)) {
    const r = await variantRefusal(f.variant, f.config);
    if (ticket !== validation) return null;
    // ConfigError("variant", refusal): run_case's words.
    if (r.refusal) errors.push({ argument: "variant", feature: r.feature, message: `variant: ${r.refusal}` });
  }
  if (!errors.length) {
    const e = pageChecks(f);
    if (e) errors.push(e);
  }
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
  $("#form-error").textContent = errors.map((e) => e.message).join("\n");
  for (const e of errors) {
    for (const name of errorFields(e, f.config)) {
      if (FIELDS.includes(name)) form.elements[name].setAttribute("aria-invalid", "true");
    }
  }
  state.valid = !errors.length && Boolean(state.pythonReady);
  syncButtons();
  return errors.length ? null : f;
}

function syncButtons() {
  const idle = state.ready && !state.busy;
  $("#run").disabled = !(idle && state.valid);
  $("#compare").disabled = !(idle && state.valid);
  $("#smoke").disabled = !idle;
  $("#matrix-all").disabled = !idle;
  $("#copy-json").disabled = !state.smoke || state.busy;
  $("#matrix-download").disabled = !state.smoke || state.busy;
  // While a job runs the form is not editable: what is on screen is what is running.
  for (const fs of form.querySelectorAll("fieldset")) fs.disabled = state.busy;
  for (const id of ["#compare-a", "#compare-b", "#matrix-long"]) $(id).disabled = state.busy;
  for (const b of document.querySelectorAll("[data-needs-idle]")) b.disabled = !idle;
}

function wireForm() {
  let timer = 0;
  const changed = (ev) => {
    // The user's edit replaces the link's refused value.
    if (ev?.target?.name) state.urlErrors.delete(ev.target.name);
    updateUrl();
    clearTimeout(timer);
    timer = setTimeout(() => validateForm().catch(showValidationError), 120);
  };
  form.addEventListener("input", changed);
  form.addEventListener("change", changed);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    // runCase validates the form itself: a pending check of the last edit would supersede
    // that one and the run would silently not start.
    clearTimeout(timer);
    runCase(state);
  });
  $("#compare").addEventListener("click", () => {
    clearTimeout(timer);
    runCompare(state);
  });
  $("#share").addEventListener("click", async () => {
    updateUrl();
    await navigator.clipboard?.writeText(location.href).catch(() => {});
    $("#share").textContent = "Link copied";
    setTimeout(() => ($("#share").textContent = "Copy link"), 1500);
  });
  $("#cancel").addEventListener("click", () => state.job?.cancel());
  for (const id of ["#pick-b", "#pick-h"])
    $(id).addEventListener("change", () => renderPictures(state));
  // Back / forward (or a script's pushState + popstate) re-reads the URL without a reload.
  window.addEventListener("popstate", () => {
    if (state.busy) return;
    const url = applyUrl(location.search);
    if (state.cases) selectCase(state, url.caseId, { fromUrl: true });
    validateForm().catch(showValidationError);
  });
}

function showValidationError(err) {
  $("#form-error").textContent = `validate_config failed: ${err.message}`;
}

function fillVariantSelects(variants, keep) {
  const options = Object.keys(variants).map((k) => [k, k]);
  buildSelect(form.elements.variant, options, keep);
  const names = Object.keys(variants);
  buildSelect($("#compare-a"), options, known(variants, keep) ? keep : names[0]);
  buildSelect($("#compare-b"), options, names.find((n) => n !== $("#compare-a").value) ?? names[0]);
  for (const sel of [form.elements.variant, $("#compare-a"), $("#compare-b")]) {
    for (const o of sel.options) o.title = known(variants, o.value) ? variants[o.value] : "unknown variant";
  }
}

// ---- boot -------------------------------------------------------------------------------------

async function boot() {
  for (const [name, presets] of PRESET_SELECTS) {
    buildSelect(
      form.elements[name],
      Object.entries(presets).map(([k, p]) => [k, p.label]),
    );
    DEFAULTS.set(name, "none");
  }
  const opened = applyUrl(location.search);
  updateUrl();
  wireForm();
  wireHistory(state);
  wireMatrix(state);
  const stages = new Stages($("#stages"), state.stageTimes);
  stages.start("download", 0); // since navigation: the page and its scripts count too
  const info = getJSON("/api/info").then(
    (i) => (state.info = i),
    (err) => {
      console.warn(err);
      return null;
    },
  );
  const cases = initMatrix(state).catch((err) => console.warn(err));
  // WebGPU first (tens of ms), before Pyodide's start-up keeps the main thread busy for
  // seconds. Without it nothing here can run: explain how to get it, and load nothing more.
  const gpu = (state.gpu = await checkWebGPU());
  if (!gpu.ok) {
    showNoGpu(gpu.reason);
    for (const [id] of STAGES) stages.skip(id, "needs WebGPU");
    stages.stopClock();
    $("#form-error").textContent = "Running a case needs WebGPU (see the box at the top).";
    return;
  }
  // harness.js defines window.harnessReady / runHarness / harnessTimings and starts Pyodide.
  await import("../harness/harness.js");
  const ready = window.harnessReady;
  ready.catch(() => {});
  // Download ends when both big files are in (polled for the live display, and read again
  // once Python is up, in case the main thread was too busy to poll in between).
  const endDownload = () => {
    if (stages.t.download.end !== undefined) return true;
    const d = downloaded();
    if (!d) return false;
    const mb = `${(d.bytes / 2 ** 20).toFixed(1)} MB${d.cached ? " (browser cache)" : ""}`;
    stages.done("download", `${mb} from /pyodide/`, d.end);
    stages.start("python", d.end);
    return true;
  };
  const poll = setInterval(() => endDownload() && clearInterval(poll), 50);
  pythonStarted().then(() => {
    clearInterval(poll);
    if (!endDownload()) {
      stages.done("download");
      stages.start("python");
    }
    stages.done("python");
    stages.start("package");
  });

  try {
    const t = await ready;
    stages.done(
      "package",
      `wheel ${Math.round(t.packageLoadMs)} ms, import ${Math.round(t.importMs)} ms`,
    );
  } catch (err) {
    clearInterval(poll);
    const failed = Object.keys(stages.t).find((id) => stages.t[id].end === undefined) ?? "package";
    stages.fail(failed, "failed");
    stages.stopClock();
    showFatal(err.message);
    return;
  }
  state.pythonReady = true;
  await info;
  validateForm().catch(showValidationError);

  stages.start("adapter");
  try {
    state.adapter = await call("adapter", {});
  } catch (err) {
    stages.fail("adapter", err.message);
    stages.stopClock();
    showNoGpu(`The harness could not open a device: ${err.message}`);
    return;
  }
  const a = state.adapter;
  state.variants = a.variants;
  state.adapterName = ["vendor", "architecture", "device", "description"]
    .map((k) => a.info[k])
    .filter(Boolean)
    .join(" ");
  renderAdapter(a, state.info, gpu);
  // The URL's variant if it gave one (shown even when unknown: the form refuses it), else
  // the harness's default.
  const fallback = known(a.variants, state.info?.default_variant)
    ? state.info.default_variant
    : Object.keys(a.variants)[0];
  DEFAULTS.set("variant", fallback);
  fillVariantSelects(a.variants, opened.values.get("variant") ?? fallback);
  updateUrl();
  stages.done("adapter", `${a.info.vendor} ${a.info.architecture}`.trim());

  stages.start("compile");
  // The form's variant if it is one, else the default: a link's unknown name only makes the
  // form refuse it.
  const variant = known(a.variants, form.elements.variant.value)
    ? form.elements.variant.value
    : fallback;
  try {
    const r = await call("compile_kernels", { variant });
    state.compiled.set(variant, r.compile_ms);
    stages.done("compile", `${variant}: ${a.variants[variant]}`);
  } catch (err) {
    stages.fail("compile", err.message);
    stages.stopClock();
    showFatal(err.detail ?? err.message);
    return;
  }
  stages.stopClock();
  $("#startup-total").textContent = `ready in ${secs(performance.now())}`;
  await cases;
  state.ready = true;
  document.body.dataset.state = "ready";
  $("#foot").textContent = `${state.adapterName} · ${navigator.userAgent}`;
  const caseOk = selectCase(state, state.urlCase, { fromUrl: true });
  await validateForm().catch(showValidationError);
  // run=1 runs only a link that is valid in every parameter.
  if (!opened.run || opened.errors.size) return;
  if (state.urlCase) {
    if (caseOk) runMatrix(state, "one");
  } else if (state.valid) {
    runCase(state);
  }
}

boot();
