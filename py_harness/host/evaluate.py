"""One case end to end on the host: make inputs, run them on a session, judge the results.

Shared by pytest and the `check` command so both judge exactly the same way.
"""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import AttentionConfig, ConfigError, validate
from ..kernels import DEFAULT_VARIANT
from . import compare
from .cases import Case
from .dropout import dropout_multiplier
from .sessions import Session, shader_sources
from .verdict import OUTPUTS, judge_outputs


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
    """Deterministic f32 inputs for a case, mask included: draw 0 is seeded by the case's
    id alone, draw n > 0 by (id, n), so each draw is reproducible on its own."""
    cfg = case.config()
    key = zlib.crc32(case.id.encode())
    rng = np.random.default_rng(key if draw == 0 else (key, draw))
    shapes = cfg.shapes()
    x = {n: rng.standard_normal(shapes[n], dtype=np.float32) for n in ("q", "k", "v", "d_out")}
    if case.large_logits:
        x["q"] *= np.float32(5)
        x["k"] *= np.float32(3)
        x["v"] *= np.float32(3)
    if cfg.mask_shape is not None:
        x["mask"] = _make_mask(case, cfg, rng)
    return x


def _make_mask(case: Case, cfg: AttentionConfig, rng: np.random.Generator) -> np.ndarray:
    shape = cfg.mask_shape
    if case.mask == "keypad":
        # Batch element b sees its first sk - 7b - 3 keys; padding is -inf.
        mask = np.zeros(shape, np.float32)
        for b in range(cfg.batch):
            mask[b, ..., cfg.seq_k - 7 * b - 3 :] = -np.inf
        return mask
    mask = rng.standard_normal(shape, dtype=np.float32)
    if case.mask.startswith("rows-"):
        fill = -np.inf if case.mask == "rows-inf" else np.float32(-1e30)
        rows = rng.choice(cfg.seq_q, size=max(1, cfg.seq_q // 5), replace=False)
        mask[..., rows, :] = fill  # whole rows with no visible key
    return mask


def encode_tensors(x: dict[str, np.ndarray]) -> dict[str, str]:
    """Arrays as the service takes them: base64 of their little-endian bytes."""
    return {n: base64.b64encode(np.ascontiguousarray(a).tobytes()).decode() for n, a in x.items()}


def run_on(
    session: Session,
    cfg: AttentionConfig,
    x: dict[str, np.ndarray],
    *,
    sources: dict[str, str] | None = None,
    backward_runs: int = 1,
    variant: str = DEFAULT_VARIANT,
) -> dict[str, Any]:
    """Send one case to a session; returns the decoded outputs as arrays plus metadata."""
    validate(cfg)
    for name, arr in x.items():
        if arr.dtype != np.float32:
            raise ConfigError(name, f"must be float32, got {arr.dtype}")
    request = {
        "config": cfg.to_dict(),
        "tensors": encode_tensors(x),
        "sources": sources if sources is not None else shader_sources(),
        "backward_runs": backward_runs,
        "variant": variant,
    }
    reply = session.call("run_case", request)
    reply["arrays"] = decode_outputs(cfg, reply["outputs"])
    return reply


def decode_outputs(cfg: AttentionConfig, outputs: dict[str, str]) -> dict[str, np.ndarray]:
    """run_case's outputs (base64 of f32 bytes) as arrays of their shapes (cfg.shapes())."""
    shapes = cfg.shapes()
    return {
        n: np.frombuffer(base64.b64decode(outputs[n]), "<f4").reshape(shapes[n])
        for n in OUTPUTS
        if n in outputs
    }


def evaluate(
    case: Case,
    session: Session,
    *,
    sources: dict[str, str] | None = None,
    variant: str = DEFAULT_VARIANT,
    draw: int = 0,
) -> CaseResult:
    """Run a case on input draw `draw` in a session and judge it (judge_case)."""
    x = make_inputs(case, draw)
    runs = 2 if case.repeat_backward else 1
    reply = run_on(session, case.config(), x, sources=sources, backward_runs=runs, variant=variant)
    return judge_case(case, x, reply, runtime=session.runtime, variant=variant, draw=draw)


def judge_case(
    case: Case,
    x: dict[str, np.ndarray],
    reply: dict[str, Any],
    *,
    runtime: str,
    variant: str = DEFAULT_VARIANT,
    draw: int = 0,
) -> CaseResult:
    """Judge one run of a case from arrays, wherever it ran: O, LSE, dQ, dK, dV against the
    rule (verdict.py), and the case's own checks. `x`: its inputs (make_inputs); `reply`:
    run_case's reply with the outputs decoded into reply["arrays"] (decode_outputs)."""
    cfg = case.config()
    got = reply["arrays"]
    reports, _ = judge_outputs(cfg, x, got, large_logits=case.large_logits)
    checks: dict[str, tuple[bool, str]] = {}
    if case.repeat_backward:
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
