"""`py-harness mutate`: mutation testing of a variant's kernels against its case set.

Every edit of the chosen operators (judge/mutation.py: comparisons, off-by-ones, signs,
min/max, select's order, barriers, an intermediate's precision, a constant's digits) is
made, one at a time, to the variant's WGSL and judged as a planted bug is: the smoke cases
(or --cases all, or --case IDs) in turn, each the forward alone first, until one fails.
An edit that no case fails SURVIVED, and is told apart by whether its outputs kept the
unmodified kernels' bits on every case (a case those fail is dropped, and an edit no case
is left to judge is unjudged):

- same bits: no case runs the edited code where it matters. An equivalent edit (nothing
  could catch it) or a gap in the cases (a size or mask that would show it is missing);
- bits differ: the cases saw the change and its error stayed within the bound, a
  precision-sized change or a real bug whose error no case makes large enough.

Edits the compiler refuses are counted apart (not compiled), as are runtime errors (an
error is a failed case, but not a judged one). An edit in a function that no pass of the
run calls leaves every pipeline's key as it was (ShaderModuleSource.entry_digest), so it
is not compiled again: it survives with the same bits, even where it would not compile.
Replay any edit alone with --only ID. results.json in --out holds every edit. Exits 1 where
an edit survived or went unjudged, 0 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import time
from collections import Counter
from collections.abc import Iterator
from fnmatch import fnmatchcase as fnmatch
from pathlib import Path
from typing import Any

import numpy as np

from .. import variants
from ..arg_types import natural, positive_int, positive_number, shard
from ..engine import (
    compile_error,
    evaluate,
    evaluate_forward_first,
    judged_cases,
    open_session,
)
from ..judge.cases import CASES, SMOKE, Case, by_id
from ..judge.inputs import CaseResult
from ..judge.mutation import OPERATORS, Edit, edits
from ..paths import cannot_write, output_dir
from ..runtimes.registry import RUNTIMES, native_child_session
from ..runtimes.sessions import Session
from .check import add_kernel_options

NATIVE = ("wgpu", "dawn")  # the runtimes native_child_session can run in a child process


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="py-harness mutate", description=__doc__)
    add_kernel_options(ap, "wgpu", "one")
    ap.add_argument(
        "--file", action="append", default=[], help="mutate this file (default: the variant's)"
    )
    ap.add_argument(
        "--operator", default="all", help=f"comma-separated, or all: {', '.join(OPERATORS)}"
    )
    ap.add_argument(
        "--function",
        action="append",
        default=[],
        help="only edits in WGSL functions of this name (a glob: 'ff_*range*'; repeatable)",
    )
    ap.add_argument("--cases", choices=("smoke", "all"), default="smoke")
    ap.add_argument("--case", action="append", default=[], help="judge on these case ids only")
    ap.add_argument("--only", action="append", default=[], help="this edit id alone (a replay)")
    ap.add_argument("--sample", type=positive_int, help="at most this many edits, drawn by --seed")
    ap.add_argument("--seed", type=natural, default=0, help="which sample (default 0)")
    ap.add_argument("--shard", type=shard, help="K/N: every N-th edit from the K-th")
    ap.add_argument(
        "--call-timeout",
        type=positive_number,
        help="seconds: run wgpu or dawn in a child process and take a case that runs longer "
        "as an error of the edit (on a GPU an edit can make a loop all but endless; "
        "lavapipe cuts loops short itself)",
    )
    ap.add_argument("--list", action="store_true", help="print the edits and run nothing")
    ap.add_argument("--out", type=Path, help="where results.json goes (default build/mutate-V)")
    return ap


def choose_edits(args: argparse.Namespace, sources: dict[str, str]) -> list[Edit]:
    """The edits this run judges, in order (ValueError names a bad argument)."""
    operators = OPERATORS if args.operator == "all" else args.operator.split(",")
    files = args.file or list(variants.get(args.variant).files)
    every = edits(sources, files, operators)
    if args.function:
        every = [e for e in every if any(fnmatch(e.function, f) for f in args.function)]
        if not every:
            raise ValueError(
                f"--function: no edit in a function named {' or '.join(args.function)}"
            )
    if args.only:
        known = {e.id: e for e in every}
        missing = [i for i in args.only if i not in known]
        if missing:
            raise ValueError(f"--only: no edit {missing[0]!r} (see --list)")
        return [known[i] for i in args.only]
    if args.sample and args.sample < len(every):
        every = sorted(random.Random(args.seed).sample(every, args.sample), key=every.index)
    if args.shard:
        k, n = args.shard
        every = every[k::n]
    return every


def choose_cases(args: argparse.Namespace) -> list[Case]:
    if args.case:
        return [by_id(i) for i in args.case]
    return list(SMOKE if args.cases == "smoke" else CASES)


class Judge:
    """Judges edits on one session: the cases the unmodified kernels get a verdict on, the
    last case that failed an edit tried first (slips cluster), and the unmodified kernels'
    result per case, made when an edit first needs it (a case they fail themselves is
    dropped, with a warning, so that it kills nothing)."""

    def __init__(self, session: Session, variant: str, cases: list[Case]) -> None:
        self.session, self.variant = session, variant
        self.cases = judged_cases(cases, variant, session.adapter_name())
        self._clean: dict[str, CaseResult] = {}

    def clean(self, case: Case) -> CaseResult:
        if case.id not in self._clean:
            result = evaluate(case, self.session, variant=self.variant)
            self._clean[case.id] = result
            if not result.passed:
                self.cases.remove(case)
                print(f"# {case.id} fails without an edit, so it judges none: {result.failures()}")
        return self._clean[case.id]

    def judge(self, edit: Edit, sources: dict[str, str]) -> dict[str, Any]:
        mutated = edit.apply(sources)
        worst, differs, judged = 0.0, [], 0
        for case in list(self.cases):
            try:
                result = evaluate_forward_first(
                    case, self.session, sources=mutated, variant=self.variant
                )
            except Exception as err:  # a compile error, or an error of the run
                refused = compile_error(err)
                text = refused or f"{type(err).__name__}: {getattr(err, 'page_message', err)}"
                status = "not compiled" if refused else "error"
                return {"status": status, "case": case.id, "detail": text.splitlines()[0][:300]}
            clean = self.clean(case)
            if not clean.passed:
                continue
            judged += 1
            ratio = max((r.ratio for r in result.reports), default=0.0)
            if not result.passed:
                self.cases.remove(case)
                self.cases.insert(0, case)
                first = result.failures().splitlines()[0][:300]
                return {"status": "killed", "case": case.id, "ratio": ratio, "detail": first}
            if any(
                not np.array_equal(a, clean.outputs[n], equal_nan=True)
                for n, a in result.outputs.items()
            ):
                differs.append(case.id)
                worst = max(worst, ratio)  # the cases that saw the edit, not the suite's worst
        if not judged:
            return {"status": "unjudged", "detail": "no case the unmodified kernels pass"}
        row = {"status": "survived", "bits": "differ" if differs else "same", "differ_on": differs}
        return row | ({"ratio": worst} if differs else {})


@contextlib.contextmanager
def judging_session(runtime: str, call_timeout: float | None) -> Iterator[Session]:
    """The runtime's session; with call_timeout, a native runtime in a child process whose
    calls fail past that many seconds (registry.native_child_session)."""
    if call_timeout is None:
        with open_session(runtime) as session:
            yield session
        return
    child = native_child_session(runtime, call_timeout)
    try:
        yield child
    finally:
        child.close()


def _status(row: dict[str, Any]) -> str:
    """The row's status as counted and printed: a survivor's with its bits."""
    return row["status"] + (f", bits {row['bits']}" if row["status"] == "survived" else "")


def _line(row: dict[str, Any]) -> str:
    status = _status(row)
    ratio = f"{row['ratio']:9.3g}" if "ratio" in row else " " * 9
    where = row.get("case", "")
    return f"{status:<21} {ratio}  {row['edit']}  {where} ({row['seconds']} s)"


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        variants.load_options(args.variant_file, args.shaders, args.variant)
        if args.runtime not in RUNTIMES:
            raise ValueError(f"--runtime: unknown {args.runtime!r}; known: {', '.join(RUNTIMES)}")
        if args.call_timeout and args.runtime not in NATIVE:
            raise ValueError(f"--call-timeout: for the native runtimes ({', '.join(NATIVE)})")
        sources = variants.sources(args.variant)
        chosen = choose_edits(args, sources)
        cases = choose_cases(args)
    except (ValueError, KeyError) as err:
        parser().error(str(err).strip("'\""))
    if args.list:
        for e in chosen:
            print(e.describe())
        print(f"# {len(chosen)} edits")
        return 0
    out = args.out or output_dir() / f"mutate-{args.variant}"
    if why := cannot_write(out):
        parser().error(f"--out: {why}")
    rows: list[dict[str, Any]] = []
    print(f"# {len(chosen)} edits of {args.variant} on {args.runtime} (status, worst ratio, edit)")
    with judging_session(args.runtime, args.call_timeout) as session:
        judge = Judge(session, args.variant, cases)
        for e in chosen:
            t0 = time.perf_counter()
            row = {"edit": e.describe(), "id": e.id, "function": e.function}
            row |= judge.judge(e, sources)
            row["seconds"] = round(time.perf_counter() - t0, 2)
            rows.append(row)
            print(_line(row), flush=True)
    counts = Counter(_status(r) for r in rows)
    print("# " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
    survivors = [r for r in rows if r["status"] == "survived"]
    for r in survivors:
        print(f"SURVIVED (bits {r['bits']}): {r['edit']}")
    if by_function := Counter(r["function"] for r in survivors):
        ranked = by_function.most_common()
        print("# survivors by fn: " + ", ".join(f"{fn or '(top level)'} {n}" for fn, n in ranked))
    summary = {"variant": args.variant, "runtime": args.runtime, "counts": counts, "results": rows}
    (out / "results.json").write_text(json.dumps(summary, indent=1))
    return 1 if survivors or counts.get("unjudged") else 0
