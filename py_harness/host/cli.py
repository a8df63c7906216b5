"""The `py-harness` command (also `python -m py_harness`): one word per tool.

py-harness check      the case matrix on each runtime (pytest with the plugin)
py-harness bench      time kernels against references (numpy, torch where installed)
py-harness bench-judge  what judging one run costs on the host (time, memory), at any size
py-harness roofline   each pass of a bench's JSON: TFLOP/s, share of peak, a roofline plot
py-harness serve      the demo page and the harness page on 127.0.0.1
py-harness setup      fetch the pinned npm packages (Pyodide, Dawn for Node) into the cache
py-harness stability  check over N input draws on several driver profiles
py-harness explore    random configurations for a while, judged as the matrix's cases
py-harness mutate     mutation testing: one rule-made edit of the kernels at a time, judged
py-harness ablate     bench the fast kernels with one optimisation taken out at a time
py-harness same-bits  whether an edit of the kernels moved any output bit, case by case
py-harness new-kernel  a variant file's skeleton from a team's WGSL
py-harness lint-kernel check a variant file against its WGSL and envelope, running nothing
py-harness browser-server  Chromium for the harness behind a Playwright server (--browser-ws)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

# command -> (module, what it does); each module has main(argv) -> exit status.
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("tools.check", "the case matrix on each WebGPU runtime"),
    "merge": ("tools.merge", "join check's results from any runtimes and machines"),
    "bench": ("tools.bench", "time the kernels"),
    "bench-judge": ("tools.bench_judge", "what judging one run costs on the host"),
    "roofline": ("tools.roofline", "each pass of a bench's JSON against the GPU's roofs"),
    "serve": ("serving.serve", "serve the demo and harness pages"),
    "setup": ("setup", "fetch Pyodide and Dawn for Node (npm) into the cache"),
    "stability": ("tools.stability", "check over many input draws on several profiles"),
    "explore": ("tools.explore", "random configurations for a while, judged as the matrix's"),
    "mutate": ("tools.mutate", "every rule-made edit of the kernels judged as a planted bug"),
    "ablate": ("tools.ablate", "bench the fast kernels without one optimisation at a time"),
    "same-bits": ("tools.same_bits", "whether an edit of the kernels moved any output bit"),
    "new-kernel": ("tools.new_kernel", "a variant file's skeleton from your WGSL"),
    "lint-kernel": ("tools.lint_kernel", "check a variant file without running anything"),
    "browser-server": (
        "runtimes.browser_server",
        "Chromium behind a Playwright server, for --browser-ws from other machines",
    ),
}


def _usage() -> str:
    rows = "\n".join(f"  {name:<15} {what}" for name, (_, what) in COMMANDS.items())
    return f"usage: py-harness COMMAND [--help for its options]\n\n{rows}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"py-harness: unknown command {argv[0]!r}\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"py_harness.host.{COMMANDS[argv[0]][0]}")
    command: Callable[[list[str]], int] = module.main
    return command(argv[1:])
