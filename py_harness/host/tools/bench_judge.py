"""`python -m py_harness bench-judge`: what the verdict costs on the host, at any size.

For each shape: the whole judgement of one run (verdict.judge_outputs: the float64
reference and its sums of |terms|, both float32 baselines, the comparison) timed once, then
its parts one by one, and the peak resident memory of a fresh process that did only this
(each shape runs in a child of its own, so one shape's peak is not another's). Inputs are
standard normal; what a kernel returned is stood in by zeros (the comparison costs the same
whatever the values). A benchmark, not a test: it asserts nothing.

    python -m py_harness bench-judge --seq 2048,4096 --head-dim 64 --heads 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ...config import OUTPUTS, AttentionConfig, ConfigError, validate
from ..arg_types import positive_int, positive_ints
from ..judge import blocks, verdict

CAUSALS = {"both": [False, True], "yes": [True], "no": [False]}


def _measure(cfg: AttentionConfig) -> dict[str, float]:
    """Seconds of each part of judging one run of cfg, in this process."""
    rng = np.random.default_rng(0)
    shapes = cfg.shapes()
    x = {n: rng.standard_normal(shapes[n], dtype=np.float32) for n in ("q", "k", "v", "d_out")}
    got = {n: np.zeros(shapes[n], np.float32) for n in OUTPUTS}
    times = {}
    t = time.perf_counter()
    verdict.judge_outputs(cfg, x, got)
    times["judge"] = time.perf_counter() - t
    parts = {
        "reference+terms": lambda: verdict.references(cfg, x, np.float64, terms=True),
        "blas32": lambda: verdict.references(cfg, x, np.float32),
        "seq32": lambda: verdict.sequential(cfg, x),
    }
    for name, part in parts.items():
        t = time.perf_counter()
        part()
        times[name] = time.perf_counter() - t
    times["peak_rss_mib"] = peak_rss_mib()
    return times


def peak_rss_mib() -> float:
    """This process's peak resident memory, MiB: Linux's VmHWM, which starts afresh at exec
    (getrusage's ru_maxrss does not: a child started from a large process reports that
    process's size), else ru_maxrss."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _config(args: argparse.Namespace, seq: int, d: int, causal: bool) -> AttentionConfig:
    return AttentionConfig(
        batch=args.batch,
        seq_q=seq,
        seq_k=seq,
        num_heads=args.heads,
        num_kv_heads=args.kv_heads or args.heads,
        head_dim=d,
        causal=causal,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m py_harness bench-judge",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--seq", type=positive_ints, default=[2048, 4096], help="comma-separated")
    ap.add_argument("--head-dim", type=positive_ints, default=[64], help="comma-separated")
    ap.add_argument("--heads", type=positive_int, default=1)
    ap.add_argument("--kv-heads", type=positive_int, help="KV heads (default: --heads)")
    ap.add_argument("--batch", type=positive_int, default=1)
    ap.add_argument("--causal", default="no", choices=list(CAUSALS))
    ap.add_argument(
        "--judge-workers",
        type=positive_int,
        help="threads the references use (default: one per core)",
    )
    ap.add_argument("--json", type=Path, help="write the figures here too")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # a child's shape: seq,d,causal
    args = ap.parse_args(argv)
    if args.kv_heads and args.heads % args.kv_heads:
        ap.error(f"--heads {args.heads} is not a multiple of --kv-heads {args.kv_heads}")
    blocks.WORKERS = args.judge_workers
    if args.one:
        seq, d, causal = (int(v) for v in args.one.split(","))
        print(json.dumps(_measure(_config(args, seq, d, bool(causal)))))
        return 0
    rows = []
    workers = args.judge_workers or os.cpu_count()
    for seq in args.seq:
        for d in args.head_dim:
            for causal in CAUSALS[args.causal]:
                cfg = _config(args, seq, d, causal)
                try:
                    validate(cfg)
                except ConfigError as exc:
                    ap.error(str(exc))
                child = [sys.executable, "-m", "py_harness", "bench-judge"]
                child += ["--one", f"{seq},{d},{int(causal)}", "--batch", str(args.batch)]
                child += ["--heads", str(cfg.num_heads), "--kv-heads", str(cfg.num_kv_heads)]
                child += ["--judge-workers", str(workers)]
                out = subprocess.run(child, capture_output=True, text=True)
                if out.returncode:
                    print(out.stderr, file=sys.stderr)
                    return out.returncode
                t = json.loads(out.stdout.splitlines()[-1])
                shape = f"B{args.batch} H{cfg.num_heads}/{cfg.num_kv_heads} S{seq} D{d}"
                shape += " causal" if causal else ""
                print(
                    f"{shape}: judged in {t['judge']:.2f} s (reference+terms "
                    f"{t['reference+terms']:.2f}, blas32 {t['blas32']:.2f}, seq32 "
                    f"{t['seq32']:.2f}); peak RSS {t['peak_rss_mib']:.0f} MiB; "
                    f"{workers} workers"
                )
                rows.append({"shape": shape, "workers": workers} | t)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0
