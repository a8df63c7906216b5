// Makes a memory snapshot of Pyodide just after its start-up: the interpreter initialised
// and the standard-library modules the harness imports already imported, no packages
// installed. The harness page (harness.js) and the Node runtime (node-harness.mjs) hand it
// to loadPyodide as _loadSnapshot, which restores that memory instead of starting Python
// again (docs/runtimes.md, "Pyodide", has the times). The snapshot holds no JS objects
// and nothing of the harness, so one made here in Node serves the page in any browser;
// it is tied to this Pyodide build alone (host/dist/snapshot.py keys it on its files).
//   node web/harness/pyodide-snapshot.mjs NODE_MODULES OUT_FILE

import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

// What py_harness.page imports from the standard library (its imports of imports
// included), so the page's import starts with them done.
const STDLIB = [
  "abc", "array", "asyncio", "base64", "collections.abc", "contextlib", "dataclasses",
  "hashlib", "json", "math", "re", "statistics", "struct", "time", "typing",
];

const [nodeModules, out] = process.argv.slice(2);
if (!nodeModules || !out) {
  console.error("usage: node web/harness/pyodide-snapshot.mjs NODE_MODULES OUT_FILE");
  process.exit(2);
}
const { loadPyodide } = await import(pathToFileURL(join(nodeModules, "pyodide/pyodide.mjs")));
const pyodide = await loadPyodide({ indexURL: join(nodeModules, "pyodide/"), _makeSnapshot: true });
pyodide.runPython(`import ${STDLIB.join(", ")}`);
const snapshot = pyodide.makeMemorySnapshot();
writeFileSync(`${out}.tmp`, snapshot);
renameSync(`${out}.tmp`, out);
