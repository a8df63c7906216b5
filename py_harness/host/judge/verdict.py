"""The verdict on one run: O, LSE, dQ, dK and dV judged against float64 NumPy.

Takes arrays, not sessions: pytest, `check`, the demo server and the benchmark's --verify
all judge through judge_outputs, so they judge alike. The rule is compare.judge's, with two
honest float32 baselines (docs/verdict.md): the plain formula through BLAS ("blas32",
reference.py with dtype=float32, K scaled) and FlashAttention-2 with sequential sums
("seq32", sequential_ref.py, Q scaled).

Host-only module; nothing that runs in Pyodide imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...config import OUTPUTS, AttentionConfig
from . import compare, reference
from .sequential_ref import attention_seq32


def _kwargs(cfg: AttentionConfig, x: dict[str, np.ndarray]) -> dict[str, Any]:
    return {
        "mask": x.get("mask"),
        "causal": cfg.causal,
        "causal_offset": cfg.causal_offset,
        "window": cfg.window,
        "window_left": cfg.window_left,
        "window_right": cfg.window_right,
        "softcap": cfg.softcap,
        "alibi_slopes": x.get("alibi_slopes"),
        "dropout_p": cfg.dropout_p,
        "seed": cfg.seed,
        "scale": cfg.softmax_scale,
    }


Outputs = dict[str, np.ndarray]


def _per_sequence(
    cfg: AttentionConfig,
    x: dict[str, np.ndarray],
    dtype: type,
    run: Callable[[dict[str, Any], dict[str, np.ndarray]], Outputs],
) -> Outputs:
    """run(kwargs, x) on the whole batch; for a variable-length batch, on each sequence as a
    dense batch of one (its own causal offset, ALiBi slopes and place in the dropout hash)
    with the results packed back: o, dq [total_q, H, D], lse [H, total_q], dk, dv
    [total_k, Hkv, D]. A sequence without queries or keys has nothing to compute: its rows
    keep O = 0, LSE = EMPTY_LSE and zero gradients."""
    if not cfg.varlen:
        return run(_kwargs(cfg, x), x)
    shapes = cfg.shapes()
    out = {n: np.zeros(shapes[n], dtype) for n in OUTPUTS}
    out["lse"][:] = reference.EMPTY_LSE
    slopes = x.get("alibi_slopes")
    for b, (q0, len_q, k0, len_k) in enumerate(cfg.sequences()):
        if not (len_q and len_k):
            continue
        rows, keys = slice(q0, q0 + len_q), slice(k0, k0 + len_k)
        xb = {n: x[n][rows][None] for n in ("q", "d_out")}
        xb |= {n: x[n][keys][None] for n in ("k", "v")}
        kwb = _kwargs(cfg.dense_sequence(len_q, len_k), x) | {
            # [H] slopes serve every sequence; [B, H] ones a row each
            "alibi_slopes": slopes if slopes is None or slopes.ndim == 1 else slopes[b],
            "dropout_batch0": b,
        }
        r = run(kwb, xb)
        for n in ("o", "dq"):
            out[n][rows] = r[n][0]
        out["lse"][:, rows] = r["lse"][0]
        for n in ("dk", "dv"):
            out[n][keys] = r[n][0]
    return out


def references(
    cfg: AttentionConfig, x: dict[str, np.ndarray], dtype: type
) -> dict[str, np.ndarray]:
    """The plain formula (reference.py) in dtype: {o, lse, dq, dk, dv}. x: q, k, v, d_out
    (and mask, alibi_slopes) as float32 arrays in the kernels' layouts."""

    def run(kw: dict[str, Any], xs: dict[str, np.ndarray]) -> Outputs:
        kw = kw | {"dtype": dtype}
        o, lse = reference.attention_ref(xs["q"], xs["k"], xs["v"], **kw)
        dq, dk, dv = reference.attention_bwd_ref(xs["q"], xs["k"], xs["v"], None, xs["d_out"], **kw)
        return {"o": o, "lse": lse, "dq": dq, "dk": dk, "dv": dv}

    return _per_sequence(cfg, x, dtype, run)


def baselines(cfg: AttentionConfig, x: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """The honest float32 results the rule measures a kernel against, by name."""

    def run(kw: dict[str, Any], xs: dict[str, np.ndarray]) -> Outputs:
        return attention_seq32(xs["q"], xs["k"], xs["v"], xs["d_out"], **kw)

    seq = _per_sequence(cfg, x, np.float32, run)
    return {"blas32": references(cfg, x, np.float32), "seq32": seq}


def judge_outputs(
    cfg: AttentionConfig,
    x: dict[str, np.ndarray],
    got: dict[str, np.ndarray],
    *,
    large_logits: bool = False,
) -> tuple[list[compare.Report], dict[str, np.ndarray]]:
    """Judge each output in `got` (o must be there; the others where present); returns the
    reports and the float64 reference. large_logits: FlashAttention's overflow factors."""
    ref64 = references(cfg, x, np.float64)
    base = baselines(cfg, x)
    factors = compare.OVERFLOW_FACTORS if large_logits else compare.FACTORS
    reports = [
        compare.judge(n, got[n], ref64[n], {b: r[n] for b, r in base.items()}, factors[n])
        for n in OUTPUTS
        if n in got
    ]
    return reports, ref64
