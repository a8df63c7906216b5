"""Kernel variants: files, entry points, bindings, dispatch geometry and limits, in one place.

A variant is a forward kernel plus the backward kernels that follow it. To add one, write
its .wgsl files in shaders/ and declare it in VARIANTS below: the case matrix, `check`,
pytest (`--variant`) and the demo page pick it up by name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .config import F32_BYTES, AttentionConfig, ConfigError, whole_vec4s
from .shaders import BACKWARD_FILE, FORWARD_FILE

RO = "read-only-storage"  # GPUBufferBindingType names
RW = "storage"
UNIFORM = "uniform"
# Buffers the runner provides; bindings name them. params is the FlashParams uniform;
# stats is the backward's scratch: [Delta, LSE] per query row (B * H * Sq vec2<f32>), then
# the variant's partial sums of dQ (Variant.dq_slots of them, each the size of dQ).
BUFFERS = ("q", "k", "v", "d_out", "mask", "params", "o", "lse", "dq", "dk", "dv", "stats")


@dataclass(frozen=True)
class Kernel:
    entry_point: str
    files: tuple[str, ...]  # the shader module: these files joined in order
    # binding number -> (buffer name, GPUBufferBindingType); only what the entry uses.
    # The pipeline layout is built from this (not "auto"), so an edit that stops using a
    # binding still gets a valid layout, and the storage-buffer count stays exact.
    bindings: dict[int, tuple[str, str]]
    # The sequence each workgroup tiles ("seq_q" or "seq_k"; workgroups along y =
    # ceil(rows / rows_per_workgroup)), or "slots": one workgroup per partial dQ sum.
    rows: str
    heads: str  # "num_heads" or "kv_heads": workgroups along z = batch * heads
    rows_per_workgroup: int = 128

    @property
    def layout(self) -> tuple[tuple[int, str], ...]:
        return tuple((i, kind) for i, (_, kind) in sorted(self.bindings.items()))

    def workgroups(self, cfg: AttentionConfig, slots: int = 0) -> tuple[int, int, int]:
        heads = getattr(cfg, self.heads)
        if self.rows == "slots":
            return (1, slots, cfg.batch * heads)
        rows = getattr(cfg, self.rows)
        return (1, math.ceil(rows / self.rows_per_workgroup), cfg.batch * heads)


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    forward: Kernel
    backward: tuple[Kernel, ...]  # dispatched in order, one compute pass each
    required_limits: dict[str, int] = field(default_factory=dict)
    # Specialisations by head_dim, smallest bound first: a run with head_dim <= bound
    # dispatches that variant's kernels instead of this one's (e.g. tiles sized for
    # head_dim 64). They compile with this variant and must fit its required_limits.
    by_head_dim: tuple[tuple[int, Variant], ...] = ()

    @property
    def partial_dq(self) -> bool:
        """Whether the backward adds dQ into partial sums in the scratch (a pass with one
        workgroup per sum: see dq_slots)."""
        return any(k.rows == "slots" for k in self.backward)

    def dq_slots(self, cfg: AttentionConfig, cap_bytes: int) -> int:
        """How many partial sums of dQ the backward keeps (0: none). Enough that
        slots x batch x kv_heads workgroups fill a large GPU (PARTIAL_DQ_WORKGROUPS), at
        most one per key tile and PARTIAL_DQ_MAX, within one binding of cap_bytes."""
        if not self.partial_dq:
            return 0
        rows, d = cfg.rows(), cfg.head_dim
        fit = (cap_bytes // F32_BYTES - whole_vec4s(2 * rows)) // whole_vec4s(rows * d)
        if fit < 1:
            need = scratch_elems(cfg, 1) * F32_BYTES
            raise ConfigError(
                "seq_q",
                f"the {self.name} backward needs a {need}-byte scratch buffer (batch x "
                f"heads x seq_q x (2 + head_dim) floats), over the device limit of "
                f"{cap_bytes} bytes (maxStorageBufferBindingSize / maxBufferSize)",
            )
        want = math.ceil(PARTIAL_DQ_WORKGROUPS / (cfg.batch * cfg.kv_heads))
        tiles = math.ceil(cfg.seq_k / FAST_ROWS)
        return max(1, min(want, tiles, PARTIAL_DQ_MAX, fit))

    def for_head_dim(self, head_dim: int) -> Variant:
        return next((v for bound, v in self.by_head_dim if head_dim <= bound), self)

    @property
    def kernels(self) -> tuple[Kernel, ...]:
        own = (self.forward, *self.backward)
        return own + tuple(k for _, v in self.by_head_dim for k in v.kernels)

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f for k in self.kernels for f in k.files))


SEED = Variant(
    name="seed",
    description="the given backward (two passes, no atomics) after our forward",
    forward=Kernel(
        "flash_fwd",
        (FORWARD_FILE,),
        {
            0: ("q", RO),
            1: ("k", RO),
            2: ("v", RO),
            3: ("o", RW),
            4: ("lse", RW),
            8: ("params", UNIFORM),
            9: ("mask", RO),
        },
        "seq_q",
        "num_heads",
    ),
    backward=(
        Kernel(
            "flash_bwd_dq",
            (FORWARD_FILE, BACKWARD_FILE),
            {
                0: ("q", RO),
                1: ("k", RO),
                2: ("v", RO),
                3: ("o", RO),
                4: ("d_out", RO),
                5: ("dq", RW),
                8: ("params", UNIFORM),
                9: ("mask", RO),
                10: ("stats", RW),
            },
            "seq_q",
            "num_heads",
        ),
        Kernel(
            "flash_bwd_dk_dv",
            (FORWARD_FILE, BACKWARD_FILE),
            {
                0: ("q", RO),
                1: ("k", RO),
                2: ("v", RO),
                4: ("d_out", RO),
                6: ("dk", RW),
                7: ("dv", RW),
                8: ("params", UNIFORM),
                9: ("mask", RO),
                10: ("stats", RW),
            },
            "seq_k",
            "kv_heads",
        ),
    ),
    required_limits={
        "maxStorageBuffersPerShaderStage": 8,
        "maxComputeWorkgroupStorageSize": 16384,
        "maxComputeInvocationsPerWorkgroup": 128,
    },
)


def scratch_elems(cfg: AttentionConfig, slots: int) -> int:
    """Floats of the "stats" scratch: [Delta, LSE] per query row, then `slots` dQ sums,
    each part rounded up to whole vec4s (the fast kernels read and add vec4s)."""
    return whole_vec4s(2 * cfg.rows()) + slots * whole_vec4s(cfg.rows() * cfg.head_dim)


# Partial dQ sums (Variant.dq_slots): about two 256-invocation workgroups per SM of a
# 132-SM GPU, and at most 64 sums (64 x head_dim floats of scratch per query row).
PARTIAL_DQ_WORKGROUPS = 256
PARTIAL_DQ_MAX = 64

# fa2_fast_common.wgsl's FF_BR (rows per workgroup; 4 FF_BR invocations) and the bytes of
# its workgroup array; tests/test_variants.py reads both from the WGSL.
FAST_ROWS = 64
FAST_WORKGROUP_BYTES = 22784


def _fast(head_dim: int, by_head_dim: tuple[tuple[int, Variant], ...] = ()) -> Variant:
    """The register-tiled kernels (shaders/fa2_fast_*.wgsl) with tiles for head_dim <= 64 or
    <= 128: FAST_ROWS x 64 score tiles in 4 x 4 blocks per invocation. Up to 64, one
    key-tile pass computes dK, dV and dQ's partial sums; at 128 a dV pass and a dK/dQ pass
    (one pass holding all three runs one workgroup per SM: fa2_fast_backward.wgsl)."""
    base = (FORWARD_FILE, f"fa2_fast_d{head_dim}.wgsl", "fa2_fast_common.wgsl")
    fwd, bwd = (*base, "fa2_fast_forward.wgsl"), (*base, "fa2_fast_backward.wgsl")
    pm = {8: ("params", UNIFORM), 9: ("mask", RO)}
    qkv = {0: ("q", RO), 1: ("k", RO), 2: ("v", RO)}
    # Every key-tile pass binds all of these: the shared body refers to each.
    key_tiles = {**qkv, 4: ("d_out", RO), 6: ("dk", RW), 7: ("dv", RW), **pm, 10: ("stats", RW)}
    key_passes: tuple[Kernel, ...] = (
        Kernel("fa2f_bwd_dk_dv", bwd, key_tiles, "slots", "kv_heads"),
    )
    if head_dim > 64:
        key_passes = (
            # adds no dQ sums: one key tile per workgroup (slot = key tile, one round)
            Kernel("fa2f_bwd_dv", bwd, key_tiles, "seq_k", "kv_heads", FAST_ROWS),
            Kernel("fa2f_bwd_dk_dq", bwd, key_tiles, "slots", "kv_heads"),
        )
    return Variant(
        name="fast",
        description="register-tiled forward; backward from the forward's LSE: Delta pass, "
        "key-tile pass(es) for dK, dV and partial sums of dQ, dQ sum pass (no atomics)",
        forward=Kernel(
            "fa2f_fwd",
            fwd,
            {**qkv, 3: ("o", RW), 4: ("lse", RW), **pm},
            "seq_q",
            "num_heads",
            FAST_ROWS,
        ),
        backward=(
            Kernel(
                "fa2f_bwd_pre",
                bwd,
                {3: ("o", RO), 4: ("d_out", RO), 8: pm[8], 10: ("stats", RW), 11: ("lse", RO)},
                "seq_q",
                "num_heads",
                256,
            ),
            *key_passes,
            Kernel(
                "fa2f_bwd_dq_sum",
                bwd,
                {5: ("dq", RW), 8: pm[8], 10: ("stats", RW)},
                "seq_q",
                "num_heads",
                2,
            ),
        ),
        required_limits={
            "maxStorageBuffersPerShaderStage": 8,
            "maxComputeWorkgroupStorageSize": FAST_WORKGROUP_BYTES,
            "maxComputeInvocationsPerWorkgroup": 256,
            "maxComputeWorkgroupSizeX": 256,
        },
        by_head_dim=by_head_dim,
    )


FAST = _fast(128, by_head_dim=((64, _fast(64)),))

VARIANTS: dict[str, Variant] = {v.name: v for v in (SEED, FAST)}
DEFAULT_VARIANT = "seed"
ALL_SHADER_FILES = tuple(dict.fromkeys(f for v in VARIANTS.values() for f in v.files))


def variant(name: str) -> Variant:
    if name not in VARIANTS:
        raise KeyError(f"variant: unknown {name!r}; known: {', '.join(VARIANTS)}")
    return VARIANTS[name]
