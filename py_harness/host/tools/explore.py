"""`py-harness explore`: random configurations for a while, judged as the matrix's are.

The matrix holds the cases someone thought of. This draws others (judge/random_cases.py:
every axis the variant supports, sizes near the tile edges) and judges each on one open
session per runtime, on its own input draw, until --minutes or --count runs out. Cases a
declared driver limitation covers are not run; those of a declared kernel flaw are
`known`. Each failure is printed with the command that replays it alone (`--seed S
--index I`) and the Case it was, and results.json in --out holds every draw.

Exits 1 when a case fails or errs (known flaws apart), 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from .. import variants
from ..arg_types import natural, positive_int, positive_number
from ..engine import evaluate, open_session
from ..judge.limitations import case_coverage
from ..judge.random_cases import case_literal, random_case
from ..judge.report import run_status
from ..paths import cannot_write, output_dir
from ..runtimes.registry import RUNTIMES
from .check import add_kernel_options

MAX_ERRORS_IN_A_ROW = 3  # a session that errs this often is taken as dead


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="py-harness explore", description=__doc__)
    add_kernel_options(ap, "wgpu", "comma-separated")
    ap.add_argument("--seed", type=natural, default=0, help="which sequence of draws (default 0)")
    ap.add_argument("--minutes", type=positive_number, default=5.0, help="per runtime (default 5)")
    ap.add_argument("--count", type=positive_int, help="at most this many cases per runtime")
    ap.add_argument("--index", type=natural, help="run draw INDEX of --seed alone (a replay)")
    ap.add_argument("--max-len", type=positive_int, default=200, help="longest sequence")
    ap.add_argument(
        "--max-work",
        type=positive_int,
        default=20_000_000,
        help="largest batch x heads x Sq x Sk x max(head_dim, 32) (default 2e7: CPU-sized)",
    )
    ap.add_argument(
        "--out", type=Path, help="where results.json goes (default build/explore-VARIANT)"
    )
    return ap


def explore_runtime(name: str, args: argparse.Namespace) -> list[dict]:
    """Draw and judge cases on one runtime until the budget is spent; one dict per draw."""
    replay = args.index is not None  # one draw, whatever the clock says
    count = 1 if replay else args.count
    refusal = variants.get(args.variant).refusal
    deadline = time.monotonic() + 60 * args.minutes
    rows: list[dict] = []
    errors_in_a_row = 0
    with open_session(name) as session:
        adapter = session.adapter_name()
        index = args.index if replay else 0
        while (count is None or len(rows) < count) and (replay or time.monotonic() < deadline):
            case = random_case(
                args.seed, index, refusal=refusal, max_len=args.max_len, max_work=args.max_work
            )
            row = {"index": index, "case": case.id, "literal": case_literal(case), "runtime": name}
            covered = case_coverage(args.variant, adapter, case)
            t0 = time.perf_counter()
            if covered is not None and covered.status == "unsupported":
                row |= {"status": "unsupported", "detail": str(covered)}
            else:
                try:
                    result = evaluate(case, session, variant=args.variant, draw=index + 1)
                except Exception as err:  # a runtime's error is a verdict on this draw
                    row |= {"status": "error", "detail": f"{type(err).__name__}: {err}"}
                    errors_in_a_row += 1
                else:
                    errors_in_a_row = 0
                    worst = max((r.ratio for r in result.reports), default=0.0)
                    row |= {
                        "status": run_status(result.passed, covered),
                        "worst_ratio": worst,
                        "detail": result.failures(),
                    }
            row["seconds"] = round(time.perf_counter() - t0, 2)
            rows.append(row)
            print(_line(row), flush=True)
            if errors_in_a_row >= MAX_ERRORS_IN_A_ROW:
                print(f"# {name}: {errors_in_a_row} errors in a row; stopping", flush=True)
                break
            index += 1
    return rows


def _line(row: dict) -> str:
    ratio = f"{row['worst_ratio']:8.3g}" if "worst_ratio" in row else " " * 8
    return f"{row['index']:5d} {row['status']:<11} {ratio}  {row['case']}  ({row['seconds']} s)"


def replay_command(args: argparse.Namespace, row: dict) -> str:
    """The command that runs one draw again, with the same kernels and limits."""
    cmd = ["py-harness explore", f"--runtime {row['runtime']}", f"--variant {args.variant}"]
    cmd += [f"--variant-file {path}" for path in args.variant_file]
    cmd += [f"--shaders {args.shaders}"] if args.shaders else []
    cmd += [f"--max-len {args.max_len}", f"--max-work {args.max_work}"]
    return " ".join([*cmd, f"--seed {args.seed}", f"--index {row['index']}"])


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        variants.load_options(args.variant_file, args.shaders, args.variant)
        refusal = variants.get(args.variant).refusal
        # a first draw before any runtime starts: limits that admit no case are refused here
        random_case(
            args.seed,
            args.index or 0,
            refusal=refusal,
            max_len=args.max_len,
            max_work=args.max_work,
        )
    except (ValueError, KeyError) as err:
        parser().error(str(err).strip("'\""))
    runtimes = list(RUNTIMES) if args.runtime == "all" else args.runtime.split(",")
    unknown = [r for r in runtimes if r not in RUNTIMES]
    if unknown:
        parser().error(f"--runtime: unknown {unknown}; known: {', '.join(RUNTIMES)}")
    out = args.out or output_dir() / f"explore-{args.variant}"
    if why := cannot_write(out):
        parser().error(f"--out: {why}")
    rows = []
    for name in runtimes:
        print(
            f"# {name}, variant {args.variant}, seed {args.seed} (index, status, worst ratio, case)"
        )
        rows += explore_runtime(name, args)
    bad = [r for r in rows if r["status"] in ("fail", "error")]
    counts = {
        s: sum(r["status"] == s for r in rows)
        for s in ("pass", "fail", "error", "known", "unsupported")
    }
    print("# " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    for r in bad:
        print(
            f"\n{r['status'].upper()} {r['case']} on {r['runtime']}: replay with "
            f"`{replay_command(args, r)}`\n{r['literal']}\n{r['detail']}"
        )
    summary = {"seed": args.seed, "variant": args.variant, "counts": counts, "results": rows}
    (out / "results.json").write_text(json.dumps(summary, indent=1))
    return 1 if bad else 0
