"""`python -m py_harness check`: run the case matrix on a runtime, print a table, write JSON.

Exits non-zero when any case fails.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import time
from collections.abc import Iterator
from pathlib import Path

from ..kernels import DEFAULT_VARIANT, VARIANTS
from .cases import CASES, SMOKE, Case, by_id
from .evaluate import CaseResult, evaluate
from .runtimes import RUNTIMES, parse_runtimes, runtime
from .sessions import ROOT, SHADER_DIR, Session, shader_sources

SHORT = {"o": "O", "lse": "LSE", "dq": "dQ", "dk": "dK", "dv": "dV"}


def load_server_module():  # server.py sits at the top of the repo, outside the package
    spec = importlib.util.spec_from_file_location("harness_server", ROOT / "server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def open_session(name: str) -> Iterator[Session]:
    """Launch a runtime (and the server, for browsers) and open one harness session."""
    rt = runtime(name)
    reason = rt.missing()
    if reason:
        raise RuntimeError(f"{name} is not available: {reason}")
    with contextlib.ExitStack() as stack:
        base_url = ""
        if rt.needs_server:
            from .build_wheel import build

            build(log=lambda _msg: None)
            server_module = load_server_module()
            server, base_url = server_module.start_server()
            stack.callback(server_module.stop, server)
        handle = stack.enter_context(rt.launch())
        session = handle.new_session(base_url)
        stack.callback(handle.close_session, session)
        yield session


def format_line(result: CaseResult) -> str:
    cells = []
    for r in result.reports:
        cells.append(f"{SHORT[r.name]} {r.max_abs_err:.1e}/{r.bound:.1e} r{r.max_rel_err:.0e}")
    t = result.timings_ms
    status = "PASS" if result.passed else "FAIL"
    return (
        f"{status} {result.case_id:<40} {'  '.join(cells)}  "
        f"fwd {t.get('forward_ms', 0):7.1f} ms  bwd {t.get('backward_ms', 0):7.1f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    t_start = time.perf_counter()
    ap = argparse.ArgumentParser(prog="python -m py_harness check", description=__doc__)
    ap.add_argument("--runtime", default="chromium", help=f"comma-separated: {', '.join(RUNTIMES)}")
    ap.add_argument(
        "--variant", default=DEFAULT_VARIANT, help=f"kernel variant: {', '.join(VARIANTS)}"
    )
    ap.add_argument("--smoke", action="store_true", help="only the fast smoke subset")
    ap.add_argument("--case", action="append", default=[], help="a case id (repeatable)")
    ap.add_argument("--shaders", type=Path, default=SHADER_DIR, help="folder with the .wgsl files")
    ap.add_argument("--json", type=Path, default=ROOT / "build" / "results.json")
    args = ap.parse_args(argv)

    cases: tuple[Case, ...] = SMOKE if args.smoke else CASES
    if args.case:
        cases = tuple(by_id(c) for c in args.case)
    sources = shader_sources(args.shaders)
    results: list[dict] = []
    failed = 0
    first_result_s = None
    for runtime_name in parse_runtimes(args.runtime):
        with open_session(runtime_name) as session:
            adapter = session.call("adapter", {})
            info = adapter["info"]
            print(
                f"# runtime {runtime_name}: {info.get('vendor')} {info.get('architecture')} "
                f"{info.get('device') or info.get('description')}".rstrip()
            )
            for case in cases:
                try:
                    result = evaluate(case, session, sources=sources, variant=args.variant)
                except Exception as exc:  # a broken case fails alone; the table goes on
                    failed += 1
                    print(f"FAIL {case.id:<40} {type(exc).__name__}: {exc}")
                    results.append(
                        {
                            "case": case.id,
                            "runtime": runtime_name,
                            "passed": False,
                            "error": f"{type(exc).__name__}: {exc}",
                        }
                    )
                    continue
                if first_result_s is None:
                    first_result_s = time.perf_counter() - t_start
                failed += not result.passed
                print(format_line(result), flush=True)
                if not result.passed:
                    print("     " + result.failures().replace("\n", "\n     "))
                results.append({**result.to_json(), "adapter": info})
    total = len(results)
    wall = time.perf_counter() - t_start
    print(
        f"# {total - failed} passed, {failed} failed; first result after "
        f"{first_result_s or 0:.1f} s; wall {wall:.1f} s"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps({"results": results, "wall_s": wall, "first_result_s": first_result_s}, indent=1)
    )
    print(f"# results written to {args.json}")
    return 1 if failed else 0
