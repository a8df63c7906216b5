"""Query blocks: how the references walk attention without an Sq x Sk matrix.

Both references (reference.py in float64 and float32, sequential_ref.py) compute one block
of query rows at a time, each row against every key (a softmax needs its whole row), so
what a block holds is pairs x rows x Sk and every per-row result is exact; dK and dV are
summed over the blocks. Blocks come (batch, KV head) pairs outermost, then the query heads
that share a KV head, then rows: the order in which a key's gradient walks its query
heads one after another, row by row (the sequential baseline's order).

A block's inputs (Block.take) are gathered from the canonical layouts:
q, d_out, o [B, Sq, H, D]; k, v [B, Sk, Hkv, D]; mask broadcasting to [B, H, Sq, Sk];
ALiBi slopes [H] or [B, H]. Host-only module; nothing that runs in Pyodide imports it.
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from .dropout import block_multiplier

# Bytes of one block's score matrix (pairs x rows x Sk). Small enough that the dozen arrays
# of that size each block in flight keeps stay far below the whole problem's Sq x Sk; large
# enough that a sequential sum's step (rows x head_dim) outweighs NumPy's per-call cost.
BLOCK_BYTES = 8 << 20
# Threads the references use (`--judge-workers`); None: one per core.
WORKERS: int | None = None


def worker_count() -> int:
    """The threads the references use: WORKERS, else one per core."""
    return WORKERS or os.cpu_count() or 1


@dataclass(frozen=True)
class Shape:
    """The problem's sizes: batch, query and key rows, query and KV heads, head_dim."""

    b: int
    sq: int
    sk: int
    h: int
    hkv: int
    d: int

    @classmethod
    def of(cls, q: ArrayLike, k: ArrayLike, v: ArrayLike) -> Shape:
        qs, ks = np.shape(q), np.shape(k)
        if len(qs) != 4 or len(ks) != 4:
            raise ValueError(f"shapes q {qs}, k {ks}: want [B, S, H, D]")
        b, sq, h, d = qs
        sk, hkv = ks[1], ks[2]
        if ks[0] != b or ks[3] != d or hkv == 0 or h % hkv or np.shape(v) != ks:
            raise ValueError(f"shapes q {qs}, k {ks}, v {np.shape(v)} do not match")
        return cls(b, sq, sk, h, hkv, d)

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.h // self.hkv


@dataclass(frozen=True)
class Pairs:
    """A run of (batch, KV head) pairs, p = b * Hkv + kvh for p in [p0, p1)."""

    p0: int
    p1: int
    shape: Shape

    @cached_property
    def batch(self) -> NDArray[np.intp]:
        return np.arange(self.p0, self.p1) // self.shape.hkv

    @cached_property
    def kv_head(self) -> NDArray[np.intp]:
        return np.arange(self.p0, self.p1) % self.shape.hkv

    def keys(self, x: ArrayLike, dtype: DTypeLike) -> NDArray[np.floating]:
        """k or v of these pairs: [pairs, Sk, D] in dtype."""
        return np.asarray(x)[self.batch, :, self.kv_head].astype(dtype)


@dataclass(frozen=True)
class Block:
    """Query rows [q0, q1) of query head r of each KV head's group, for a run of pairs."""

    pairs: Pairs
    r: int
    q0: int
    q1: int

    @cached_property
    def head(self) -> NDArray[np.intp]:
        """Each pair's query head: [pairs]."""
        return self.pairs.kv_head * self.pairs.shape.group + self.r

    @property
    def rows(self) -> int:
        return self.q1 - self.q0

    def queries(self, x: ArrayLike, dtype: DTypeLike) -> NDArray[np.floating]:
        """q, d_out or o at these rows and heads: [pairs, rows, D] in dtype."""
        return np.asarray(x)[self.pairs.batch, self.q0 : self.q1, self.head].astype(dtype)

    def mask(self, mask: ArrayLike | None, dtype: DTypeLike) -> NDArray[np.floating] | None:
        """The additive mask at these rows: [pairs, rows, Sk] in dtype (None: none)."""
        if mask is None:
            return None
        m = np.asarray(mask, dtype=np.float32)
        if m.ndim > 4:
            raise ValueError(f"mask has {m.ndim} dims, at most 4 allowed")
        s = self.pairs.shape
        full = np.broadcast_to(m, (s.b, s.h, s.sq, s.sk))
        rows = np.arange(self.q0, self.q1)
        b, h = self.pairs.batch[:, None], self.head[:, None]
        return full[b, h, rows[None, :]].astype(dtype)

    def slopes(self, alibi_slopes: ArrayLike) -> NDArray[np.float32]:
        """Each pair's ALiBi slope at this head: [pairs] float32 (the kernel's values)."""
        s = self.pairs.shape
        a = np.asarray(alibi_slopes, dtype=np.float32)
        if a.ndim not in (1, 2) or a.shape[-1] != s.h or (a.ndim == 2 and a.shape[0] != s.b):
            raise ValueError(f"alibi slopes have shape {a.shape}: want [H] or [{s.b}, H]")
        return a[self.head] if a.ndim == 1 else a[self.pairs.batch, self.head]

    def dropout(
        self, p: float, seed: int, dtype: DTypeLike, batch0: int = 0
    ) -> NDArray[np.floating] | None:
        """The dropout multiplier at these rows: [pairs, rows, Sk] (None without dropout)."""
        if np.float32(p) <= 0:
            return None
        s = self.pairs.shape
        bh = (batch0 + self.pairs.batch) * s.h + self.head
        return block_multiplier(p, seed, bh, np.arange(self.q0, self.q1), s.sk, dtype)


def walk(shape: Shape, budget: int) -> Iterator[Block]:
    """The blocks of a problem, in order: pairs, then query heads, then rows, each block at
    most `budget` scores (a row of more keys is a block of its own)."""
    s = shape
    rows = max(1, min(s.sq, budget // max(1, s.sk)))
    n_pairs = s.b * s.hkv
    per = max(1, min(n_pairs, budget // max(1, rows * s.sk)))
    for p0 in range(0, n_pairs, per):
        pairs = Pairs(p0, min(n_pairs, p0 + per), s)
        for r in range(s.group):
            for q0 in range(0, s.sq, rows):
                yield Block(pairs, r, q0, min(s.sq, q0 + rows))


def pipelined[T](
    items: Iterable[T], first: Callable[[T], Any], then: Callable[[Any], None]
) -> None:
    """then(first(item)) for each item, `then` in the items' order on this thread, `first`
    on up to WORKERS threads ahead of it (NumPy's arithmetic and BLAS release the GIL).
    The references put what is row-local in `first` and their sums over rows, whose order
    is part of the result, in `then`."""
    workers = worker_count()
    items = iter(items)
    head = list(itertools.islice(items, 2))
    if workers <= 1 or len(head) < 2:  # one block: threads would cost more than they save
        for item in itertools.chain(head, items):
            then(first(item))
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: deque = deque()
        for item in itertools.chain(head, items):
            pending.append(pool.submit(first, item))
            if len(pending) > workers:
                then(pending.popleft().result())
        while pending:
            then(pending.popleft().result())


def with_keys(
    shape: Shape, k: ArrayLike, v: ArrayLike, dtype: DTypeLike
) -> Iterator[tuple[Block, NDArray[np.floating], NDArray[np.floating]]]:
    """walk's blocks, each with its pairs' K and V [pairs, Sk, D] in dtype (gathered once
    per run of pairs)."""
    pairs, ks, vs = None, None, None
    for blk in walk(shape, BLOCK_BYTES // np.dtype(dtype).itemsize):
        if blk.pairs != pairs:
            pairs, ks, vs = blk.pairs, blk.pairs.keys(k, dtype), blk.pairs.keys(v, dtype)
        yield blk, ks, vs


class KeySums:
    """Sums over query rows (dK, dV, ...) for one run of pairs at a time: `start(pairs)`
    makes them at a run's first block, `done(pairs, sums)` takes them when the next run
    begins or at close()."""

    def __init__(
        self,
        start: Callable[[Pairs], dict[str, Any]],
        done: Callable[[Pairs, dict[str, Any]], None],
    ) -> None:
        self._start, self._done = start, done
        self._pairs: Pairs | None = None
        self._sums: dict[str, Any] = {}

    def at(self, pairs: Pairs) -> dict[str, Any]:
        if pairs != self._pairs:
            self.close()
            self._pairs, self._sums = pairs, self._start(pairs)
        return self._sums

    def close(self) -> None:
        if self._pairs is not None:
            self._done(self._pairs, self._sums)
            self._pairs = None
