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
        ("flash_attention_v2.wgsl", "FlashParams"),
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
    if file == "flash_attention_v2.wgsl":
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
