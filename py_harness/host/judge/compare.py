"""FlashAttention's acceptance rule for the WGSL kernels, with an honest float32 baseline.

A kernel result passes when

    |actual_i - ref64_i| <= factor * max(E, u * T_i) + floor   for every element i,

    E = max over baselines b of max over elements |b - ref64|

ref64 is the float64 reference; each baseline is an honest float32 computation of the same
thing: the plain formula through BLAS (reference.py with dtype=float32) and FlashAttention-2
with sequential sums (sequential_ref.py). The kernel may be `factor` times worse than the
less accurate of them, so a correct kernel passes whichever accumulation order it uses
(docs/verdict.md gives the measurements). T_i, where given, is the sum of the absolute
values of the terms that element's last sum adds (reference.attention_term_sums), and u * T_i
the typical error of one float32 sum of them in any order: two baselines' orders can both
sum one long, cancelling element well while another honest order does not. Failure reports
name the worst element with its expected and actual values, in the manner of the WebGPU CTS.

Host-only module; nothing that runs in Pyodide imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import numpy as np
from numpy.typing import ArrayLike

# The factors, in one place (FlashAttention: 2 for the output, 3 for the gradients).
FACTORS: dict[str, float] = {"o": 2.0, "lse": 2.0, "dq": 3.0, "dk": 3.0, "dv": 3.0}
# FlashAttention's overflow test (q x 5, k and v x 3) allows 5x for every output: with
# logits of tens, exp(s - lse) turns an ulp of s into a relative error of tens of ulps of P,
# and the score's rounding depends on the order of its sums. The floor stays ATOL_FLOOR
# (FlashAttention adds 1e-3 there; we do not).
OVERFLOW_FACTORS: dict[str, float] = {"o": 5.0, "lse": 5.0, "dq": 5.0, "dk": 5.0, "dv": 5.0}

# Absolute floor added to the bound. It only matters when the float32 baseline is
# accidentally tiny (e.g. a baseline rounds exactly like ref64, or most entries are
# exact zeros), where factor * baseline alone would demand bit-exactness. 1e-6 is
# about 8 float32 ulps of 1.0 (ulp(1) = 1.2e-7): the size of honest rounding
# differences for O(1) values such as these tests' outputs and gradients. Real bugs
# are far larger: a missing scale or a wrong causal/window edge moves values by
# 1e-2..1, and even one extra or missing key among 2048 moves O by ~P_ij ~ 5e-4,
# hundreds of times the floor. Callers with scaled-up inputs (FlashAttention's
# overflow test) pass their own, larger floor.
ATOL_FLOOR = 1e-6


def floor_at_scale(name: str, dropout_p: float) -> float:
    """ATOL_FLOOR at the scale of the data: dropout multiplies every kept weight, and with
    them O, dS, dQ, dK and dV (not the LSE), by 1 / (1 - p), so their honest rounding
    differences are that much larger than O(1) values'. At p = 0.9 one dominant key's
    P dO is ten times its size; a correct kernel's few ulps there were 1.01-1.25x the
    unscaled floor's bound in 4 of 300 draws (docs/verdict.md, "Cases nobody wrote")."""
    p = float(np.float32(dropout_p))  # the p the kernel receives
    return ATOL_FLOOR if name == "lse" or p <= 0 else ATOL_FLOOR / (1.0 - p)


# reference.EMPTY_LSE is 3e38; an empty row's lse must only be "huge" (>= this),
# since exp(s - lse) = 0 for every s is all the backward pass needs from it.
LSE_SENTINEL_MIN = 1e38

_TINY = float(np.finfo(np.float32).tiny)  # denominator guard for relative errors
U32 = 2.0**-24  # float32's unit roundoff


@dataclass
class Report:
    """Outcome of one comparison; str() gives a one-line summary."""

    name: str
    passed: bool
    max_abs_err: float  # max |actual - ref| over compared elements (inf if any is bad)
    max_rel_err: float  # max |actual - ref| / max(|ref|, float32 tiny), elementwise
    baseline_err: float  # max |baseline - ref| over compared elements, worst baseline
    factor: float
    floor: float
    bound: float  # at worst_index: factor * max(baseline_err, term_err) + floor
    ratio: float  # max over elements of error / its bound; passed needs <= 1
    worst_index: tuple[int, ...] | None  # first non-finite element, else the largest ratio
    expected: float | None  # ref at worst_index
    actual: float | None  # actual at worst_index
    nan_count: int  # NaN / Inf in actual where ref is finite (or != ref where it is not)
    sentinel_misses: int = 0  # lse only: empty rows whose actual is < LSE_SENTINEL_MIN
    note: str = ""
    baseline: str = ""  # the baseline that set the bound (the least accurate one)
    term_err: float = 0.0  # u * sum |terms| at worst_index (0: not given)
    # At worst_index, each allowance added to the bound, by what it is for (judge's
    # `allowances`: what a backward handed its O and LSE may owe to them, an f16 output's
    # rounding).
    allowances: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict:
        d = asdict(self)
        d["worst_index"] = list(self.worst_index) if self.worst_index is not None else None
        return d

    def _honest(self) -> str:
        """What the bound multiplies: the worst baseline's error or, where larger, the
        element's own u * sum |terms|."""
        if self.term_err > self.baseline_err:
            base = f"its baseline {self.baseline_err:.2g}, {self.baseline}"
            return f"u sum|terms| {self.term_err:.2g} ({base})"
        return f"{self.baseline_err:.2g} ({self.baseline})"

    def __str__(self) -> str:
        head = f"{self.name}: {'ok' if self.passed else 'FAIL'}"
        if self.note:
            head += f" ({self.note})"
        if self.worst_index is None:
            return head
        text = (
            f"{head} max abs {self.max_abs_err:.2g} at {self.worst_index}: "
            f"expected {self.expected:.9g}, got {self.actual:.9g}; "
            f"bound {self.bound:.2g} = {self.factor:g} x {self._honest()} + {self.floor:.2g}"
            + "".join(f" + {v:.2g} ({k})" for k, v in self.allowances.items() if v)
            + f"; ratio {self.ratio:.2f}"
        )
        if self.nan_count:
            text += f"; {self.nan_count} non-finite"
        if self.sentinel_misses:
            text += f"; {self.sentinel_misses} empty rows with lse < {LSE_SENTINEL_MIN:g}"
        return text


def judge(
    name: str,
    actual: ArrayLike,
    ref64: ArrayLike,
    baselines: ArrayLike | Mapping[str, ArrayLike],
    factor: float | None = None,
    floor: float = ATOL_FLOOR,
    term_sums: ArrayLike | None = None,
    allowances: Mapping[str, ArrayLike] | None = None,
) -> Report:
    """Judge a kernel result `actual` against ref64 with FlashAttention's rule.

    baselines: honest float32 results of the same computation, by name (one bare array is
    named "f32"); the bound takes the largest of their errors. term_sums: ref64's shape,
    each element's sum of |terms| (None: no such term). factor defaults to
    FACTORS[name]. For name "lse", elements where ref64 holds the empty-row sentinel
    (>= LSE_SENTINEL_MIN) are left out of every error measure but actual must be
    >= LSE_SENTINEL_MIN there. Elements where ref64 itself is not finite must match
    exactly (same inf, or NaN). Fails on a shape mismatch, on any NaN / Inf in actual
    where ref64 is finite, and when max_abs_err > bound. allowances: arrays of ref64's
    shape by what they allow for, each added to each element's bound (verdict.py: what a
    backward handed its O and LSE owes to them, an f16 output's rounding; None: none).
    """
    factor = FACTORS[name] if factor is None else float(factor)
    if not isinstance(baselines, Mapping):
        baselines = {"f32": baselines}
    a = np.asarray(actual, dtype=np.float64)
    r = np.asarray(ref64, dtype=np.float64)
    base = {b: np.asarray(x, dtype=np.float64) for b, x in baselines.items()}
    for b, x in base.items():
        if x.shape != r.shape:  # a harness bug, not a kernel failure
            raise ValueError(f"{name}: baseline {b} shape {x.shape} != ref64 shape {r.shape}")
    nan = float("nan")
    if a.shape != r.shape:
        return Report(
            name,
            False,
            nan,
            nan,
            nan,
            factor,
            floor,
            nan,
            nan,
            None,
            None,
            None,
            0,
            note=f"shape {a.shape} != expected {r.shape}",
        )

    compared = np.isfinite(r)
    # Where ref is inf / NaN, actual must be the same thing.
    bad = ~compared & ~((a == r) | (np.isnan(a) & np.isnan(r)))
    missed = np.zeros(r.shape, dtype=bool)
    if name == "lse":
        empty = r >= LSE_SENTINEL_MIN
        missed = empty & ~(a >= LSE_SENTINEL_MIN)  # NaN misses too
        for b, x in base.items():  # else that baseline's error would be ~3e38
            if ((x >= LSE_SENTINEL_MIN) != empty).any():
                raise ValueError(f"{name}: baseline {b} and ref64 disagree on which rows are empty")
        compared &= ~empty
        bad &= ~empty
    bad |= compared & ~np.isfinite(a)
    nan_count = int(np.count_nonzero(bad))
    misses = int(np.count_nonzero(missed))
    bad |= missed

    errors = {}
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(compared & ~bad, np.abs(a - r), 0.0)
        for b, x in base.items():
            e = np.where(compared, np.abs(x - r), 0.0)
            if not np.isfinite(e).all():
                raise ValueError(f"{name}: baseline {b} is not finite where ref64 is")
            errors[b] = float(e.max(initial=0.0))
    worst_baseline = max(errors, key=errors.__getitem__)
    baseline = errors[worst_baseline]
    terms = np.zeros(r.shape)
    if term_sums is not None:
        terms = U32 * np.asarray(term_sums, dtype=np.float64)
        if terms.shape != r.shape or not np.isfinite(terms[compared]).all():
            raise ValueError(f"{name}: term_sums {terms.shape} not finite where ref64 {r.shape} is")
    bounds = _bounds(factor, baseline, terms, floor)
    extra = {
        k: np.broadcast_to(np.asarray(v, np.float64), r.shape)
        for k, v in (allowances or {}).items()
    }
    for v in extra.values():
        bounds = bounds + np.where(compared, v, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(err > 0, err / bounds, 0.0)  # a 0 bound is met by 0 error only
    if bad.any():  # report the first failing element, CTS style
        worst, max_abs, ratio = np.argwhere(bad)[0], float("inf"), float("inf")
    else:
        worst = np.unravel_index(np.argmax(ratios), err.shape) if err.size else None
        max_abs, ratio = float(err.max(initial=0.0)), float(ratios.max(initial=0.0))
    rel = float((err / np.where(compared, np.maximum(np.abs(r), _TINY), 1.0)).max(initial=0.0))
    idx = None if worst is None else tuple(int(i) for i in worst)
    # The worst element's own bound; where no element errs, none mattered: the baselines'.
    own = idx is not None and max_abs > 0
    return Report(
        name=name,
        passed=not bad.any() and ratio <= 1.0,
        max_abs_err=max_abs,
        max_rel_err=rel,
        baseline_err=baseline,
        factor=factor,
        floor=floor,
        bound=float(bounds[idx]) if own else factor * baseline + floor,
        ratio=ratio,
        worst_index=idx,
        expected=None if idx is None else float(r[idx]),
        actual=None if idx is None else float(a[idx]),
        nan_count=nan_count,
        sentinel_misses=misses,
        baseline=worst_baseline,
        term_err=float(terms[idx]) if own else 0.0,
        allowances={k: float(v[idx]) for k, v in extra.items()} if own else {},
    )


def _bounds(factor: float, baseline: float, terms: np.ndarray, floor: float) -> np.ndarray:
    """Each element's bound: factor x max(the baselines' worst error, u x its sum of |terms|)
    + floor."""
    return factor * np.maximum(baseline, terms) + floor


def element_bounds(report: Report, term_sums: ArrayLike | None = None) -> np.ndarray:
    """The bound judge held each element of report's output to, from the report and the same
    term_sums (None: none): what an element's error is measured against, for the maps of the
    demo page (report.bound is the worst element's)."""
    terms = 0.0 if term_sums is None else U32 * np.asarray(term_sums, dtype=np.float64)
    return np.asarray(_bounds(report.factor, report.baseline_err, terms, report.floor))
    # (allowances are not here: the demo page runs float32 built-ins, which have none)
