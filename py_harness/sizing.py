"""Buffer sizing: how many floats each role's buffer holds for a configuration (the one
place buffer sizes are computed: the runner's buffers and read-backs, the variants' scratch,
the bench's byte counts), the bytes a buffer is allocated with, and the check that refuses
a configuration whose buffers exceed the device's limits before any GPU work.

Pure Python: this module runs inside Pyodide (no NumPy there).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .config import (
    ALIBI_SLOTS,
    F32_BYTES,
    PACKED,
    ROLES,
    VARLEN_MAX_BATCH,
    AttentionConfig,
    ConfigError,
)

# The argument a too-large buffer is refused under: the tensors whose shape sets its size
# (the demo page maps these names to its form fields).
_SIZE_ARGUMENT = {
    "q": "q / d_out",
    "d_out": "q / d_out",
    "o": "q / d_out",
    "dq": "q / d_out",
    "k": "k / v",
    "v": "k / v",
    "dk": "k / v",
    "dv": "k / v",
}
# What validate_sizes checks when no variant says which roles it binds (every buffer of
# the seed's shape is one of these sizes or smaller).
DEFAULT_SIZE_ROLES = ("q", "d_out", "k", "v", "stats", "mask")


def whole_vec4s(floats: int) -> int:
    """floats rounded up to a multiple of 4: buffers and scratch parts the kernels may read
    as vec4s."""
    return -(-floats // 4) * 4


# Keys per tile of the band layout of dQ's partial sums (fa2_fast_backward.wgsl: FF_BR).
DQ_BAND_TILE = 64


def dq_band_blocks(cfg: AttentionConfig) -> int:
    """Key tiles the band layout of dQ's partial sums holds: sequence b's tile kt is block
    k_row0 // DQ_BAND_TILE + b + kt (fa2_fast_backward.wgsl: ffb_band_row), so sequences
    never share one."""
    t = DQ_BAND_TILE
    seqs = cfg.sequences()
    return max((k0 // t + b + -(-n // t) for b, (_, _, k0, n) in enumerate(seqs)), default=0)


def scratch_elems(cfg: AttentionConfig, slots: int, band_rows: int = 0) -> int:
    """Floats of the "stats" scratch: [Delta, LSE] per query row, then `slots` partial sums
    of dQ, each part rounded up to whole vec4s (the fast kernels read and add vec4s); with
    band_rows > 0, the band layout instead: band_rows rows per head and key tile
    (dq_band_blocks)."""
    stats = whole_vec4s(2 * cfg.rows())
    if band_rows:
        return stats + whole_vec4s(dq_band_blocks(cfg) * cfg.num_heads * band_rows * cfg.head_dim)
    return stats + slots * whole_vec4s(cfg.rows() * cfg.head_dim)


def buffer_sizes(
    cfg: AttentionConfig,
    roles: Iterable[str] = DEFAULT_SIZE_ROLES,
    slots: int = 0,
    kv_parts: int = 1,
    band_rows: int = 0,
) -> dict[str, int]:
    """Floats each role's buffer holds: a tensor its elements (cfg.shapes(); the mask's, 0
    when there is none), a packed role the sum of its parts, stats the scratch with `slots`
    partial dQ sums (or the band layout's, band_rows > 0: scratch_elems), dk and dv
    `kv_parts` copies of whole vec4s where kv_parts > 1 (Kernel.key_parts). The one place
    buffer sizes are computed: the checks below, the runner's buffers (allocated as
    buffer_bytes) and its read-backs use it. params is skipped: a uniform, sized by its
    struct (params.params_size). alibi_slopes is ALIBI_SLOTS floats whatever the config
    (the slopes, zero-padded), seqlens 4 VARLEN_MAX_BATCH words."""
    floats = {name: math.prod(shape) for name, shape in cfg.shapes().items()}
    floats["mask"] = cfg.mask_elems()
    floats["alibi_slopes"] = ALIBI_SLOTS
    floats["seqlens"] = 4 * VARLEN_MAX_BATCH
    floats["stats"] = scratch_elems(cfg, slots, band_rows)
    if kv_parts > 1:
        for role in ("dk", "dv"):
            floats[role] = kv_parts * whole_vec4s(floats[role])
    for packed, parts in PACKED.items():
        floats[packed] = sum(floats[p] for p in parts)
    unknown = [r for r in roles if r not in floats and r != "params"]
    if unknown:
        raise KeyError(f"buffer roles: unknown {unknown}; known: {', '.join(ROLES)}")
    return {r: floats[r] for r in roles if r != "params"}


def buffer_bytes(floats: int) -> int:
    """Bytes of the buffer that holds `floats`: whole vec4s, since kernels may read any
    buffer as array<vec4<f32>> (whose length is the binding's size in whole vec4s, so a
    shorter buffer hides its last floats), and at least one vec4, since a zero-size binding
    is invalid (an absent mask binds a placeholder)."""
    return max(4, whole_vec4s(floats)) * F32_BYTES


def data_buffer_bytes(data: bytes) -> int:
    """Bytes of the buffer that holds `data` (params, seqlens: not whole floats' worth of
    tensor), sized as buffer_bytes."""
    return buffer_bytes(-(-len(data) // F32_BYTES))


def binding_cap(limits: dict[str, int]) -> int:
    """The largest buffer one binding can hold on this device, in bytes."""
    return min(limits["maxStorageBufferBindingSize"], limits["maxBufferSize"])


def validate_sizes(
    cfg: AttentionConfig,
    limits: dict[str, int],
    roles: Iterable[str] = DEFAULT_SIZE_ROLES,
    slots: int = 0,
    kv_parts: int = 1,
) -> None:
    """Refuse buffers over the device's limits (maxStorageBufferBindingSize / maxBufferSize):
    those of `roles` (a variant's: Variant.storage_roles) with `slots` partial dQ sums and
    `kv_parts` copies of dK and dV."""
    cap = binding_cap(limits)
    for role, floats in buffer_sizes(cfg, roles, slots, kv_parts).items():
        nbytes = whole_vec4s(floats) * F32_BYTES
        if nbytes > cap:
            raise ConfigError(
                _SIZE_ARGUMENT.get(role, role),
                f"needs a {nbytes}-byte buffer, over the device limit of {cap} bytes "
                "(maxStorageBufferBindingSize / maxBufferSize)",
            )
