"""The Pyodide memory snapshot the pages and the Node runtime boot from
(web/harness/pyodide-snapshot.mjs makes it with Node; docs/runtimes.md, "Pyodide", says what
it saves).

It is an optimisation: without Node, or when making it fails, there is none and Pyodide
starts as before; the page's harnessTimings say which way it booted (`snapshot`). It is
remade when Pyodide's version or lock, or the script, change (a content hash, kept in a
stamp), and holds nothing of the harness, so a new wheel does not remake it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from .. import paths

SNAPSHOT_NAME = "pyodide-snapshot.bin"
SCRIPT = paths.HARNESS_WEB_DIR / "pyodide-snapshot.mjs"
# What names the Pyodide build whose start-up the snapshot is (its version and its lock),
# hashed on every build() call: small files, where hashing the 12 MB the start-up runs took
# 15-31 ms a call. A snapshot of another build would not restore anyway (Pyodide checks its
# build id; harness-core.mjs then starts plainly).
PYODIDE_FILES = ("package.json", "pyodide-lock.json")
MAKE_TIMEOUT_S = 300


def snapshot_digest() -> str:
    h = hashlib.sha256()
    for path in [*(paths.pyodide_dir() / n for n in PYODIDE_FILES), SCRIPT]:
        h.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def ensure_snapshot(dist: Path, log: Callable[[str], None] = print) -> Path | None:
    """The snapshot in `dist`, made first where it is missing or stale; None (and no file)
    where it cannot be made. The caller holds the build lock."""
    out, stamp = dist / SNAPSHOT_NAME, dist / ".snapshot-stamp.json"
    digest = snapshot_digest()
    try:
        if json.loads(stamp.read_text()).get("digest") == digest and out.is_file():
            return out
    except (OSError, ValueError):
        pass
    out.unlink(missing_ok=True)
    stamp.unlink(missing_ok=True)
    node = shutil.which(paths.node_binary())
    if node is None:
        log(f"snapshot: no {paths.node_binary()}: pages start Pyodide without a snapshot")
        return None
    cmd = [node, str(SCRIPT), str(paths.node_modules()), str(out)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=MAKE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        log(f"snapshot: {' '.join(cmd)} ran over {MAKE_TIMEOUT_S} s: none made")
        return None
    if proc.returncode != 0 or not out.is_file():
        said = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        log(f"snapshot: {' '.join(cmd)} failed ({proc.returncode}): {' / '.join(said)}")
        out.unlink(missing_ok=True)
        return None
    stamp.write_text(json.dumps({"digest": digest}))
    log(f"snapshot: made {out} ({out.stat().st_size:,} bytes)")
    return out
