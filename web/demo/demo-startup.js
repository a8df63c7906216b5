// Start-up of the demo page: the stage list with its clocks, the WebGPU check and its
// explanation, and the adapter card.

const $ = (sel) => document.querySelector(sel);

// ---- start-up stages ------------------------------------------------------------------------

export const STAGES = [
  ["download", "Pyodide download", "WebAssembly runtime and Python standard library"],
  ["python", "Python start", "WebAssembly compile, interpreter boot"],
  ["package", "py_harness load", "wheel from /dist/, import py_harness.page"],
  ["adapter", "Adapter request", "navigator.gpu → adapter → device"],
  ["compile", "Pipeline compile", "forward and backward compute pipelines"],
];
export const secs = (ms) => (ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`);

export class Stages {
  // times: where each stage's duration (ms) is recorded, for tests.
  constructor(list, times) {
    this.times = times;
    this.t = {};
    this.items = {};
    for (const [id, name, what] of STAGES) {
      const li = document.createElement("li");
      li.dataset.stage = id;
      li.dataset.status = "pending";
      li.innerHTML =
        `<span class="dot"></span><span class="name">${name}</span>` +
        `<span class="time"></span><span class="detail">${what}</span>`;
      list.append(li);
      this.items[id] = li;
    }
    this.timer = setInterval(() => this.tick(), 100);
  }
  start(id, at = performance.now()) {
    this.t[id] = { start: at };
    this.items[id].dataset.status = "running";
    this.tick();
  }
  end(id, status, detail, at = performance.now()) {
    const t = this.t[id] ?? (this.t[id] = { start: at });
    t.end = at;
    const li = this.items[id];
    li.dataset.status = status;
    if (detail) li.querySelector(".detail").textContent = detail;
    li.querySelector(".time").textContent = status === "skipped" ? "—" : secs(t.end - t.start);
    this.times[id] = Math.round(t.end - t.start);
    const done = STAGES.filter(([s]) =>
      ["done", "failed", "skipped"].includes(this.items[s].dataset.status),
    ).length;
    $("#progress-bar").style.width = `${(100 * done) / STAGES.length}%`;
    this.tick();
  }
  done(id, detail, at) {
    this.end(id, "done", detail, at);
  }
  fail(id, detail) {
    this.end(id, "failed", detail);
  }
  skip(id, detail) {
    this.end(id, "skipped", detail);
  }
  tick() {
    const now = performance.now();
    let running = false;
    for (const [id, t] of Object.entries(this.t)) {
      if (t.end === undefined) {
        running = true;
        this.items[id].querySelector(".time").textContent = secs(now - t.start);
      }
    }
    $("#startup-total").textContent = secs(now);
    if (!running && this.t.compile?.end !== undefined) clearInterval(this.timer);
  }
  stopClock() {
    clearInterval(this.timer);
  }
}

// Pyodide's two big files (the WebAssembly module, the standard library) as resource timing
// has them: {end, bytes, cached}, or null before both have arrived. Read on demand rather
// than observed: Pyodide's start-up blocks the main thread, so an observer's callback can
// come only after Python is up, while the entries' timestamps are right whenever read.
export function downloaded() {
  const all = performance.getEntriesByType("resource").filter((e) => e.name.includes("/pyodide/"));
  const base = (e) => e.name.split("?")[0].split("/").pop();
  const big = all.filter((e) => ["pyodide.asm.wasm", "python_stdlib.zip"].includes(base(e)));
  if (big.length < 2) return null;
  return {
    end: Math.max(...big.map((e) => e.responseEnd)),
    bytes: all.reduce((n, e) => n + (e.encodedBodySize || 0), 0),
    cached: all.every((e) => e.transferSize === 0),
  };
}

// Resolves when harness.js has finished loadPyodide (its timings object fills in as it goes).
export function pythonStarted() {
  return new Promise((resolve) => {
    const poll = setInterval(() => {
      if (window.harnessTimings?.pyodideLoadMs !== undefined) {
        clearInterval(poll);
        resolve();
      }
    }, 25);
    window.harnessReady.catch(() => clearInterval(poll));
  });
}

// ---- WebGPU availability --------------------------------------------------------------------

export async function checkWebGPU() {
  if (!window.isSecureContext) {
    return {
      ok: false,
      reason: `${location.origin} is not a secure context, so navigator.gpu does not exist here. Open http://127.0.0.1:${location.port}/ instead.`,
    };
  }
  if (!navigator.gpu) {
    return {
      ok: false,
      reason:
        "navigator.gpu is undefined: this browser has WebGPU switched off, or does not have it.",
    };
  }
  let adapter = null;
  try {
    adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  } catch (err) {
    return { ok: false, reason: `navigator.gpu.requestAdapter() failed: ${err.message}` };
  }
  if (!adapter) {
    return {
      ok: false,
      reason:
        "navigator.gpu exists, but requestAdapter() returned null: WebGPU is disabled for this GPU or driver (blocklisted, or behind a flag), or there is no usable GPU.",
    };
  }
  return { ok: true, features: [...adapter.features].sort() };
}

export function showNoGpu(reason) {
  $("#nogpu-why").textContent = reason;
  $("#nogpu").hidden = false;
  document.body.dataset.state = "no-webgpu";
  $("#adapter").innerHTML = `<p class="bad">No WebGPU adapter. See the box above.</p>`;
}

export function showFatal(text) {
  $("#fatal-text").textContent = text;
  $("#fatal").hidden = false;
  document.body.dataset.state = "error";
}

// ---- adapter ------------------------------------------------------------------------------

export function renderAdapter(a, info, gpu) {
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
  const fields = ["vendor", "architecture", "device", "description"]
    .filter((k) => a.info[k])
    .map((k) => `<dt>${k}</dt><dd data-info="${k}">${esc(a.info[k])}</dd>`)
    .join("");
  const need = { ...(info?.required_limits ?? {}) };
  for (const v of Object.values(info?.variants ?? {})) {
    for (const [k, n] of Object.entries(v.required_limits)) need[k] = Math.max(need[k] ?? 0, n);
  }
  const limits = Object.entries(a.limits)
    .map(([k, v]) => {
      const ok = need[k] === undefined || v >= need[k];
      return (
        `<tr><td>${k}</td><td class="num">${v.toLocaleString("en")}</td>` +
        `<td class="num muted">${need[k] === undefined ? "" : `≥ ${need[k].toLocaleString("en")}`}</td>` +
        `<td class="${ok ? "good" : "bad"}">${ok ? "✓" : "✗"}</td></tr>`
      );
    })
    .join("");
  const ts = a.features.includes("timestamp-query");
  const chips = ["timestamp-query", "subgroups", "shader-f16"]
    .map((f) => {
      const has = a.features.includes(f) || gpu?.features?.includes(f);
      const used = a.features.includes(f);
      return `<span class="chip ${has ? "on" : "off"}" title="${used ? "enabled on the device" : has ? "adapter has it; the kernels do not use it" : "not available"}">${f}</span>`;
    })
    .join("");
  $("#adapter").innerHTML =
    `<dl class="kv">${fields}<dt>timing</dt><dd>${ts ? "GPU timestamps (timestamp-query)" : "wall clock (no timestamp-query)"}</dd></dl>` +
    `<div class="chips">${chips}</div>` +
    `<details open><summary>Limits the kernels depend on</summary><table class="data limits">` +
    `<thead><tr><th>limit</th><th>device</th><th>kernels need</th><th></th></tr></thead>${limits}</table></details>` +
    (gpu?.features
      ? `<details><summary>All adapter features (${gpu.features.length})</summary><p class="mono small">${gpu.features.join(" · ")}</p></details>`
      : "");
}
