"""Measure what judging a case costs (the float64 reference and float32 baselines) against
reference_cost.reference_cost's model, which the demo server uses to refuse cases before any work.

    python benchmarks/reference_cost.py            # the shapes below, one fresh process each

For each shape: the model's bytes and seconds, and the measured peak memory (tracemalloc's
traced peak, and the growth of the process's peak RSS) and time of verdict.judge_outputs.
The model must stay above what is measured: docs/serving.md has a run's table.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc

# (batch, heads, kv_heads, seq_q, seq_k, head_dim, extra config): squares, degenerate
# sequences, wide heads, GQA, masks and dropout.
SHAPES = [
    (1, 1, 1, 512, 512, 64, {}),
    (1, 4, 4, 1024, 1024, 64, {}),
    (2, 2, 2, 1024, 512, 128, {"causal": True}),
    (1, 1, 1, 4000, 4000, 1, {}),
    (1, 1, 1, 3000, 3000, 1, {"dropout_p": 0.3, "mask_shape": (3000, 3000)}),
    (1, 4, 1, 512, 700, 32, {"dropout_p": 0.2, "causal": True, "mask_shape": (1, 4, 512, 700)}),
    (1, 16, 1, 4096, 1, 64, {}),
    (1, 1, 1, 1, 200000, 1, {}),
    (1, 1, 1, 200000, 1, 1, {}),
    (1, 1, 1, 64, 8192, 16, {}),
    (65535, 1, 1, 1, 1, 1, {}),
    (4096, 1, 1, 1, 1, 1, {"varlen_lengths": 1}),  # 4096 sequences of one query and key
    (1000, 2, 2, 37, 53, 8, {"varlen_lengths": 37}),
]


def measure(shape: list) -> dict:
    import numpy as np

    from py_harness.config import AttentionConfig
    from py_harness.host.judge.verdict import judge_outputs
    from py_harness.reference_cost import reference_cost

    b, h, hkv, sq, sk, d, extra = shape
    if "mask_shape" in extra:
        extra = dict(extra, mask_shape=tuple(extra["mask_shape"]))
    if "varlen_lengths" in extra:  # b sequences of sq x sk, packed
        extra = {k: v for k, v in extra.items() if k != "varlen_lengths"}
        extra |= {
            "cu_seqlens_q": tuple(range(0, b * sq + 1, sq)),
            "cu_seqlens_k": tuple(range(0, b * sk + 1, sk)),
        }
    cfg = AttentionConfig(
        batch=b, num_heads=h, num_kv_heads=hkv, seq_q=sq, seq_k=sk, head_dim=d, **extra
    )
    rng = np.random.default_rng(0)
    shapes = cfg.shapes()
    x = {n: rng.standard_normal(shapes[n], np.float32) for n in ("q", "k", "v", "d_out")}
    if cfg.mask_shape:
        x["mask"] = rng.standard_normal(cfg.mask_shape, np.float32)
    got = {n: rng.standard_normal(shapes[n], np.float32) for n in ("o", "lse", "dq", "dk", "dv")}
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    t0 = time.perf_counter()
    judge_outputs(cfg, x, got)
    seconds = time.perf_counter() - t0
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0
    cost = reference_cost(cfg)
    mib = 2**20
    return {
        "shape": f"B{b} H{h}/{hkv} Sq{sq} Sk{sk} D{d} {shape[6] or ''}".strip(),
        "model_mib": round(cost.bytes / mib),
        "traced_mib": round(traced / mib),
        "rss_growth_mib": round(rss / mib),
        "model_s": round(cost.seconds, 2),
        "measured_s": round(seconds, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--one",
        metavar="SHAPE_JSON",
        help="measure one shape in this process (what each fresh process is asked)",
    )
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(measure(json.loads(args.one))))
        return
    print("| shape | model MiB | traced MiB | RSS growth MiB | model s | measured s |")
    print("|---|---|---|---|---|---|")
    for shape in SHAPES:
        out = subprocess.run(
            [sys.executable, __file__, "--one", json.dumps(shape)],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(out.stdout)
        print(
            f"| {r['shape']} | {r['model_mib']} | {r['traced_mib']} | {r['rss_growth_mib']} "
            f"| {r['model_s']} | {r['measured_s']} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
