// Page glue for automated tests (Playwright): boots Pyodide, installs the py-harness wheel from
// /dist/ and exposes
//   window.harnessReady   Promise: resolves with harnessTimings, rejects with an Error saying why
//   window.runHarness(entry, requestJson) -> [status, value, stack], never rejects:
//       ["ok", resultJson, null] or ["error", message, jsStack]; for a Python exception the
//       message is the full Python traceback
//   window.harnessTimings {pyodideLoadMs, packageLoadMs, importMs, totalMs, readyAtMs}

const PACKAGE = "py-harness";
const MODULE = "py_harness.page";
// Entries are plain public names: no dunders, no attribute paths.
const ENTRY_RE = /^[A-Za-z][A-Za-z0-9_]*$/;
const BUILD_HINT = "Build it with: python -m py_harness.host.build_wheel (python server.py does).";

const timings = {};
window.harnessTimings = timings;

const since = (t) => Math.round((performance.now() - t) * 10) / 10;

async function boot() {
  const t0 = performance.now();
  // Fetch the lock ourselves (in parallel with Pyodide's start-up) so that a missing build
  // says so, rather than Pyodide failing to JSON.parse a 404 page.
  const lockUrl = new URL("/dist/pyodide-lock.json", location.href);
  const lockText = fetch(lockUrl, { cache: "no-store" }).then((resp) => {
    if (!resp.ok) {
      throw new Error(`GET ${lockUrl.pathname}: HTTP ${resp.status}. ${BUILD_HINT}`);
    }
    return resp.text();
  });
  // Dynamic import so that a missing /pyodide/ rejects harnessReady instead of killing the module.
  // Both awaited here (not handed to Pyodide as a promise), so a failure is one clean rejection.
  const [{ loadPyodide }, lockFileContents] = await Promise.all([
    import("/pyodide/pyodide.mjs"),
    lockText,
  ]);
  const pyodide = await loadPyodide({
    indexURL: new URL("/pyodide/", location.href).href,
    lockFileContents,
    // Lock entries have relative file_name (the bare wheel name); Pyodide resolves it with
    // new URL(file_name, packageBaseUrl), so the base must be absolute. It is required
    // whenever lockFileContents is given.
    packageBaseUrl: new URL("/dist/", location.href).href,
  });
  timings.pyodideLoadMs = since(t0);

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
  timings.totalMs = since(t0);
  timings.readyAtMs = Math.round(performance.now()); // since navigation start
  return { pyodide, page };
}

const booting = boot().catch((err) => {
  // PythonError.message holds the traceback (e.g. an ImportError in py_harness.page).
  const message = `harness failed to load: ${err?.message ?? err}`;
  window.harnessError = message;
  throw new Error(message, { cause: err });
});

window.harnessReady = booting.then(() => timings);
window.harnessReady.catch(() => {}); // awaited by tests; avoid an "unhandled rejection" report

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

async function callEntry(entry, requestJson) {
  const { pyodide, page } = await booting;
  if (typeof entry !== "string" || !ENTRY_RE.test(entry)) {
    throw new Error(`invalid entry name ${JSON.stringify(entry)}`);
  }
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
    return result;
  } finally {
    fn.destroy();
  }
}

window.runHarness = async (entry, requestJson) => {
  try {
    return ["ok", await callEntry(entry, requestJson), null];
  } catch (err) {
    return ["error", String(err?.message ?? err), err?.stack ?? null];
  }
};
