"""Packed buffers: several tensors interleaved row by row in one buffer (config.PACKED).

A variant that binds `kv` reads K and V from one buffer laid out [B, Sk, Hkv, 2, D]: for
each key row and KV head, K's D floats, then V's D floats. `qkv` is [B, S, 3, H, D] (as
FlashAttention's qkvpacked functions take it): for each position, Q's H x D floats, then
K's, then V's. The gradients `dkv` and `dqkv` have the layouts of `kv` and `qkv`; the
runner splits them back into dK, dV (and dQ), so the host always sees separate tensors.

Pure Python over array("f"): this runs inside Pyodide, where there is no NumPy.
"""

from __future__ import annotations

from array import array

from .config import PACKED, AttentionConfig


def chunk_floats(cfg: AttentionConfig, packed: str) -> int:
    """Floats of one part in one row of a packed buffer: a kv row is one key of one KV head
    (D floats each of K and V); a qkv row is one position (H x D floats each of Q, K, V)."""
    if packed in ("kv", "dkv"):
        return cfg.head_dim
    if packed in ("qkv", "dqkv"):
        return cfg.num_heads * cfg.head_dim
    raise KeyError(f"packed role: unknown {packed!r}; known: {', '.join(PACKED)}")


def pack(cfg: AttentionConfig, packed: str, tensors: dict[str, bytes]) -> bytes:
    """The packed buffer's bytes from its parts' (f32, little-endian)."""
    return interleave([tensors[p] for p in PACKED[packed]], chunk_floats(cfg, packed))


def unpack(cfg: AttentionConfig, packed: str, data: bytes) -> dict[str, bytes]:
    """A packed buffer's parts, by name."""
    parts = PACKED[packed]
    return dict(zip(parts, deinterleave(data, len(parts), chunk_floats(cfg, packed)), strict=True))


def interleave(parts: list[bytes], chunk: int) -> bytes:
    """Row r of the result is chunk r of parts[0], then chunk r of parts[1], ...; every part
    holds the same number of whole chunks."""
    src = [_floats(p) for p in parts]
    rows = _rows(src[0], chunk)
    if any(len(a) != rows * chunk for a in src):
        raise ValueError(f"packing: parts of unequal length {[len(a) for a in src]}")
    out = array("f", bytes(4 * rows * chunk * len(src)))
    for i, a in enumerate(src):
        for dst, part in _moves(rows, chunk, len(src), i):
            out[dst] = a[part]
    return out.tobytes()


def deinterleave(data: bytes, n: int, chunk: int) -> list[bytes]:
    """interleave's inverse: the n parts of a buffer packed `chunk` floats at a time."""
    packed = _floats(data)
    rows = _rows(packed, n * chunk)
    outs = []
    for i in range(n):
        out = array("f", bytes(4 * rows * chunk))
        for dst, part in _moves(rows, chunk, n, i):
            out[part] = packed[dst]
        outs.append(out.tobytes())
    return outs


def _moves(rows: int, chunk: int, n: int, i: int) -> list[tuple[slice, slice]]:
    """(slice of the packed buffer, slice of part i) pairs that move part i, as few as
    possible: one strided slice per column when rows outnumber columns (kv: D columns of
    many rows), else one contiguous slice per row (qkv of a short sequence)."""
    stride = n * chunk
    if rows >= chunk:
        return [(slice(i * chunk + c, None, stride), slice(c, None, chunk)) for c in range(chunk)]
    return [
        (
            slice(r * stride + i * chunk, r * stride + (i + 1) * chunk),
            slice(r * chunk, (r + 1) * chunk),
        )
        for r in range(rows)
    ]


def _floats(data: bytes) -> array:
    a = array("f")
    a.frombytes(data)
    return a


def _rows(a: array, width: int) -> int:
    if width < 1 or len(a) % width:
        raise ValueError(f"packing: {len(a)} floats are not whole rows of {width}")
    return len(a) // width
