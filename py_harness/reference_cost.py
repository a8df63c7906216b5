"""What judging a configuration costs the demo server: the float64 reference's and the
float32 baselines' peak memory and time, modelled from the shape alone, and the check that
refuses a configuration over the server's limits. The server checks before any array work;
the page's service (service.py) checks the same limits, sent with the request, so its form
refuses the same cases.

Pure Python: this module runs inside Pyodide (no NumPy there).
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import OUTPUTS, AttentionConfig, ConfigError
from .sizing import buffer_sizes

# The demo server computes the float64 reference and the float32 baselines (host/judge) for
# whatever shape a request declares: a 208-byte change to a body can ask for gigabytes. These
# model judge_outputs' peak memory and time from the shape alone, so the server and the page's
# form refuse before any array work. Fitted over `python benchmarks/reference_cost.py` (NumPy 2.5,
# this 2-core machine; docs/serving.md has the table) to stay above what it measures.
REFERENCE_BYTES_PER_SCORE = 40  # per element of B*H*Sq*Sk: P, dP, dS in float64 and float32
REFERENCE_BYTES_PER_FLOAT = 28  # per tensor element: float64 copies, baselines, base64
REFERENCE_SECONDS_PER_SCORE_TERM = 25e-9  # per score and (head_dim + 8): the matrix products
REFERENCE_SECONDS_PER_SCORE = 40e-9  # per score: softmax, masks
REFERENCE_SECONDS_PER_SCORE_DROPOUT_OR_MASK = 160e-9  # instead, with dropout's hash or a mask
REFERENCE_SECONDS_PER_ROW = 14e-6  # per query row (B*H*Sq)
REFERENCE_SECONDS_PER_FLOAT = 100e-9  # per tensor element
REFERENCE_SECONDS_PER_STEP = 4e-6  # per step of the float32 baseline's sequential sums
_SEQ_BLOCK = 1 << 16  # sequential_ref's rows x columns per step


@dataclass(frozen=True)
class ReferenceCost:
    """What judging `cfg` is expected to cost the server, from its shape alone."""

    bytes: int
    seconds: float


def reference_cost(cfg: AttentionConfig) -> ReferenceCost:
    """The float64 reference's and float32 baselines' peak memory and time for `cfg`, modelled
    from the measured costs above (an upper bound on the shapes measured, not an exact figure).
    A variable-length batch is judged a run of consecutive sequences of equal lengths at a
    time (AttentionConfig.sequence_runs): its peak is its largest run's, its time the sum."""
    h, d = cfg.num_heads, cfg.head_dim
    seqs = [(len_q, len_k) for _, len_q, _, len_k in cfg.sequences()]
    scores = h * sum(len_q * len_k for len_q, len_k in seqs)
    # A variable-length batch is judged a run of equal sequences at a time.
    runs = [n * seq[1] * seq[3] for _, n, seq in cfg.sequence_runs()]
    peak_scores = h * max(runs, default=0) if cfg.varlen else scores
    floats = sum(cfg.input_elems().values()) + sum(buffer_sizes(cfg, OUTPUTS).values())
    # sequential_ref: P @ V and dP's row sums step once per key, Q @ K^T once per head_dim,
    # over blocks of _SEQ_BLOCK floats of the output.
    steps = h * sum(
        3 * len_k * -(-len_q * d // _SEQ_BLOCK)
        + 2 * len_k
        + 2 * d * -(-len_q * len_k // _SEQ_BLOCK)
        for len_q, len_k in seqs
    )
    per_score = (
        REFERENCE_SECONDS_PER_SCORE_DROPOUT_OR_MASK
        if cfg.dropout_p or cfg.mask_shape
        else REFERENCE_SECONDS_PER_SCORE
    )
    return ReferenceCost(
        bytes=REFERENCE_BYTES_PER_SCORE * peak_scores + REFERENCE_BYTES_PER_FLOAT * floats,
        seconds=scores * (REFERENCE_SECONDS_PER_SCORE_TERM * (d + 8) + per_score)
        + REFERENCE_SECONDS_PER_ROW * h * cfg.total_q
        + REFERENCE_SECONDS_PER_FLOAT * floats
        + REFERENCE_SECONDS_PER_STEP * steps,
    )


def check_reference_cost(cfg: AttentionConfig, limits: dict[str, float]) -> None:
    """Refuse a config whose reference would cost more than `limits` allow (the server's
    /api/info reference_limits: max_reference_bytes, max_reference_seconds), naming both."""
    cost = reference_cost(cfg)
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
