// Variant A against variant B in one click: the form's case, the same inputs for both, each
// run on the GPU and judged by the server; then their times, their error ratios and the
// largest |A - B| per output side by side (the pictures card maps |A - B|).

import { makeInputs } from "./demo-data.js";
import { addEntry } from "./demo-history.js";
import {
  MASK_LABELS,
  decode,
  encodeInputs,
  finishJob,
  judgeOnServer,
  provenance,
  runOnGpu,
  startJob,
} from "./demo-run.js";
import { num, variantRefusal } from "./demo-api.js";
import { $, Cancelled, NAMES, VERDICTS, esc, fmtErr, ms, secs, shapeText, verdictOf } from "./demo-util.js";

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

export function renderCompare(e) {
  $("#compare-title").textContent = `${e.a.variant} vs ${e.b.variant}`;
  $("#compare-sub").textContent = `${e.name} · ${e.meta}`;
  $("#compare-command-text").hidden = true;
  const pill = (r) => {
    const st = verdictOf(r);
    return `<span class="pill ${VERDICTS[st].cls}" data-status="${st}">${VERDICTS[st].label}</span>`;
  };
  const src = (r) => (r.timing_source === "timestamp-query" ? "GPU timestamps" : "wall clock");
  const timeRow = (label, key) =>
    `<tr data-row="${key}"><td>${label}</td>` +
    [e.a, e.b]
      .map((r, i) => `<td class="num" data-side="${"ab"[i]}" title="${src(r)}">${ms(r.timings_ms[key])} ms</td>`)
      .join("") +
    `<td class="num muted">${ratioText(e.b.timings_ms[key], e.a.timings_ms[key])}</td></tr>`;
  const byName = (r) => Object.fromEntries(r.reports.map((x) => [x.name, x]));
  const ra = byName(e.a);
  const rb = byName(e.b);
  const outRows = Object.keys(ra)
    .map((n) => {
      const cell = (r, side) =>
        `<td class="num ${r.passed ? "" : "bad"}" data-side="${side}" data-ratio="${n}" title="${esc(`max abs err ${fmtErr(r.max_abs_err)}, bound ${fmtErr(r.bound)}`)}">${num(r.ratio).toFixed(3)}</td>`;
      const d = e.maxDiff[n];
      return (
        `<tr data-output="${n}"><td>${NAMES[n] ?? esc(n)} error ratio</td>${cell(ra[n], "a")}${cell(rb[n], "b")}` +
        `<td class="num" data-diff="${n}" title="max |${NAMES[n]}(A) − ${NAMES[n]}(B)|; the output's bound is ${fmtErr(ra[n].bound)}">${d === 0 ? "0" : fmtErr(d)}</td></tr>`
      );
    })
    .join("");
  const compile = (r) => (r.compile_ms === null ? "earlier" : `${ms(r.compile_ms)} ms`);
  $("#compare-table").innerHTML =
    `<thead><tr><th></th><th data-side="a">A: ${esc(e.a.variant)}</th><th data-side="b">B: ${esc(e.b.variant)}</th>` +
    `<th>B / A · |A − B|</th></tr></thead><tbody>` +
    `<tr data-row="verdict"><td>verdict</td><td>${pill(e.a)}</td><td>${pill(e.b)}</td><td></td></tr>` +
    timeRow("forward (GPU)", "forward_ms") +
    timeRow("backward (GPU)", "backward_ms") +
    `<tr data-row="compile"><td>pipeline compile</td><td class="num">${compile(e.a)}</td><td class="num">${compile(e.b)}</td><td></td></tr>` +
    outRows +
    `</tbody>`;
}

const ratioText = (b, a) => (a > 0 && Number.isFinite(b) ? `${(b / a).toFixed(2)}×` : "");
