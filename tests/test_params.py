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
    fields, size = wgsl_struct_layout((SHADERS / file).read_text(), struct_name)
    offsets = field_offsets()
    assert [f for f, _, _ in fields] == [f for f, _ in PARAM_FIELDS]
    for fname, offset, code in fields:
        assert offsets[fname] == offset, fname
        assert dict(PARAM_FIELDS)[fname] == code, f"{fname}: type code"
    # A uniform buffer's size must be a multiple of 16 and cover the struct.
    assert size == PARAMS_SIZE and PARAMS_SIZE % 16 == 0


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
