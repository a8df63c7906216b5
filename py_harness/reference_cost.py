"""What judging a configuration costs the demo server: the float64 reference's and the
float32 baselines' peak memory and time, modelled from the shape alone, and the check that
refuses a configuration over the server's limits. The server checks before any array work;
the page's service (service.py) checks the same limits, sent with the request, so its form
refuses the same cases.

Pure Python: this module runs inside Pyodide (no NumPy there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .config import OUTPUTS, AttentionConfig, ConfigError
from .sizing import buffer_sizes

# The demo server computes the float64 reference and the float32 baselines (host/judge) for
# whatever shape a request declares: a 208-byte change to a body can ask for gigabytes. These
# model judge_outputs' peak memory and time from the shape alone, so the server and the page's
# form refuse before any array work. Fitted over `python benchmarks/reference_cost.py` (NumPy
# 2.5, a 2-core machine; docs/records/judge.md has the table): memory an upper bound within
# 1.5x of what it measures, time within 1.5x either way. The judge walks blocks of query rows
# (host/judge/blocks.py) of REFERENCE_BLOCK_SCORES scores, one per worker thread and one more
# being summed, so its memory stops growing with the scores past those blocks.
REFERENCE_BYTES = 5 << 20  # NumPy's and the judge's own working set
REFERENCE_BYTES_PER_FLOAT = 17  # per input and output element (not the mask): float64 copies
REFERENCE_BYTES_PER_SCORE = 57  # per score of the blocks in flight: P, dP, dS, term sums
REFERENCE_BLOCK_SCORES = 1 << 20  # blocks.BLOCK_BYTES of float64 scores
REFERENCE_SECONDS = 0.05  # a judgement's fixed cost
REFERENCE_SECONDS_PER_SCORE_TERM = 4.3e-9  # per score and head_dim: the matrix products
REFERENCE_SECONDS_PER_SCORE = 57e-9  # per score: softmax, the baselines' sums
REFERENCE_SECONDS_PER_SCORE_DROPOUT_OR_MASK = 29e-9  # per score more, with dropout or a mask
REFERENCE_SECONDS_PER_FLOAT = 45e-9  # per tensor element: copies, conversions, comparison
DEFAULT_JUDGE_WORKERS = 2  # where the limits do not say how many threads the judge uses


@dataclass(frozen=True)
class ReferenceCost:
    """What judging `cfg` is expected to cost the server, from its shape alone."""

    bytes: int
    seconds: float


def reference_cost(cfg: AttentionConfig, workers: int = DEFAULT_JUDGE_WORKERS) -> ReferenceCost:
    """The float64 reference's and float32 baselines' peak memory and time for `cfg` when
    the judge uses `workers` threads, modelled from the measured costs above. A
    variable-length batch is judged a run of consecutive sequences of equal lengths at a
    time (AttentionConfig.sequence_runs): its blocks come from its largest run."""
    h, d = cfg.num_heads, cfg.head_dim
    scores = h * sum(len_q * len_k for _, len_q, _, len_k in cfg.sequences())
    runs = [n * seq[1] * seq[3] for _, n, seq in cfg.sequence_runs()]
    peak_scores = h * max(runs, default=0) if cfg.varlen else scores
    in_flight = min(peak_scores, (max(workers, 1) + 1) * REFERENCE_BLOCK_SCORES)
    floats = sum(cfg.input_elems().values()) + sum(buffer_sizes(cfg, OUTPUTS).values())
    mask = math.prod(cfg.mask_shape) if cfg.mask_shape else 0  # read in place, block by block
    per_score = REFERENCE_SECONDS_PER_SCORE + REFERENCE_SECONDS_PER_SCORE_TERM * d
    if cfg.dropout_p or cfg.mask_shape:
        per_score += REFERENCE_SECONDS_PER_SCORE_DROPOUT_OR_MASK
    return ReferenceCost(
        bytes=REFERENCE_BYTES
        + REFERENCE_BYTES_PER_FLOAT * (floats - mask)
        + REFERENCE_BYTES_PER_SCORE * in_flight,
        seconds=REFERENCE_SECONDS + per_score * scores + REFERENCE_SECONDS_PER_FLOAT * floats,
    )


def check_reference_cost(cfg: AttentionConfig, limits: dict[str, float]) -> None:
    """Refuse a config whose reference would cost more than `limits` allow (the server's
    /api/info reference_limits: max_reference_bytes, max_reference_seconds, and the threads
    its judge uses, judge_workers), naming both."""
    cost = reference_cost(cfg, int(limits.get("judge_workers", DEFAULT_JUDGE_WORKERS)))
    max_bytes, max_seconds = limits["max_reference_bytes"], limits["max_reference_seconds"]
    if cost.bytes > max_bytes or cost.seconds > max_seconds:
        mib = 2**20
        raise ConfigError(
            "case",
            f"judging it needs about {cost.bytes / mib:.0f} MiB and {cost.seconds:.1f} s of "
            f"the server's float64 reference, over its limit of {max_bytes / mib:.0f} MiB and "
            f"{max_seconds:g} s (start it with py-harness serve --max-reference-mb N "
            "--max-reference-seconds S)",
        )
