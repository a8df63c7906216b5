"""Host-side copies and scans of large tensors over threads, for the native backends.

A case at S = 4096 moves 64-128 MB each way between Python and the GPU's staging memory.
On the H200's host (16 cores), for 128 MB (`python benchmarks/case_overhead.py --copies`):
`bytes()` of a mapped range took 110-134 ms (its fresh 4 KiB pages fault one at a time),
copy_out 10-13 ms into new memory and 4.3-6.7 ms into memory it filled before
(_Destinations); the finite-input check as bytes operations (config.any_nonfinite) 62-63
ms, over threads here 4.0-5.8 ms; 16 threads instead of 8 changed neither. A case's two
reads, 128 MB, took 18.6-19.8 ms (medians) with copy_out filling new memory each time,
11.4-12.5 ms with it filling memory it filled before. Filling the upload's mapped range
with a case's 128 MB of inputs: 10-14 ms with wgpu-py's write_mapped (one thread, under the
GIL), 6-7 ms with copy_into. Each function takes all of a case's tensors at once: called
per tensor, a 16 MB one went to two threads and every call paid the threads' start and
finish (head_dim 64: the check of 64 MB 5-7 ms as four calls, 1.4-2.2 ms as one). NumPy
releases the GIL in each (docs/records/gpu.md).

CPython with NumPy only: the Pyodide wheel leaves host/ out (build_wheel.in_browser_files).
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...gpu.device import Bytes

THREADS = max(1, min(8, os.cpu_count() or 1))
# Below this, one thread: handing out the work costs more than it saves. Small enough that
# one tensor of a case (16 MB at S = 4096, H = 16, head_dim 64) spreads over every thread.
CHUNK_BYTES = 1 << 20
_pool: ThreadPoolExecutor | None = None


def _chunks(nbytes: int) -> list[tuple[int, int]]:
    """[start, end) byte ranges of at least CHUNK_BYTES, at most THREADS of them, on
    4096-byte (page and float) boundaries."""
    n = max(1, min(THREADS, nbytes // CHUNK_BYTES))
    step = max(1, -(-nbytes // (n * 4096))) * 4096
    return [(a, min(a + step, nbytes)) for a in range(0, nbytes, step)] or [(0, 0)]


Piece = tuple[int, int, int]  # (array index, start byte, end byte)


def _tasks(sizes: list[int]) -> list[list[Piece]]:
    """The bytes of several arrays taken end to end and cut as _chunks cuts one: per task,
    its pieces of each array. One call for all of a case's tensors keeps every thread busy
    where one call per tensor paid the threads' start and finish each time (on the H200's
    host the 16 MB tensors of head_dim 64 ran at 18 GB/s that way, 128 MB at once at 30)."""
    starts = list(itertools.accumulate(sizes, initial=0))
    tasks = []
    for a, b in _chunks(starts[-1]):
        pieces = []
        for i, size in enumerate(sizes):
            lo, hi = max(a, starts[i]), min(b, starts[i] + size)
            if lo < hi:
                pieces.append((i, lo - starts[i], hi - starts[i]))
        tasks.append(pieces)
    return tasks


def _map(fn, tasks: list[list[Piece]]) -> list:  # noqa: ANN001
    global _pool
    if len(tasks) == 1:
        return [fn(tasks[0])]
    if _pool is None:
        _pool = ThreadPoolExecutor(THREADS, thread_name_prefix="host-memory")
    return list(_pool.map(fn, tasks))


class _Destinations:
    """Host memory that copy_out fills, kept for the next copy of the same size once
    nothing holds what it handed out. Fresh memory is what made copies out of a mapping
    slow: its pages fault in one at a time on first touch (32 MB on this 2-core machine:
    38-44 ms into new memory over two threads, 3.4-5.7 ms into touched memory in one). A
    copy hands out a view object of its array; a weak reference to that view says when the
    last memoryview or array made from it is gone (each holds its exporter), and only then
    is the array filled again. At most MAX_BYTES are kept."""

    MAX_BYTES = 1 << 30

    def __init__(self) -> None:
        self._kept: list[tuple[np.ndarray, weakref.ref]] = []
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> np.ndarray:
        """An array of nbytes bytes that nothing else refers to: a kept one, else new."""
        with self._lock:
            for i, (arr, handed) in enumerate(self._kept):
                if arr.nbytes == nbytes and handed() is None:
                    del self._kept[i]
                    return arr
        return np.empty(nbytes, np.uint8)

    def hand_out(self, arr: np.ndarray) -> memoryview:
        """A view of arr for the caller; arr is kept for reuse once that view is gone.
        Past MAX_BYTES kept, the oldest free arrays are let go (those in use stay)."""
        view = arr[:]
        with self._lock:
            self._kept.append((arr, weakref.ref(view)))
            while sum(a.nbytes for a, _ in self._kept) > self.MAX_BYTES:
                free = [i for i, (_, handed) in enumerate(self._kept) if handed() is None]
                if not free:
                    break
                del self._kept[free[0]]
        return memoryview(view)


_destinations = _Destinations()


def copy_out(views: list[memoryview]) -> list[memoryview]:
    """A copy of each view's bytes (e.g. slices of a mapped range about to be unmapped) in
    host memory that nothing else refers to, made over threads; bytes-like, as
    Device.read_buffers returns."""
    dsts = [_destinations.take(memoryview(v).nbytes) for v in views]
    copy_into(list(zip((memoryview(d) for d in dsts), views, strict=True)))
    return [_destinations.hand_out(d) for d in dsts]


def copy_into(pairs: list[tuple[memoryview, Bytes]]) -> None:
    """Each (dst, src): src's bytes into the first len(src) bytes of dst (e.g. slices of a
    mapped range being filled for an upload), all of them over the threads at once."""
    srcs = [np.frombuffer(src, np.uint8) for _, src in pairs]
    dsts = [
        np.frombuffer(dst, np.uint8, count=len(s)) for (dst, _), s in zip(pairs, srcs, strict=True)
    ]

    def copy(pieces: list[Piece]) -> None:
        for i, a, b in pieces:
            np.copyto(dsts[i][a:b], srcs[i][a:b])

    _map(copy, _tasks([len(s) for s in srcs]))


def nonfinite(tensors: list[Bytes]) -> list[bool]:
    """Whether each tensor (float32, little-endian) holds an Inf or NaN, as
    config.any_nonfinite answers, all of them over the threads at once: a NaN makes a
    piece's min NaN, an Inf its max or min infinite."""
    xs = [np.frombuffer(t, "<f4") for t in tensors]

    def bad(pieces: list[Piece]) -> set[int]:
        found = set()
        for i, a, b in pieces:
            part = xs[i][a // 4 : b // 4]
            if not (np.isfinite(part.min()) and np.isfinite(part.max())):
                found.add(i)
        return found

    flagged = set().union(*_map(bad, _tasks([x.nbytes for x in xs])))
    return [i in flagged for i in range(len(xs))]


def f16_from_f32(data: bytes) -> bytes:
    """float32 bytes rounded to f16 (nearest, ties to even), as struct's "e" rounds them;
    OverflowError where a finite value rounds past f16's range (dtypes.encode names it)."""
    x = np.frombuffer(data, "<f4")
    with np.errstate(over="ignore"):
        h = x.astype("<f2")
    if (np.isinf(h) & np.isfinite(x)).any():
        raise OverflowError("a finite value past f16's range")
    return h.tobytes()


def f32_from_f16(data: bytes) -> bytes:
    """f16 bytes widened to float32 (exact)."""
    return np.frombuffer(data, "<f2").astype("<f4").tobytes()
