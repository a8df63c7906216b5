"""A case's inputs and the judging of its outputs, from arrays (no session here).

make_inputs draws a case's tensors; judge_case judges what a run returned. host/engine.py
runs a case on a session between the two; pytest, `check` and the demo API all judge here.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...config import OUTPUTS, AttentionConfig
from ...kernels import DEFAULT_VARIANT
from . import compare
from .cases import Case
from .dropout import dropout_multiplier
from .verdict import F32_PRECISION, Precision, judge_outputs

# Case.shifted_scores: the rms of each row's shift, beyond +-88.7 for 55 % of rows.
# float32's exp overflows above 88.7, is subnormal below -87.3 and 0 below -104.
SCORE_SHIFT_RMS = 150.0


@dataclass
class CaseResult:
    case_id: str
    runtime: str
    variant: str
    reports: list[compare.Report]
    timings_ms: dict[str, float]
    timing_source: str
    checks: dict[str, tuple[bool, str]] = field(default_factory=dict)  # name -> (ok, detail)
    outputs: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    draw: int = 0  # which input draw (make_inputs)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.reports) and all(ok for ok, _ in self.checks.values())

    def failures(self) -> str:
        lines = [str(r) for r in self.reports if not r.passed]
        lines += [f"{name}: {detail}" for name, (ok, detail) in self.checks.items() if not ok]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case_id,
            "runtime": self.runtime,
            "variant": self.variant,
            "draw": self.draw,
            "passed": self.passed,
            "reports": [r.to_json() for r in self.reports],
            "checks": {k: {"ok": ok, "detail": d} for k, (ok, d) in self.checks.items()},
            "timings_ms": self.timings_ms,
            "timing_source": self.timing_source,
        }


def make_inputs(case: Case, draw: int = 0) -> dict[str, np.ndarray]:
    """Deterministic f32 inputs for a case, mask and ALiBi slopes included: draw 0 is
    seeded by the case's id alone, draw n > 0 by (id, n), so each draw is reproducible on
    its own."""
    key = zlib.crc32(case.id.encode())
    rng = np.random.default_rng(key if draw == 0 else (key, draw))
    return draw_tensors(
        case.config(),
        rng,
        mask=case.mask,
        large=case.large_logits,
        shifted=case.shifted_scores,
    )


def draw_tensors(
    cfg: AttentionConfig,
    rng: np.random.Generator,
    *,
    mask: str = "none",
    large: bool = False,
    shifted: bool = False,
) -> dict[str, np.ndarray]:
    """cfg's tensors drawn from rng, as the matrix draws them (`bench` too): q, k, v and
    d_out standard normal in that order, the scores made large or shifted (scale_logits),
    then the additive mask of kind `mask` (make_mask) and ALiBi slopes where cfg has them."""
    shapes = cfg.shapes()
    x = {n: rng.standard_normal(shapes[n], dtype=np.float32) for n in ("q", "k", "v", "d_out")}
    scale_logits(x, cfg, rng, large=large, shifted=shifted)
    if cfg.mask_shape is not None:
        x["mask"] = make_mask(mask, cfg, rng)
    if cfg.alibi_shape is not None:
        # FlashAttention-2's test draw: uniform in [0, 0.3)
        x["alibi_slopes"] = rng.random(cfg.alibi_shape, dtype=np.float32) * np.float32(0.3)
    return x


def scale_logits(
    x: dict[str, np.ndarray],
    cfg: AttentionConfig,
    rng: np.random.Generator,
    *,
    large: bool = False,
    shifted: bool = False,
) -> None:
    """Make x's scores large, in place. large: FlashAttention's overflow test (q x 5, k and
    v x 3: logits of tens). shifted: one vector added to every key, so that row i's scores
    move by scale * q_i . c, a normal draw of SCORE_SHIFT_RMS per row; most rows then lie
    wholly above 88.7 or below -88.7, and softmax does not change."""
    if large:
        x["q"] *= np.float32(5)
        x["k"] *= np.float32(3)
        x["v"] *= np.float32(3)
    if shifted:
        c = rng.standard_normal(cfg.head_dim)
        c *= SCORE_SHIFT_RMS / (cfg.softmax_scale * np.linalg.norm(c))
        x["k"] += c.astype(np.float32)


def make_mask(kind: str, cfg: AttentionConfig, rng: np.random.Generator) -> np.ndarray:
    """The additive mask of cfg.mask_shape that the matrix draws for a mask kind (Case.mask):
    keypad is 0 or -inf per key, rows-inf / rows-1e30 fill a fifth of the rows, any other
    kind is a normal draw."""
    shape = cfg.mask_shape
    if kind == "keypad":
        # Batch element b sees its first sk - 7b - 3 keys; padding is -inf.
        mask = np.zeros(shape, np.float32)
        for b in range(cfg.batch):
            mask[b, ..., cfg.seq_k - 7 * b - 3 :] = -np.inf
        return mask
    mask = rng.standard_normal(shape, dtype=np.float32)
    if kind.startswith("rows-"):
        fill = -np.inf if kind == "rows-inf" else np.float32(-1e30)
        rows = rng.choice(cfg.seq_q, size=max(1, cfg.seq_q // 5), replace=False)
        mask[..., rows, :] = fill  # whole rows with no visible key
    return mask


def judge_case(
    case: Case,
    x: dict[str, np.ndarray],
    reply: dict[str, Any],
    *,
    runtime: str,
    variant: str = DEFAULT_VARIANT,
    draw: int = 0,
    backward: bool = True,
    produced: tuple[str, ...] = OUTPUTS,
    given: dict[str, np.ndarray] | None = None,
    precision: Precision = F32_PRECISION,
) -> CaseResult:
    """Judge one run of a case from arrays, wherever it ran: O, LSE, dQ, dK, dV against the
    rule (verdict.py), and the case's own checks. `x`: its inputs (make_inputs); `reply`:
    run_case's reply with the outputs decoded into reply["arrays"] (decode_outputs).
    backward: False for a run of the forward alone (O and the LSE judged, no gradient
    wanted). produced: the outputs the variant makes (Variant.outputs), each of which must
    come back. given: the O and LSE a backward-only variant was handed (verdict.judge_outputs
    then adds the baseline such a backward gets)."""
    cfg = case.config()
    got = reply["arrays"]
    reports, _ = judge_outputs(
        cfg,
        x,
        got,
        large_scores=case.large_scores,
        reuse=True,
        given=given or None,
        precision=precision,
    )
    checks: dict[str, tuple[bool, str]] = {}
    wanted = [n for n in produced if backward or n in ("o", "lse")]
    missing = [n for n in wanted if n not in got]
    if missing:  # judge_outputs judges what came back: an output that did not is a failure
        checks["every output returned"] = (False, f"the reply lacks {', '.join(missing)}")
    if case.repeat_backward and backward:
        d = reply.get("backward_digests", [])
        checks["bit-identical backward"] = (
            len(d) == 2 and d[0] == d[1],
            f"sha256 of dq|dk|dv over 2 runs: {[s[:12] for s in d]}",
        )
    if case.check_dropout_fraction:
        m = dropout_multiplier(
            cfg.dropout_p, cfg.seed, cfg.batch, cfg.num_heads, cfg.seq_q, cfg.seq_k, np.float64
        )
        dropped = float(np.mean(m == 0))
        checks["dropped fraction"] = (
            abs(dropped - cfg.dropout_p) <= 0.01,
            f"dropped {dropped:.4f} of {m.size} weights, p = {cfg.dropout_p}",
        )
    return CaseResult(
        case.id,
        runtime,
        variant,
        reports,
        reply.get("timings_ms", {}),
        reply.get("timing_source", ""),
        checks,
        got,
        draw,
    )
