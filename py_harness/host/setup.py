"""`py-harness setup`: the pinned npm packages (Pyodide for the pages and Node, npm `webgpu`
for the node runtime) in the per-user cache, for an installed distribution. A checkout
runs `npm ci` itself (scripts/setup.sh). Needs npm; browsers come from the system (apt's
chromium, firefox-esr) or HARNESS_CHROMIUM / HARNESS_FIREFOX."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from . import paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="py-harness setup", description=__doc__)
    ap.parse_args(argv)
    target = paths.cache_dir()
    target.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(paths.NPM_DIR / name, target / name)
    npm = shutil.which("npm")
    if npm is None:
        print("py-harness setup: npm not found (apt-get install npm)", file=sys.stderr)
        return 2
    cmd = [npm, "ci", "--silent", "--no-audit", "--no-fund", "--ignore-scripts"]
    print(f"py-harness setup: {' '.join(cmd[:2])} in {target}", flush=True)
    if subprocess.run(cmd, cwd=target).returncode != 0:
        return 1
    print(f"py-harness setup: {target / 'node_modules'} is ready")
    return 0
