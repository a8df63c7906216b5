// The demo page (web/index.html): boot, the case form and its URL. Start-up stages, the WebGPU
// check and the adapter card are in demo-startup.js; runs, pictures and the smoke suite in
// demo-run.js.
//
// State for tests and the console: window.demo; document.body.dataset.state is
// loading | ready | no-webgpu | error, dataset.run and dataset.smoke are running | done | error.

import { call, getJSON } from "./demo-api.js";
import { MASK_PRESETS } from "./demo-data.js";
import { renderPictures, runCase, runSmoke, copySmokeJson } from "./demo-run.js";
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

const $ = (sel) => document.querySelector(sel);
const form = $("#case-form");
const INT_FIELDS = [
  "batch",
  "num_heads",
  "num_kv_heads",
  "seq_q",
  "seq_k",
  "head_dim",
  "causal_offset",
  "window",
  "seed",
];
const FIELDS = [...INT_FIELDS, "causal", "dropout_p", "mask", "input_seed", "variant"];
// ConfigError.argument -> the form fields to mark.
const ARG_FIELDS = {
  "batch * num_heads": ["batch", "num_heads"],
  "q / d_out": ["batch", "seq_q", "num_heads", "head_dim"],
  "k / v": ["batch", "seq_k", "num_kv_heads", "head_dim"],
  stats: ["batch", "num_heads", "seq_q"],
};

// Shared with demo-run.js, which gets the form functions through it (no import cycle).
const state = {
  ready: false,
  busy: false,
  valid: false,
  info: null,
  adapter: null,
  gpu: null,
  lastRun: null,
  smoke: null,
  stageTimes: {},
  validateForm,
  syncButtons,
};
window.demo = state;

// ---- the case form and its URL ------------------------------------------------------------

function buildSelect(select, options, keep) {
  select.replaceChildren(
    ...Object.entries(options).map(([value, label]) => new Option(label, value)),
  );
  if (keep !== undefined) {
    if (![...select.options].some((o) => o.value === keep)) select.append(new Option(keep, keep));
    select.value = keep;
  }
}

// The query the page was opened with (the form rewrites the URL as it changes).
const OPENED_WITH = new URLSearchParams(location.search);

function restoreFromUrl() {
  const q = OPENED_WITH;
  for (const name of FIELDS) {
    if (!q.has(name)) continue;
    const el = form.elements[name];
    if (el.type === "checkbox") el.checked = ["1", "true", "on"].includes(q.get(name));
    else if (el.tagName === "SELECT")
      buildSelect(
        el,
        Object.fromEntries([...el.options].map((o) => [o.value, o.text])),
        q.get(name),
      );
    else el.value = q.get(name);
  }
  return q.has("run");
}

function updateUrl() {
  const q = new URLSearchParams();
  for (const name of FIELDS) {
    const el = form.elements[name];
    q.set(name, el.type === "checkbox" ? (el.checked ? "1" : "0") : el.value);
  }
  history.replaceState(null, "", `${location.pathname}?${q}`);
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
  for (const n of INT_FIELDS) config[n] = parseValue(f[n].value);
  config.causal = f.causal.checked;
  config.dropout_p = parseValue(f.dropout_p.value);
  config.mask_shape = MASK_PRESETS[f.mask.value]?.shape(config) ?? null;
  config.scale = null;
  return {
    config,
    mask: f.mask.value,
    inputSeed: parseValue(f.input_seed.value),
    variant: f.variant.value,
  };
}

// Bytes of the POST /api/judge body: 8 tensors (+ mask) as base64.
function judgeBodyBytes(c) {
  const q = c.batch * c.seq_q * c.num_heads * c.head_dim;
  const kv = c.batch * c.seq_k * c.num_kv_heads * c.head_dim;
  const mask = (c.mask_shape ?? []).reduce((a, b) => a * b, c.mask_shape ? 1 : 0);
  return Math.ceil(((4 * q + 4 * kv + c.batch * c.num_heads * c.seq_q + mask) * 4 * 4) / 3) + 4096;
}

let validation = 0;
// Python's validate (through validate_config), then the page's own checks. Returns the form
// when it is valid, else null; shows the message either way.
async function validateForm() {
  const ticket = ++validation;
  const f = readForm();
  let error = null;
  if (state.pythonReady) {
    const r = await call("validate_config", { config: f.config });
    if (ticket !== validation) return null; // a newer edit is being checked
    if (!r.ok) error = r;
  }
  const seed = f.inputSeed;
  if (!error && !(Number.isInteger(seed) && seed >= 0 && seed <= 4294967295)) {
    const why = Number.isInteger(seed)
      ? `must be in [0, 4294967295], got ${seed}`
      : `must be an int, got ${JSON.stringify(seed)}`;
    error = { argument: "input_seed", message: `input_seed: ${why}` };
  }
  if (!error && state.variants && !(f.variant in state.variants)) {
    error = {
      argument: "variant",
      message: `variant: unknown '${f.variant}'; known: ${Object.keys(state.variants).join(", ")}`,
    };
  }
  const limit = state.info?.max_body_bytes;
  if (!error && limit && judgeBodyBytes(f.config) > limit) {
    const mib = (b) => (b / 2 ** 20).toFixed(1);
    error = {
      argument: "q / d_out",
      message: `case: judging it sends ${mib(judgeBodyBytes(f.config))} MiB to the server, over its limit of ${mib(limit)} MiB (start it with python server.py --max-body-mb N)`,
    };
  }
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
  $("#form-error").textContent = error ? error.message : "";
  if (error) {
    for (const name of ARG_FIELDS[error.argument] ?? [error.argument]) {
      form.elements[name]?.setAttribute("aria-invalid", "true");
    }
  }
  state.valid = !error && state.pythonReady;
  syncButtons();
  return error ? null : f;
}

function syncButtons() {
  $("#run").disabled = !(state.ready && state.valid) || state.busy;
  $("#smoke").disabled = !state.ready || state.busy;
  $("#copy-json").disabled = !state.smoke || state.busy;
}

function wireForm() {
  let timer = 0;
  const changed = () => {
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
  $("#share").addEventListener("click", async () => {
    updateUrl();
    await navigator.clipboard?.writeText(location.href).catch(() => {});
    $("#share").textContent = "Link copied";
    setTimeout(() => ($("#share").textContent = "Copy link"), 1500);
  });
  $("#smoke").addEventListener("click", () => runSmoke(state));
  $("#copy-json").addEventListener("click", () => copySmokeJson(state));
  for (const id of ["#pick-b", "#pick-h"])
    $(id).addEventListener("change", () => renderPictures(state));
}

function showValidationError(err) {
  $("#form-error").textContent = `validate_config failed: ${err.message}`;
}

// ---- boot -------------------------------------------------------------------------------------

async function boot() {
  buildSelect(
    form.elements.mask,
    Object.fromEntries(Object.entries(MASK_PRESETS).map(([k, p]) => [k, p.label])),
  );
  const autoRun = restoreFromUrl();
  updateUrl();
  wireForm();
  const stages = new Stages($("#stages"), state.stageTimes);
  stages.start("download", 0); // since navigation: the page and its scripts count too
  const info = getJSON("/api/info").then(
    (i) => (state.info = i),
    (err) => {
      console.warn(err);
      return null;
    },
  );
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
  await import("./harness.js");
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
  await info;
  const a = state.adapter;
  state.variants = a.variants;
  state.adapterName = ["vendor", "architecture", "device", "description"]
    .map((k) => a.info[k])
    .filter(Boolean)
    .join(" ");
  renderAdapter(a, state.info, gpu);
  // The URL's variant if it names one, else the harness's default.
  const urlVariant = OPENED_WITH.has("variant");
  const variant = urlVariant
    ? form.elements.variant.value
    : (state.info?.default_variant ?? form.elements.variant.value);
  buildSelect(
    form.elements.variant,
    Object.fromEntries(Object.keys(a.variants).map((k) => [k, k])),
    variant,
  );
  updateUrl();
  for (const o of form.elements.variant.options) o.title = a.variants[o.value] ?? "unknown variant";
  stages.done("adapter", `${a.info.vendor} ${a.info.architecture}`.trim());

  stages.start("compile");
  try {
    const variant =
      form.elements.variant.value in a.variants
        ? form.elements.variant.value
        : Object.keys(a.variants)[0];
    const r = await call("compile_kernels", { variant });
    stages.done("compile", `${variant}: ${a.variants[variant]}`);
  } catch (err) {
    stages.fail("compile", err.message);
    stages.stopClock();
    showFatal(err.detail ?? err.message);
    return;
  }
  stages.stopClock();
  $("#startup-total").textContent = `ready in ${secs(performance.now())}`;
  state.ready = true;
  document.body.dataset.state = "ready";
  $("#foot").textContent = `${state.adapterName} · ${navigator.userAgent}`;
  await validateForm().catch(showValidationError);
  if (autoRun && state.valid) runCase(state);
}

boot();
