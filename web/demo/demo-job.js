// The job life cycle every run shares (form run, comparison, matrix: busy form, stale
// result, Cancel) and the steps a form run and a comparison share: run_case in Pyodide, the
// server's judgement, where an entry ran. `state` is demo.js's shared state.

import { call, postJudge } from "./demo-api.js";
import { fromBase64, toBase64 } from "./demo-data.js";
import { shownEntry } from "./demo-entries.js";
import { $, Job, esc, runtimeName, secs } from "./demo-util.js";

// The line under the form that says what a run did (#run-status).
export function showStatus(text, cls = "") {
  const el = $("#run-status");
  el.className = `run-status ${cls}`;
  el.textContent = text;
}

function showError(err) {
  const el = $("#run-status");
  el.className = "run-status bad";
  el.innerHTML =
    `<b>${esc(err.message)}</b>` +
    (err.detail
      ? `<details><summary>details</summary><pre>${esc(err.detail)}</pre></details>`
      : "");
}

// ---- the job life cycle -------------------------------------------------------------------

const RESULT_VIEWS = ["#result-card", "#compare-card", "#pictures"];

function banner(kind, html) {
  const b = $("#result-banner");
  b.dataset.kind = kind;
  b.className = `result-banner ${kind}`;
  b.innerHTML = html;
  b.hidden = false;
}

// A job takes the page: the form is disabled and what is on screen is marked as the earlier
// result (`dataset` names the body attribute the job reports on: run or smoke).
export function startJob(state, kind, title, dataset = "run") {
  const job = new Job(kind, title);
  state.job = job;
  state.busy = true;
  state.syncButtons();
  document.body.dataset[dataset] = "running";
  if (dataset === "run") {
    const shown = shownEntry(state);
    for (const sel of RESULT_VIEWS) $(sel).classList.toggle("stale", Boolean(shown));
    banner(
      "running",
      shown
        ? `<b>Running:</b> ${esc(title)}. Below is the earlier result <b>${esc(shown.name)}</b>, not this run.`
        : `<b>Running:</b> ${esc(title)}.`,
    );
  }
  return job;
}

// outcome: done | error | cancelled. A failed or cancelled run leaves the earlier result on
// screen, marked as such, and says so.
export function finishJob(state, job, outcome, err, dataset = "run") {
  job.finish();
  state.job = null;
  state.busy = false;
  document.body.dataset[dataset] = outcome;
  if (dataset === "run") {
    const shown = shownEntry(state);
    const stale = outcome !== "done" && Boolean(shown);
    for (const sel of RESULT_VIEWS) $(sel).classList.toggle("stale", stale);
    const earlier = shown
      ? ` Below is the earlier result <b>${esc(shown.name)}</b>, not this run.`
      : " No result is shown.";
    const took = secs(job.elapsed());
    if (outcome === "done") $("#result-banner").hidden = true;
    else if (outcome === "cancelled")
      banner("cancelled", `<b>Cancelled</b> after ${took}: ${esc(job.title)}. Nothing of it was kept.${earlier}`);
    else banner("failed", `<b>Failed</b> after ${took}: ${esc(job.title)}: ${esc(err.message)}.${earlier}`);
  }
  if (outcome === "cancelled") showStatus(`Cancelled after ${secs(job.elapsed())}: ${job.title}.`, "bad");
  else if (outcome === "error") showError(err);
  state.syncButtons();
}

// ---- the steps every run shares -----------------------------------------------------------

// run_case for `variant` on `tensors`. A variant's first run on this page compiles its
// pipelines (seconds on a CPU adapter): the step says so, and run_case times it apart from
// the passes (timings_ms.compile_ms). compile_kernels is not called here: it compiles every
// head_dim specialisation, run_case only the one this case dispatches.
export async function runOnGpu(state, job, request) {
  const { variant } = request;
  const first = !state.compiled.has(variant);
  job.step(
    first
      ? `Compiling the pipelines of variant ${variant} (first run of this variant), then running forward and backward…`
      : `Running forward and backward on the GPU: variant ${variant} (py_harness in Pyodide)…`,
  );
  const reply = await call("run_case", { backward: true, ...request });
  const compileMs = first ? (reply.timings_ms.compile_ms ?? null) : null;
  if (first) {
    state.compiled.set(variant, compileMs);
    showStatus(`Compiled the pipelines of variant ${variant} in ${secs(compileMs ?? 0)} (first run of this variant).`);
  }
  job.check();
  return { reply, compileMs };
}

// POST /api/judge (waiting out a 503 while the server computes another reference).
export async function judgeOnServer(state, job, body, what) {
  job.step(`Judging ${what} against the float64 NumPy reference on the server…`);
  const t0 = performance.now();
  const judged = await postJudge("/api/judge", { adapter: state.adapterName ?? "", ...body }, job, (text) =>
    job.step(`Judging ${what}: ${text}…`),
  );
  job.check();
  return { judged, judgeMs: performance.now() - t0 };
}

export const decode = (obj) =>
  Object.fromEntries(Object.entries(obj).map(([n, b]) => [n, fromBase64(b)]));

export const encodeInputs = (x) =>
  Object.fromEntries(Object.entries(x).map(([n, a]) => [n, toBase64(a)]));

// What a history entry says about where it ran.
export function provenance(state) {
  return {
    runtime: runtimeName(),
    adapter: state.adapterName ?? "",
    user_agent: navigator.userAgent,
    created: new Date(),
  };
}
