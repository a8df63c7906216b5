// The case matrix view: the smoke subset, the whole matrix, or one case, run in this page
// with the server's inputs (GET /api/inputs) and judged as pytest judges them (POST
// /api/judge_case). Rows link to each case's details (the URL's case=ID selects one); counts
// by status; results as JSON (copy or download) and the command that reruns a case.

import { call, getJSON, num, postJudge, variantRefusal } from "./demo-api.js";
import { finishJob, startJob } from "./demo-job.js";
import { errorRows } from "./demo-result.js";
import {
  $,
  Cancelled,
  VERDICTS,
  axesParts,
  copyText,
  downloadJson,
  esc,
  fmtErr,
  ms,
  plural,
  slug,
  verdictOf,
} from "./demo-util.js";

const RUNTIME = "browser-demo";
// The order the counts are shown in; "skipped" (the variant does not support the case),
// "error" (the run or the judge failed) and "cancelled" (not reached) only when there are some.
const COUNTED = ["pass", "fail", "known", "unsupported", "skipped", "error", "cancelled"];

// Every case of the matrix (GET /api/cases?set=all), for case=ID links.
export async function initMatrix(state) {
  const { cases } = await getJSON("/api/cases?set=all");
  state.cases = new Map(cases.map((c) => [c.id, c]));
}

const variantNow = () => $("#case-form").elements.variant.value;

export function checkCommand(variant, id) {
  return `py-harness check --runtime chromium --variant ${variant} --case ${id}`;
}

// Select a case (a row's link, or the URL's case=ID). Returns whether it is one.
export function selectCase(state, id, { fromUrl = false } = {}) {
  if (id === null || id === undefined || id === "") {
    state.selectedCase = null;
    $("#case-detail").hidden = true;
    return false;
  }
  if (!state.cases?.has(id)) {
    if (fromUrl) {
      const known = state.cases ? `${state.cases.size} known, e.g. ${[...state.cases.keys()][0]}` : "the case list did not load";
      state.urlNotes = [...(state.urlNotes ?? []), `case: unknown ${JSON.stringify(id.slice(0, 80))} (${known}); nothing selected.`];
      const el = $("#url-note");
      el.textContent = state.urlNotes.join("\n");
      el.hidden = false;
    }
    state.selectedCase = null;
    $("#case-detail").hidden = true;
    return false;
  }
  state.selectedCase = id;
  if (!fromUrl) state.updateUrl();
  for (const tr of document.querySelectorAll("#smoke-table tbody tr"))
    tr.classList.toggle("selected", tr.dataset.case === id);
  renderDetail(state);
  return true;
}

function renderDetail(state) {
  const id = state.selectedCase;
  const c = state.cases.get(id);
  const r = state.smoke?.results.find((x) => x.case === id) ?? null;
  const variant = r?.variant ?? variantNow();
  const cfg = c.config;
  const heads = `H${cfg.num_heads} Hkv${cfg.num_kv_heads ?? cfg.num_heads}`;
  const shape = cfg.cu_seqlens_q
    ? `varlen B${cfg.batch} cu_seqlens_q [${cfg.cu_seqlens_q}] cu_seqlens_k [${cfg.cu_seqlens_k}] ${heads} D${cfg.head_dim}`
    : `B${cfg.batch} ${heads} Sq${cfg.seq_q} Sk${cfg.seq_k} D${cfg.head_dim}`;
  const parts = [
    shape,
    ...axesParts(cfg),
    c.mask && c.mask !== "none" && `mask ${c.mask}`,
    cfg.dropout_p && `dropout ${cfg.dropout_p}`,
    c.long && "long",
  ].filter(Boolean);
  let body = `<p class="muted small" data-field="config">${esc(parts.join(" · "))}</p>`;
  if (!r) {
    body += `<p data-field="status">Not run yet on this page (variant ${esc(variant)}).</p>`;
  } else {
    const st = verdictOf(r);
    const why = r.refusal ?? r.covered?.text;
    body += `<p data-field="status"><span class="pill ${VERDICTS[st].cls}">${VERDICTS[st].label}</span> variant ${esc(r.variant)}${why ? ` · ${esc(why)}` : ""}</p>`;
    if (r.error) body += `<pre class="bad">${esc(r.error)}</pre>`;
    if (r.reports) {
      const t = r.timings_ms;
      body +=
        `<table class="data detail-errors">${errorRows(r.reports)}</table>` +
        `<p class="small">forward ${ms(t.forward_ms)} ms · backward ${ms(t.backward_ms)} ms (${r.timing_source === "timestamp-query" ? "GPU timestamps" : "wall clock"})</p>` +
        `<p class="small">${Object.entries(r.checks ?? {})
          .map(([k, v]) => `<span class="${v.ok ? "good" : "bad"}">${v.ok ? "✓" : "✗"} ${esc(k)}</span>: ${esc(v.detail)}`)
          .join("<br>")}</p>`;
    }
  }
  const cmd = checkCommand(variant, id);
  body +=
    `<div class="buttons left"><button type="button" id="case-run" data-needs-idle>Run this case</button>` +
    `<button type="button" id="case-command" class="secondary">Copy command line</button></div>` +
    `<pre class="command" id="case-command-text">${esc(cmd)}</pre>`;
  const el = $("#case-detail");
  el.dataset.case = id;
  el.innerHTML = `<h3>Case <span class="mono">${esc(id)}</span></h3>${body}`;
  el.hidden = false;
  state.syncButtons();
}

// ---- running ------------------------------------------------------------------------------

// which: smoke | all | one (the selected case).
export async function runMatrix(state, which) {
  if (state.busy || !state.ready) return;
  const variant = variantNow();
  if (!Object.hasOwn(state.variants ?? {}, variant)) {
    $("#copy-status").textContent = `variant: unknown ${JSON.stringify(variant)}; pick one in the form.`;
    return;
  }
  const adapter = state.adapterName ?? "";
  const label = { smoke: "smoke subset", all: "whole matrix", one: `case ${state.selectedCase}` }[which];
  const job = startJob(state, "matrix", `${label} · variant ${variant}`, "smoke");
  const tbody = $("#smoke-table tbody");
  const results = [];
  let cases = [];
  let outcome = "done";
  let failure = null;
  try {
    job.step("Asking the server for the cases…");
    // With the variant and this page's adapter, each case says whether a declared limitation
    // covers it: a driver's (not run) or the variant's own flaw (run; a failure is known).
    const query = new URLSearchParams({ variant, adapter });
    if (which !== "smoke") query.set("set", "all");
    ({ cases } = await getJSON(`/api/cases?${query}`));
    let left = 0;
    if (which === "one") cases = cases.filter((c) => c.id === state.selectedCase);
    else if (which === "all" && !$("#matrix-long").checked) {
      left = cases.filter((c) => c.long).length;
      cases = cases.filter((c) => !c.long);
    }
    $("#copy-status").textContent = left ? `${plural(left, "long case")} left out (tick the box to include them).` : "";
    tbody.replaceChildren(...cases.map((c) => rowFor(c.id, variant)));
    $("#smoke-table").hidden = false;
    for (const [i, c] of cases.entries()) {
      const tr = tbody.children[i];
      $("#smoke-summary").textContent = `${i + 1} / ${cases.length}`;
      $("#smoke-summary").className = "pill";
      job.step(`Case ${i + 1} of ${cases.length}: ${c.id}`);
      let result;
      // As pytest does: a case the variant cannot run (Variant.refusal) is skipped, then one a
      // driver limitation covers.
      const { refusal } = await variantRefusal(variant, c.config);
      job.check();
      if (refusal) {
        result = { case: c.id, variant, passed: null, status: "skipped", refusal, covered: c.covered ?? null };
      } else if (c.covered?.status === "unsupported") {
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
          job.check(); // a cancelled run's GPU work has finished: drop it, judge nothing
          result = await postJudge(
            "/api/judge_case",
            { case: c.id, variant, runtime: RUNTIME, adapter, reply },
            job,
          );
        } catch (err) {
          if (err instanceof Cancelled) throw err;
          result = { case: c.id, variant, passed: false, status: "error", error: err.message };
          result.covered = c.covered ?? null;
        }
      }
      results.push(result);
      matrixRow(tr, result);
    }
  } catch (err) {
    outcome = err instanceof Cancelled ? "cancelled" : "error";
    failure = err;
    for (const tr of [...tbody.children].slice(results.length)) {
      tr.dataset.status = "cancelled";
      tr.children[1].textContent = outcome === "cancelled" ? "cancelled" : "not run";
    }
  }
  summarize(state, { which, variant, adapter, results, cases, outcome, job });
  finishJob(state, job, outcome, failure, "smoke");
  if (failure && outcome === "error") $("#copy-status").textContent = failure.message;
  if (state.selectedCase && state.cases.has(state.selectedCase)) selectCase(state, state.selectedCase);
}

function rowFor(id, variant) {
  const tr = document.createElement("tr");
  tr.dataset.case = id;
  tr.innerHTML = `<td>${caseLink(id, variant)}</td><td class="muted" colspan="9">waiting</td>`;
  return tr;
}

// A link that opens the case (the page with case=ID) and, clicked here, shows its details.
function caseLink(id, variant) {
  const q = new URLSearchParams({ variant, case: id });
  return `<a class="mono case-link" href="?${q}" data-case="${esc(id)}">${esc(id)}</a>`;
}

function summarize(state, { which, variant, adapter, results, cases, outcome, job }) {
  const n = Object.fromEntries(COUNTED.map((s) => [s, 0]));
  for (const r of results) n[verdictOf(r)] += 1;
  n.cancelled = cases.length - results.length;
  const failed = n.fail + n.error;
  const complete = outcome === "done";
  state.smoke = {
    set: which,
    runtime: RUNTIME,
    adapter,
    user_agent: navigator.userAgent,
    variant,
    outcome,
    // Nothing failed: known failures and cases unsupported on this driver are not failures.
    passed: complete && results.length > 0 && failed === 0,
    counts: {
      passed: n.pass,
      known: n.known,
      unsupported: n.unsupported,
      skipped: n.skipped,
      failed,
      errors: n.error,
      not_run: n.cancelled,
    },
    wall_ms: Math.round(job.elapsed()),
    commands: Object.fromEntries(results.map((r) => [r.case, checkCommand(variant, r.case)])),
    results,
  };
  const parts = [`${n.pass} passed`];
  if (n.known) parts.push(plural(n.known, "known failure"));
  if (n.unsupported) parts.push(`${n.unsupported} unsupported on this driver`);
  if (n.skipped) parts.push(`${n.skipped} not supported by ${variant}`);
  parts.push(`${failed} failed`);
  const s = $("#smoke-summary");
  const head = complete ? "" : `${outcome === "cancelled" ? "cancelled" : "stopped"} after ${results.length} of ${cases.length}: `;
  s.textContent = `${head}${parts.join(", ")} · ${(job.elapsed() / 1000).toFixed(1)} s`;
  s.title = `${results.length} cases, variant ${variant}, on ${adapter || "this adapter"}`;
  s.className = `pill ${failed || !complete ? "fail" : n.known || n.unsupported || n.skipped ? "known" : "pass"}`;
  s.dataset.outcome = outcome;
  const counts = $("#matrix-counts");
  counts.innerHTML = COUNTED.filter((st) => n[st] || ["pass", "fail", "known", "unsupported"].includes(st))
    .map((st) => `<span class="count ${VERDICTS[st].cls}" data-status="${st}" data-count="${n[st]}"><b>${n[st]}</b> ${VERDICTS[st].row}</span>`)
    .join("");
  counts.hidden = false;
}

function matrixRow(tr, r) {
  const st = verdictOf(r);
  tr.dataset.status = st;
  if (r.passed === null || r.passed === undefined) delete tr.dataset.passed;
  else tr.dataset.passed = String(Boolean(r.passed));
  const id = `<td>${caseLink(r.case, r.variant)}</td>`;
  const cov = r.covered;
  if (st === "unsupported") {
    tr.innerHTML =
      id +
      `<td class="unsupported" title="${esc(cov.text)}">${VERDICTS[st].row}</td>` +
      `<td colspan="8" class="small muted" data-field="reason">not run: ` +
      `<b>${esc(cov.limitation)}</b>: ${esc(cov.reason)}</td>`;
    return;
  }
  if (st === "skipped") {
    tr.innerHTML =
      id +
      `<td class="unsupported" title="${esc(r.refusal)}">${VERDICTS[st].row}</td>` +
      `<td colspan="8" class="small muted" data-field="reason">not run: ${esc(r.refusal)}</td>`;
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
          `<span class="${v.ok ? "good" : "bad"}" title="${esc(v.detail)}">${v.ok ? "✓" : "✗"} ${esc(k)}</span>`,
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
    `<td class="num" data-field="worst_ratio">${worst.toFixed(3)}</td>` +
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
  const ok = await copyText(JSON.stringify(state.smoke, null, 1));
  $("#copy-status").textContent = ok
    ? `Copied ${state.smoke.results.length} results as JSON.`
    : "Copy failed: the browser refused clipboard access.";
}

export function wireMatrix(state) {
  $("#smoke").addEventListener("click", () => runMatrix(state, "smoke"));
  $("#matrix-all").addEventListener("click", () => runMatrix(state, "all"));
  $("#copy-json").addEventListener("click", () => copySmokeJson(state));
  $("#matrix-download").addEventListener("click", () => {
    const s = state.smoke;
    downloadJson(`py-harness-matrix-${s.set}-${slug(s.variant)}.json`, s);
  });
  $("#smoke-table").addEventListener("click", (ev) => {
    const a = ev.target.closest("a.case-link");
    // A plain click shows the details here; a modified click opens the link as usual.
    if (!a || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
    ev.preventDefault();
    selectCase(state, a.dataset.case);
    $("#case-detail").scrollIntoView({ block: "nearest" });
  });
  $("#case-detail").addEventListener("click", async (ev) => {
    const button = ev.target.closest("button");
    if (button?.id === "case-run") runMatrix(state, "one");
    else if (button?.id === "case-command") {
      const ok = await copyText($("#case-command-text").textContent);
      button.textContent = ok ? "Copied" : "Copy failed";
      setTimeout(() => (button.textContent = "Copy command line"), 1500);
    }
  });
}

