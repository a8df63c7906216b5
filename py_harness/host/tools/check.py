"""`py-harness check`: the case matrix on each WebGPU runtime, through pytest and the
harness's plugin (the same tests, fixtures and judging as `pytest`), with the case x runtime
matrix and where runtimes disagree printed at the end; results.json (the plugin's writer)
and results.xml (pytest's JUnit XML) in --out.

Exits non-zero when a case fails (a declared known failure does not; one that passes
does, as a strict xfail) or when nothing ran. Arguments after `--` go to pytest as they are
(e.g. `-- -n 2` with pytest-xdist, `-- -x`).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ...kernels import DEFAULT_VARIANT
from .. import matrix_suite
from ..arg_types import positive_int
from ..judge import report
from ..paths import cannot_write, output_dir
from ..runtimes.registry import RUNTIMES


def add_kernel_options(ap: argparse.ArgumentParser, runtime: str, runtimes: str) -> None:
    """--runtime (default `runtime`; `runtimes` says how many it takes), --variant,
    --variant-file and --shaders: the options of every tool that judges kernels
    (variants.load_options applies the last two)."""
    ap.add_argument(
        "--runtime", default=runtime, help=f"{runtimes}: {', '.join(RUNTIMES)} (default: {runtime})"
    )
    ap.add_argument(
        "--variant",
        default=DEFAULT_VARIANT,
        help=f"a built-in variant or one from --variant-file (default: {DEFAULT_VARIANT})",
    )
    ap.add_argument(
        "--variant-file", action="append", default=[], type=Path, help="a variant's TOML file"
    )
    ap.add_argument("--shaders", type=Path, help="the built-in variants' .wgsl from this folder")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="py-harness check", description=__doc__)
    add_kernel_options(ap, "all", "comma-separated")
    ap.add_argument("--smoke", action="store_true", help="only the fast smoke subset")
    ap.add_argument(
        "--long", action="store_true", help="also the long cases (GPU-sized; slow on CPUs)"
    )
    ap.add_argument(
        "--draws",
        type=positive_int,
        default=1,
        help="judge each case on N seeded input draws (default 1: draw 0)",
    )
    ap.add_argument("--case", action="append", default=[], help="a case id (repeatable)")
    ap.add_argument(
        "--out",
        type=Path,
        help="where results.json/.xml and the outputs go (default: "
        "build/check/VARIANT--RUNTIMES--MACHINE, MACHINE from HARNESS_MACHINE or the host name)",
    )
    ap.add_argument("--browser-ws", help="Chromium through a Playwright browser server")
    ap.add_argument(
        "--browser-channel", help="Chromium: an installed Chrome or Edge (chrome, msedge, ...)"
    )
    ap.add_argument("--headed", action="store_true", help="Chromium with its window shown")
    ap.add_argument("--slowmo", type=float, default=0, help="Chromium: ms between steps")
    ap.add_argument(
        "--judge-workers",
        type=positive_int,
        help="threads the float64 reference and baselines use (default: one per core)",
    )
    return ap


PLUGIN = "py_harness.host.pytest_plugin"


def plugin_registered() -> bool:
    """Whether pytest will load the plugin by itself: an installed distribution registers
    it (entry point pytest11) and PYTEST_DISABLE_PLUGIN_AUTOLOAD is unset. A checkout run
    from PYTHONPATH (scripts/gpu_run.sh on a GPU machine) registers nothing; then check
    names the plugin (naming it as well as registering it would make pytest refuse it)."""
    import os
    from importlib.metadata import entry_points

    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    return any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))


def default_out(variant: str, runtime: str) -> Path:
    """A folder per variant, runtimes and machine: a run on other runtimes, or another
    machine's copied here, never replaces this one's (`py-harness merge` joins them)."""
    runtimes = "+".join(r.strip() for r in runtime.split(",") if r.strip())
    machine = re.sub(r"[^A-Za-z0-9._-]+", "-", report.machine_name())
    return output_dir() / "check" / f"{variant}--{runtimes}--{machine}"


def pytest_args(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """The pytest command line that runs what `args` asks for."""
    out = args.out or default_out(args.variant, args.runtime)
    # Hypothesis's plugin (a dev dependency, for tests/test_fuzz.py) is not used here and
    # takes 1.7 s to import.
    cmd = [matrix_suite.__file__, "-v", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
    cmd += ["-ra"]  # every skip's and failure's reason in the summary (a runtime's missing part)
    cmd += [] if plugin_registered() else ["-p", PLUGIN]
    # This process imported py_harness before pytest started, so pytest cannot rewrite the
    # plugin's asserts; its assert messages say everything themselves.
    cmd += ["-W", "ignore::pytest.PytestAssertRewriteWarning"]
    cmd += ["--runtime", args.runtime, "--variant", args.variant, "--draws", str(args.draws)]
    cmd += [arg for path in args.variant_file for arg in ("--variant-file", str(path))]
    cmd += [arg for case in args.case for arg in ("--case", case)]
    cmd += ["--long"] if args.long else []
    cmd += ["-m", "smoke"] if args.smoke else []
    cmd += ["--browser-ws", args.browser_ws] if args.browser_ws else []
    cmd += ["--browser-channel", args.browser_channel] if args.browser_channel else []
    cmd += ["--headed"] if args.headed else []
    cmd += ["--slowmo", str(args.slowmo)] if args.slowmo else []
    cmd += ["--shaders", str(args.shaders)] if args.shaders else []
    cmd += ["--judge-workers", str(args.judge_workers)] if args.judge_workers else []
    cmd += ["--harness-json", str(out / "results.json"), "--junitxml", str(out / "results.xml")]
    return cmd + extra


def main(argv: list[str] | None = None) -> int:
    import sys

    import pytest

    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    ap = parser()
    args = ap.parse_args(argv[: len(argv) - len(extra) - (1 if "--" in argv else 0)])
    if args.out is not None and (why := cannot_write(args.out)):
        ap.error(f"--out: {why}")
    code = pytest.main(pytest_args(args, extra))
    # 0: all passed (skips and expected failures included); 5: nothing was collected.
    return 0 if code == 0 else 1
