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


class BaselineOverflow(ValueError):
    """An honest float32 computation overflowed where the float64 reference did not: the
    inputs are outside float32's range for attention (scores past 3.4e38, say), so no
    float32 kernel can be judged on them."""


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
    a, r = np.asarray(actual), np.asarray(ref64)
    base = {b: np.asarray(x) for b, x in baselines.items()}
    for b, x in base.items():
        if x.shape != r.shape:  # a harness bug, not a kernel failure
            raise ValueError(f"{name}: baseline {b} shape {x.shape} != ref64 shape {r.shape}")
    if a.shape != r.shape:
        nan = float("nan")
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
    terms = None if term_sums is None else np.asarray(term_sums)
    if terms is not None and terms.shape != r.shape:
        raise ValueError(f"{name}: term_sums {terms.shape} not finite where ref64 {r.shape} is")
    extra = {k: np.broadcast_to(np.asarray(v), r.shape) for k, v in (allowances or {}).items()}

    # Two passes over chunks of the flattened arrays, so that the float64 temporaries are a
    # chunk's, not the output's: the baselines' worst errors first (the bound needs them),
    # then each element's error over its bound.
    flat = {"a": a, "r": r, **{f"b:{b}": x for b, x in base.items()}}
    flat |= {} if terms is None else {"t": terms}
    flat |= {f"x:{k}": v for k, v in extra.items()}
    flat = {k: v.reshape(-1) for k, v in flat.items()}
    n = r.size
    chunks = [slice(i, min(n, i + COMPARE_CHUNK)) for i in range(0, n, COMPARE_CHUNK)] or [
        slice(0, 0)
    ]
    errors = dict.fromkeys(base, 0.0)
    nan_count = misses = 0
    first_bad = None
    rel = 0.0
    for c in chunks:
        ck = _Chunk(name, {k: v[c] for k, v in flat.items()}, base)
        nan_count += ck.nan_count
        misses += ck.misses
        if first_bad is None and ck.bad.any():
            first_bad = c.start + int(np.argmax(ck.bad))
        for b, e in ck.baseline_errors().items():
            errors[b] = max(errors[b], e)
        rel = max(rel, ck.rel_err())
    worst_baseline = max(errors, key=errors.__getitem__)
    baseline = errors[worst_baseline]

    max_abs, ratio, best = 0.0, 0.0, None  # best: (flat index, its bound) of the largest ratio
    for c in chunks:
        ck = _Chunk(name, {k: v[c] for k, v in flat.items()}, base)
        bounds = _bounds(factor, baseline, ck.term_err(), floor)
        for k in extra:
            bounds = bounds + np.where(ck.compared, ck.vals[f"x:{k}"].astype(np.float64), 0.0)
        err = ck.err()
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(err > 0, err / bounds, 0.0)  # a 0 bound is met by 0 error only
        if ratios.size:
            i = int(np.argmax(ratios))
            if best is None or ratios[i] > ratio:
                ratio, best = float(ratios[i]), c.start + i
            max_abs = max(max_abs, float(err.max()))

    if first_bad is not None:  # report the first failing element, CTS style
        worst_flat, max_abs, ratio = first_bad, float("inf"), float("inf")
    else:
        worst_flat = best
    idx = None if worst_flat is None else np.unravel_index(worst_flat, r.shape)
    idx = None if idx is None else tuple(int(i) for i in idx)
    # The worst element's own bound; where no element errs, none mattered: the baselines'.
    own = idx is not None and max_abs > 0
    t_err = U32 * float(flat["t"][worst_flat]) if own and terms is not None else 0.0
    at = {k: float(flat[f"x:{k}"][worst_flat]) for k in extra} if own else {}
    if own:
        there = float(r[idx])
        compared_there = np.isfinite(there) and not (name == "lse" and there >= LSE_SENTINEL_MIN)
        added = sum(at.values()) if compared_there else 0.0
        bound = float(np.maximum(baseline, t_err)) * factor + floor + added
    else:
        bound = factor * baseline + floor
    return Report(
        name=name,
        passed=first_bad is None and ratio <= 1.0,
        max_abs_err=max_abs,
        max_rel_err=rel,
        baseline_err=baseline,
        factor=factor,
        floor=floor,
        bound=float(bound),
        ratio=ratio,
        worst_index=idx,
        expected=None if idx is None else float(r[idx]),
        actual=None if idx is None else float(a[idx]),
        nan_count=nan_count,
        sentinel_misses=misses,
        baseline=worst_baseline,
        term_err=t_err,
        allowances=at,
    )


# Elements judged at a time: the comparison's float64 temporaries are this many each.
COMPARE_CHUNK = 1 << 18


class _Chunk:
    """One chunk of an output's comparison: which elements are compared, which are bad
    (non-finite where the reference is finite, or not the reference's inf / NaN, or an
    empty LSE row missed), and the errors."""

    def __init__(self, name: str, vals: dict[str, np.ndarray], base: Mapping[str, object]):
        self.vals, self.base = vals, base
        a = vals["a"].astype(np.float64)
        r = vals["r"].astype(np.float64)
        self.a, self.r = a, r
        compared = np.isfinite(r)
        # Where ref is inf / NaN, actual must be the same thing.
        bad = ~compared & ~((a == r) | (np.isnan(a) & np.isnan(r)))
        missed = np.zeros(r.shape, dtype=bool)
        if name == "lse":
            empty = r >= LSE_SENTINEL_MIN
            missed = empty & ~(a >= LSE_SENTINEL_MIN)  # NaN misses too
            for b in base:  # else that baseline's error would be ~3e38
                if ((vals[f"b:{b}"] >= LSE_SENTINEL_MIN) != empty).any():
                    raise ValueError(
                        f"{name}: baseline {b} and ref64 disagree on which rows are empty"
                    )
            compared &= ~empty
            bad &= ~empty
        bad |= compared & ~np.isfinite(a)
        self.nan_count = int(np.count_nonzero(bad))
        self.misses = int(np.count_nonzero(missed))
        self.bad = bad | missed
        self.compared = compared
        self.name = name
        if "t" in vals and not np.isfinite(vals["t"].astype(np.float64)[compared]).all():
            raise ValueError(f"{name}: term_sums not finite where ref64 is")

    def baseline_errors(self) -> dict[str, float]:
        out = {}
        with np.errstate(invalid="ignore", over="ignore"):
            for b in self.base:
                x = self.vals[f"b:{b}"].astype(np.float64)
                e = np.where(self.compared, np.abs(x - self.r), 0.0)
                if not np.isfinite(e).all():
                    raise BaselineOverflow(
                        f"{self.name}: baseline {b} is not finite where ref64 is (the inputs "
                        "are past what float32 can compute this with)"
                    )
                out[b] = float(e.max(initial=0.0))
        return out

    def err(self) -> np.ndarray:
        with np.errstate(invalid="ignore", over="ignore"):
            return np.where(self.compared & ~self.bad, np.abs(self.a - self.r), 0.0)

    def rel_err(self) -> float:
        e = self.err()
        scale = np.where(self.compared, np.maximum(np.abs(self.r), _TINY), 1.0)
        return float((e / scale).max(initial=0.0))

    def term_err(self) -> np.ndarray | float:
        if "t" not in self.vals:
            return 0.0
        return U32 * self.vals["t"].astype(np.float64)


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
