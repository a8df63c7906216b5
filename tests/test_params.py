"""The host's params packing against the WGSL structs in both shaders."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from py_harness.config import AttentionConfig
from py_harness.params import PARAM_FIELDS, PARAMS_FORMAT, PARAMS_SIZE, field_offsets, pack_params

SHADERS = Path(__file__).resolve().parents[1] / "shaders"
# WGSL host-shareable layout (spec, "Alignment and Size") for the types these structs use.
# What the seed's backward reads (the rest of the layout is padding to it).
SEED_READS = {f for f, _ in PARAM_FIELDS[:17]}
WGSL_TYPES = {"u32": (4, 4, "I"), "i32": (4, 4, "i"), "f32": (4, 4, "f")}


def wgsl_struct_layout(source: str, name: str) -> tuple[list[tuple[str, int, str]], int]:
    """[(field, offset, struct code)] and the struct size, by WGSL's layout rules."""
    body = re.search(rf"struct\s+{name}\s*\{{(.*?)\}};", source, re.S)
    assert body, f"struct {name} not found"
    fields, offset, align = [], 0, 1
    for fname, ftype in re.findall(r"(\w+)\s*:\s*(\w+)\s*,", body[1]):
        falign, fsize, code = WGSL_TYPES[ftype]
        offset = (offset + falign - 1) // falign * falign
        fields.append((fname, offset, code))
        offset += fsize
        align = max(align, falign)
    size = (offset + align - 1) // align * align
    return fields, size


@pytest.mark.parametrize(
    ("file", "struct_name"),
    [
        ("fa2_common.wgsl", "FlashParams"),
        ("flash_attention_v2_backward.wgsl", "FlashBwdParams"),
    ],
)
def test_every_field_offset_matches_wgsl(file: str, struct_name: str) -> None:
    """Our FlashParams is the whole layout; the seed's FlashBwdParams (given, unchanged) is
    its first 20 words, with padding where the fields it does not read (query_shift ...) are."""
    fields, size = wgsl_struct_layout((SHADERS / file).read_text(), struct_name)
    offsets = field_offsets()
    ours = [f for f, _ in PARAM_FIELDS][: len(fields)]
    for (fname, offset, code), want in zip(fields, ours, strict=True):
        if fname.startswith("_pad") and fname != want:
            assert file == "flash_attention_v2_backward.wgsl" and want not in SEED_READS
            continue
        assert fname == want
        assert offsets[fname] == offset, fname
        assert dict(PARAM_FIELDS)[fname] == code, f"{fname}: type code"
    # A uniform buffer's size must be a multiple of 16 and cover the struct.
    assert size <= PARAMS_SIZE and PARAMS_SIZE % 16 == 0
    if file == "fa2_common.wgsl":
        assert size == PARAMS_SIZE


def test_packed_values_round_trip() -> None:
    cfg = AttentionConfig(
        batch=2,
        num_heads=6,
        num_kv_heads=2,
        seq_q=113,
        seq_k=203,
        head_dim=59,
        causal=True,
        causal_offset=90,
        window=17,
        mask_shape=(2, 1, 1, 203),
        dropout_p=0.17,
        seed=99,
    )
    values = dict(
        zip(
            [f for f, _ in PARAM_FIELDS],
            struct.unpack(PARAMS_FORMAT, pack_params(cfg)),
            strict=True,
        )
    )
    assert values["num_kv_heads"] == 2 and values["causal_offset"] == 90 and values["window"] == 17
    assert values["has_mask"] == 1 and values["causal"] == 1 and values["seed"] == 99
    # [B, 1, 1, Sk]: batch stride Sk, heads and rows broadcast, keys contiguous.
    assert (values["mask_stride_b"], values["mask_stride_h"]) == (203, 0)
    assert (values["mask_stride_q"], values["mask_stride_k"]) == (0, 1)
    assert values["scale"] == pytest.approx(59**-0.5, rel=1e-7)
    assert values["dropout_prob"] == pytest.approx(0.17, rel=1e-7)


@pytest.mark.parametrize(
    ("shape", "strides"),
    [
        ((113, 203), (0, 0, 203, 1)),
        ((2, 6, 113, 203), (6 * 113 * 203, 113 * 203, 203, 1)),
        ((2, 1, 113, 203), (113 * 203, 0, 203, 1)),
        ((203,), (0, 0, 0, 1)),
        ((1, 1, 113, 1), (0, 0, 1, 0)),
    ],
)
def test_mask_strides_broadcast_with_zero(shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
    cfg = AttentionConfig(2, 6, 113, 203, 64, mask_shape=shape)
    assert cfg.mask_strides() == strides


def test_kernel_window_is_the_reference_visibility() -> None:
    """The bounds the kernels read (config.kernel_window, with query_shift) select exactly
    the keys reference.visible_mask does, for every way of writing a window, signed offsets
    and causal, over random small shapes."""
    import numpy as np

    from py_harness.config import kernel_window
    from py_harness.host.judge.reference import visible_mask

    rng = np.random.default_rng(5)
    for _ in range(400):
        sq, sk = (int(x) for x in rng.integers(1, 40, 2))
        kw = {
            "causal": bool(rng.integers(2)),
            "causal_offset": int(rng.integers(-45, 45)),
        }
        form = rng.integers(3)
        if form == 1:
            kw["window"] = int(rng.integers(1, 12))
        elif form == 2:
            kw["window_left"], kw["window_right"] = (int(x) for x in rng.integers(-1, 12, 2))
        cfg = AttentionConfig(batch=1, num_heads=1, seq_q=sq, seq_k=sk, head_dim=4, **kw)
        left, right = kernel_window(cfg)
        d = np.arange(sk)[None, :] - (np.arange(sq)[:, None] + cfg.causal_offset)
        got = (d >= -left) & (d <= right)
        np.testing.assert_array_equal(got, visible_mask(sq, sk, **kw), err_msg=str(kw))
        words = struct.unpack(PARAMS_FORMAT, pack_params(cfg))
        values = dict(zip([f for f, _ in PARAM_FIELDS], words, strict=True))
        assert (values["query_shift"], values["key_left"], values["key_right"]) == (
            cfg.causal_offset,
            left,
            right,
        )


def _tiles_inside(cfg: AttentionConfig, rows: int) -> bool:
    """Whether every tile the fast kernels' passes walk lies inside Q and K: the forward's
    key tiles from each query tile's first visible key (ff_key_range), the backward's query
    tiles from each key tile's first visible query (ff_query_range), as the WGSL steps."""
    from py_harness.config import kernel_window

    left, right = kernel_window(cfg)
    shift, sq, sk = cfg.causal_offset, cfg.seq_q, cfg.seq_k
    if sq % rows or sk % rows:
        return False
    for q0 in range(0, sq, rows):
        lo = max(q0 + shift - left, 0)
        hi = min(max(q0 + rows - 1 + shift + right + 1, 0), sk)
        if any(k0 + rows > sk for k0 in range(lo, hi, rows)):
            return False
    for k0 in range(0, sk, rows):
        lo = max(k0 - shift - right, 0)
        hi = min(max(k0 + rows - 1 - shift + left + 1, 0), sq)
        if any(q0 + rows > sq for q0 in range(lo, hi, rows)):
            return False
    return True


def test_whole_tiles_only_where_every_tile_is_inside() -> None:
    """config.tiles_are_whole (which lets the fast kernels load without bounds checks) holds
    only where every tile their passes walk lies inside the tensors, over random shapes,
    windows, signed offsets and causal; and it holds for the plain, causal, bottom-right and
    tile-aligned window runs it is meant for. Never for head_dim off the column blocks or a
    variable-length batch."""
    import numpy as np

    from py_harness.config import tiles_are_whole

    rng = np.random.default_rng(7)
    held = 0
    for _ in range(3000):
        sq, sk = (int(x) * 32 for x in rng.integers(1, 10, 2))
        kw: dict = {
            "causal": bool(rng.integers(2)),
            "causal_offset": 32 * int(rng.integers(-10, 10)),
        }
        if rng.integers(2):  # bounds of 32 k - 1 and 32 k, -1 meaning open
            kw["window_left"], kw["window_right"] = (
                int(x) // 2 * 32 - int(x) % 2 for x in rng.integers(0, 12, 2)
            )
        cfg = AttentionConfig(batch=1, num_heads=1, seq_q=sq, seq_k=sk, head_dim=64, **kw)
        if tiles_are_whole(cfg, 64, 64):
            held += 1
            assert _tiles_inside(cfg, 64), kw | {"seq_q": sq, "seq_k": sk}
    assert held > 200  # 270 of these draws
    meant = [
        {},
        {"causal": True},
        {"causal": True, "causal_offset": 64},  # bottom-right, Sk = Sq + 64
        {"window_left": 64, "window_right": 0},
        {"window_left": 128, "window_right": 64, "causal_offset": -64},
    ]
    for kw in meant:
        cfg = AttentionConfig(batch=2, num_heads=2, seq_q=128, seq_k=192, head_dim=128, **kw)
        assert tiles_are_whole(cfg, 64, 128) and _tiles_inside(cfg, 64), kw
        assert not tiles_are_whole(cfg, 64, 256), kw  # head_dim 128 in blocks of 256
    assert not tiles_are_whole(AttentionConfig(1, 2, 129, 128, 64), 64, 64)
    assert not tiles_are_whole(AttentionConfig(1, 2, 128, 128, 64, window_left=63), 64, 64)
    packed = AttentionConfig(2, 2, 64, 64, 64, cu_seqlens_q=(0, 64, 128), cu_seqlens_k=(0, 64, 128))
    assert not tiles_are_whole(packed, 64, 64)


def test_dq_band_rows_is_the_runners_choice_not_the_configs() -> None:
    """dq_band_rows comes from the runner's Split (0 unless given); a layout that pads its
    place gets 0 there whatever the runner chose."""
    cfg = AttentionConfig(1, 2, 64, 64, 16, window=9)
    at = field_offsets()["dq_band_rows"] // 4
    assert struct.unpack(PARAMS_FORMAT, pack_params(cfg))[at] == 0
    assert struct.unpack(PARAMS_FORMAT, pack_params(cfg, dq_band_rows=128))[at] == 128
    padded = tuple("_pad0" if f == "dq_band_rows" else f for f, _ in PARAM_FIELDS)
    assert struct.unpack(PARAMS_FORMAT, pack_params(cfg, padded, 128))[at] == 0
