"""The verdict on one run: O, LSE, dQ, dK and dV judged against float64 NumPy.

Takes arrays, not sessions: pytest, `check`, the demo server and the benchmark's --verify
all judge through judge_outputs, so they judge alike. The rule is compare.judge's, with two
honest float32 baselines (docs/verdict.md): the plain formula through BLAS ("blas32",
reference.py with dtype=float32, K scaled) and FlashAttention-2 with sequential sums
("seq32", sequential_ref.py, Q scaled).

Host-only module; nothing that runs in Pyodide imports it.
"""

from __future__ import annotations

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


def references(
    cfg: AttentionConfig, x: dict[str, np.ndarray], dtype: type
) -> dict[str, np.ndarray]:
    """The plain formula (reference.py) in dtype: {o, lse, dq, dk, dv}. x: q, k, v, d_out
    (and mask, alibi_slopes) as float32 arrays in the kernels' layouts."""
    kw = _kwargs(cfg, x) | {"dtype": dtype}
    o, lse = reference.attention_ref(x["q"], x["k"], x["v"], **kw)
    dq, dk, dv = reference.attention_bwd_ref(x["q"], x["k"], x["v"], None, x["d_out"], **kw)
    return {"o": o, "lse": lse, "dq": dq, "dk": dk, "dv": dv}


def baselines(cfg: AttentionConfig, x: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """The honest float32 results the rule measures a kernel against, by name."""
    seq = attention_seq32(x["q"], x["k"], x["v"], x["d_out"], **_kwargs(cfg, x))
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
