"""What the second float32 baseline changes: each case judged with the BLAS baseline alone
(FlashAttention's rule as this harness had it) and with both baselines (the rule now).

    .venv/bin/python benchmarks/compare_baselines.py --runtime wgpu --variant fast --draws 3 \\
        --case d64-sq256-sk64-mqa16x1 --case d64-sq512-sk1-mqa4x1

Prints, per case, draw and output: the ratio (error / bound) under blas32 alone, under
both, and how much larger the sequential baseline's error is than BLAS's (seq/blas).
"""

from __future__ import annotations

import argparse

from py_harness.host.engine import open_session
from py_harness.host.judge import compare
from py_harness.host.judge.cases import by_id
from py_harness.host.judge.inputs import make_inputs
from py_harness.host.judge.verdict import OUTPUTS, baselines, references
from py_harness.host.wire import run_on


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runtime", default="wgpu")
    ap.add_argument("--variant", default="fast")
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--case", action="append", required=True)
    args = ap.parse_args()
    with open_session(args.runtime) as session:
        print(f"# {args.runtime}: {session.adapter_name()}, variant {args.variant}")
        print(f"{'case':<38} draw output  blas32-alone  both  seq/blas")
        for case in map(by_id, args.case):
            cfg = case.config()
            factors = compare.OVERFLOW_FACTORS if case.large_scores else compare.FACTORS
            for draw in range(args.draws):
                x = make_inputs(case, draw)
                got = run_on(session, cfg, x, variant=args.variant)["arrays"]
                ref64, base = references(cfg, x, float), baselines(cfg, x)
                for n in OUTPUTS:
                    blas = {"blas32": base["blas32"][n]}
                    both = {b: r[n] for b, r in base.items()}
                    old = compare.judge(n, got[n], ref64[n], blas, factors[n])
                    new = compare.judge(n, got[n], ref64[n], both, factors[n])
                    seq = compare.judge(n, got[n], ref64[n], {"seq32": both["seq32"]}).baseline_err
                    grow = seq / old.baseline_err if old.baseline_err else float("inf")
                    print(
                        f"{case.id:<38} {draw:>4} {n:<6} {old.ratio:>12.2f} {new.ratio:>5.2f} "
                        f"{grow:>9.1f}"
                    )


if __name__ == "__main__":
    main()
