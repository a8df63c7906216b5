"""Packs the kernels' uniform params struct (FlashParams / FlashBwdParams, same layout).

The field list below is the single host-side copy of the WGSL struct; tests parse
both shaders and check every name and offset against it.
"""

from __future__ import annotations

import struct

from .config import AttentionConfig

# (name, struct code) in WGSL declaration order; every field is 4 bytes.
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
    ("_pad0", "I"),
    ("_pad1", "I"),
    ("_pad2", "I"),
)
PARAMS_FORMAT = "<" + "".join(code for _, code in PARAM_FIELDS)
PARAMS_SIZE = struct.calcsize(PARAMS_FORMAT)  # 80: a multiple of 16, as uniforms need


def field_offsets() -> dict[str, int]:
    """Byte offset of each field, as the host packs it."""
    return {name: 4 * i for i, (name, _) in enumerate(PARAM_FIELDS)}


def param_values(cfg: AttentionConfig) -> dict[str, int | float]:
    sb, sh, sq, sk = cfg.mask_strides()
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
        "causal_offset": cfg.causal_offset,
        "mask_stride_b": sb,
        "mask_stride_h": sh,
        "mask_stride_q": sq,
        "mask_stride_k": sk,
        "window": cfg.window,
        "_pad0": 0,
        "_pad1": 0,
        "_pad2": 0,
    }


def pack_params(cfg: AttentionConfig) -> bytes:
    values = param_values(cfg)
    return struct.pack(PARAMS_FORMAT, *(values[name] for name, _ in PARAM_FIELDS))
