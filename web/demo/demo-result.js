// How a history entry is shown: a run's result card (times, errors, verdict), a comparison's
// card, and the pictures of either (attention weights, outputs, errors, |A - B|).

import { num } from "./demo-api.js";
import {
  MASK_LABELS,
  alibiSlope,
  attentionWeights,
  flops,
  headSlice,
  sequences,
} from "./demo-data.js";
import { shownEntry } from "./demo-entries.js";
import { DROPPED_RGB, MASKED_RGB, css, heatmap } from "./demo-heatmap.js";
import { $, NAMES, VERDICTS, axesParts, esc, fmtErr, ms, relErr, verdictOf } from "./demo-util.js";

// ---- the result card ----------------------------------------------------------------------

export function renderResult(run) {
  const c = run.config;
  const f = flops(c);
  const t = run.timings_ms;
  const gpu = run.timing_source === "timestamp-query";
  const src = gpu ? "GPU timestamps" : "wall clock";
  const row = (name, v, fl, note = "") =>
    `<tr data-pass="${name}"><td>${name}</td><td class="num">${v === undefined || v === null ? "—" : `${ms(v)} ms`}</td>` +
    `<td class="num">${fl && v ? (fl / (v * 1e6)).toFixed(2) : ""}</td><td class="muted">${note}</td></tr>`;
  $("#timing").innerHTML =
    `<thead><tr><th>pass</th><th>time</th><th>GFLOP/s</th><th></th></tr></thead><tbody>` +
    row("forward", t.forward_ms, f.forward, `${src} · ${(f.forward / 1e6).toFixed(1)} MFLOP`) +
    row("backward", t.backward_ms, f.backward, `${src} · ${(f.backward / 1e6).toFixed(1)} MFLOP`) +
    row(
      "pipeline compile",
      t.compile_ms,
      0,
      run.compile_ms === null ? "cached: an earlier run compiled them" : `first run of ${esc(run.variant)} on this page`,
    ) +
    row("run_case in Python", t.service_total_ms, 0, "wall clock: upload, passes, read-back") +
    row("NumPy reference + judge", run.judge_ms, 0, "wall clock, server round trip") +
    `</tbody>`;
  $("#timing").dataset.source = run.timing_source;
  $("#timing-note").innerHTML = gpu
    ? "Pass times are <b>GPU timestamps</b> (timestamp-query) of the compute passes."
    : "Pass times are <b>wall clock</b> around submit and onSubmittedWorkDone: this adapter has no timestamp-query.";
  renderRepeats(run);
  const unsupported = run.status === "unsupported";
  $("#errors").classList.toggle("not-verdict", unsupported);
  $("#errors-caveat").hidden = !unsupported;
  $("#errors").innerHTML = errorRows(run.reports, run.maxAbsRef);
  const v = $("#verdict");
  const st = verdictOf(run);
  v.textContent = VERDICTS[st].label;
  v.className = `pill ${VERDICTS[st].cls}`;
  v.dataset.status = st;
  $("#result-title").textContent = `${run.name} · ${run.meta}`;
  $("#result-command-text").hidden = true;
  renderVerdictNote(run, st);
  $("#result-card").hidden = false;
}

// What a report's bound multiplies at its worst element: the worst baseline's error or,
// where larger, that element's own u × sum |terms| (compare.judge).
function honest(r) {
  const base = r.baseline || "float32 baseline";
  if ((r.term_err ?? 0) > r.baseline_err) {
    return `u·Σ|terms| ${fmtErr(r.term_err)} (its baseline ${fmtErr(r.baseline_err)}, ${base})`;
  }
  return `${fmtErr(r.baseline_err)} (${base})`;
}

// The error table of a run's reports (also the matrix view's case details).
export function errorRows(reports, maxAbsRef = {}) {
  return (
    `<thead><tr><th>output</th><th>max abs err</th><th>max rel err</th><th>bound</th><th>ratio</th><th></th></tr></thead><tbody>` +
    reports
      .map((r) => {
        const tip = r.worst_index
          ? `worst at [${r.worst_index.join(", ")}]: expected ${num(r.expected)}, got ${num(r.actual)}; bound = ${r.factor} × ${honest(r)} + ${r.floor}`
          : r.note;
        const rel = relErr(r, Object.hasOwn(maxAbsRef, r.name) ? maxAbsRef[r.name] : 0);
        return (
          `<tr data-output="${esc(r.name)}" title="${esc(tip)}"><td>${NAMES[r.name] ?? esc(r.name)}</td>` +
          `<td class="num" data-field="max_abs_err">${fmtErr(r.max_abs_err)}</td>` +
          `<td class="num" data-field="max_rel_err" title="${esc(rel.title)}">${rel.text}</td>` +
          `<td class="num" data-field="bound">${fmtErr(r.bound)}</td>` +
          `<td class="num" data-field="ratio">${num(r.ratio).toFixed(3)}</td>` +
          `<td data-field="passed" class="${r.passed ? "good" : "bad"}">${r.passed ? "pass" : "FAIL"}</td></tr>`
        );
      })
      .join("") +
    `</tbody>`
  );
}

// time_case's medians with the spread of its runs (runs_ms: every run's GPU ms).
function renderRepeats(run) {
  const r = run.repeats;
  $("#repeats-box").hidden = !r;
  if (!r) return;
  const row = (name, p) => {
    const runs = [...(p.runs_ms ?? [])].sort((a, b) => a - b);
    const lo = runs[0];
    const hi = runs[runs.length - 1];
    const spread = runs.length ? ((hi - lo) / p.ms) * 100 : NaN;
    return (
      `<tr data-pass="${name}"><td>${name}</td><td class="num" data-field="median">${ms(p.ms)} ms</td>` +
      `<td class="num" data-field="range">${runs.length ? `${ms(lo)} – ${ms(hi)} ms` : "—"}</td>` +
      `<td class="num" data-field="spread">${Number.isFinite(spread) ? `${spread.toFixed(1)} %` : "—"}</td>` +
      `<td class="num" data-field="n">${runs.length}</td></tr>`
    );
  };
  $("#repeats").innerHTML =
    `<thead><tr><th>pass</th><th>median</th><th>min – max</th><th>spread</th><th>N</th></tr></thead><tbody>` +
    row("forward", r.fwd) +
    row("backward", r.bwd) +
    `</tbody>`;
  $("#repeats").dataset.runs = r.runs;
}

// Why a declared limitation covers this run (or would, had it failed): under the verdict.
function renderVerdictNote(run, st) {
  const note = $("#verdict-note");
  const cov = run.covered;
  note.dataset.status = st;
  note.dataset.limitation = cov?.limitation ?? "";
  note.className = `verdict-note ${VERDICTS[st].cls}`;
  if (!cov || st === "fail") {
    note.hidden = true;
    note.replaceChildren();
    return;
  }
  const text = esc(cov.text.charAt(0).toUpperCase() + cov.text.slice(1));
  if (st === "unsupported") {
    note.innerHTML =
      `<b>Not a verdict.</b> ${text}. A declared limitation of this driver covers this ` +
      `case, so its errors below say nothing about the kernel.` +
      `<div class="cause"><b>Cause:</b> ${esc(cov.cause)}</div>`;
  } else if (st === "known") {
    note.innerHTML =
      `<b>A known failure of the ${esc(run.variant)} variant.</b> ${text}.` +
      `<details><summary>cause</summary>${esc(cov.cause)}</details>`;
  } else {
    note.innerHTML =
      `<b>Passed on these inputs.</b> A declared flaw of the ${esc(run.variant)} variant ` +
      `covers this case; it shows on some input draws and not others. ${text}.`;
  }
  note.hidden = false;
}

// ---- pictures ---------------------------------------------------------------------------------

export function setupPicks(c) {
  const fill = (sel, n, label) => {
    const keep = Number($(sel).value) || 0;
    $(sel).replaceChildren(...Array.from({ length: n }, (_, i) => new Option(label(i), i)));
    $(sel).value = String(Math.min(keep, n - 1));
  };
  fill("#pick-b", c.batch, (i) => `${i}`);
  const g = c.num_heads / c.num_kv_heads;
  fill("#pick-h", c.num_heads, (i) => (g > 1 ? `${i} (kv ${Math.floor(i / g)})` : `${i}`));
}

// The ALiBi bias of the pictured head, in words: its slope (drawn by the page) and the rule,
// the distance measured from the query's key position qa = query + causal_offset.
function alibiLegend(c, x, b, h) {
  const slope = alibiSlope(c, x.alibi_slopes, b, h).toPrecision(3);
  const off = c.causal_offset;
  const qa = off ? `(query ${off < 0 ? "−" : "+"} ${Math.abs(off)})` : "query";
  const whose = c.alibi_shape.length === 2 ? `batch ${b}, head ${h}` : `head ${h}`;
  return `ALiBi bias −${slope}·|key − ${qa}| (the slope of ${whose})`;
}

// The shown history entry's pictures: a run's values and errors, a comparison's |A - B|.
export function renderPictures(state) {
  const run = shownEntry(state);
  if (!run) return;
  const c = run.config;
  const b = Number($("#pick-b").value) || 0;
  const h = Number($("#pick-h").value) || 0;
  const { x } = run.arrays;
  const { num_heads: H, num_kv_heads: Hkv, head_dim: D } = c;
  const { q0, lq: Sq, k0, lk: Sk } = sequences(c)[b];
  const kh = Math.floor(h / (H / Hkv));
  const { p, dropped } = attentionWeights(c, x, b, h);
  const parts = [
    ...axesParts(c),
    run.mask !== "none" && `mask: ${MASK_LABELS[run.mask]}`,
    c.dropout_p && `dropout ${c.dropout_p}`,
  ].filter(Boolean);
  const weights = heatmap(p, Sq, Sk, {
    kind: "weights",
    dropped: c.dropout_p ? dropped : null,
    rowLabel: "query",
    colLabel: "key",
    title: `Attention weights P · batch ${b}, head ${h}${parts.length ? ` · ${parts.join(", ")}` : ""}`,
  });
  const legend = document.createElement("div");
  legend.className = "legend";
  legend.innerHTML =
    `<span><i style="background:${css(MASKED_RGB)}"></i>masked (causal, window, −∞ mask)</span>` +
    (c.softcap ? `<span>scores softcapped: ${c.softcap}·tanh(s / ${c.softcap})</span>` : "") +
    (c.alibi_shape ? `<span>${alibiLegend(c, x, b, h)}</span>` : "") +
    (c.dropout_p
      ? `<span><i style="background:${css(DROPPED_RGB)}"></i>dropped by dropout</span>`
      : "");
  weights.append(legend);
  $("#weights").replaceChildren(weights);

  const maps = [];
  const add = (name, row0, S, Hx, hx, who) => {
    const slice = (t) => headSlice(t, row0, S, Hx, D, hx);
    const rows = name === "dq" || name === "o" ? "query" : "key";
    const card = document.createElement("div");
    card.className = "map-pair";
    card.dataset.output = name;
    card.innerHTML = `<h3>${NAMES[name]} <small>${who}</small></h3>`;
    const opts = { rowLabel: rows, colLabel: "dim" };
    if (run.kind === "compare") {
      const bound = num(run.a.reports.find((r) => r.name === name).bound);
      card.append(
        heatmap(slice(run.arrays.diff[name]), S, D, {
          ...opts,
          kind: "error",
          bound,
          title: `|${NAMES[name]}(${esc(run.a.variant)}) − ${NAMES[name]}(${esc(run.b.variant)})|`,
        }),
      );
    } else {
      const bound = num(run.reports.find((r) => r.name === name).bound);
      card.append(
        heatmap(slice(run.arrays.got[name]), S, D, { ...opts, kind: "signed", title: `${NAMES[name]} (GPU)` }),
        heatmap(slice(run.arrays.err[name]), S, D, {
          ...opts,
          kind: "error",
          bound,
          // each element against its own bound (the server's per-element term); runs kept
          // from before it came have the worst element's only
          bounds: run.arrays.bound && slice(run.arrays.bound[name]),
          title: `|${NAMES[name]} − ref64|`,
        }),
      );
    }
    maps.push(card);
  };
  add("o", q0, Sq, H, h, `head ${h}`);
  add("dq", q0, Sq, H, h, `head ${h}`);
  const shared =
    H / Hkv > 1 ? ` (sum over heads ${kh * (H / Hkv)}–${(kh + 1) * (H / Hkv) - 1})` : "";
  add("dk", k0, Sk, Hkv, kh, `kv head ${kh}${shared}`);
  add("dv", k0, Sk, Hkv, kh, `kv head ${kh}${shared}`);
  $("#maps").replaceChildren(...maps);
  $("#maps").dataset.kind = run.kind;
  $("#pictures").hidden = false;
}

// ---- the comparison card -------------------------------------------------------------------

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
