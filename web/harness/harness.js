// Page glue for automated tests (Playwright, WebDriver BiDi): boots Pyodide, installs the
// py-harness wheel from /dist/ and exposes
//   window.harnessReady   Promise: resolves with harnessTimings, rejects with an Error saying why
//   window.runHarness(entry, requestJson) -> [status, value, stack], never rejects
//       (harness-core.mjs says what they hold)
//   window.runHarnessFrom(entry, url) -> the same, with the request JSON fetched from url:
//       how the host sends large requests (py_harness/host/exchange.py)
//   window.runHarnessExchange(entry, requestUrl, replyUrl) -> [status, "", stack]: an entry
//       with tensors, its request a frame of JSON and bytes fetched from requestUrl, its
//       reply (JSON and the outputs' bytes) POSTed as a frame to replyUrl (exchange.py)
//   window.harnessTimings {pyodideLoadMs, packageLoadMs, importMs, totalMs, readyAtMs,
//       snapshot: whether Pyodide started from build/dist/pyodide-snapshot.bin}
//   window.variantRefusal(variant, configJson) -> JSON {refusal, feature}: why a built-in
//       variant cannot run the config (harness-core.mjs), asked before a run

import {
  bootHarness,
  makeRunHarness,
  makeRunHarnessBlobs,
  makeVariantRefusal,
  packFrame,
  settle,
  unpackFrame,
} from "./harness-core.mjs";

const BUILD_HINT = "Build it with: python -m py_harness.host.dist.build_wheel (the server does).";

const timings = {};
window.harnessTimings = timings;

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
  // Pyodide's memory after start-up, where the build could make it (404 where not).
  const snapshot = fetch(new URL("/dist/pyodide-snapshot.bin", location.href), { cache: "no-store" })
    .then((resp) => (resp.ok ? resp.arrayBuffer() : null))
    .then((bytes) => bytes && new Uint8Array(bytes))
    .catch(() => null);
  // Dynamic import so that a missing /pyodide/ rejects harnessReady instead of killing the module.
  // All awaited here (not handed to Pyodide as a promise), so a failure is one clean rejection.
  const [{ loadPyodide }, lockFileContents, snapshotBytes] = await Promise.all([
    import("/pyodide/pyodide.mjs"),
    lockText,
    snapshot,
  ]);
  const options = {
    indexURL: new URL("/pyodide/", location.href).href,
    lockFileContents,
    // Lock entries have relative file_name (the bare wheel name); Pyodide resolves it with
    // new URL(file_name, packageBaseUrl), so the base must be absolute. It is required
    // whenever lockFileContents is given.
    packageBaseUrl: new URL("/dist/", location.href).href,
  };
  const loaded = await bootHarness(loadPyodide, options, timings, t0, snapshotBytes);
  timings.readyAtMs = Math.round(performance.now()); // since navigation start
  return loaded;
}

const booting = boot().catch((err) => {
  // PythonError.message holds the traceback (e.g. an ImportError in py_harness.page).
  const message = `harness failed to load: ${err?.message ?? err}`;
  window.harnessError = message;
  throw new Error(message, { cause: err });
});

window.harnessReady = booting.then(() => timings);
window.harnessReady.catch(() => {}); // awaited by tests; avoid an "unhandled rejection" report

window.runHarness = makeRunHarness(booting);
// One GET of a body the host put in its exchange, read as "text" or "arrayBuffer".
async function fetchBody(url, read) {
  const resp = await fetch(url, { cache: "no-store" });
  if (!resp.ok) {
    throw new Error(`GET ${new URL(url).pathname}: HTTP ${resp.status}`);
  }
  return resp[read]();
}

// A step's [status, value, stack] with what failed named before its message.
async function step(what, work) {
  const [status, value, stack] = await settle(work);
  return status === "ok" ? [status, value, stack] : [status, `${what}: ${value}`, stack];
}

window.runHarnessFrom = async (entry, url) => {
  const [status, requestJson, stack] = await step("the request did not arrive", () =>
    fetchBody(url, "text"),
  );
  return status === "ok" ? window.runHarness(entry, requestJson) : [status, requestJson, stack];
};
const runHarnessBlobs = makeRunHarnessBlobs(booting);
window.runHarnessExchange = async (entry, requestUrl, replyUrl) => {
  const request = await step("the request did not arrive", async () =>
    unpackFrame(await fetchBody(requestUrl, "arrayBuffer")),
  );
  if (request[0] !== "ok") {
    return request;
  }
  const reply = await runHarnessBlobs(entry, ...request[1]);
  if (reply[0] !== "ok") {
    return reply;
  }
  return step("the reply did not go back", async () => {
    const resp = await fetch(replyUrl, {
      method: "POST",
      headers: { "Content-Type": "application/octet-stream" },
      body: packFrame(...reply[1]),
      cache: "no-store",
    });
    if (!resp.ok) {
      throw new Error(`POST ${new URL(replyUrl).pathname}: HTTP ${resp.status} ${await resp.text()}`);
    }
    return "";
  });
};
window.variantRefusal = makeVariantRefusal(booting);
