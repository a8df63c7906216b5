"""Bit-exact NumPy port of the dropout hash in shaders/fa2_common.wgsl.

WGSL u32 arithmetic wraps modulo 2**32; NumPy uint32 *array* arithmetic does the
same without warnings (only NumPy uint32 *scalars* warn on overflow), so every
input is turned into an ndarray first and every constant is a uint32.

Host-only module (imports NumPy at top); nothing that runs in Pyodide imports it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

_U32 = np.uint32


def _u32(x: ArrayLike) -> NDArray[np.uint32]:
    # astype (not asarray(dtype=)) so negative / >32-bit ints wrap like a u32 cast.
    return np.asarray(x).astype(_U32)


def pcg(v: ArrayLike) -> NDArray[np.uint32]:
    """fa2_pcg: PCG hash (Jarzynski & Olano 2020), elementwise on uint32."""
    v = _u32(v)
    # Work on a 1-D view: ops on 0-d arrays yield NumPy scalars, which warn on wrap.
    state = v.reshape(-1) * _U32(747796405) + _U32(2891336453)
    # Shift amount is (state >> 28) + 4 <= 19, always a valid uint32 shift.
    word = ((state >> ((state >> _U32(28)) + _U32(4))) ^ state) * _U32(277803737)
    return ((word >> _U32(22)) ^ word).reshape(v.shape)


def hash3(x: ArrayLike, y: ArrayLike, z: ArrayLike) -> NDArray[np.uint32]:
    """hash3(x, y, z) = pcg(x ^ pcg(y ^ pcg(z))); inputs broadcast together."""
    return pcg(_u32(x) ^ pcg(_u32(y) ^ pcg(z)))


def dropout_bits(
    seed: int, batch: int, num_heads: int, seq_q: int, seq_k: int, batch0: int = 0
) -> NDArray[np.uint32]:
    """The 24 random bits of every weight, shape [batch, num_heads, seq_q, seq_k].

    bits[b, h, qi, kj] = hash3(seed ^ pcg((batch0 + b) * num_heads + h), qi, kj) >> 8
    (batch0: the first batch element's index, for one sequence of a variable-length batch,
    whose qi and kj count from its own start).
    """
    bh = np.arange(batch0 * num_heads, (batch0 + batch) * num_heads, dtype=_U32)
    bits = _bits(seed, bh, np.arange(seq_q), seq_k)
    return bits.reshape(batch, num_heads, seq_q, seq_k)


def _bits(seed: int, bh: ArrayLike, qi: ArrayLike, seq_k: int) -> NDArray[np.uint32]:
    """dropout_bits for (batch * num_heads + head) indices bh and query rows qi: [bh, qi, Sk]."""
    x = (_u32(seed) ^ pcg(bh))[:, None, None]
    kj = np.arange(seq_k, dtype=_U32)
    # Same nesting as hash3, but each stage only at the rank it needs: pcg(kj) is
    # [Sk], the middle stage [Sq, Sk], only the outer one [B*H, Sq, Sk].
    return pcg(x ^ pcg(_u32(qi)[:, None] ^ pcg(kj))) >> _U32(8)


def dropout_uniform(
    seed: int, batch: int, num_heads: int, seq_q: int, seq_k: int, batch0: int = 0
) -> NDArray[np.float32]:
    """The uniform u in [0, 1) of every weight as the shader computes it (float32).

    f32(bits) * 2**-24 is exact in float32 (bits < 2**24), so this is bit-exact.
    """
    bits = dropout_bits(seed, batch, num_heads, seq_q, seq_k, batch0)
    return bits.astype(np.float32) * np.float32(1.0 / 16777216.0)


def dropout_multiplier(
    p: float,
    seed: int,
    batch: int,
    num_heads: int,
    seq_q: int,
    seq_k: int,
    dtype: DTypeLike = np.float64,
    batch0: int = 0,
) -> NDArray[np.floating]:
    """Dropout multiplier M[b, h, qi, kj]: 0 if dropped, 1 / (1 - p) if kept.

    Mirrors dropout_scale: p is the float32 uniform the kernel receives; keep iff
    u >= p compared exactly in float32; M == 1 exactly when p <= 0. The keep scale
    1 / (1 - p) is evaluated in `dtype` from float32(p) (float32: as the kernel
    does, up to the GPU's division ULP error; float64: the exact reference). batch0: as
    for dropout_bits.
    """
    shape = (batch, num_heads, seq_q, seq_k)
    bh = np.arange(batch0 * num_heads, (batch0 + batch) * num_heads)
    out = block_multiplier(p, seed, bh, np.arange(seq_q), seq_k, dtype)
    return np.ones(shape, dtype) if out is None else out.reshape(shape)


def block_multiplier(
    p: float, seed: int, bh: ArrayLike, qi: ArrayLike, seq_k: int, dtype: DTypeLike
) -> NDArray[np.floating] | None:
    """dropout_multiplier at (batch * num_heads + head) indices bh and query rows qi:
    [bh, qi, Sk]; None when p <= 0 (every weight kept, M == 1)."""
    p32 = np.float32(p)
    if p32 <= 0:
        return None
    shape = (np.size(bh), np.size(qi), seq_k)
    if p32 >= 1:  # every u < 1 <= p is dropped; avoid the 1 / 0
        return np.zeros(shape, dtype)
    # f32(bits) * 2**-24 is exact in float32 (bits < 2**24): the shader's uniform, exactly
    u = _bits(seed, np.asarray(bh), np.asarray(qi), seq_k).astype(np.float32)
    keep = u * np.float32(1.0 / 16777216.0) >= p32
    one = np.asarray(1, dtype)
    scale = one / (one - np.asarray(p32, dtype))
    return np.where(keep, scale, np.zeros((), dtype)).astype(dtype, copy=False)
