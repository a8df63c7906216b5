// Small helpers shared by the demo page's modules: formatting, verdict labels, the job bar
// (progress, elapsed time, Cancel), downloads and the clipboard.

import { num } from "./demo-api.js";

export const $ = (sel) => document.querySelector(sel);
export const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
export const ms = (v) =>
  !Number.isFinite(v) ? "—" : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
export const fmtErr = (v) => {
  v = num(v);
  return Number.isFinite(v) ? v.toExponential(2) : String(v);
};
export const secs = (t) => (t < 1000 ? `${Math.round(t)} ms` : `${(t / 1000).toFixed(1)} s`);
export const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
export const NAMES = { o: "O", lse: "LSE", dq: "dQ", dk: "dK", dv: "dV" };

// The harness's statuses (api.judge, api.judge_case) as the page shows them. "known": a
// declared flaw of the variant covers the failure; "unsupported": a declared limitation of
// this driver covers the case, which is then not a verdict on the kernel (and, in the matrix
// view, not run).
export const VERDICTS = {
  pass: { label: "PASS", row: "pass", cls: "pass" },
  fail: { label: "FAIL", row: "FAIL", cls: "fail" },
  known: { label: "known failure", row: "known failure", cls: "known" },
  unsupported: {
    label: "unsupported on this driver",
    row: "unsupported on this driver",
    cls: "unsupported",
  },
  // The variant cannot run the case (Variant.refusal): not run, as pytest skips it.
  skipped: {
    label: "not supported by the variant",
    row: "not supported by the variant",
    cls: "unsupported",
  },
  error: { label: "error", row: "error", cls: "fail" },
  cancelled: { label: "cancelled", row: "cancelled", cls: "unsupported" },
};
export const verdictOf = (r) =>
  Object.hasOwn(VERDICTS, r.status ?? "") ? r.status : r.error ? "error" : r.passed ? "pass" : "fail";

// The relative error of a report, or null where it means nothing. compare.judge's
// max_rel_err is max |a - r| / max(|r|, f32 tiny) over all elements, so one reference value
// near 0 (a masked row's O, a gradient that cancels) gives 1e+31 beside a pass. Below
// `tiny` (the report's absolute bound, or 1e-6 of the output's max |ref| when the page has
// the reference) a relative error is noise. It is hidden when the worst element's
// reference is below tiny, or when the maximum must come from such an element: rel_i =
// err_i / |r_i| <= max_abs / |r_i|, so max_rel > max_abs / tiny needs some |r_i| < tiny.
export function relErr(report, maxAbsRef = 0) {
  const rel = num(report.max_rel_err);
  const abs = num(report.max_abs_err);
  const tiny = Math.max(num(report.bound) || 0, 1e-6 * maxAbsRef);
  const expected = Math.abs(num(report.expected));
  const why =
    Number.isFinite(expected) && expected < tiny
      ? `the reference at the worst element is ${fmtErr(expected)}`
      : Number.isFinite(rel) && Number.isFinite(abs) && rel * tiny > abs * (1 + 1e-9)
        ? "the largest relative error is at an element whose reference is about 0"
        : null;
  if (!why || !(tiny > 0)) return { value: rel, text: fmtErr(rel), title: "" };
  return {
    value: null,
    text: "—",
    title:
      `Not shown: ${why} (below ${fmtErr(tiny)}, the absolute tolerance), where a relative ` +
      `error means nothing. The server's max |a − r| / |r| is ${fmtErr(rel)}.`,
  };
}

// ---- the job bar: one job at a time (a form run, a comparison, a matrix run) ----------------

export class Cancelled extends Error {
  constructor() {
    super("cancelled");
    this.name = "Cancelled";
  }
}

const TICK_MS = 100;

// A running job: step(text) announces a step (and is where a Cancel takes effect: the GPU
// work already submitted finishes, the job stops before the next step). The bar is fixed at
// the bottom of the window, so it is in view wherever the user scrolled to.
export class Job {
  constructor(kind, title) {
    this.kind = kind;
    this.title = title;
    this.cancelled = false;
    this.t0 = performance.now();
    this.text = "";
    this.steps = [];
    const bar = $("#job");
    bar.hidden = false;
    bar.dataset.kind = kind;
    $("#job-title").textContent = title;
    $("#cancel").disabled = false;
    $("#cancel").textContent = "Cancel";
    this.timer = setInterval(() => this.render(), TICK_MS);
  }
  elapsed() {
    return performance.now() - this.t0;
  }
  step(text) {
    this.check();
    const now = performance.now();
    const last = this.steps[this.steps.length - 1];
    if (last && last.end === undefined) last.end = now;
    this.steps.push({ text, start: now });
    this.text = text;
    this.render();
  }
  check() {
    if (this.cancelled) throw new Cancelled();
  }
  cancel() {
    this.cancelled = true;
    $("#cancel").disabled = true;
    $("#cancel").textContent = "Cancelling…";
    $("#job-step").textContent = `${this.text} (cancelling: this step finishes first)`;
  }
  render() {
    if (!this.cancelled) $("#job-step").textContent = this.text;
    $("#job-elapsed").textContent = secs(this.elapsed());
  }
  finish() {
    clearInterval(this.timer);
    const last = this.steps[this.steps.length - 1];
    if (last && last.end === undefined) last.end = performance.now();
    $("#job").hidden = true;
  }
}

// ---- getting results out ----------------------------------------------------------------------

export function downloadJson(filename, obj) {
  const blob = new Blob([JSON.stringify(obj, null, 1)], { type: "application/json" });
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  // The click has started the download; the object URL can go once it has been read.
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // No clipboard permission (an unfocused or headless page): the old select-and-copy way.
    const ta = document.createElement("textarea");
    ta.value = text;
    document.body.append(ta);
    ta.select();
    const ok = document.execCommand("copy");
    ta.remove();
    return ok;
  }
}

// A file name part from free text: letters, digits, dot, dash.
export const slug = (s) =>
  String(s)
    .replace(/[^A-Za-z0-9.-]+/g, "-")
    .replace(/^-|-$/g, "")
    .slice(0, 80);

// ---- naming a run -------------------------------------------------------------------------------

// Where the queries sit and what they see, in words: ["causal", "bottom-right (offset -4)",
// "window (5, 40)", "softcap 2.5", "ALiBi per head"]. The offset only where it matters (with
// causal, a window or ALiBi, whose bias is measured from it; alone it changes nothing);
// "bottom-right" when it is Sk - Sq, FlashAttention-2's alignment. A config from before
// window_left / window_right / softcap / alibi_shape reads as without them.
export function axesParts(c) {
  const left = c.window_left ?? -1;
  const right = c.window_right ?? -1;
  const lr = left >= 0 || right >= 0;
  const parts = [];
  if (c.causal) parts.push("causal");
  if (c.cu_seqlens_q) parts.push("varlen: each sequence bottom-right");
  if (c.causal_offset && (c.causal || c.window || lr || c.alibi_shape)) {
    const br = !c.cu_seqlens_q && c.causal_offset === c.seq_k - c.seq_q;
    parts.push(br ? `bottom-right (offset ${c.causal_offset})` : `offset ${c.causal_offset}`);
  }
  if (c.window) parts.push(`window ${c.window}`);
  if (lr) parts.push(`window (${left}, ${right})`);
  if (c.softcap) parts.push(`softcap ${c.softcap}`);
  if (c.alibi_shape) parts.push(c.alibi_shape.length === 2 ? "ALiBi per batch and head" : "ALiBi per head");
  return parts;
}

// "B1 H4 Hkv2 Sq113 Sk203 D59 · causal · window 17 · mask key padding · dropout 0.1 (seed 3)"
export function shapeText(c, mask, labels = {}) {
  const lens = (cu) => cu.slice(1).map((x, i) => x - cu[i]);
  const seqs = c.cu_seqlens_q
    ? `lengths q [${lens(c.cu_seqlens_q)}] k [${lens(c.cu_seqlens_k)}]`
    : `Sq${c.seq_q} Sk${c.seq_k}`;
  const parts = [
    `B${c.batch} H${c.num_heads} Hkv${c.num_kv_heads} ${seqs} D${c.head_dim}`,
    ...axesParts(c),
  ];
  if (mask && mask !== "none") parts.push(`mask ${Object.hasOwn(labels, mask) ? labels[mask] : mask}`);
  if (c.dropout_p) parts.push(`dropout ${c.dropout_p} (seed ${c.seed})`);
  return parts.join(" · ");
}

// The browser, from its user agent: "Chromium 131", "Firefox 128", else the first token.
export function runtimeName() {
  const ua = navigator.userAgent;
  const m = ua.match(/(Firefox|Edg|Chrome|Chromium|Safari)\/(\d+)/);
  if (!m) return ua.split(" ")[0];
  const name = { Chrome: "Chromium", Edg: "Edge" }[m[1]] ?? m[1];
  return `${name} ${m[2]}`;
}

export const clock = (d) => d.toTimeString().slice(0, 8);
