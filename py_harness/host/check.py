"""`python -m py_harness check`: run the case matrix on each WebGPU runtime, print the
results, the case x runtime matrix and where runtimes disagree; write JSON and JUnit XML.

Exits non-zero when any case fails (a listed known failure does not; one that passes does).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from ..kernels import DEFAULT_VARIANT, VARIANTS
from .cases import CASES, SMOKE, Case, by_id, known_failure
from .evaluate import evaluate
from .report import (
    Outcome,
    disagreements,
    format_disagreements,
    format_line,
    matrix,
    outcome,
    write_junit,
)
from .runtimes import RUNTIMES, parse_runtimes, runtime
from .sessions import ROOT, SHADER_DIR, Session, shader_sources


def load_server_module() -> ModuleType:
    """server.py sits at the top of the repo, outside the package."""
    spec = importlib.util.spec_from_file_location("harness_server", ROOT / "server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def open_session(name: str) -> Iterator[Session]:
    """Launch a runtime (and the server, for browsers) and open one harness session."""
    rt = runtime(name)
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


def run_runtime(name: str, cases: tuple[Case, ...], args: argparse.Namespace) -> list[Outcome]:
    sources = shader_sources(args.shaders)
    outcomes = []
    with open_session(name) as session:
        info = session.call("adapter", {})["info"]
        args.adapters[name] = info
        print(f"# {name}: {session.adapter_name()} ({info.get('backend', '')})", flush=True)
        for case in cases:
            try:
                result = evaluate(case, session, sources=sources, variant=args.variant)
            except Exception as exc:  # a broken case fails alone; the run goes on
                text = f"{type(exc).__name__}: {exc}"
                print(f"ERROR {case.id:<38} {text.splitlines()[0]}", flush=True)
                outcomes.append(Outcome(case.id, name, "error", float("inf"), text))
                continue
            if args.first_result_s is None:
                args.first_result_s = time.perf_counter() - args.t_start
            o = outcome(result, known_failure(args.variant, session.adapter_name(), case))
            print(format_line(result) + ("  (known failure)" if o.status == "known" else ""))
            if not o.ok:
                print("      " + o.detail.replace("\n", "\n      "), flush=True)
            outcomes.append(o)
    return outcomes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m py_harness check", description=__doc__)
    ap.add_argument(
        "--runtime", default="all", help=f"comma-separated: {', '.join(RUNTIMES)} (default: all)"
    )
    ap.add_argument("--variant", default=DEFAULT_VARIANT, help=f"one of: {', '.join(VARIANTS)}")
    ap.add_argument("--smoke", action="store_true", help="only the fast smoke subset")
    ap.add_argument("--case", action="append", default=[], help="a case id (repeatable)")
    ap.add_argument("--shaders", type=Path, default=SHADER_DIR, help="folder with the .wgsl files")
    ap.add_argument("--out", type=Path, default=ROOT / "build", help="where results.json/.xml go")
    args = ap.parse_args(argv)
    args.t_start, args.first_result_s, args.adapters = time.perf_counter(), None, {}

    cases = tuple(by_id(c) for c in args.case) if args.case else (SMOKE if args.smoke else CASES)
    runtimes, outcomes = [], []
    for name in parse_runtimes(args.runtime):
        reason = runtime(name).missing()
        if reason:
            print(f"# {name}: skipped, {reason}")
            continue
        runtimes.append(name)
        outcomes += run_runtime(name, cases, args)

    case_ids = [c.id for c in cases]
    print("\n# case x runtime: status, worst error / bound (<= 1 passes)")
    print(matrix(outcomes, runtimes, case_ids))
    rows = disagreements(outcomes)
    if len(runtimes) > 1:
        print("\n# where runtimes disagree most, per case (difference / the rule's bound)")
        print(format_disagreements(sorted(rows, key=lambda r: -r["ratio_to_bound"])))
    bad = [o for o in outcomes if not o.ok]
    wall = time.perf_counter() - args.t_start
    print(
        f"\n# {len(outcomes) - len(bad)} passed, {len(bad)} failed "
        f"({sum(o.status == 'known' for o in outcomes)} known failures); "
        f"first result after {args.first_result_s or 0:.1f} s; wall {wall:.1f} s"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {
        "variant": args.variant,
        "runtimes": runtimes,
        "adapters": args.adapters,
        "results": [o.to_json() for o in outcomes],
        "disagreements": rows,
        "wall_s": wall,
        "first_result_s": args.first_result_s,
    }
    (args.out / "results.json").write_text(json.dumps(summary, indent=1))
    write_junit(args.out / "results.xml", outcomes, runtimes)
    print(f"# written: {args.out / 'results.json'}, {args.out / 'results.xml'}")
    return 1 if bad or not outcomes else 0
