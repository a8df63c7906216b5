// A run from the form: inputs, the variant's pipelines (compiled on its first run, announced),
// run_case in Pyodide, the server's judgement, optional repeated timing; then it joins the
// history, which shows it (demo-result.js draws its card and pictures). `state` is demo.js's
// shared state.

import { call } from "./demo-api.js";
import { MASK_LABELS, makeInputs } from "./demo-data.js";
import { addEntry } from "./demo-history.js";
import {
  decode,
  encodeInputs,
  finishJob,
  judgeOnServer,
  provenance,
  runOnGpu,
  showStatus,
  startJob,
} from "./demo-job.js";
import { Cancelled, secs, shapeText } from "./demo-util.js";

// ---- one case from the form ---------------------------------------------------------------

export async function runCase(state) {
  if (state.busy || !state.ready) return;
  const form = await state.validateForm();
  if (!form) return;
  const { config, mask, inputSeed, variant, repeats } = form;
  const shape = shapeText(config, mask, MASK_LABELS);
  const job = startJob(state, "run", `${variant} · ${shape}`);
  showStatus("");
  try {
    job.step("Generating the inputs (mulberry32, Box-Muller)…");
    const x = makeInputs(config, mask, inputSeed);
    const inputs = encodeInputs(x);
    const { reply, compileMs } = await runOnGpu(state, job, { config, tensors: inputs, variant });
    const { judged, judgeMs } = await judgeOnServer(
      state,
      job,
      { config, inputs, outputs: reply.outputs, variant },
      `variant ${variant}`,
    );
    let timing = null;
    if (repeats > 1) {
      job.step(`Timing: ${repeats} repeats of each pass (time_case)…`);
      timing = await call("time_case", { config, tensors: inputs, variant, runs: repeats });
      job.check();
    }
    const got = decode(reply.outputs);
    const ref = decode(judged.reference);
    const entry = {
      kind: "run",
      ...provenance(state),
      shape,
      config,
      mask,
      inputSeed,
      variant,
      query: form.query,
      inputs,
      outputs: reply.outputs,
      timings_ms: reply.timings_ms,
      timing_source: reply.timing_source,
      compile_ms: compileMs,
      judge_ms: judgeMs,
      repeats: timing && { runs: repeats, ...timing },
      passed: judged.passed,
      status: judged.status,
      covered: judged.covered,
      reports: judged.reports,
      maxAbsRef: Object.fromEntries(Object.entries(ref).map(([n, a]) => [n, maxAbs(a)])),
      arrays: { x, got, ref, err: decode(judged.abs_error), bound: decode(judged.bound) },
    };
    state.lastRun = entry;
    addEntry(state, entry, `${variant} · ${shape}`);
    showStatus(
      `Done in ${secs(job.elapsed())} (inputs, ${compileMs === null ? "" : `compile ${secs(compileMs)}, `}GPU, judging, drawing).`,
      "good",
    );
    finishJob(state, job, "done");
  } catch (err) {
    finishJob(state, job, err instanceof Cancelled ? "cancelled" : "error", err);
  }
}

export function maxAbs(a) {
  let m = 0;
  for (const v of a) if (Math.abs(v) > m && Number.isFinite(v)) m = Math.abs(v);
  return m;
}
