"""What kernels.py declares about the fast variant matches its WGSL (dispatch geometry and
workgroup memory), so a tile-size edit cannot leave the host dispatching the wrong grid."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from py_harness.config import AttentionConfig, ConfigError
from py_harness.gpu.device import Buffer
from py_harness.host.paths import SHADER_DIR
from py_harness.kernels import (
    FAST_INVOCATIONS,
    FAST_ROWS,
    FAST_WORKGROUP_BYTES,
    PARTIAL_DQ_MAX,
    VARIANTS,
    Kernel,
    Variant,
    scratch_elems,
)
from py_harness.runner import Split, create_buffers
from py_harness.sizing import buffer_sizes, dq_band_blocks
from tests.fakes import NoGPUWorkDevice

COMMON = SHADER_DIR / "fa2_fast_common.wgsl"
BACKWARD = SHADER_DIR / "fa2_fast_backward.wgsl"
FORWARD = SHADER_DIR / "fa2_fast_forward.wgsl"


def _const(src: str, name: str) -> int:
    return int(re.search(rf"const {name}: u32 = (\d+)u;", src).group(1))


def _family(v: Variant | Kernel) -> int:
    """The head_dim family of a fast variant or kernel (its fa2_fast_dN.wgsl)."""
    files = v.files if isinstance(v, Kernel) else v.forward.files
    return int(next(m[1] for f in files if (m := re.fullmatch(r"fa2_fast_d(\d+)\.wgsl", f))))


def test_fast_rows_and_workgroup_memory_match_the_wgsl() -> None:
    src = COMMON.read_text()
    assert _const(src, "FF_BR") == FAST_ROWS
    assert re.findall(r"var<workgroup> \w+: array<vec4<f32>, (\w+)>", src) == ["FF_SMEM"]
    bwd = BACKWARD.read_text()
    fast = VARIANTS["fast"]
    for v in (fast, *(s for _, s in fast.by_head_dim)):
        family = _family(v)
        sizes = (SHADER_DIR / f"fa2_fast_d{_family(v)}.wgsl").read_text()
        smem = _const(sizes, "FF_SMEM")
        assert 16 * smem == FAST_WORKGROUP_BYTES[family]
        assert v.required_limits["maxComputeWorkgroupStorageSize"] == FAST_WORKGROUP_BYTES[family]
        # every phase's area within the array (fa2_fast_common.wgsl's offsets)
        vk, ncol, split = (_const(sizes, n) for n in ("FF_VK", "FF_NCOL", "FF_SPLIT"))
        padded = re.search(r"const FF_AS: u32 = FF_KC / 4u( \+ 1u)?;", sizes).group(1)
        assert padded or _const(sizes, "FF_KC") == 32  # the swizzle permutes 8 vec4s
        staging = 2 * 64 * (_const(sizes, "FF_KC") // 4 + (1 if padded else 0))  # one half's
        v0 = max(staging, 64 * 17)  # after one half's staging and the P tile
        ends = (split * staging, v0 + split * vk * (16 * ncol + 1), v0 + 256)
        assert max(ends) <= smem
        if split > 1:
            assert 1024 * split <= smem  # the halves' partial blocks (ff_exchange)
        assert 256 * split == FAST_INVOCATIONS[family]
        assert v.required_limits["maxComputeInvocationsPerWorkgroup"] == 256 * split
        assert v.required_limits["maxComputeWorkgroupSizeX"] == 256 * split
        assert v.forward.rows_per_workgroup == FAST_ROWS
        pre, *key_tiles, dq_sum, kv_sum = v.backward
        # the pass adding dQ's partial sums takes slots; a dV-only pass, FF_BR keys each;
        # both split their key tiles into parts, which the last pass adds
        assert key_tiles[-1].rows == "slots" and v.partial_dq
        assert all(k.rows_per_workgroup == FAST_ROWS for k in key_tiles if k.rows != "slots")
        assert all(f"fn {k.entry_point}(" in bwd for k in key_tiles)
        assert all(k.key_parts for k in key_tiles)
        assert not any(k.key_parts for k in (pre, dq_sum, kv_sum))
        # the per-row passes' rows per workgroup, as their WGSL computes the row
        assert f"let qi = wg.y * {pre.rows_per_workgroup}u + lid;" in bwd
        assert f"let qi = wg.y * {dq_sum.rows_per_workgroup}u + lid / 16u;" in bwd
        assert f"let kj = wg.y * {kv_sum.rows_per_workgroup}u + lid / 128u;" in bwd
    # the tile passes' workgroups are FF_WG invocations, the row passes' 256
    every = bwd + FORWARD.read_text()
    for entry in ("fa2f_fwd", "fa2f_bwd_dk_dv", "fa2f_bwd_dv", "fa2f_bwd_dk_dq"):
        assert re.search(rf"@workgroup_size\(FF_WG\)\nfn {entry}\(", every), entry
    for entry in ("fa2f_bwd_pre", "fa2f_bwd_dq_sum", "fa2f_bwd_kv_sum"):
        assert re.search(rf"@workgroup_size\(256\)\nfn {entry}\(", every), entry


# What lavapipe offers (1024 invocations per workgroup) and what SwiftShader does (256).
WIDE = {"maxComputeInvocationsPerWorkgroup": 1024, "maxComputeWorkgroupSizeX": 1024}
NARROW = {"maxComputeInvocationsPerWorkgroup": 256, "maxComputeWorkgroupSizeX": 256}
for _limits in (WIDE, NARROW):
    _limits.update(maxComputeWorkgroupStorageSize=32768, maxStorageBuffersPerShaderStage=8)


def test_head_dim_families_fall_back_where_the_device_lacks_their_limits() -> None:
    fast = VARIANTS["fast"]
    dims = (1, 64, 65, 128, 129, 256)
    assert [_family(fast.for_head_dim(d, WIDE)) for d in dims] == [64, 64, 128, 128, 256, 256]
    assert [_family(fast.for_head_dim(d, NARROW)) for d in dims] == [64, 64, 128, 128, 128, 128]
    assert fast.for_head_dim(256, NARROW) is fast  # the 128 family, in two column blocks
    # what `prepare` compiles: only the families the device can run, each module once
    narrow = {(k.entry_point, _family(k)) for k in fast.kernels_for(NARROW)}
    wide = {(k.entry_point, _family(k)) for k in fast.kernels_for(WIDE)}
    assert ("fa2f_fwd", 256) in wide - narrow
    assert not any(family == 256 for _, family in narrow)
    assert len(wide) == len(fast.kernels_for(WIDE)) == len(fast.kernels)


def test_column_blocks_match_the_wgsl_and_cover_head_dim() -> None:
    """The workgroups along x split head_dim into blocks of the columns each workgroup
    owns (FF_WG_COLS = 64 FF_NCOL FF_SPLIT of its module; the sum passes' 64 and 128), and
    together cover every column up to the largest head_dim, with no block left empty."""
    bwd = BACKWARD.read_text()
    fast = VARIANTS["fast"]
    assert [bound for bound, _ in fast.by_head_dim] == [64, 128, 256]
    # each family over its head_dims where the device runs it, and the 128 family (the
    # variant itself) above 128 where the device cannot run the 256 family
    families, lower = [], 0
    for bound, v in fast.by_head_dim:
        families.append((v, range(lower + 1, bound + 1), WIDE))
        lower = bound
    families.append((fast, range(129, fast.max_head_dim + 1), NARROW))
    for v, dims, limits in families:
        sizes = (SHADER_DIR / f"fa2_fast_d{_family(v)}.wgsl").read_text()
        ncol, split = _const(sizes, "FF_NCOL"), _const(sizes, "FF_SPLIT")
        *passes, dq_sum, kv_sum = (v.forward, *v.backward[1:])
        assert all(k.cols_per_workgroup == 64 * ncol * split for k in passes), v.forward.files
        assert f"let c = wg.x * {dq_sum.cols_per_workgroup}u + (lid % 16u) * 4u;" in bwd
        assert f"let c = wg.x * {kv_sum.cols_per_workgroup}u + lid % 128u;" in bwd
        assert v.backward[0].cols_per_workgroup == 0  # the Delta pass loops over head_dim
        for d in dims:
            cfg = AttentionConfig(batch=1, num_heads=1, seq_q=1, seq_k=1, head_dim=d)
            assert fast.for_head_dim(d, limits) is v
            for k in (v.forward, *v.backward):
                # the pass adding dK/dV copies runs only with several (kv_parts > 1)
                assert (k.workgroups(cfg, 1, 1) == (0, 0, 0)) == k.adds_kv_parts
                x = k.workgroups(cfg, 1, 2 if k.adds_kv_parts else 1)[0]
                cols = k.cols_per_workgroup or d
                assert (x - 1) * cols < d <= x * cols, (k.entry_point, d, x)
                # parts repeat the column blocks along x (ff_set_cols takes x % blocks)
                assert k.workgroups(cfg, 1, 3)[0] == x * (3 if k.key_parts else 1)


def test_partial_dq_slots_fill_the_gpu_within_one_binding() -> None:
    fast = VARIANTS["fast"]
    big = 1 << 40
    # 16 heads: 16 slots x 16 = 256 workgroups; few heads: one slot per key tile at most
    assert fast.dq_slots(AttentionConfig(1, 16, 4096, 4096, 64), big) == 16
    assert fast.dq_slots(AttentionConfig(1, 2, 4096, 4096, 64), big) == PARTIAL_DQ_MAX
    assert fast.dq_slots(AttentionConfig(1, 1, 40, 300, 8), big) == 5  # 5 key tiles
    assert VARIANTS["seed"].dq_slots(AttentionConfig(1, 16, 4096, 4096, 64), big) == 0
    # the scratch (stats + sums) stays within the binding limit ...
    cfg = AttentionConfig(1, 16, 32768, 32768, 128)
    cap = 2**31 - 1
    slots = fast.dq_slots(cfg, cap)
    assert 1 <= slots < 16 and 4 * scratch_elems(cfg, slots) <= cap
    # ... and a case whose scratch cannot fit is refused by name, with the limit
    with pytest.raises(ConfigError, match=r"seq_q.*over the device limit of 1000000 bytes"):
        fast.dq_slots(AttentionConfig(1, 16, 4096, 4096, 64), 1_000_000)


def test_band_layout_where_a_window_bounds_both_sides() -> None:
    """dQ's partial sums per key tile (Variant.dq_band_rows) where the window is bounded on
    both sides and the band costs at most DQ_BAND_MAX_RATIO times the slots' memory; one
    workgroup per key tile then; never for a variant whose params do not name the field."""
    fast = VARIANTS["fast"].for_head_dim(64)
    big = 1 << 40
    band = AttentionConfig(1, 16, 4096, 4096, 64, causal=True, window_left=1024, window_right=1024)
    # causal caps right at 0: 64 + 1024 rows, 17 tiles; 64 blocks x 1088 rows against 16
    # sums of 4096 rows
    assert fast.dq_band_rows(band, big) == 1088
    assert Split.of(fast, band, {"maxStorageBufferBindingSize": big, "maxBufferSize": big}) == (
        Split(dq_slots=64, kv_parts=1, dq_band_rows=1088)
    )
    stats = scratch_elems(band, 0)
    assert scratch_elems(band, 0, 1088) == stats + 64 * 16 * 1088 * 64
    # not causal: 2112 rows, 2.06 times the slots' sums
    both = AttentionConfig(1, 16, 4096, 4096, 64, window_left=1024, window_right=1024)
    assert fast.dq_band_rows(both, big) == 0
    # a side left open (causal alone, left only), the seed, a layout without the field
    for cfg in (
        AttentionConfig(1, 16, 4096, 4096, 64, causal=True),
        AttentionConfig(1, 16, 4096, 4096, 64, window_right=40),
    ):
        assert fast.dq_band_rows(cfg, big) == 0
    assert VARIANTS["seed"].dq_band_rows(band, big) == 0
    padded = tuple("_pad0" if f == "dq_band_rows" else f for f in fast.params)
    assert replace(fast, params=padded).dq_band_rows(band, big) == 0
    # one float over the binding: the slots instead (all 16 fit: the band is 1.06 times them)
    cap = 4 * scratch_elems(band, 0, 1088) - 4
    assert fast.dq_band_rows(band, cap) == 0 and fast.dq_slots(band, cap) == 16
    # window w: w - 1 keys each side; two sequences of 113 keys take blocks 0-1 and 2-3
    # (sequence b's tiles from k_row0 // 64 + b: they would meet in block 1 otherwise)
    win = AttentionConfig(2, 4, 100, 113, 16, window=17)
    assert fast.dq_band_rows(win, big) == 128 and dq_band_blocks(win) == 4
    varlen = AttentionConfig(
        3,
        4,
        200,
        300,
        64,
        window=8,
        cu_seqlens_q=(0, 113, 153, 353),
        cu_seqlens_k=(0, 113, 413, 483),
    )
    assert dq_band_blocks(varlen) == max(0 + 0 + 2, 1 + 1 + 5, 6 + 2 + 2)


def test_key_tiles_split_into_parts_where_they_are_too_few() -> None:
    fast = VARIANTS["fast"]
    big = 1 << 40
    # enough key tiles (64 x 16 heads): no split; the seed never splits
    assert fast.kv_parts(AttentionConfig(1, 16, 4096, 4096, 64), big) == 1
    assert VARIANTS["seed"].kv_parts(AttentionConfig(1, 16, 4096, 1, 64), big) == 1
    # cross-attention's short K: 2 key tiles x 16 heads, 8 parts each fill 256 workgroups
    assert fast.kv_parts(AttentionConfig(1, 16, 4096, 128, 128), big) == 8
    # the count whose workgroups come nearest to 256: 9 tiles x 16 heads, 2 parts (288, not
    # 144); 60 tiles of MQA, 4 (240, not 300)
    assert fast.kv_parts(AttentionConfig(1, 16, 4096, 576, 64), big) == 2
    assert fast.kv_parts(AttentionConfig(1, 16, 4096, 3840, 64, num_kv_heads=1), big) == 4
    # one key of MQA: 16 heads x 64 query tiles, at least KV_PART_MIN_TILES of them a part
    assert fast.kv_parts(AttentionConfig(1, 16, 4096, 1, 64, num_kv_heads=1), big) == 128
    assert fast.kv_parts(AttentionConfig(1, 16, 64, 1, 64, num_kv_heads=1), big) == 2
    assert fast.kv_parts(AttentionConfig(1, 1, 64, 1, 64), big) == 1
    # fewer dQ sums than key tiles, each sum's tiles in rounds: the sums' workgroups fill the
    # GPU where they are enough (S = 4096, 16 heads: 16 sums, no parts) ...
    assert fast.kv_parts(AttentionConfig(1, 16, 4096, 4096, 128), big) == 1
    # ... and where they are capped (64 at most; here 256 would fill it) parts make up the
    # rest, whatever the mask: a part takes the same aligned query tiles in every key tile
    # (ffb_first_tile), so two rounds' parts never add into the same dQ rows at once
    mqa = AttentionConfig(1, 16, 8192, 8192, 64, num_kv_heads=1, causal=True)
    assert fast.dq_slots(mqa, big) == 64 and fast.kv_parts(mqa, big) == 4
    gqa3 = AttentionConfig(1, 3, 8192, 8192, 64, num_kv_heads=1, causal=True)
    assert fast.dq_slots(gqa3, big) == 64 and fast.kv_parts(gqa3, big) == 4
    assert fast.kv_parts(replace(gqa3, causal=False), big) == 4
    one = AttentionConfig(1, 1, 8192, 8192, 64)
    assert fast.dq_slots(one, big) == 64 and fast.kv_parts(one, big) == 4
    assert fast.kv_parts(replace(one, window_left=8000), big) == 4
    # the sums' binding caps them at 7 (S = 32768, head_dim 128, 2 GiB): 2 parts make 14 of
    # the 16 wanted (3 would make 21)
    long = AttentionConfig(1, 16, 32768, 32768, 128)
    cap = (1 << 31) - 4
    assert fast.dq_slots(long, cap) == 7 and fast.kv_parts(long, cap) == 2
    assert fast.kv_parts(replace(long, causal=True), cap) == 2
    # ... and 15 sums at S = 16384: no parts (2 would make 30)
    assert fast.kv_parts(replace(long, seq_q=16384, seq_k=16384), cap) == 1
    # 64 key tiles: a sum each on an H200, 4 parts; 21 sums fit lavapipe's binding, and
    # 12 parts make 252 of the 256 workgroups
    gqa6 = AttentionConfig(1, 6, 4096, 4096, 64, num_kv_heads=1, causal=True)
    assert fast.kv_parts(gqa6, big) == 4
    assert fast.dq_slots(gqa6, 1 << 27) == 21 and fast.kv_parts(gqa6, 1 << 27) == 12
    # the copies of dK stay within one binding
    cfg = AttentionConfig(1, 16, 4096, 1, 64, num_kv_heads=1)
    assert fast.kv_parts(cfg, 64 * 4 * 10) == 10
    sizes = buffer_sizes(cfg, ("dk", "dv", "dq"), 1, kv_parts=10)
    assert sizes == {"dk": 640, "dv": 640, "dq": 4096 * 16 * 64}


def test_key_parts_travel_with_the_kernel() -> None:
    # the page rebuilds a variant's kernels from to_dict (variants.request_form)
    for k in VARIANTS["fast"].for_head_dim(128).backward:
        assert Kernel.from_dict(k.to_dict()) == k
    assert Kernel.from_dict({**k.to_dict(), "key_parts": True}).key_parts


class SizeRecorder(NoGPUWorkDevice):
    """Makes the buffers the runner asks for, recording their sizes; no other GPU work."""

    def create_buffer(self, size: int, usage: tuple[str, ...], label: str) -> Buffer:
        return Buffer(None, size, label)

    def write_buffer(self, buffer: Buffer, data: bytes) -> None:
        assert len(data) <= buffer.size


def test_buffers_read_as_vec4s_hold_every_float() -> None:
    """The fast kernels view the inputs and the scratch as array<vec4<f32>>, whose length
    is the binding's size in whole vec4s: a size that is not a multiple of 16 bytes hides
    the last floats (Chromium's bounds checks then return other floats; four cases of the
    matrix failed there). The scratch's parts start on a vec4 too, for odd row counts."""
    cfg = AttentionConfig(1, 3, 59, 203, 59, num_kv_heads=1)  # 177 rows, odd floats
    assert cfg.q_elems() % 4 and cfg.kv_elems() % 4 and cfg.rows() % 2
    f32 = {n: b"\0" * 4 * e for n, e in (("q", cfg.q_elems()), ("k", cfg.kv_elems()))}
    tensors = {**f32, "v": f32["k"], "d_out": f32["q"]}
    bufs = create_buffers(SizeRecorder(), cfg, tensors, Split(dq_slots=3))
    for name in ("q", "k", "v", "d_out", "mask"):
        assert bufs[name].size % 16 == 0 and bufs[name].size >= len(tensors.get(name, b"")), name
    # [Delta, LSE] of 177 rows: 354 floats, then 3 sums of 177 x 59 floats, each from a vec4
    assert scratch_elems(cfg, 3) == 356 + 3 * 10444
    assert bufs["stats"].size == 4 * scratch_elems(cfg, 3)


def test_feature_axes_are_the_fast_variants_and_skipped_by_the_seed() -> None:
    """Every case of the matrix runs on the fast variant; the seed refuses exactly the cases
    that use FlashAttention-2's axes beyond it, naming the feature (pytest skips them)."""
    from py_harness.host.judge.cases import CASES
    from py_harness.kernels import FAST, SEED, features_used
    from py_harness.variant import FEATURES, SEED_FEATURES

    new_axes = set(FEATURES) - SEED_FEATURES
    assert new_axes == {"bottom_right", "window_lr", "softcap", "alibi", "varlen"}
    used_somewhere = set()
    for case in CASES:
        cfg = case.config()
        used = set(features_used(cfg))
        used_somewhere |= used
        assert FAST.for_head_dim(cfg.head_dim).refusal(cfg) is None, case.id
        why = SEED.refusal(cfg)
        if case.head_dim > 128:
            assert why == f"seed supports head_dim <= 128 (head_dim={case.head_dim})"
        elif used & new_axes:
            assert why and any(f in why for f in used & new_axes), (case.id, why)
        else:
            assert why is None, (case.id, why)
    assert new_axes <= used_somewhere
