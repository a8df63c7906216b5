"""Packs the kernels' uniform params struct, in the field order a variant declares.

PARAM_FIELDS is the built-in kernels' struct (FlashParams / FlashBwdParams, one layout) and
the vocabulary a variant's own layout (Variant.params) draws from; `_padN` names padding.
tests/test_params.py parses the built-in shaders and checks every name and offset against
it; host/variant_file.py checks a variant file's layout against its WGSL struct.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Any

from .config import AttentionConfig, ConfigError, kernel_window
from .expr import Expr, as_float, as_int, compile_expr

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
_PAD_NAME = re.compile(r"_?pad")  # a kernel's own struct: zeros for _pad0, pad1, _padding


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


# ---- a kernel's own uniform structs, field by field by expression -----------------------
# What a variant's expressions (grids, struct fields, buffer sizes, layouts, constants, its
# envelope) may name: every params field above by its name (causal_offset signed here), the
# configuration's own names, and the runner's choices for the device (dq_slots, kv_parts).
CONFIG_NAMES: dict[str, str] = {
    "batch": "batch elements (the sequences of a variable-length batch)",
    "kv_heads": "K/V heads (num_kv_heads)",
    "group": "query heads per K/V head (num_heads / num_kv_heads)",
    "total_k": "key rows of all sequences (batch x seq_k when dense)",
    "causal_offset": "query i sits at key position i + causal_offset (signed)",
    "window_left": "FlashAttention-2's window_size_left (-1: unbounded)",
    "window_right": "FlashAttention-2's window_size_right (-1: unbounded)",
    "dropout_p": "the dropout probability",
    "dq_slots": "partial dQ sums the runner keeps in stats (0: none)",
    "kv_parts": "parts each key tile's work is split into (Kernel.key_parts)",
}
SCOPE_NAMES: tuple[str, ...] = (*KNOWN_PARAMS, *(n for n in CONFIG_NAMES if n not in KNOWN_PARAMS))
# A WGSL scalar or vector type: (scalar code, components); shorthands vec4f, vec2u, ...
_SCALARS = {"u32": "I", "i32": "i", "f32": "f"}
_SHORT = {"f": "f32", "u": "u32", "i": "i32"}
_VECTOR = re.compile(r"vec([234])\s*(?:<\s*(u32|i32|f32)\s*>|([fui]))")


def expression_scope(
    cfg: AttentionConfig, dq_band_rows: int = 0, dq_slots: int = 0, kv_parts: int = 1
) -> dict[str, int | float]:
    """Every SCOPE_NAMES name's value for a run of cfg on a device (runner.Split's choices)."""
    scope: dict[str, int | float] = dict(param_values(cfg, dq_band_rows))
    scope |= {
        "batch": cfg.batch,
        "kv_heads": cfg.kv_heads,
        "group": cfg.num_heads // cfg.kv_heads,
        "total_k": cfg.total_k,
        "causal_offset": cfg.causal_offset,
        "window_left": cfg.window_left,
        "window_right": cfg.window_right,
        "dropout_p": float(cfg.dropout_p),
        "dq_slots": dq_slots,
        "kv_parts": kv_parts,
    }
    return scope


def wgsl_type(text: str) -> tuple[str, int] | None:
    """(struct code, components) of a WGSL scalar or vector type; None for any other."""
    text = text.strip()
    if text in _SCALARS:
        return _SCALARS[text], 1
    m = _VECTOR.fullmatch(text)
    if m is None:
        return None
    return _SCALARS[m[2] or _SHORT[m[3]]], int(m[1])


@dataclass(frozen=True)
class Field:
    """One field of a kernel's uniform struct: its name, WGSL type, and its value: an
    expression per component, or none for a KNOWN_PARAMS name (param_values' value) or
    padding (zeros)."""

    name: str
    type: str
    # Compared by their texts (below): where an error names one differs by how it came.
    exprs: tuple[Expr, ...] = field(default=(), compare=False)
    texts: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "texts", tuple(e.text for e in self.exprs))

    @property
    def code(self) -> str:
        return wgsl_type(self.type)[0]  # type: ignore[index]

    @property
    def components(self) -> int:
        return wgsl_type(self.type)[1]  # type: ignore[index]

    def to_spec(self) -> list[Any]:
        return [self.name, self.type, list(self.texts)]


def make_fields(
    struct: str, declared: list[tuple[str, str]], values: dict[str, Any], where: str
) -> tuple[Field, ...]:
    """The fields of a uniform struct (declared: (name, WGSL type) in order, as the WGSL has
    them), each given a value: values[name] (an expression, a number, or a list of them for a
    vector), else the harness's own field of that name (KNOWN_PARAMS, its type checked), else
    zeros for a name that starts with "_pad" or "pad". ConfigError names the field."""
    fields = []
    for name, ftype in declared:
        at = f"{where}.{name}"
        kind = wgsl_type(ftype)
        if kind is None:
            raise ConfigError(
                at,
                f"struct {struct} declares {name}: {ftype}; the harness packs u32, i32, f32 "
                "and vec2/vec3/vec4 of them",
            )
        code, n = kind
        if name in values:
            given = values[name]
            items = given if isinstance(given, list) else [given]
            if len(items) != n:
                raise ConfigError(at, f"{ftype} takes {n} value(s), got {len(items)}")
            exprs = tuple(
                compile_expr(item, SCOPE_NAMES, at if n == 1 else f"{at}[{i}]")
                for i, item in enumerate(items)
            )
            fields.append(Field(name, ftype, exprs))
        elif name in KNOWN_PARAMS:
            if n != 1 or code != KNOWN_PARAMS[name]:
                raise ConfigError(
                    at,
                    f"struct {struct} declares {name}: {ftype}; the harness's {name} is "
                    f"{WGSL_TYPE[KNOWN_PARAMS[name]]} (or give params.{name} an expression)",
                )
            fields.append(Field(name, ftype))
        elif _PAD_NAME.match(name):
            fields.append(Field(name, ftype))
        else:
            raise ConfigError(
                at,
                f"struct {struct}'s field {name} has no value: give it an expression over "
                f'{", ".join(SCOPE_NAMES)} (e.g. params.{name} = "seq_q")',
            )
    unused = sorted(set(values) - {n for n, _ in declared})
    if unused:
        raise ConfigError(
            f"{where}.{unused[0]}",
            f"struct {struct} has no field {unused[0]}; its fields: "
            f"{', '.join(n for n, _ in declared)}",
        )
    return tuple(fields)


def pack_struct(
    fields: tuple[Field, ...], cfg: AttentionConfig, scope: dict[str, int | float]
) -> bytes:
    """The struct's bytes in WGSL's uniform layout (each field at its alignment: 4 bytes for
    a scalar, 8 for vec2, 16 for vec3 and vec4), the size rounded up to 16 bytes. Values out
    of their type's range are refused with the field named."""
    out = bytearray()
    known = param_values(cfg, int(scope.get("dq_band_rows", 0)))
    for f in fields:
        code, n = f.code, f.components
        align = 4 if n == 1 else 8 if n == 2 else 16
        out += bytes(-len(out) % align)
        if f.exprs:
            words = [_word(code, e(scope), e.where) for e in f.exprs]
        elif f.name in KNOWN_PARAMS:
            words = [known[f.name]]
        else:
            words = [0] * n
        out += struct.pack("<" + code * n, *words)
    out += bytes(-len(out) % 16)
    return bytes(out)


def _word(code: str, value: Any, where: str) -> int | float:
    if code == "f":
        return as_float(value, where)
    if code == "i":
        return as_int(value, where, -(2**31), 2**31 - 1)
    return as_int(value, where, 0, 2**32 - 1)
