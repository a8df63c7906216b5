"""A float32 FlashAttention-2 that accumulates one term at a time: the judge's second baseline.

FlashAttention's rule measures a kernel's error against the error of an honest float32
computation of the same math. The first baseline (reference.py with dtype=float32) sums
through BLAS, which is blocked and pairwise-like: over a few hundred terms or more it is
4-10x more accurate than a loop that adds one term at a time, and such a loop is exactly
what a correct GPU kernel runs (each invocation owns an output element and walks the
reduction). This module is that loop, written once for every reduction of the algorithm:

  forward   s = (scale q) . k (over D); l = sum_j exp(s - m); O = sum_j exp(s - m) v / l;
            lse = m + log(l)                                      (over keys)
  backward  P = exp(s - lse); dP = dO . v; Delta = dO . O (over D, last to first);
            dS = P (M dP - Delta) scale; dV = sum P M dO; dK = sum dS q (over the
            query heads sharing a KV head, then rows); dQ = sum dS k (over keys)

Every product and every addition is rounded to float32 (no FMA, which is more accurate),
and exp and log are evaluated the way GPUs evaluate them, through exp2 and log2 with the
argument scaled by a float32 constant (the product's rounding gives exp a relative error
of about |x| u; WGSL allows 3 + 2|x| ulp). Shapes and conventions as in reference.py:
q, d_out [B, Sq, H, D]; k, v [B, Sk, Hkv, D]; mask broadcasting to [B, H, Sq, Sk].

The loops cost B*H*Sq*Sk*D elementwise float32 operations per GEMM (no BLAS): about a
second per 10^9 on one core. Host-only module; nothing that runs in Pyodide imports it.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ...dtypes import Arithmetic
from .blocks import Block, KeySums, Pairs, Shape, pipelined, with_keys
from .reference import EMPTY_LSE, Setting, outputs_like, put_keys, put_rows

F32 = np.float32
LOG2E = F32(np.log2(np.e))
LN2 = F32(np.log(2.0))
F32_ARITH = Arithmetic()


def exp32(x: NDArray[np.float32]) -> NDArray[np.float32]:
    """exp as GPUs evaluate it: exp2(float32(x * log2(e)))."""
    with np.errstate(over="ignore"):
        return np.exp2((x * LOG2E).astype(F32)).astype(F32)


def log32(x: NDArray[np.float32]) -> NDArray[np.float32]:
    """log as GPUs evaluate it: float32(log2(x) * ln(2))."""
    return (np.log2(x).astype(F32) * LN2).astype(F32)


# seq_matmul works in blocks of about this many output floats (a block stays in cache over
# the K steps), spread over the cores: NumPy releases the GIL inside each step.
_BLOCK_FLOATS = 1 << 16
_CORES = os.cpu_count() or 1
_POOL = ThreadPoolExecutor(max_workers=_CORES)


def to_f16(x: ArrayLike) -> NDArray[np.float32]:
    """x rounded to the nearest f16 (ties to even; past its range: inf), kept as float32."""
    with np.errstate(over="ignore"):
        return np.asarray(x, F32).astype(np.float16).astype(F32)


class Running:
    """Sums in progress, [..., M, N]: the float32 totals and, in an arithmetic with f16
    sums in chunks, each element's open f16 chunk; `count` terms have gone in. seq_matmul
    adds to one, so a sum over many calls has the order and the chunks of one call."""

    def __init__(self, shape: tuple[int, ...], arith: Arithmetic = F32_ARITH) -> None:
        self.total = np.zeros(shape, F32)
        self.chunk = arith.chunk if arith.accumulate == "f16" else -1  # 0: one chunk of all
        self.part = np.zeros(shape, np.float16) if self.chunk >= 0 else None
        self.count = 0

    def result(self) -> NDArray[np.float32]:
        """The totals, with the open chunk added (as a kernel adds its last, short one)."""
        if self.part is not None and (self.chunk == 0 or self.count % self.chunk):
            self.total += self.part
            self.part[...] = 0
            self.count = 0
        return self.total


def seq_matmul(
    a: NDArray[np.float32],
    b: NDArray[np.float32],
    arith: Arithmetic = F32_ARITH,
    into: Running | None = None,
) -> NDArray[np.float32]:
    """a [..., M, K] @ b [..., K, N] in float32, adding the K terms one at a time in order.
    In another arithmetic (dtypes.Arithmetic): f16 products round the operands and each
    product to f16; f16 sums add the terms in f16, `chunk` at a time (0: all), each chunk
    then added to a float32 total. into: a Running sum of the output's shape to go on
    adding to (its totals are returned, its last chunk left open); None: a fresh one."""
    f16_products = arith.products == "f16"
    if f16_products:
        a, b = to_f16(a), to_f16(b)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    (m, k), n = a.shape[-2:], b.shape[-1]
    run = Running((*batch, m, n), arith) if into is None else into
    total = run.total.reshape(-1, m, n)
    part = None if run.part is None else run.part.reshape(-1, m, n)
    # Each step is an outer product: the longer side innermost makes fewer, longer vector
    # operations (out^T = b^T a^T adds the same products in the same order).
    flip = n < m
    if flip:
        a, b, m, n = np.swapaxes(b, -1, -2), np.swapaxes(a, -1, -2), n, m
        total = np.ascontiguousarray(total.swapaxes(1, 2))
        part = None if part is None else np.ascontiguousarray(part.swapaxes(1, 2))
    # [nb, K, M] and [nb, K, N], contiguous, so step t reads one row of each.
    at = np.ascontiguousarray(np.broadcast_to(a, (*batch, m, k)).reshape(-1, m, k).swapaxes(1, 2))
    bt = np.ascontiguousarray(np.broadcast_to(b, (*batch, k, n)).reshape(-1, k, n))
    chunk, t0 = run.chunk, run.count
    # Blocks of about _BLOCK_FLOATS outputs: rows of one product, or whole products of a
    # batch of small ones (65535 products of 1 x 1 are one block, not 65535).
    rows = max(1, _BLOCK_FLOATS // max(1, n))
    per = max(1, _BLOCK_FLOATS // max(1, m * n)) if rows >= m else 1

    def block(i: int, m0: int) -> None:
        at_, bt_ = at[i : i + per, :, m0 : m0 + rows, None], bt[i : i + per, :, None]
        acc = total[i : i + per, m0 : m0 + rows]
        tmp = np.empty_like(acc)
        open_ = None if part is None else part[i : i + per, m0 : m0 + rows]
        if open_ is None and not f16_products and acc.size <= _SMALL_OUTPUT:
            _accumulate(at_, bt_, acc)
            return
        for t in range(k):
            np.multiply(at_[:, t], bt_[:, t], out=tmp)
            if f16_products:  # exact in float32 (11-bit operands), then rounded
                tmp[...] = tmp.astype(np.float16)
            if open_ is None:
                acc += tmp
                continue
            with np.errstate(over="ignore"):
                open_ += tmp.astype(np.float16)
            if chunk and (t0 + t + 1) % chunk == 0:
                acc += open_
                open_[...] = 0

    work = [(i, m0) for i in range(0, total.shape[0], per) for m0 in range(0, m, rows)]
    if len(work) == 1:  # one block: handing it to a thread would cost more than it does
        block(*work[0])
    for job in [_POOL.submit(block, *w) for w in work] if len(work) > 1 else []:
        job.result()
    if flip:
        run.total.reshape(-1, n, m)[...] = total.swapaxes(1, 2)
        if part is not None:
            run.part.reshape(-1, n, m)[...] = part.swapaxes(1, 2)
    run.count += k
    return run.result() if into is None else run.total


# Outputs few enough that a step's NumPy calls cost more than its arithmetic: their terms
# are made many steps at a time and added by np.add.accumulate, which adds left to right.
_SMALL_OUTPUT = 4096
_STEPS_AT_ONCE = 1 << 18  # terms x outputs made at once


def _accumulate(at: NDArray[np.float32], bt: NDArray[np.float32], acc: NDArray[np.float32]) -> None:
    """acc += at[:, t] * bt[:, t] for t in order, each product rounded to float32 and each
    sum too: [B, K, M, 1] x [B, K, 1, N] into acc [B, M, N], many terms per NumPy call."""
    k = at.shape[1]
    step = max(1, _STEPS_AT_ONCE // max(1, acc.size))
    terms = np.empty((step + 1, *acc.shape), np.float32)
    for t0 in range(0, k, step):
        n = min(step, k - t0)
        terms[0] = acc
        np.multiply(
            np.moveaxis(at[:, t0 : t0 + n], 1, 0),
            np.moveaxis(bt[:, t0 : t0 + n], 1, 0),
            out=terms[1 : n + 1],
        )
        np.add.accumulate(terms[: n + 1], axis=0, out=terms[: n + 1])
        acc[...] = terms[n]


def seq_rowsum(
    x: NDArray[np.float32], *, reverse: bool = False, arith: Arithmetic = F32_ARITH
) -> NDArray[np.float32]:
    """x [..., K] summed over K one term at a time (last to first if reverse), in float32
    (or as seq_matmul sums in `arith`, the terms rounded to f16 where its products are):
    [..., 1]."""
    terms = np.ascontiguousarray(np.moveaxis(x, -1, 0))  # term t is one contiguous slice
    if arith.products == "f16":
        terms = to_f16(terms)
    out = np.zeros(x.shape[:-1], F32)
    chunk = (arith.chunk or len(terms)) if arith.accumulate == "f16" else 0
    if not chunk and out.size <= _SMALL_OUTPUT:  # few sums: many terms per NumPy call
        ordered = terms[::-1] if reverse else terms
        step = max(1, _STEPS_AT_ONCE // max(1, out.size))
        for t0 in range(0, len(ordered), step):
            run = np.concatenate([out[None], ordered[t0 : t0 + step]])
            out = np.add.accumulate(run, axis=0)[-1]
        return out[..., None]
    part = np.zeros(out.shape, np.float16) if chunk else None
    order = list(reversed(range(len(terms))) if reverse else range(len(terms)))
    for n, t in enumerate(order):
        if part is None:
            out += terms[t]
            continue
        with np.errstate(over="ignore"):
            part += terms[t].astype(np.float16)
        if (n + 1) % chunk == 0 or n == len(order) - 1:
            out += part
            part[...] = 0
    return out[..., None]


def _same(x: NDArray[np.float32]) -> NDArray[np.float32]:
    return x


def attention_seq32(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    d_out: ArrayLike,
    *,
    arith: Arithmetic = F32_ARITH,
    stored: frozenset[str] = frozenset(),
    **kw: Any,
) -> dict[str, NDArray[np.float32]]:
    """Forward and backward in float32 with sequential sums: {o, lse, dq, dk, dv}.

    o, dq: [B, Sq, H, D]; lse: [B, H, Sq]; dk, dv: [B, Sk, Hkv, D]. Keywords as in
    reference.attention_ref (not dtype). Rows with no visible key: o = 0, lse = EMPTY_LSE,
    no gradient. arith: the arithmetic of a kernel that declares another
    (dtypes.Arithmetic: f16 products, f16 sums, f16 P and dS). stored: the outputs it
    stores as f16, of which O and the LSE are what its backward reads back (rounded here,
    as there); the results themselves are returned unrounded (the judge allows for an
    output's own rounding). Computed one block of query rows at a time (blocks.py), with
    every sum in the order it would have over the whole problem.
    """
    shape = Shape.of(q, k, v)
    st = Setting(shape, **kw)
    scale32 = st.scale_in(F32)
    out = outputs_like(shape, F32, True)
    half = to_f16 if arith.intermediates == "f16" else _same  # P and dS as fed to products

    def rows(item: tuple[Block, NDArray[np.float32], NDArray[np.float32]]) -> tuple:
        """What is row-local: O, the LSE, dQ; the weights and dS that dK, dV sum."""
        blk, ks, vs = item
        qb, dob = blk.queries(q, F32), blk.queries(d_out, F32)
        # Scores, Q scaled first (as the forward and dQ kernels do).
        s, cap_grad, valid = st.scored(
            blk, seq_matmul(qb * scale32, ks.swapaxes(-1, -2), arith), F32
        )
        present = valid.any(-1, keepdims=True)
        top = np.max(s, -1, where=valid, initial=-np.inf, keepdims=True)
        m = np.where(present, top, F32(0))
        e = np.where(valid, exp32(np.where(valid, s - m, F32(0))), F32(0))
        mult = st.dropout(blk, F32)
        keep = _same if mult is None else mult.__mul__
        safe_l = np.where(present, seq_rowsum(e), F32(1))
        o = np.where(present, seq_matmul(half(keep(e)), vs, arith) / safe_l, F32(0))
        lse = np.where(present, m + log32(safe_l), F32(EMPTY_LSE))
        put_rows(out["o"], blk, o)
        out["lse"][blk.pairs.batch, blk.head, blk.q0 : blk.q1] = lse[..., 0]

        # Backward from the forward's LSE and O as stored, as FlashAttention-2 does.
        o_read = to_f16(o) if "o" in stored else o
        lse_read = to_f16(lse) if "lse" in stored else lse  # an empty row's 3e38: inf
        p = np.where(valid, exp32(np.where(valid, s - lse_read, F32(0))), F32(0))
        dp = seq_matmul(dob, vs.swapaxes(-1, -2), arith)
        # dS = P (dP - Delta) cancels where one key dominates a row (P near 1, so O is near
        # V_j and Delta near dP_ij); then dS is the rounding of two dot products summed in
        # different orders, as in any kernel (Delta comes from O in a pass of its own).
        # Summed in the same order, they would cancel exactly and the baseline would claim
        # a precision no kernel has: Delta is summed last to first.
        delta = seq_rowsum(dob * o_read, reverse=True, arith=arith)
        ds = p * (keep(dp) - delta)
        if cap_grad is not None:
            ds = ds * cap_grad  # through the softcap, to the uncapped score
        ds = half(ds * scale32)
        put_rows(out["dq"], blk, seq_matmul(ds, ks, arith))
        return blk, {"dv": (half(keep(p)), dob), "dk": (ds, qb)}

    def start(pairs: Pairs) -> dict[str, Running]:
        s = shape
        return {n: Running((pairs.p1 - pairs.p0, s.sk, s.d), arith) for n in ("dk", "dv")}

    def done(pairs: Pairs, sums: dict[str, Running]) -> None:
        for n, running in sums.items():
            put_keys(out[n], pairs, running.result())

    key_sums = KeySums(start, done)

    def add(res: tuple) -> None:
        # A key's gradient goes on summing, query head by head and row by row.
        blk, parts = res
        sums = key_sums.at(blk.pairs)
        for n, (w, x) in parts.items():
            seq_matmul(w.swapaxes(-1, -2), x, arith, into=sums[n])

    pipelined(with_keys(shape, k, v, F32), rows, add)
    key_sums.close()
    return out
