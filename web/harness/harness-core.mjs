// What the harness page (harness.js) and the Node runtime (node-harness.mjs) share: boot
// Pyodide with the py-harness wheel, and call py_harness.page's entries as
// [status, value, stack] (["ok", resultJson, null] or ["error", message, jsStack]; for a
// Python exception the message is the full Python traceback). Never touches window or
// the file system: each host hands in what it has.

export const PACKAGE = "py-harness";
export const MODULE = "py_harness.page";
// Entries are plain public names: no dunders, no attribute paths.
const ENTRY_RE = /^[A-Za-z][A-Za-z0-9_]*$/;

const since = (t) => Math.round((performance.now() - t) * 10) / 10;

// Load Pyodide and the wheel named in the lock file; fills `timings` (ms) as it goes.
// `started` is when the host began (the browser starts fetching the lock before this).
// `snapshot`: the bytes of build/dist/pyodide-snapshot.bin (web/harness/pyodide-snapshot.mjs), or
// null: Pyodide restores its memory after start-up instead of starting Python. Should
// that fail, Pyodide starts as it would without one (timings.snapshot says which).
export async function bootHarness(
  loadPyodide,
  options,
  timings,
  started = performance.now(),
  snapshot = null,
) {
  let pyodide = null;
  timings.snapshot = false;
  if (snapshot) {
    try {
      pyodide = await loadPyodide({ ...options, _loadSnapshot: snapshot });
      timings.snapshot = true;
    } catch (err) {
      timings.snapshotError = String(err?.message ?? err);
      console.error(`Pyodide snapshot not used: ${timings.snapshotError}`);
    }
  }
  pyodide ??= await loadPyodide(options);
  timings.pyodideLoadMs = since(started);

  const t1 = performance.now();
  const loadErrors = [];
  // loadPackage logs download/integrity failures instead of throwing: collect them.
  await pyodide.loadPackage(PACKAGE, {
    checkIntegrity: true,
    errorCallback: (msg) => {
      loadErrors.push(msg);
      console.error(msg);
    },
  });
  if (!(PACKAGE in pyodide.loadedPackages)) {
    throw new Error(`loadPackage('${PACKAGE}') failed:\n${loadErrors.join("\n")}`);
  }
  timings.packageLoadMs = since(t1);

  const t2 = performance.now();
  const page = pyodide.pyimport(MODULE);
  timings.importMs = since(t2);
  timings.totalMs = since(started);
  return { pyodide, page };
}

function listEntries(pyodide) {
  const names = pyodide.runPython(
    `import ${MODULE} as _m\n` +
      "[n for n in dir(_m) if not n.startswith('_') and callable(getattr(_m, n))]",
  );
  try {
    return names.toJs().join(", ");
  } finally {
    names.destroy();
  }
}

function checkEntryName(entry) {
  if (typeof entry !== "string" || !ENTRY_RE.test(entry)) {
    throw new Error(`invalid entry name ${JSON.stringify(entry)}`);
  }
}

// A typed error raised in the page's Python (a ConfigError, a WGSL compile error, ...)
// comes back from its entry as a record (py_harness/errors.py), a JSON text that starts
// with ERROR_RECORD: thrown here, so the call answers ["error", record, stack] and the host
// rebuilds the same exception from it.
const ERROR_RECORD = '{"harness_error"';

function throwIfErrorRecord(text) {
  if (text.startsWith(ERROR_RECORD)) {
    throw new Error(text);
  }
  return text;
}

// [status, value, stack] of an async call: ["ok", its value, null], or ["error", message,
// stack] when it throws (a Python exception's message is its traceback).
export async function settle(work) {
  try {
    return ["ok", await work(), null];
  } catch (err) {
    return ["error", String(err?.message ?? err), err?.stack ?? null];
  }
}

async function callEntry(booting, entry, requestJson) {
  const { pyodide, page } = await booting;
  checkEntryName(entry);
  if (typeof requestJson !== "string") {
    throw new TypeError(`requestJson must be a JSON string, got ${typeof requestJson}`);
  }
  const fn = page[entry];
  if (typeof fn !== "function") {
    fn?.destroy?.();
    throw new Error(`${MODULE} has no function '${entry}' (has: ${listEntries(pyodide)})`);
  }
  try {
    // Calling an async def gives an awaitable proxy; awaiting runs it on Pyodide's event loop.
    const result = await fn(requestJson);
    if (typeof result !== "string") {
      const shown = String(result);
      result?.destroy?.();
      throw new TypeError(`${MODULE}.${entry} must return a JSON string, got ${shown}`);
    }
    return throwIfErrorRecord(result);
  } finally {
    fn.destroy();
  }
}

// Why a built-in variant cannot run a configuration, asked before any run: Variant.refusal,
// which run_case checks only once it runs (the service's validate_config takes no variant).
// A Python function of (variant name, config JSON) -> JSON {refusal, feature}: refusal is
// Variant.refusal's text (null: it runs it, or the config is invalid, which validate_config
// says), feature the first feature (variant.features_used) the variant does not support.
const REFUSAL_PY = `
import json
from py_harness.config import AttentionConfig, ConfigError, validate
from py_harness.kernels import VARIANTS
from py_harness.variant import features_used

def variant_refusal(name, config_json):
    none = json.dumps({"refusal": None, "feature": None})
    if name not in VARIANTS:
        return none
    v = VARIANTS[name]
    try:
        cfg = AttentionConfig.from_dict(json.loads(config_json))
        validate(cfg)
    except (ConfigError, TypeError, ValueError):
        return none
    refusal = v.refusal(cfg)
    unsupported = [f for f in features_used(cfg) if f not in v.supports]
    feature = unsupported[0] if refusal and unsupported else None
    return json.dumps({"refusal": refusal, "feature": feature})

variant_refusal
`;

// variantRefusal(variantName, configJson) -> JSON string {refusal, feature}; rejects when
// Python fails (not for a refused or invalid config).
export function makeVariantRefusal(booting) {
  let fn = null;
  return async (variantName, configJson) => {
    const { pyodide } = await booting;
    if (typeof variantName !== "string" || typeof configJson !== "string") {
      throw new TypeError("variantRefusal takes (variant name, config JSON), both strings");
    }
    if (!fn) {
      const scope = pyodide.toPy({});
      try {
        fn = pyodide.runPython(REFUSAL_PY, { globals: scope });
      } finally {
        scope.destroy();
      }
    }
    return fn(variantName, configJson);
  };
}

// A JSON text and blobs (Uint8Arrays) as one frame, as py_harness/host/exchange.py
// packs them: u32 text length, u32 blob count, a u32 length per blob (little-endian), the
// text padded with spaces to 4 bytes, the blobs. packFrame gives a Blob (no copy here).
const FRAME_ALIGN = 4;

export function packFrame(text, blobs) {
  const raw = new TextEncoder().encode(text);
  const headBytes = 8 + 4 * blobs.length;
  const pad = (FRAME_ALIGN - ((headBytes + raw.length) % FRAME_ALIGN)) % FRAME_ALIGN;
  const head = new DataView(new ArrayBuffer(headBytes));
  head.setUint32(0, raw.length + pad, true);
  head.setUint32(4, blobs.length, true);
  blobs.forEach((b, i) => head.setUint32(8 + 4 * i, b.byteLength, true));
  return new Blob([head, raw, " ".repeat(pad), ...blobs]);
}

// [text, blobs as Uint8Array views of buffer]; throws when buffer is no frame.
export function unpackFrame(buffer) {
  const view = new DataView(buffer);
  if (buffer.byteLength < 8) throw new Error(`a frame has at least 8 bytes, got ${buffer.byteLength}`);
  const textLength = view.getUint32(0, true);
  const count = view.getUint32(4, true);
  let at = 8 + 4 * count;
  if (at > buffer.byteLength) throw new Error(`a frame of ${buffer.byteLength} bytes cannot list ${count} blobs`);
  const sizes = Array.from({ length: count }, (_, i) => view.getUint32(8 + 4 * i, true));
  if (at + textLength + sizes.reduce((a, b) => a + b, 0) !== buffer.byteLength) {
    throw new Error(`a frame of ${buffer.byteLength} bytes does not hold its text and blobs`);
  }
  const text = new TextDecoder().decode(new Uint8Array(buffer, at, textLength));
  at += textLength;
  const blobs = sizes.map((size) => {
    const blob = new Uint8Array(buffer, at, size);
    at += size;
    return blob;
  });
  return [text, blobs];
}

// runHarnessBlobs(entry, requestJson, blobs) -> [status, [replyJson, blobs] | message,
// stack]: an entry that takes tensors (the service's BLOB_ENTRIES) with them as
// Uint8Arrays beside the JSON (py_harness.page.call_blobs); never rejects.
export function makeRunHarnessBlobs(booting) {
  return (entry, requestJson, blobs) =>
    settle(async () => {
      const { page } = await booting;
      checkEntryName(entry);
      const fn = page.call_blobs;
      try {
        const reply = await fn(entry, requestJson, blobs);
        return typeof reply === "string" ? throwIfErrorRecord(reply) : reply;
      } finally {
        fn.destroy();
      }
    });
}

// runHarness(entry, requestJson) -> [status, value, stack]; never rejects.
export function makeRunHarness(booting) {
  return (entry, requestJson) => settle(() => callEntry(booting, entry, requestJson));
}
