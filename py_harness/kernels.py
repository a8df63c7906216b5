"""The built-in kernel variants: files, entry points, bindings, dispatch geometry and
limits, in one place (what a variant is, and its checks: variant.py).

A variant is a forward kernel plus the backward kernels that follow it. To add one, write
its .wgsl files in shaders/ and declare it in VARIANTS below: the case matrix, `check`,
pytest (`--variant`) and the demo page pick it up by name. A team's own kernels, outside
this project, come from a variant file instead (docs/own-kernels.md).
"""

from __future__ import annotations

from .config import MAX_HEAD_DIM, ROLES
from .dtypes import Arithmetic
from .shaders import BACKWARD_FILE, COMMON_FILE, FORWARD_FILE
from .sizing import scratch_elems
from .variant import (
    FEATURES,
    PARTIAL_DQ_MAX,
    PARTIAL_DQ_WORKGROUPS,
    RO,
    RW,
    UNIFORM,
    Kernel,
    Variant,
    features_used,
)

__all__ = [  # the built-in variants, and what variant.py defines that callers import here
    "ALL_SHADER_FILES",
    "BUFFERS",
    "DEFAULT_VARIANT",
    "FAST",
    "FAST_F16",
    "FAST_F16X2",
    "PACKED_F16",
    "FAST_ROWS",
    "FAST_INVOCATIONS",
    "FAST_WORKGROUP_BYTES",
    "FEATURES",
    "PARTIAL_DQ_MAX",
    "PARTIAL_DQ_WORKGROUPS",
    "RO",
    "RW",
    "SEED",
    "UNIFORM",
    "VARIANTS",
    "Kernel",
    "Variant",
    "features_used",
    "scratch_elems",
    "variant",
]

# Buffers the runner provides, by role; bindings name them (config.ROLES says what each
# holds). params is the uniform struct; stats is the backward's scratch: [Delta, LSE] per
# query row (B * H * Sq vec2<f32>), then the variant's partial sums of dQ
# (Variant.dq_slots of them, each the size of dQ).
BUFFERS = ROLES


SEED = Variant(
    name="seed",
    description="the given backward (two passes, no atomics) after our forward",
    forward=Kernel(
        "flash_fwd",
        (COMMON_FILE, FORWARD_FILE),
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
        gemms=2,  # S = Q K^T, O = P V
    ),
    backward=(
        Kernel(
            "flash_bwd_dq",
            (COMMON_FILE, BACKWARD_FILE),
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
            gemms=4,  # S for the LSE, then S, dP = dO V^T and dQ = dS K
        ),
        Kernel(
            "flash_bwd_dk_dv",
            (COMMON_FILE, BACKWARD_FILE),
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
            gemms=4,  # S, dP, dV = P^T dO, dK = dS^T Q
        ),
    ),
    required_limits={
        "maxStorageBuffersPerShaderStage": 8,
        "maxComputeWorkgroupStorageSize": 16384,
        "maxComputeInvocationsPerWorkgroup": 128,
    },
)


# fa2_fast_common.wgsl's FF_BR (rows per workgroup and half; 4 FF_BR invocations per half)
# and, per head_dim family, the bytes of its workgroup array and its invocations per
# workgroup (two halves above 128); tests/test_variants.py reads them from the WGSL.
FAST_ROWS = 64
FAST_WORKGROUP_BYTES = {64: 22784, 128: 22784, 256: 32768}
FAST_INVOCATIONS = {64: 256, 128: 256, 256: 512}
# fa2_fast_common.wgsl's override: the tile passes' loads without bounds checks, set where
# a run's tiles are whole (Kernel.whole_tiles); and the GEMMs' inner loops kept as loops,
# set on the CPU drivers (Kernel.rolled_loops).
WHOLE = "FF_WHOLE"
ROLLED = "FF_ROLLED"


# What fast_f16x2 computes its score GEMMs in (fa2_fast_f16x2.wgsl): f16 products, each
# score's two vec2<f16> lanes summing 16 terms (a quarter of a staged chunk of 64) in f16
# before they go into a float32 total. Its other GEMMs are float32: the declaration is
# one for all of a variant's GEMMs, so the judge's baseline does them in f16 too.
PACKED_F16 = Arithmetic(products="f16", accumulate="f16", chunk=16)


def _fast(
    head_dim: int,
    by_head_dim: tuple[tuple[int, Variant], ...] = (),
    io: str = "f32",
    packed: bool = False,
) -> Variant:
    """The register-tiled kernels (shaders/fa2_fast_*.wgsl) with tiles for head_dim <= 64 or
    above: FAST_ROWS x 64 score tiles in 4 x 4 blocks per invocation. One key-tile pass
    computes dK, dV and dQ's partial sums, except in the 128 family: a dV pass and a dK/dQ
    pass there (one pass holding all three runs one workgroup per SM where these run two;
    the 256 family's workgroups of 512 run one per SM either way: fa2_fast_backward.wgsl). Where
    the key tiles are few, those passes split each one's work into parts (key_parts) and
    a last pass adds the parts' copies of dK and dV. A workgroup owns `head_dim` output
    columns (cols_per_workgroup): the 128 family serves 256 in two workgroups per tile
    where a device lacks the 256 family's 512 invocations; the 256 family's two halves
    share each score GEMM. io: the tensors' element type in memory (fa2_fast_f16.wgsl: the
    fast_f16 variant, whose key-tile passes split no tile: parts' copies of dK and dV
    would be f16 partial sums, where its arithmetic is float32). packed: the score GEMMs
    in packed f16 arithmetic (fa2_fast_f16x2.wgsl, in place of the io file: fast_f16x2)."""
    cols = head_dim  # output columns per workgroup: fa2_fast_common.wgsl's FF_WG_COLS
    # first: an `enable` precedes every declaration
    io_file = "fa2_fast_f16x2.wgsl" if packed else f"fa2_fast_{io}.wgsl"
    base = (io_file, COMMON_FILE, f"fa2_fast_d{head_dim}.wgsl", "fa2_fast_common.wgsl")
    fwd, bwd = (*base, "fa2_fast_forward.wgsl"), (*base, "fa2_fast_backward.wgsl")
    # The row passes (Delta, the sums) use no tiles: above 128 they are the 128 family's
    # modules, compiled once for both.
    rows_family = f"fa2_fast_d{min(head_dim, 128)}.wgsl"
    rows_base = (io_file, COMMON_FILE, rows_family, "fa2_fast_common.wgsl")
    row_passes = (*rows_base, "fa2_fast_backward.wgsl")
    invocations = FAST_INVOCATIONS[head_dim]
    seqlens = {13: ("seqlens", UNIFORM)}  # every entry point reads its sequence's view
    pm = {8: ("params", UNIFORM), 9: ("mask", RO), 12: ("alibi_slopes", UNIFORM), **seqlens}
    qkv = {0: ("q", RO), 1: ("k", RO), 2: ("v", RO)}
    # Every key-tile pass binds all of these: the shared body refers to each.
    key_tiles = {**qkv, 4: ("d_out", RO), 6: ("dk", RW), 7: ("dv", RW), **pm, 10: ("stats", RW)}

    def key_pass(entry_point: str, rows: str, gemms: int) -> Kernel:
        return Kernel(
            entry_point,
            bwd,
            key_tiles,
            rows,
            "kv_heads",
            FAST_ROWS,
            cols,
            io == "f32",  # key_parts
            gemms,
            whole_tiles=WHOLE,
            rolled_loops=ROLLED,
        )

    # S, dP, dV, dK and dQ's partial sum
    key_passes: tuple[Kernel, ...] = (key_pass("fa2f_bwd_dk_dv", "slots", 5),)
    if head_dim == 128:
        key_passes = (
            # adds no dQ sums: one key tile per workgroup (slot = key tile, one round)
            # S, dV; then S again, dP, dK and dQ's partial sum: 6 GEMMs where FA counts 5
            key_pass("fa2f_bwd_dv", "seq_k", 2),
            key_pass("fa2f_bwd_dk_dq", "slots", 4),
        )
    # adds the copies of dK and dV where the key-tile passes split their tiles (kv_parts)
    kv_sum = {6: ("dk", RW), 7: ("dv", RW), 8: pm[8], **seqlens}
    f16 = ("q", "k", "v", "o", "d_out", "dq", "dk", "dv") if io == "f16" else ()
    arithmetic = "; tensors in f16, float32 arithmetic" if f16 else ""
    if packed:
        arithmetic = "; tensors in f16, score GEMMs in packed f16 (vec2<f16>), the rest float32"
    return Variant(
        name="fast" if io == "f32" else f"fast_{io}" + ("x2" if packed else ""),
        description="register-tiled forward; backward from the forward's LSE: Delta pass, "
        "key-tile pass(es) for dK, dV and partial sums of dQ, dQ sum pass (no atomics)"
        + arithmetic,
        dtypes=dict.fromkeys(f16, "f16"),
        arithmetic=PACKED_F16 if packed else Arithmetic(),
        forward=Kernel(
            "fa2f_fwd",
            fwd,
            {**qkv, 3: ("o", RW), 4: ("lse", RW), **pm},
            "seq_q",
            "num_heads",
            FAST_ROWS,
            cols,
            gemms=2,
            whole_tiles=WHOLE,
            rolled_loops=ROLLED,
        ),
        backward=(
            Kernel(
                "fa2f_bwd_pre",
                row_passes,
                {
                    3: ("o", RO),
                    4: ("d_out", RO),
                    8: pm[8],
                    10: ("stats", RW),
                    11: ("lse", RO),
                    **seqlens,
                },
                "seq_q",
                "num_heads",
                256,
                dq_sums=False,  # writes the row stats only
            ),
            *key_passes,
            Kernel(
                "fa2f_bwd_dq_sum",
                row_passes,
                {5: ("dq", RW), 8: pm[8], 10: ("stats", RW), **seqlens},
                "seq_q",
                "num_heads",
                16,
                64,
            ),
            Kernel(
                "fa2f_bwd_kv_sum",
                row_passes,
                kv_sum,
                "seq_k",
                "kv_heads",
                2,
                128,
                adds_kv_parts=True,
            ),
        ),
        required_limits={
            "maxStorageBuffersPerShaderStage": 8,
            "maxComputeWorkgroupStorageSize": FAST_WORKGROUP_BYTES[head_dim],
            "maxComputeInvocationsPerWorkgroup": invocations,
            "maxComputeWorkgroupSizeX": invocations,
        },
        by_head_dim=by_head_dim,
        supports=frozenset(FEATURES),
        max_head_dim=MAX_HEAD_DIM,
    )


# Above 128 the 256 family where the device runs it, else the 128 family (this variant).
FAST = _fast(128, by_head_dim=((64, _fast(64)), (128, _fast(128)), (256, _fast(256))))
# The same kernels reading and writing f16 tensors (where the adapter offers shader-f16).
FAST_F16 = _fast(
    128,
    by_head_dim=tuple((hd, _fast(hd, io="f16")) for hd in (64, 128, 256)),
    io="f16",
)

# The same with the score GEMMs (S = Q K^T, dP = dO V^T) in packed f16 arithmetic.
FAST_F16X2 = _fast(
    128,
    by_head_dim=tuple((hd, _fast(hd, io="f16", packed=True)) for hd in (64, 128, 256)),
    io="f16",
    packed=True,
)

VARIANTS: dict[str, Variant] = {v.name: v for v in (SEED, FAST, FAST_F16, FAST_F16X2)}
DEFAULT_VARIANT = "seed"
ALL_SHADER_FILES = tuple(dict.fromkeys(f for v in VARIANTS.values() for f in v.files))


def variant(name: str) -> Variant:
    if name not in VARIANTS:
        raise KeyError(f"variant: unknown {name!r}; known: {', '.join(VARIANTS)}")
    return VARIANTS[name]
