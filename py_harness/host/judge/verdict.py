"""The verdict on one run: O, LSE, dQ, dK and dV judged against float64 NumPy.

Takes arrays, not sessions: pytest, `check`, the demo server and the benchmark's --verify
all judge through judge_outputs, so they judge alike. The rule is compare.judge's, with two
honest float32 baselines (docs/verdict.md): the plain formula through BLAS ("blas32",
reference.py with dtype=float32, K scaled) and FlashAttention-2 with sequential sums
("seq32", sequential_ref.py, Q scaled), and each element's sum of |terms| for the sums
that cancel (reference.attention_term_sums), all computed a block of query rows at a time
(blocks.py).

Host-only module; nothing that runs in Pyodide imports it.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...config import OUTPUTS, AttentionConfig
from ...dtypes import Arithmetic
from . import compare, reference
from .sequential_ref import attention_seq32, to_f16


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


@dataclass(frozen=True)
class Precision:
    """What a kernel stores and computes in (Variant.dtypes, Variant.arithmetic), in the
    judge's terms: the canonical tensors it stores as f16 (q, k, v, d_out, mask; o, lse,
    dq, dk, dv) and its arithmetic. The default is float32 throughout."""

    f16: frozenset[str] = frozenset()
    arithmetic: Arithmetic = Arithmetic()

    @property
    def is_f32(self) -> bool:
        return not self.f16 and self.arithmetic.is_f32

    def round_inputs(self, x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The inputs as the kernel reads them: its f16 ones rounded (float32 arrays), so
        that the reference and the kernel see the same values."""
        return {n: to_f16(a) if n in self.f16 else a for n, a in x.items()}

    def baseline_name(self) -> str:
        return "seq32" if self.arithmetic.is_f32 else f"seq({self.arithmetic.describe()})"


F32_PRECISION = Precision()
# An f16 output's rounding, allowed on top of the bound: one f16 ulp at the kernel's own
# value (WGSL lets a conversion to a narrower type give either neighbour).
F16_ROUNDING = "f16 rounding of the output"


def f16_ulp(x: np.ndarray) -> np.ndarray:
    """The spacing of f16 values at |x| (2^-24 below 2^-14, the subnormals)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        ax = np.abs(np.asarray(x, np.float64))
        e = np.floor(np.log2(np.maximum(ax, 2.0**-14)))
        return np.where(np.isfinite(ax), 2.0 ** (e - 10), 0.0)


# What _per_sequence packs, by where a sequence's rows go: its query rows, its key rows.
_QUERY_ROWS = ("o", "dq", "t_o", "t_dq")
_KEY_ROWS = ("dk", "dv", "t_dk", "t_dv")


def _per_sequence(
    cfg: AttentionConfig,
    x: dict[str, np.ndarray],
    run: Callable[[dict[str, Any], dict[str, np.ndarray]], Outputs],
    dtype: type,
    names: tuple[str, ...] = OUTPUTS,
) -> Outputs:
    """run(kwargs, x) on the whole batch; for a variable-length batch, on each run of
    consecutive sequences of the same lengths as a dense batch (their own causal offset,
    ALiBi slopes and places in the dropout hash), with the results packed back: o, dq
    [total_q, H, D], lse [H, total_q], dk, dv [total_k, Hkv, D] (and the term sums t_o,
    t_dq, t_dk, t_dv where run gives them). A sequence without queries or keys has nothing
    to compute: its rows keep O = 0, LSE = EMPTY_LSE and zero gradients."""
    if not cfg.varlen:
        return run(_kwargs(cfg, x), x)
    shapes = cfg.shapes()
    out = {n: np.zeros(shapes[n.removeprefix("t_")], dtype) for n in names}
    out["lse"][:] = reference.EMPTY_LSE
    slopes = x.get("alibi_slopes")
    for b, n_seq, (q0, len_q, k0, len_k) in cfg.sequence_runs():
        rows, keys = slice(q0, q0 + n_seq * len_q), slice(k0, k0 + n_seq * len_k)
        xb = {n: _stacked(x[n][rows], n_seq) for n in ("q", "d_out")}
        xb |= {n: _stacked(x[n][keys], n_seq) for n in ("k", "v")}
        kwb = _kwargs(cfg.dense_sequence(len_q, len_k), x) | {
            # [H] slopes serve every sequence; [B, H] ones a row each
            "alibi_slopes": slopes if slopes is None or slopes.ndim == 1 else slopes[b : b + n_seq],
            "dropout_batch0": b,
        }
        for n, a in run(kwb, xb).items():
            if n in _QUERY_ROWS:
                out[n][rows] = a.reshape(-1, *a.shape[2:])
            elif n in _KEY_ROWS:
                out[n][keys] = a.reshape(-1, *a.shape[2:])
            else:  # the LSE, [sequences, H, len_q]
                out[n][:, rows] = a.transpose(1, 0, 2).reshape(a.shape[1], -1)
    return out


def _stacked(packed: np.ndarray, n_seq: int) -> np.ndarray:
    """[n_seq * S, H, D] rows of consecutive sequences -> [n_seq, S, H, D]."""
    return packed.reshape(n_seq, -1, *packed.shape[1:])


def references(
    cfg: AttentionConfig, x: dict[str, np.ndarray], dtype: type, *, terms: bool = False
) -> dict[str, np.ndarray]:
    """The plain formula (reference.py) in dtype: {o, lse, dq, dk, dv}, and with terms
    (float64) each output's sum of |terms| as {t_o, t_dq, t_dk, t_dv}. x: q, k, v, d_out
    (and mask, alibi_slopes) as float32 arrays in the kernels' layouts."""

    def run(kw: dict[str, Any], xs: dict[str, np.ndarray]) -> Outputs:
        return reference.attention_blocks(
            xs["q"], xs["k"], xs["v"], xs["d_out"], terms=terms, dtype=dtype, **kw
        )

    names = OUTPUTS + (("t_o", "t_dq", "t_dk", "t_dv") if terms else ())
    return _per_sequence(cfg, x, run, dtype, names)


def sequential(
    cfg: AttentionConfig, x: dict[str, np.ndarray], precision: Precision = F32_PRECISION
) -> Outputs:
    """FlashAttention-2 with sequential sums (sequential_ref.py) in the kernel's declared
    arithmetic, its backward reading O and the LSE as the kernel stores them."""
    extra = {"arith": precision.arithmetic, "stored": precision.f16 & {"o", "lse"}}

    def run(kw: dict[str, Any], xs: dict[str, np.ndarray]) -> Outputs:
        return attention_seq32(xs["q"], xs["k"], xs["v"], xs["d_out"], **kw, **extra)

    return _per_sequence(cfg, x, run, np.float32)


def baselines(
    cfg: AttentionConfig, x: dict[str, np.ndarray], precision: Precision = F32_PRECISION
) -> dict[str, dict[str, Any]]:
    """The honest results the rule measures a kernel against, by name: float32 through
    BLAS, and the sequential sums in the kernel's declared arithmetic (sequential)."""
    return {
        "blas32": references(cfg, x, np.float32),
        precision.baseline_name(): sequential(cfg, x, precision),
    }


def handed_allowance(base: dict[str, Outputs], ref64: Outputs, terms: Outputs) -> Outputs:
    """What a backward handed O and the LSE (a backward-only variant) may owe to them, per
    gradient element: {dq, dk, dv}. Its float32 scores do not make the handed LSE exactly
    (any forward's LSE may miss the exact one by the LSE rule's bound, eps = 2 x the
    baselines' LSE error + the floor), so each P = exp(s - lse) it computes may be off by
    a factor 1 +- eps, and each term of a gradient's sum with it: the sum by eps times its
    sum of |terms|. A forward-and-backward pair owes nothing here: its P come from its own
    LSE."""
    empty = ref64["lse"] >= compare.LSE_SENTINEL_MIN
    worst = max(
        float(np.abs(np.where(empty, 0.0, b["lse"] - ref64["lse"])).max(initial=0.0))
        for b in base.values()
    )
    eps = compare.FACTORS["lse"] * worst + compare.ATOL_FLOOR
    return {n: eps * terms[n].astype(np.float64) for n in ("dq", "dk", "dv")}


# (float64 reference, baselines by name, sums of |terms|)
Expected = tuple[Outputs, dict[str, Outputs], Outputs]


def expected(
    cfg: AttentionConfig, x: dict[str, np.ndarray], precision: Precision = F32_PRECISION
) -> Expected:
    """What a kernel's outputs are judged against, computed afresh."""
    ref64 = references(cfg, x, np.float64, terms=True)
    terms = {n: ref64.pop(f"t_{n}").astype(np.float32) for n in ("o", "dq", "dk", "dv")}
    terms["lse"] = np.zeros(cfg.shapes()["lse"], np.float32)  # the LSE has no such term
    return ref64, baselines(cfg, x, precision), terms


# A matrix case is judged on every runtime and variant that runs it, ten times in `make
# test`, against the same reference and baselines: judge_case reuses them (reuse=True),
# keyed by the configuration and a digest of the inputs, up to this many bytes of arrays,
# least recently used first out. The whole CPU matrix's draw 0 holds 356 MB.
REFERENCE_CACHE_BYTES = 512 << 20


class ReferenceCache:
    """(config, inputs) -> Expected, within a byte budget. Cached arrays are read-only, so no
    caller can change what the next one is judged against."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._entries: OrderedDict[tuple[AttentionConfig, str], tuple[Expected, int]] = (
            OrderedDict()
        )
        self._bytes = 0
        self._lock = threading.Lock()

    @staticmethod
    def key(
        cfg: AttentionConfig, x: dict[str, np.ndarray], precision: Precision = F32_PRECISION
    ) -> tuple[AttentionConfig, str]:
        h = hashlib.blake2b(digest_size=20)
        h.update(repr((sorted(precision.f16), precision.arithmetic)).encode())
        for name in sorted(x):
            a = np.ascontiguousarray(x[name])
            h.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
            h.update(a.data)
        return cfg, h.hexdigest()

    def get(
        self, cfg: AttentionConfig, x: dict[str, np.ndarray], precision: Precision = F32_PRECISION
    ) -> Expected:
        key = self.key(cfg, x, precision)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key][0]
        value = ref64, base, terms = expected(cfg, x, precision)
        arrays = [*ref64.values(), *(a for b in base.values() for a in b.values())]
        arrays += terms.values()
        size = sum(a.nbytes for a in arrays)
        if size <= self.budget:
            for a in arrays:
                a.flags.writeable = False
            with self._lock:
                self._entries[key] = (value, size)
                self._bytes += size
                while self._bytes > self.budget:
                    _, (_, freed) = self._entries.popitem(last=False)
                    self._bytes -= freed
        return value

    def __len__(self) -> int:
        return len(self._entries)


REFERENCE_CACHE = ReferenceCache(REFERENCE_CACHE_BYTES)


def judge_outputs(
    cfg: AttentionConfig,
    x: dict[str, np.ndarray],
    got: dict[str, np.ndarray],
    *,
    large_scores: bool = False,
    reuse: bool = False,
    bounds: dict[str, np.ndarray] | None = None,
    given: dict[str, np.ndarray] | None = None,
    precision: Precision = F32_PRECISION,
) -> tuple[list[compare.Report], dict[str, np.ndarray]]:
    """Judge each output in `got` (o must be there; the others where present); returns the
    reports and the float64 reference. large_scores: FlashAttention's overflow factors
    (Case.large_scores). reuse: take the reference and baselines from REFERENCE_CACHE
    (read-only arrays). bounds: a dict to fill with each judged output's bound per element
    (compare.element_bounds). given: the O and LSE a backward-only kernel was handed
    (float32): the gradients' bounds then grow by handed_allowance. precision: what the
    kernel stores and computes in (x holds its inputs as it read them: round_inputs); an
    output it stores as f16 may also be one f16 ulp off, on top of the bound."""
    if reuse:
        ref64, base, terms = REFERENCE_CACHE.get(cfg, x, precision)
    else:
        ref64, base, terms = expected(cfg, x, precision)
    handed = handed_allowance(base, ref64, terms) if given is not None else {}

    def allowances(n: str) -> dict[str, np.ndarray]:
        out = {"the handed LSE": handed[n]} if n in handed else {}
        if n in precision.f16:
            out[F16_ROUNDING] = f16_ulp(got[n])
        return out

    factors = compare.OVERFLOW_FACTORS if large_scores else compare.FACTORS
    reports = [
        compare.judge(
            n,
            got[n],
            ref64[n],
            {b: r[n] for b, r in base.items()},
            factors[n],
            compare.floor_at_scale(n, cfg.dropout_p),
            terms[n],
            allowances(n),
        )
        for n in OUTPUTS
        if n in got
    ]
    if bounds is not None:
        bounds.update({r.name: compare.element_bounds(r, terms[r.name]) for r in reports})
    return reports, ref64
