// The demo's two back ends: py_harness in Pyodide (window.runHarness, from harness.js) and the
// server's NumPy endpoints (/api/, py_harness/host/serving/api.py).

export class HarnessError extends Error {
  // message: the exception line of the Python traceback (what went wrong); detail: all of it.
  constructor(entry, text, stack) {
    const lines = String(text).trim().split("\n");
    super(`${entry}: ${lines[lines.length - 1]}`);
    this.detail = stack ? `${text}\n\n${stack}` : String(text);
  }
}

export async function call(entry, request) {
  const [status, value, stack] = await window.runHarness(entry, JSON.stringify(request));
  if (status !== "ok") throw new HarnessError(entry, value, stack);
  return JSON.parse(value);
}

// Why `variant` cannot run `config`, from Python (Variant.refusal in Pyodide, harness.js's
// window.variantRefusal): {refusal, feature}, refusal null when it can (or when the config is
// invalid: validate_config says why), feature the setting it does not support.
export async function variantRefusal(variant, config) {
  return JSON.parse(await window.variantRefusal(variant, JSON.stringify(config)));
}

async function fetchJSON(path, init) {
  let resp;
  try {
    resp = await fetch(path, { cache: "no-store", ...init });
  } catch (err) {
    throw new Error(`${init?.method ?? "GET"} ${path}: the server did not answer (${err.message})`);
  }
  const text = await resp.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = { error: text.slice(0, 500) };
  }
  if (!resp.ok) {
    const err = new Error(`${init?.method ?? "GET"} ${path}: HTTP ${resp.status}: ${body.error}`);
    err.detail = body.error;
    err.status = resp.status;
    err.retryAfter = Number(resp.headers.get("Retry-After"));
    throw err;
  }
  return body;
}

export const getJSON = (path) => fetchJSON(path);

export const postJSON = (path, obj) =>
  fetchJSON(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(obj),
  });

// A judge request: the server computes one float64 reference at a time and answers 503 with
// Retry-After while another is being computed (another tab, a test). Wait and ask again, a
// few times; `job` (demo-util.js's Job) may cancel the wait. 422 (over the server's reference
// cost limit) and every other error are thrown as they are.
const JUDGE_TRIES = 6;
const RETRY_DEFAULT_S = 2;
const RETRY_MAX_S = 15;

export async function postJudge(path, obj, job, onWait = () => {}) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await postJSON(path, obj);
    } catch (err) {
      if (err.status !== 503 || attempt >= JUDGE_TRIES) throw err;
      const wait = Math.min(RETRY_MAX_S, err.retryAfter > 0 ? err.retryAfter : RETRY_DEFAULT_S);
      onWait(`the server is computing another reference; asking again in ${wait} s`);
      for (let t = 0; t < wait * 10; t++) {
        job?.check();
        await new Promise((r) => setTimeout(r, 100));
      }
      job?.check();
    }
  }
}

// The server sends non-finite floats as strings (JSON has no inf / NaN).
export const num = (v) => (typeof v === "string" ? Number(v) : (v ?? NaN));
