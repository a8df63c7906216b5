"""`py-harness setup`: the pinned npm packages (Pyodide for the pages and Node, npm `webgpu`
for the node runtime) in the per-user cache, for an installed distribution. A checkout
runs `npm ci` itself (scripts/setup.sh). Needs npm. Browsers come from the system (apt's
chromium, firefox-esr), HARNESS_CHROMIUM / HARNESS_FIREFOX, or, with --browsers,
Playwright's own Chromium (`playwright install chromium`, where its download is reachable),
which the chromium runtime uses when the system has none."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from . import paths

PLAYWRIGHT_BROWSERS = ("chromium",)


def install_browsers() -> int:
    """Playwright's builds of PLAYWRIGHT_BROWSERS through its own installer; where that
    fails (no route to its download), what to install instead."""
    cmd = [sys.executable, "-m", "playwright", "install", *PLAYWRIGHT_BROWSERS]
    print(f"py-harness setup: {' '.join(cmd[1:])}", flush=True)
    if subprocess.run(cmd).returncode != 0:
        print(
            "py-harness setup: Playwright's download failed; install the system's instead "
            "(apt-get install chromium firefox-esr) or set HARNESS_CHROMIUM",
            file=sys.stderr,
        )
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="py-harness setup", description=__doc__)
    ap.add_argument(
        "--browsers", action="store_true", help="also Playwright's Chromium (a download)"
    )
    args = ap.parse_args(argv)
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
    status = install_browsers() if args.browsers else 0
    report_runtimes()
    return status


def report_runtimes() -> None:
    """Each runtime: ready, or what it still needs and how to install it."""
    from .runtimes.registry import RUNTIMES

    for name, rt in RUNTIMES.items():
        why = rt.missing()
        print(f"py-harness setup: {name}: {'ready' if why is None else why}")
