"""`python -m py_harness check`: run the case matrix on each WebGPU runtime, print the
results, the case x runtime matrix and where runtimes disagree; write JSON and JUnit XML.

Exits non-zero when any case fails (a listed known failure does not; one that passes does).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path

from ..kernels import DEFAULT_VARIANT, VARIANTS
from .cases import Case, by_id, select
from .evaluate import evaluate
from .limitations import LIMITATIONS, case_coverage
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


@contextlib.contextmanager
def open_session(name: str) -> Iterator[Session]:
    """Launch a runtime (and the server, for browsers) and open one harness session."""
    rt = runtime(name)
    with contextlib.ExitStack() as stack:
        base_url = ""
        if rt.needs_server:
            from .build_wheel import build

            build(log=lambda _msg: None)
            from .server import start_server, stop

            server, base_url = start_server()
            stack.callback(stop, server)
        handle = stack.enter_context(rt.launch())
        session = handle.new_session(base_url)
        stack.callback(handle.close_session, session)
        yield session


def check_limitations(name: str, session: Session, adapter: str, variant: str) -> list[Outcome]:
    """Run the reproducer of every declared limitation of this variant that names this
    adapter; one that no longer reproduces is `stale` (its declaration is out of date)."""
    outcomes = []
    for lim in LIMITATIONS:
        if variant not in lim.variants or not lim.applies_to(adapter):
            continue
        row = f"limitation:{lim.name}"
        try:
            still, what = lim.reproduce(session)
        except Exception as exc:  # a broken reproducer fails alone
            print(f"ERROR {row:<38} {type(exc).__name__}: {exc}", flush=True)
            outcomes.append(Outcome(row, name, "error", math.inf, str(exc)))
            continue
        status = "pass" if still else "stale"
        detail = what if still else f"declared, but no longer reproduces: {what}"
        print(f"{'PASS' if still else 'STALE'} {row:<38} {what}", flush=True)
        outcomes.append(Outcome(row, name, status, math.nan, detail))
    return outcomes


def run_case(case: Case, session: Session, adapter: str, args: argparse.Namespace) -> Outcome:
    """One case over args.draws input draws; not run where a driver limitation covers it."""
    covered = case_coverage(args.variant, adapter, case)
    if covered is not None and covered.status == "unsupported":
        print(f"UNSUP {case.id:<38} {covered}", flush=True)
        return Outcome(case.id, session.runtime, "unsupported", math.nan, str(covered))
    results = []
    for draw in range(args.draws):
        results.append(
            evaluate(case, session, sources=args.sources, variant=args.variant, draw=draw)
        )
        if args.first_result_s is None:
            args.first_result_s = time.perf_counter() - args.t_start
    o = outcome(results, covered)
    if args.draws == 1:
        print(format_line(results[0]) + ("  (known flaw)" if o.status == "known" else ""))
    else:
        print(
            f"{o.status.upper():<5} {case.id:<38} {args.draws} draws, {o.failed_draws} failed, "
            f"worst ratio {o.ratio:.3g}",
            flush=True,
        )
    if o.status != "pass":
        print("      " + o.detail.replace("\n", "\n      "), flush=True)
    return o


def run_runtime(name: str, cases: tuple[Case, ...], args: argparse.Namespace) -> list[Outcome]:
    outcomes = []
    with open_session(name) as session:
        info = session.adapter()["info"]
        args.adapters[name] = info
        adapter = session.adapter_name()
        print(f"# {name}: {adapter} ({info.get('backend', '')})", flush=True)
        outcomes += check_limitations(name, session, adapter, args.variant)
        for case in cases:
            try:
                outcomes.append(run_case(case, session, adapter, args))
            except Exception as exc:  # a broken case fails alone; the run goes on
                text = f"{type(exc).__name__}: {exc}"
                print(f"ERROR {case.id:<38} {text.splitlines()[0]}", flush=True)
                outcomes.append(Outcome(case.id, name, "error", math.inf, text))
    return outcomes


def positive_int(text: str) -> int:
    """argparse type: an int >= 1."""
    if not text.strip().isdecimal() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m py_harness check", description=__doc__)
    ap.add_argument(
        "--runtime", default="all", help=f"comma-separated: {', '.join(RUNTIMES)} (default: all)"
    )
    ap.add_argument("--variant", default=DEFAULT_VARIANT, choices=list(VARIANTS))
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
    ap.add_argument("--shaders", type=Path, default=SHADER_DIR, help="folder with the .wgsl files")
    ap.add_argument(
        "--out", type=Path, help="where results.json/.xml go (default: build/check-VARIANT)"
    )
    args = ap.parse_args(argv)
    args.t_start, args.first_result_s, args.adapters = time.perf_counter(), None, {}
    args.sources = shader_sources(args.shaders)
    args.out = args.out or ROOT / "build" / f"check-{args.variant}"

    try:
        cases = tuple(map(by_id, args.case)) or select(smoke=args.smoke, long=args.long)
        names = parse_runtimes(args.runtime)
    except KeyError as exc:
        ap.error(f"--case: {exc.args[0]}")
    except ValueError as exc:
        ap.error(str(exc))
    runtimes, outcomes = [], []
    for name in names:
        reason = runtime(name).missing()
        if reason:
            print(f"# {name}: skipped, {reason}")
            continue
        runtimes.append(name)
        outcomes += run_runtime(name, cases, args)

    case_ids = list(dict.fromkeys(o.case_id for o in outcomes if o.case_id.startswith("lim")))
    case_ids += [c.id for c in cases]
    print("\n# case x runtime: status, worst error / bound (<= 1 passes)")
    print(matrix(outcomes, runtimes, case_ids))
    rows = disagreements(outcomes)
    if len(runtimes) > 1:
        print("\n# where runtimes disagree most, per case (difference / the rule's bound)")
        print(format_disagreements(sorted(rows, key=lambda r: -r["ratio_to_bound"])))
    bad = [o for o in outcomes if not o.ok]
    wall = time.perf_counter() - args.t_start
    counts = {s: sum(o.status == s for o in outcomes) for s in ("known", "unsupported")}
    print(
        f"\n# {len(outcomes) - len(bad)} passed, {len(bad)} failed "
        f"({counts['known']} known failures, {counts['unsupported']} unsupported on their "
        f"driver); first result after {args.first_result_s or 0:.1f} s; wall {wall:.1f} s"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {
        "variant": args.variant,
        "draws": args.draws,
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
