// Runs for the demo page: one case from the form (run_case in Pyodide, judged by the server),
// its tables and pictures, and the smoke suite. `state` is demo.js's shared state.

import { call, getJSON, num, postJSON } from "./demo-api.js";
import {
  MASK_PRESETS,
  attentionWeights,
  flops,
  fromBase64,
  headSlice,
  makeInputs,
  toBase64,
} from "./demo-data.js";
import { DROPPED_RGB, MASKED_RGB, css, heatmap } from "./demo-heatmap.js";

const $ = (sel) => document.querySelector(sel);
const NAMES = { o: "O", lse: "LSE", dq: "dQ", dk: "dK", dv: "dV" };
const ms = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
export const fmtErr = (v) => {
  v = num(v);
  return Number.isFinite(v) ? v.toExponential(2) : String(v);
};
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
// The harness's statuses (api.judge, api.judge_case) as the page shows them. "known": a
// declared flaw of the variant covers the failure; "unsupported": a declared limitation of
// this driver covers the case, which is then not a verdict on the kernel (and, in the smoke
// suite, not run).
const VERDICTS = {
  pass: { label: "PASS", row: "pass", cls: "pass" },
  fail: { label: "FAIL", row: "FAIL", cls: "fail" },
  known: { label: "known failure", row: "known failure", cls: "known" },
  unsupported: {
    label: "unsupported on this driver",
    row: "unsupported on this driver",
    cls: "unsupported",
  },
  error: { label: "error", row: "error", cls: "fail" },
};
const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

function setBusy(state, busy) {
  state.busy = busy;
  state.syncButtons();
}

function status(text, cls = "") {
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

// ---- one case ---------------------------------------------------------------------------------

export async function runCase(state) {
  if (state.busy || !state.ready) return;
  const form = await state.validateForm();
  if (!form) return;
  setBusy(state, true);
  document.body.dataset.run = "running";
  const t0 = performance.now();
  try {
    const { config, mask, inputSeed, variant } = form;
    status("Generating inputs…");
    const x = makeInputs(config, mask, inputSeed);
    const inputs = Object.fromEntries(Object.entries(x).map(([n, a]) => [n, toBase64(a)]));
    status("Running forward and backward on the GPU (py_harness in Pyodide)…");
    const reply = await call("run_case", { config, tensors: inputs, variant, backward: true });
    status("Judging against the float64 NumPy reference on the server…");
    const tj = performance.now();
    const judged = await postJSON("/api/judge", {
      config,
      inputs,
      outputs: reply.outputs,
      variant,
      adapter: state.adapterName ?? "",
    });
    const judgeMs = performance.now() - tj;
    const decode = (obj) =>
      Object.fromEntries(Object.entries(obj).map(([n, b]) => [n, fromBase64(b)]));
    state.lastRun = {
      config,
      mask,
      inputSeed,
      variant,
      inputs,
      outputs: reply.outputs,
      timings_ms: reply.timings_ms,
      timing_source: reply.timing_source,
      judge_ms: judgeMs,
      passed: judged.passed,
      status: judged.status,
      covered: judged.covered,
      reports: judged.reports,
      arrays: {
        x,
        got: decode(reply.outputs),
        ref: decode(judged.reference),
        err: decode(judged.abs_error),
      },
    };
    renderResult(state.lastRun);
    setupPicks(state.lastRun.config);
    renderPictures(state);
    status(
      `Done in ${(performance.now() - t0).toFixed(0)} ms (inputs, GPU, judging, drawing).`,
      "good",
    );
    document.body.dataset.run = "done";
  } catch (err) {
    showError(err);
    document.body.dataset.run = "error";
  } finally {
    setBusy(state, false);
  }
}

function renderResult(run) {
  const c = run.config;
  const f = flops(c);
  const t = run.timings_ms;
  const gpu = run.timing_source === "timestamp-query";
  const src = gpu ? "GPU timestamps" : "wall clock";
  const row = (name, v, fl, note = "") =>
    `<tr data-pass="${name}"><td>${name}</td><td class="num">${v === undefined ? "—" : `${ms(v)} ms`}</td>` +
    `<td class="num">${fl && v ? (fl / (v * 1e6)).toFixed(2) : ""}</td><td class="muted">${note}</td></tr>`;
  $("#timing").innerHTML =
    `<thead><tr><th>pass</th><th>time</th><th>GFLOP/s</th><th></th></tr></thead><tbody>` +
    row("forward", t.forward_ms, f.forward, `${src} · ${(f.forward / 1e6).toFixed(1)} MFLOP`) +
    row("backward", t.backward_ms, f.backward, `${src} · ${(f.backward / 1e6).toFixed(1)} MFLOP`) +
    row("pipeline compile", t.compile_ms, 0, "cached after the first run") +
    row("run_case in Python", t.service_total_ms, 0, "wall clock: upload, passes, read-back") +
    row("NumPy reference + judge", run.judge_ms, 0, "wall clock, server round trip") +
    `</tbody>`;
  $("#timing").dataset.source = run.timing_source;
  $("#timing-note").innerHTML = gpu
    ? "Pass times are <b>GPU timestamps</b> (timestamp-query) of the compute passes."
    : "Pass times are <b>wall clock</b> around submit and onSubmittedWorkDone: this adapter has no timestamp-query.";
  const unsupported = run.status === "unsupported";
  $("#errors").classList.toggle("not-verdict", unsupported);
  $("#errors-caveat").hidden = !unsupported;
  $("#errors").innerHTML =
    `<thead><tr><th>output</th><th>max abs err</th><th>max rel err</th><th>bound</th><th>ratio</th><th></th></tr></thead><tbody>` +
    run.reports
      .map((r) => {
        const tip = r.worst_index
          ? `worst at [${r.worst_index.join(", ")}]: expected ${num(r.expected)}, got ${num(r.actual)}; bound = ${r.factor} × ${fmtErr(r.baseline_err)} (${r.baseline || "float32 baseline"}) + ${r.floor}`
          : r.note;
        return (
          `<tr data-output="${r.name}" title="${esc(tip)}"><td>${NAMES[r.name]}</td>` +
          `<td class="num" data-field="max_abs_err">${fmtErr(r.max_abs_err)}</td>` +
          `<td class="num" data-field="max_rel_err">${fmtErr(r.max_rel_err)}</td>` +
          `<td class="num" data-field="bound">${fmtErr(r.bound)}</td>` +
          `<td class="num" data-field="ratio">${num(r.ratio).toFixed(3)}</td>` +
          `<td data-field="passed" class="${r.passed ? "good" : "bad"}">${r.passed ? "pass" : "FAIL"}</td></tr>`
        );
      })
      .join("") +
    `</tbody>`;
  const v = $("#verdict");
  const st = VERDICTS[run.status] ? run.status : run.passed ? "pass" : "fail";
  v.textContent = VERDICTS[st].label;
  v.className = `pill ${VERDICTS[st].cls}`;
  v.dataset.status = st;
  renderVerdictNote(run, st);
  $("#result-card").hidden = false;
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

function setupPicks(c) {
  const fill = (sel, n, label) => {
    const keep = Number($(sel).value) || 0;
    $(sel).replaceChildren(...Array.from({ length: n }, (_, i) => new Option(label(i), i)));
    $(sel).value = String(Math.min(keep, n - 1));
  };
  fill("#pick-b", c.batch, (i) => `${i}`);
  const g = c.num_heads / c.num_kv_heads;
  fill("#pick-h", c.num_heads, (i) => (g > 1 ? `${i} (kv ${Math.floor(i / g)})` : `${i}`));
}

export function renderPictures(state) {
  const run = state.lastRun;
  if (!run) return;
  const c = run.config;
  const b = Number($("#pick-b").value) || 0;
  const h = Number($("#pick-h").value) || 0;
  const { x, got, ref, err } = run.arrays;
  const { batch: B, num_heads: H, num_kv_heads: Hkv, seq_q: Sq, seq_k: Sk, head_dim: D } = c;
  const kh = Math.floor(h / (H / Hkv));
  const { p, dropped } = attentionWeights(c, x, b, h);
  const parts = [
    c.causal && `causal (offset ${c.causal_offset})`,
    c.window && `window ${c.window}`,
    run.mask !== "none" && `mask: ${MASK_PRESETS[run.mask].label}`,
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
    (c.dropout_p
      ? `<span><i style="background:${css(DROPPED_RGB)}"></i>dropped by dropout</span>`
      : "");
  weights.append(legend);
  $("#weights").replaceChildren(weights);

  const report = Object.fromEntries(run.reports.map((r) => [r.name, r]));
  const maps = [];
  const add = (name, S, Hx, hx, who) => {
    const slice = (t) => headSlice(t, B, S, Hx, D, b, hx);
    const rows = name === "dq" || name === "o" ? "query" : "key";
    const bound = num(report[name].bound);
    const card = document.createElement("div");
    card.className = "map-pair";
    card.dataset.output = name;
    card.innerHTML = `<h3>${NAMES[name]} <small>${who}</small></h3>`;
    card.append(
      heatmap(slice(got[name]), S, D, {
        kind: "signed",
        title: `${NAMES[name]} (GPU)`,
        rowLabel: rows,
        colLabel: "dim",
      }),
      heatmap(slice(err[name]), S, D, {
        kind: "error",
        bound,
        title: `|${NAMES[name]} − ref64|`,
        rowLabel: rows,
        colLabel: "dim",
      }),
    );
    maps.push(card);
  };
  add("o", Sq, H, h, `head ${h}`);
  add("dq", Sq, H, h, `head ${h}`);
  const shared =
    H / Hkv > 1 ? ` (sum over heads ${kh * (H / Hkv)}–${(kh + 1) * (H / Hkv) - 1})` : "";
  add("dk", Sk, Hkv, kh, `kv head ${kh}${shared}`);
  add("dv", Sk, Hkv, kh, `kv head ${kh}${shared}`);
  $("#maps").replaceChildren(...maps);
  $("#pictures").hidden = false;
}

// ---- smoke suite ------------------------------------------------------------------------------

export async function runSmoke(state) {
  if (state.busy || !state.ready) return;
  setBusy(state, true);
  document.body.dataset.smoke = "running";
  const variant = document.querySelector("#case-form").elements.variant.value;
  const adapter = state.adapterName ?? "";
  const tbody = $("#smoke-table tbody");
  const t0 = performance.now();
  const results = [];
  let complete = false;
  try {
    // With the variant and this page's adapter, each case says whether a declared limitation
    // covers it: a driver's (not run) or the variant's own flaw (run; a failure is known).
    const query = new URLSearchParams({ variant, adapter });
    const { cases } = await getJSON(`/api/cases?${query}`);
    tbody.replaceChildren(
      ...cases.map((c) => {
        const tr = document.createElement("tr");
        tr.dataset.case = c.id;
        tr.innerHTML = `<td class="mono">${esc(c.id)}</td><td class="muted" colspan="9">waiting</td>`;
        return tr;
      }),
    );
    $("#smoke-table").hidden = false;
    for (const [i, c] of cases.entries()) {
      const tr = tbody.children[i];
      $("#smoke-summary").textContent = `${i + 1} / ${cases.length}`;
      $("#smoke-summary").className = "pill";
      let result;
      if (c.covered?.status === "unsupported") {
        // Its result would say nothing about the kernel: not run, neither pass nor fail.
        result = { case: c.id, variant, passed: null, status: "unsupported", covered: c.covered };
      } else {
        tr.children[1].textContent = "running…";
        try {
          const inp = await getJSON(`/api/inputs?case=${encodeURIComponent(c.id)}`);
          const reply = await call("run_case", {
            config: inp.config,
            tensors: inp.tensors,
            variant,
            backward_runs: c.backward_runs,
          });
          result = await postJSON("/api/judge_case", {
            case: c.id,
            variant,
            runtime: "browser-demo",
            adapter,
            reply,
          });
        } catch (err) {
          result = { case: c.id, variant, passed: false, status: "error", error: err.message };
          result.covered = c.covered ?? null;
        }
      }
      results.push(result);
      smokeRow(tr, result);
    }
    complete = true;
  } catch (err) {
    showError(err);
  }
  const count = (st) => results.filter((r) => r.status === st).length;
  const n = {
    pass: count("pass"),
    known: count("known"),
    unsupported: count("unsupported"),
    failed: results.length - count("pass") - count("known") - count("unsupported"),
  };
  state.smoke = {
    adapter,
    user_agent: navigator.userAgent,
    variant,
    // Nothing failed: known failures and cases unsupported on this driver are not failures.
    passed: complete && results.length > 0 && n.failed === 0,
    counts: {
      passed: n.pass,
      known: n.known,
      unsupported: n.unsupported,
      failed: n.failed,
      errors: count("error"),
    },
    wall_ms: Math.round(performance.now() - t0),
    results,
  };
  const parts = [`${n.pass} passed`];
  if (n.known) parts.push(plural(n.known, "known failure"));
  if (n.unsupported) parts.push(`${n.unsupported} unsupported on this driver`);
  parts.push(`${n.failed} failed`);
  const s = $("#smoke-summary");
  s.textContent = `${parts.join(", ")} · ${((performance.now() - t0) / 1000).toFixed(1)} s`;
  s.title = `${results.length} cases, variant ${variant}, on ${adapter || "this adapter"}`;
  s.className = `pill ${!state.smoke.passed ? "fail" : n.known || n.unsupported ? "known" : "pass"}`;
  document.body.dataset.smoke = "done";
  setBusy(state, false);
}

function smokeRow(tr, r) {
  const st = VERDICTS[r.status] ? r.status : r.error ? "error" : r.passed ? "pass" : "fail";
  tr.dataset.status = st;
  if (r.passed === null || r.passed === undefined) delete tr.dataset.passed;
  else tr.dataset.passed = String(Boolean(r.passed));
  const id = `<td class="mono">${esc(r.case)}</td>`;
  const cov = r.covered;
  if (st === "unsupported") {
    tr.innerHTML =
      id +
      `<td class="unsupported" title="${esc(cov.text)}">${VERDICTS[st].row}</td>` +
      `<td colspan="8" class="small muted" data-field="reason">not run: ` +
      `<b>${esc(cov.limitation)}</b>: ${esc(cov.reason)}</td>`;
    return;
  }
  if (st === "error") {
    tr.innerHTML = `${id}<td class="bad">error</td><td colspan="8" class="bad small">${esc(r.error)}</td>`;
    return;
  }
  const by = Object.fromEntries(r.reports.map((x) => [x.name, x]));
  const worst = Math.max(...r.reports.map((x) => num(x.ratio)));
  const checks =
    Object.entries(r.checks)
      .map(
        ([k, v]) =>
          `<span class="${v.ok ? "good" : "bad"}" title="${esc(v.detail)}">${v.ok ? "✓" : "✗"} ${k}</span>`,
      )
      .join("<br>") || "<span class=muted>—</span>";
  // A known failure names its declared flaw; the full text is the cell's title.
  const why =
    st === "known" && cov
      ? `<div class="small muted" data-field="limitation">${esc(cov.limitation)}</div>`
      : "";
  const cls = { pass: "good", fail: "bad", known: "known" }[st];
  const t = r.timings_ms;
  const src = r.timing_source === "timestamp-query" ? "GPU" : "wall";
  tr.innerHTML =
    id +
    `<td class="${cls}" title="${esc(st === "known" && cov ? cov.text : "")}">` +
    `<span data-field="verdict">${VERDICTS[st].row}</span>${why}</td>` +
    `<td class="num">${worst.toFixed(3)}</td>` +
    ["o", "dq", "dk", "dv"]
      .map(
        (n) =>
          `<td class="num" title="${esc(`bound ${fmtErr(by[n].bound)}`)}">${fmtErr(by[n].max_abs_err)}</td>`,
      )
      .join("") +
    `<td class="small">${checks}</td>` +
    `<td class="num" title="${src}">${ms(t.forward_ms)}</td><td class="num" title="${src}">${ms(t.backward_ms)}</td>`;
}

export async function copySmokeJson(state) {
  const text = JSON.stringify(state.smoke, null, 1);
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch {
    // No clipboard permission (an unfocused or headless page): the old select-and-copy way.
    const ta = document.createElement("textarea");
    ta.value = text;
    document.body.append(ta);
    ta.select();
    ok = document.execCommand("copy");
    ta.remove();
  }
  $("#copy-status").textContent = ok
    ? `Copied ${state.smoke.results.length} results as JSON.`
    : "Copy failed: the browser refused clipboard access.";
}
