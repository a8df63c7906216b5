"""Packs the kernels' uniform params struct, in the field order a variant declares.

PARAM_FIELDS is the built-in kernels' struct (FlashParams / FlashBwdParams, one layout) and
the vocabulary a variant's own layout (Variant.params) draws from; `_padN` names padding.
tests/test_params.py parses the built-in shaders and checks every name and offset against
it; host/variant_file.py checks a variant file's layout against its WGSL struct.
"""

from __future__ import annotations

import re
import struct

from .config import AttentionConfig, ConfigError, kernel_window

# (name, struct code) in WGSL declaration order; every field is 4 bytes
# ("I": u32, "i": i32, "f": f32).
PARAM_FIELDS: tuple[tuple[str, str], ...] = (
    ("batch_size", "I"),
    ("num_heads", "I"),
    ("seq_q", "I"),
    ("seq_k", "I"),
    ("head_dim", "I"),
    ("num_kv_heads", "I"),
    ("scale", "f"),
    ("dropout_prob", "f"),
    ("seed", "I"),
    ("causal", "I"),
    ("has_mask", "I"),
    ("causal_offset", "I"),
    ("mask_stride_b", "I"),
    ("mask_stride_h", "I"),
    ("mask_stride_q", "I"),
    ("mask_stride_k", "I"),
    ("window", "I"),
    # The general visibility rule (config.kernel_window): key kj is visible to query qi
    # when -key_left <= kj - (qi + query_shift) <= key_right; the seed reads causal,
    # causal_offset and window instead (its struct has padding here).
    ("query_shift", "i"),
    ("key_left", "i"),
    ("key_right", "i"),
    ("softcap", "f"),
    # ALiBi: the slope of (b, h) is alibi_slopes[b * alibi_stride_b + h]
    ("has_alibi", "I"),
    ("alibi_stride_b", "I"),
    # A variable-length batch (1: its sequences are in the seqlens uniform) and its query
    # rows (batch * seq_q when dense): the LSE is [H, total_q] there.
    ("varlen", "I"),
    ("total_q", "I"),
    # The fast backward's dQ partial sums in the band layout, rows per key tile (0: per
    # slot; the runner's Split, from Variant.dq_band_rows: only a variant whose layout
    # names this field is given the band layout).
    ("dq_band_rows", "I"),
    ("_pad1", "I"),
    ("_pad2", "I"),
)
DEFAULT_PARAMS: tuple[str, ...] = tuple(name for name, _ in PARAM_FIELDS)
# The fields a layout may name (padding aside), with their WGSL types.
KNOWN_PARAMS: dict[str, str] = {n: c for n, c in PARAM_FIELDS if not n.startswith("_pad")}
WGSL_TYPE = {"I": "u32", "i": "i32", "f": "f32"}
_PAD = re.compile(r"_pad\d+")


def check_layout(layout: tuple[str, ...]) -> None:
    """Refuse a layout naming a field the harness cannot fill, or one field twice."""
    if not isinstance(layout, tuple) or not all(isinstance(f, str) for f in layout):
        raise ConfigError("params", f"must be a list of field names, got {layout!r}")
    for name in layout:
        if name not in KNOWN_PARAMS and not _PAD.fullmatch(name):
            raise ConfigError(
                "params",
                f"unknown field {name!r}; known: {', '.join(KNOWN_PARAMS)} "
                "(and _pad0, _pad1, ... for padding)",
            )
    twice = sorted({f for f in layout if layout.count(f) > 1})
    if twice:
        raise ConfigError("params", f"names {twice} more than once")


def field_code(name: str) -> str:
    """The struct code of a field: its type ("I" u32 or "f" f32); padding is u32."""
    return KNOWN_PARAMS.get(name, "I")


def params_format(layout: tuple[str, ...] = DEFAULT_PARAMS) -> str:
    """struct format of the layout, padded with zero words to a multiple of 16 bytes (a
    uniform buffer's size must be one; the WGSL struct itself may end earlier)."""
    pad = -len(layout) % 4
    return "<" + "".join(field_code(name) for name in layout) + "I" * pad


def params_size(layout: tuple[str, ...] = DEFAULT_PARAMS) -> int:
    return struct.calcsize(params_format(layout))


PARAMS_FORMAT = params_format()
PARAMS_SIZE = params_size()  # 112: a multiple of 16, as uniforms need


def field_offsets(layout: tuple[str, ...] = DEFAULT_PARAMS) -> dict[str, int]:
    """Byte offset of each field, as the host packs it."""
    return {name: 4 * i for i, name in enumerate(layout)}


def param_values(cfg: AttentionConfig, dq_band_rows: int = 0) -> dict[str, int | float]:
    """Each field's value for a run of cfg; dq_band_rows is the runner's choice for the
    device (runner.Split), not the configuration's."""
    sb, sh, sq, sk = cfg.mask_strides()
    left, right = kernel_window(cfg)
    return {
        "batch_size": cfg.batch,
        "num_heads": cfg.num_heads,
        "seq_q": cfg.seq_q,
        "seq_k": cfg.seq_k,
        "head_dim": cfg.head_dim,
        "num_kv_heads": cfg.kv_heads,
        "scale": cfg.softmax_scale,
        "dropout_prob": float(cfg.dropout_p),
        "seed": cfg.seed,
        "causal": int(cfg.causal),
        "has_mask": int(cfg.mask_shape is not None),
        # u32 for the seed, which only runs offsets >= 0; two's complement otherwise
        "causal_offset": cfg.causal_offset % 2**32,
        "mask_stride_b": sb,
        "mask_stride_h": sh,
        "mask_stride_q": sq,
        "mask_stride_k": sk,
        "window": cfg.window,
        "query_shift": cfg.causal_offset,
        "key_left": left,
        "key_right": right,
        "softcap": float(cfg.softcap),
        "has_alibi": int(cfg.alibi_shape is not None),
        "alibi_stride_b": cfg.alibi_stride_b(),
        "varlen": int(cfg.varlen),
        "total_q": cfg.total_q,
        "dq_band_rows": dq_band_rows,
    }


def pack_params(
    cfg: AttentionConfig, layout: tuple[str, ...] = DEFAULT_PARAMS, dq_band_rows: int = 0
) -> bytes:
    check_layout(layout)
    values = param_values(cfg, dq_band_rows)
    words = [values.get(name, 0) for name in layout]  # padding: 0
    return struct.pack(params_format(layout), *words, *[0] * (-len(layout) % 4))
