// The harness without a browser: Pyodide in Node, with Dawn's `webgpu` package as
// navigator.gpu. The same wheel, the same py_harness.page (gpu/browser.py through JS
// interop) and the same runHarness as the page (harness-core.mjs); the host speaks to it
// over stdin / stdout (py_harness/host/runtimes/workers.py):
//   in:  [id, entry, requestJson]            one per line
//   out: "\x1e" + [id, status, value, stack]  one per line; id null: the ready line
// and for an entry with tensors (run_case, time_case), their bytes after the line:
//   in:  [id, entry, requestJson, [n1, ...]]  then n1 + ... bytes
//   out: "\x1e" + [id, "ok", replyJson, null, [n1, ...]]  then the outputs' n1 + ... bytes
// Everything else (Python's print, Dawn's warnings) goes to stderr.
//   node web/harness/node-harness.mjs [dawn option ...]   e.g. backend=vulkan

import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

import { bootHarness, makeRunHarness, makeRunHarnessBlobs } from "./harness-core.mjs";

// The checkout (or the installed package's _data/): web/harness/ is two folders down.
const ROOT = new URL("../..", import.meta.url);
const path = (rel) => fileURLToPath(new URL(rel, ROOT));
// The host names both folders (py_harness/host/paths.py); a checkout's are the fallback.
const NODE_MODULES = process.env.HARNESS_NODE_MODULES || path("node_modules");
const DIST = process.env.HARNESS_DIST_DIR || path("build/dist");
const say = (fields) => process.stdout.write("\x1e" + JSON.stringify(fields) + "\n");
const BUILD_HINT = "Build it with: python -m py_harness.host.dist.build_wheel";
// Dawn rounds timestamp queries to 2^16 ns steps unless told not to (host/gpu/native.py says
// why); Chromium under --enable-webgpu-developer-features, as the chromium runtime runs
// it, does not round them either. Dawn for Node keeps the last of a repeated option, so
// the toggles the host turns off (on SwiftShader: gpu/device.py) join this one.
const DAWN_OPTIONS = dawnOptions(["timestamp_quantization"], process.argv.slice(2));

function dawnOptions(disabled, args) {
  const rest = [];
  for (const arg of args) {
    const named = /^disable-dawn-features=(.*)$/.exec(arg);
    if (named) disabled.push(...named[1].split(",").filter(Boolean));
    else rest.push(arg);
  }
  return [`disable-dawn-features=${disabled.join(",")}`, ...rest];
}

// Dawn for Node waits for the GPU by polling: while any GPU work is pending it runs its
// tick through setImmediate, which schedules the next one (its AsyncRunner, which looks
// setImmediate up on the global object each time). That kept the main thread busy for
// 54-61 % of a GPU-bound case on SwiftShader, CPU the GPU's own threads needed on a
// 2-core machine (docs/runtimes.md). Its tick is a native function: after the first
// HARNESS_NODE_POLL_SPIN_MS of a wait it runs on a 1 ms timer instead, so that the thread
// sleeps between ticks; a short wait still ends as soon as the work does, and every other
// callback keeps setImmediate. Ticks more than NEW_WAIT_MS apart belong to different waits.
// The host sets it on SwiftShader only (runtimes/registry.py): on a GPU the timer slows every
// dispatch, so unset the ticks spin throughout.
const POLL_SPIN_MS = Number(process.env.HARNESS_NODE_POLL_SPIN_MS || Infinity);
const NEW_WAIT_MS = 5;
const setImmediateOf = globalThis.setImmediate;
const NATIVE = /\{\s*\[native code\]\s*\}\s*$/;
let lastTick = -Infinity;
let waitStart = 0;
globalThis.setImmediate = (fn, ...args) => {
  if (typeof fn !== "function" || !NATIVE.test(Function.prototype.toString.call(fn))) {
    return setImmediateOf(fn, ...args);
  }
  const now = performance.now();
  if (now - lastTick > NEW_WAIT_MS) waitStart = now;
  lastTick = now;
  return now - waitStart < POLL_SPIN_MS ? setImmediateOf(fn, ...args) : setTimeout(fn, 1, ...args);
};

// Relative URLs are the page's own files (page.py fetches "../shaders/NAME"): read them
// from the checkout, as the server would serve them. The base is the page's folder as the
// server names it (/harness/, one below the root as shaders/ is), not where this file sits.
const nodeFetch = globalThis.fetch;
const PAGE_BASE = new URL("harness/", ROOT);
globalThis.fetch = async (url, init) => {
  if (typeof url === "string" && !/^[a-z][a-z0-9+.-]*:/i.test(url)) {
    try {
      return new Response(await readFile(new URL(url, PAGE_BASE)));
    } catch (err) {
      return new Response(String(err), { status: err.code === "ENOENT" ? 404 : 500 });
    }
  }
  return nodeFetch(url, init);
};

// Pyodide's memory after start-up, where the build could make it (host/dist/snapshot.py).
function snapshotBytes() {
  try {
    return readFileSync(join(DIST, "pyodide-snapshot.bin"));
  } catch {
    return null;
  }
}

async function boot() {
  const t0 = performance.now();
  let lockFileContents;
  try {
    lockFileContents = readFileSync(join(DIST, "pyodide-lock.json"), "utf8");
  } catch (err) {
    throw new Error(`${join(DIST, "pyodide-lock.json")}: ${err.message}. ${BUILD_HINT}`);
  }
  const { loadPyodide } = await import(pathToFileURL(join(NODE_MODULES, "pyodide/pyodide.mjs")));
  const webgpu = await import(pathToFileURL(join(NODE_MODULES, "webgpu/index.js")));
  const options = {
    indexURL: join(NODE_MODULES, "pyodide/"),
    lockFileContents,
    packageBaseUrl: join(DIST, "/"),
    stdout: (line) => process.stderr.write(line + "\n"),
    stderr: (line) => process.stderr.write(line + "\n"),
  };
  const timings = {};
  const loaded = await bootHarness(
    async (opts) => {
      const pyodide = await loadPyodide(opts);
      // After loadPyodide (assigned before, Pyodide's start fails: docs/runtimes.md), and with a
      // userAgent, which Pyodide reads from navigator.
      Object.assign(globalThis, webgpu.globals);
      const version = JSON.parse(readFileSync(join(NODE_MODULES, "webgpu/package.json"))).version;
      Object.defineProperty(globalThis, "navigator", {
        value: {
          gpu: webgpu.create(DAWN_OPTIONS),
          userAgent: `Node.js ${process.version}; Dawn (npm webgpu ${version})`,
        },
        configurable: true,
      });
      return pyodide;
    },
    options,
    timings,
    t0,
    snapshotBytes(),
  );
  return { loaded, timings };
}

let booted;
try {
  booted = await boot();
} catch (err) {
  say([null, "error", `harness failed to load: ${err?.message ?? err}`, err?.stack ?? null]);
  process.exit(1);
}
say([null, "ok", JSON.stringify(booted.timings), null]);

// stdin as lines and the bytes after them. Chunks are joined once per take, so a blob of
// many chunks is copied once.
function byteReader(stream) {
  let chunks = [];
  let size = 0;
  let ended = false;
  let wake = null;
  const more = () => new Promise((resolve) => (wake = resolve));
  const woken = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  stream.on("data", (chunk) => {
    chunks.push(chunk);
    size += chunk.length;
    woken();
  });
  stream.on("end", () => {
    ended = true;
    woken();
  });
  const take = (n) => {
    const all = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
    chunks = n < all.length ? [all.subarray(n)] : [];
    size -= n;
    return all.subarray(0, n);
  };
  return {
    async line() {
      for (;;) {
        let seen = 0;
        for (const chunk of chunks) {
          const at = chunk.indexOf(10);
          if (at >= 0) return take(seen + at + 1).toString("utf8", 0, seen + at);
          seen += chunk.length;
        }
        if (ended) return null;
        await more();
      }
    },
    async bytes(n) {
      while (size < n) {
        if (ended) throw new Error(`stdin ended ${n - size} bytes short of a blob`);
        await more();
      }
      const blob = take(n); // a Buffer, which Pyodide does not take: a plain view of it
      return new Uint8Array(blob.buffer, blob.byteOffset, blob.byteLength);
    },
  };
}

const loaded = Promise.resolve(booted.loaded);
const runHarness = makeRunHarness(loaded);
const runHarnessBlobs = makeRunHarnessBlobs(loaded);
const input = byteReader(process.stdin);
// One call at a time, in order: the service holds one device and expects no overlap.
for (let line; (line = await input.line()) !== null; ) {
  if (!line.trim()) continue;
  const [id, entry, requestJson, lengths] = JSON.parse(line);
  if (lengths === undefined) {
    say([id, ...(await runHarness(entry, requestJson))]);
    continue;
  }
  const blobs = [];
  for (const n of lengths) blobs.push(await input.bytes(n));
  const [status, value, stack] = await runHarnessBlobs(entry, requestJson, blobs);
  if (status !== "ok") {
    say([id, status, value, stack]);
    continue;
  }
  const [reply, outputs] = value;
  say([id, "ok", reply, null, outputs.map((b) => b.byteLength)]);
  for (const blob of outputs) process.stdout.write(blob);
}
process.exit(0);
