// Variant A against variant B in one click: the form's case, the same inputs for both, each
// run on the GPU and judged by the server; then it joins the history, whose comparison card
// (demo-result.js) shows their times, their error ratios and the largest |A - B| per output
// side by side, and the pictures map |A - B|.

import { variantRefusal } from "./demo-api.js";
import { MASK_LABELS, makeInputs } from "./demo-data.js";
import { addEntry } from "./demo-history.js";
import {
  decode,
  encodeInputs,
  finishJob,
  judgeOnServer,
  provenance,
  runOnGpu,
  startJob,
} from "./demo-job.js";
import { $, Cancelled, secs, shapeText } from "./demo-util.js";

export async function runCompare(state) {
  if (state.busy || !state.ready) return;
  const form = await state.validateForm();
  if (!form) return;
  const a = $("#compare-a").value;
  const b = $("#compare-b").value;
  for (const v of [a, b]) {
    if (!Object.hasOwn(state.variants ?? {}, v)) {
      $("#run-status").textContent = `compare: unknown variant ${JSON.stringify(v)}`;
      return;
    }
  }
  const { config, mask, inputSeed } = form;
  // The form checked its own variant; A and B may not run this case either (Variant.refusal):
  // say so before any run, as the form does.
  for (const [side, v] of [["A", a], ["B", b]]) {
    const { refusal } = await variantRefusal(v, config);
    if (refusal) {
      $("#run-status").className = "run-status bad";
      $("#run-status").textContent = `compare: ${side} (${v}): ${refusal}`;
      return;
    }
  }
  const shape = shapeText(config, mask, MASK_LABELS);
  const job = startJob(state, "compare", `${a} vs ${b} · ${shape}`);
  try {
    job.step("Generating the inputs (mulberry32, Box-Muller)…");
    const x = makeInputs(config, mask, inputSeed);
    const inputs = encodeInputs(x);
    const sides = [];
    for (const variant of [a, b]) {
      const { reply, compileMs } = await runOnGpu(state, job, { config, tensors: inputs, variant });
      sides.push({ variant, reply, compileMs });
    }
    for (const [i, side] of sides.entries()) {
      const { judged } = await judgeOnServer(
        state,
        job,
        { config, inputs, outputs: side.reply.outputs, variant: side.variant },
        `${"AB"[i]} (${side.variant})`,
      );
      side.judged = judged;
    }
    job.step("Differencing the outputs…");
    const gotA = decode(sides[0].reply.outputs);
    const gotB = decode(sides[1].reply.outputs);
    const diff = {};
    const maxDiff = {};
    for (const name of Object.keys(gotA)) {
      const d = new Float32Array(gotA[name].length);
      let m = 0;
      for (let i = 0; i < d.length; i++) {
        d[i] = Math.abs(gotA[name][i] - gotB[name][i]);
        // NaN in either output: the difference is NaN too, and it is the largest.
        if (!(d[i] <= m)) m = Number.isNaN(d[i]) ? NaN : d[i];
        if (Number.isNaN(m)) break;
      }
      diff[name] = d;
      maxDiff[name] = m;
    }
    const side = (s) => ({
      variant: s.variant,
      timings_ms: s.reply.timings_ms,
      timing_source: s.reply.timing_source,
      compile_ms: s.compileMs,
      status: s.judged.status,
      passed: s.judged.passed,
      covered: s.judged.covered,
      reports: s.judged.reports,
    });
    const entry = {
      kind: "compare",
      ...provenance(state),
      shape,
      config,
      mask,
      inputSeed,
      query: form.query,
      a: side(sides[0]),
      b: side(sides[1]),
      maxDiff,
      arrays: { x, diff },
    };
    state.lastCompare = entry;
    addEntry(state, entry, `${a} vs ${b} · ${shape}`);
    finishJob(state, job, "done");
    $("#run-status").textContent = `Compared ${a} and ${b} in ${secs(job.elapsed())}.`;
  } catch (err) {
    finishJob(state, job, err instanceof Cancelled ? "cancelled" : "error", err);
  }
}
