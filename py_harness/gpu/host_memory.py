"""Host-side copies and scans of large tensors over threads, for the native backends.

A case at S = 4096 moves 64-128 MB each way between Python and the GPU's staging memory.
On the H200's host (16 cores), for 128 MB (`python scripts/case_overhead.py --copies`):
`bytes()` of a mapped range took 110-134 ms (its fresh 4 KiB pages fault one at a time),
copy_out 10-13 ms into new memory and 4.3-6.7 ms into memory it filled before
(_Destinations); the finite-input check as bytes operations (config.any_nonfinite) 62-63
ms, any_nonfinite here 5-7 ms; 16 threads instead of 8 changed neither. A case's two
reads, 128 MB, took 18.6-19.8 ms (medians) with copy_out filling new memory each time,
11.4-12.5 ms with it filling memory it filled before (`case_overhead.py`'s read_buffers
step). Taking a case's buffers and filling them with its 128 MB of inputs (create_buffers
there): 10-14 ms with wgpu-py's write_mapped filling the upload's mapped range (one thread,
under the GIL), 6-7 ms with copy_into. NumPy releases the GIL in each
(docs/results-h200.md).

CPython with NumPy only: the Pyodide wheel leaves this module out (build_wheel.HOST_ONLY).
"""

from __future__ import annotations

import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np

THREADS = max(1, min(8, os.cpu_count() or 1))
# Below this, one thread: handing out the work costs more than it saves.
CHUNK_BYTES = 8 << 20
_pool: ThreadPoolExecutor | None = None


def _chunks(nbytes: int) -> list[tuple[int, int]]:
    """[start, end) byte ranges of at least CHUNK_BYTES, at most THREADS of them, on
    4096-byte (page and float) boundaries."""
    n = max(1, min(THREADS, nbytes // CHUNK_BYTES))
    step = max(1, -(-nbytes // (n * 4096))) * 4096
    return [(a, min(a + step, nbytes)) for a in range(0, nbytes, step)] or [(0, 0)]


def _map(fn, ranges: list[tuple[int, int]]) -> list:  # noqa: ANN001
    global _pool
    if len(ranges) == 1:
        return [fn(*ranges[0])]
    if _pool is None:
        _pool = ThreadPoolExecutor(THREADS, thread_name_prefix="host-memory")
    return list(_pool.map(lambda r: fn(*r), ranges))


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


def copy_out(view: memoryview) -> memoryview:
    """A copy of `view`'s bytes (e.g. a mapped range about to be unmapped) in host memory
    that nothing else refers to, made over threads; bytes-like, as Device.read_buffers
    returns."""
    dst = _destinations.take(memoryview(view).nbytes)
    copy_into(memoryview(dst), view)
    return _destinations.hand_out(dst)


def copy_into(dst: memoryview, src: bytes | memoryview) -> None:
    """src's bytes into the first len(src) bytes of dst (e.g. a mapped range being filled
    for an upload), over threads."""
    s = np.frombuffer(src, np.uint8)
    d = np.frombuffer(dst, np.uint8, count=len(s))

    def copy(a: int, b: int) -> None:
        np.copyto(d[a:b], s[a:b])

    _map(copy, _chunks(len(s)))


def any_nonfinite(data: bytes | memoryview) -> bool:
    """Whether some float32 of `data` (little-endian) is Inf or NaN, as config.any_nonfinite
    answers: a NaN makes a chunk's min NaN, an Inf its max or min infinite."""
    x = np.frombuffer(data, "<f4")

    def bad(a: int, b: int) -> bool:
        part = x[a // 4 : b // 4]
        return part.size > 0 and not (np.isfinite(part.min()) and np.isfinite(part.max()))

    return any(_map(bad, _chunks(len(x) * 4)))
