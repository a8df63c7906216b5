"""Tensor layouts: where each element of a role's tensor lies in the buffer a kernel binds.

The host and the judge hold every tensor in one canonical layout (AttentionConfig.shapes):
Q-shaped roles [B, Sq, H, D], K-shaped ones [B, Sk, Hkv, D], the LSE [B, H, Sq]; a
variable-length batch is one batch element (B = 1) over its packed rows. A kernel declares
its own layout per role, as an axis order, outermost first ("BHSD": batch, head, position,
head_dim), or as explicit strides with an offset and a size where no order fits (padded
rows, a tensor inside a larger buffer). A packed role (kv, qkv and their gradients) holds
several tensors; its part axis is the digit that counts them ("BS3HD": per position, Q's
heads, then K's, then V's; "B3HSD": per batch element, Q, then K, then V, each [H, S, D]).

The runner converts between the two with `relayout`, slice copies over array("f") with one
Python step per element of every axis but the longest. Pure Python: runs in Pyodide.
"""

from __future__ import annotations

import itertools
import math
from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .config import PACKED, AttentionConfig, ConfigError
from .expr import Expr, Number, as_int, compile_expr

# Each role's canonical layout: the host's, and the default where a variant declares none.
CANONICAL: dict[str, str] = {
    **dict.fromkeys(("q", "d_out", "o", "dq", "k", "v", "dk", "dv"), "BSHD"),
    "lse": "BHS",
    "kv": "BSH2D",
    "dkv": "BSH2D",
    "qkv": "BS3HD",
    "dqkv": "BS3HD",
}
# Roles whose sequence axis is the queries' (the others: the keys').
_QUERY_SIDE = ("q", "d_out", "o", "dq", "lse", "qkv", "dqkv")


def parts(role: str) -> tuple[str, ...]:
    """The tensors a role's buffer holds: itself, or a packed role's parts in order."""
    return PACKED.get(role, (role,))


def axis_sizes(cfg: AttentionConfig, role: str) -> dict[str, int]:
    """Each axis of the role's canonical layout with its length (a packed role's part axis
    under its digit)."""
    query = role in _QUERY_SIDE
    if cfg.varlen:
        batch, seq = 1, cfg.total_q if query else cfg.total_k
    else:
        batch, seq = cfg.batch, cfg.seq_q if query else cfg.seq_k
    sizes = {"B": batch, "S": seq, "H": cfg.num_heads if query else cfg.kv_heads}
    if role != "lse":
        sizes["D"] = cfg.head_dim
    if role in PACKED:
        sizes[str(len(PACKED[role]))] = len(PACKED[role])
    return {axis: sizes[axis] for axis in CANONICAL[role]}


def row_major(order: str, sizes: Mapping[str, int]) -> dict[str, int]:
    """The strides of a dense buffer with these axes, outermost first."""
    strides, step = {}, 1
    for axis in reversed(order):
        strides[axis] = step
        step *= sizes[axis]
    return strides


@dataclass(frozen=True)
class Placement:
    """A role's tensor in one case: each canonical axis's stride in the buffer, the offset of
    its first element, and the buffer's floats."""

    strides: dict[str, int]
    offset: int
    floats: int

    def is_canonical(self, cfg: AttentionConfig, role: str) -> bool:
        sizes = axis_sizes(cfg, role)
        return (
            self.offset == 0
            and self.floats == math.prod(sizes.values())
            and self.strides == row_major(CANONICAL[role], sizes)
        )


@dataclass(frozen=True)
class Layout:
    """A role's declared layout: an axis order, or strides (expressions over the scope, as
    the variant's other expressions: variant.SCOPE_NAMES) with an offset and a size."""

    role: str
    order: str = ""
    strides: tuple[tuple[str, Expr], ...] = ()
    offset: Expr | None = None
    size: Expr | None = None

    @classmethod
    def parse(cls, role: str, spec: Any, known: Iterable[str], where: str) -> Layout:
        """From a variant's declaration: "BHSD", or {strides = {B = ..., ...}, offset =
        ..., size = ...}; refused with `where` and what is wrong."""
        if role not in CANONICAL:
            raise ConfigError(where, f"{role} has no layout; roles with one: {_list(CANONICAL)}")
        axes = CANONICAL[role]
        if isinstance(spec, str):
            if sorted(spec) != sorted(axes):
                raise ConfigError(
                    where,
                    f"{spec!r} is not an order of {role}'s axes {axes} ({_axis_words(axes)})",
                )
            return cls(role, order=spec)
        if not isinstance(spec, Mapping):
            raise ConfigError(
                where, f"must be an axis order like {axes!r} or a table of strides, got {spec!r}"
            )
        unknown = sorted(set(spec) - {"strides", "offset", "size"})
        if unknown or not isinstance(spec.get("strides"), Mapping):
            raise ConfigError(
                where, "a table of strides is {strides = {axis = expr, ...}, offset?, size?}"
            )
        given = spec["strides"]
        if sorted(given) != sorted(axes):
            raise ConfigError(
                f"{where}.strides",
                f"give a stride for each of {role}'s axes {list(axes)} "
                f"({_axis_words(axes)}), got {sorted(given)}",
            )
        known = tuple(known)
        strides = tuple((a, compile_expr(given[a], known, f"{where}.strides.{a}")) for a in axes)
        opt = {
            key: compile_expr(spec[key], known, f"{where}.{key}")
            for key in ("offset", "size")
            if key in spec
        }
        return cls(role, strides=strides, **opt)

    def to_spec(self) -> str | dict[str, Any]:
        """The declaration parse() reads (to_dict's form)."""
        if self.order:
            return self.order
        spec: dict[str, Any] = {"strides": {a: e.text for a, e in self.strides}}
        spec |= {k: e.text for k, e in (("offset", self.offset), ("size", self.size)) if e}
        return spec

    def placement(self, cfg: AttentionConfig, scope: Mapping[str, Number]) -> Placement:
        """Where the tensor lies in one case; refused where an element falls outside the
        buffer's declared size."""
        sizes = axis_sizes(cfg, self.role)
        if self.order:
            return Placement(row_major(self.order, sizes), 0, math.prod(sizes.values()))
        strides = {a: as_int(e(scope), e.where, 0) for a, e in self.strides}
        for a, n in sizes.items():
            if n > 1 and strides[a] == 0:
                raise ConfigError(
                    f"{self.strides[0][1].where.rsplit('.', 1)[0]}.{a}",
                    f"stride 0 puts all {n} elements of axis {a} in one place",
                )
        offset = as_int(self.offset(scope), self.offset.where, 0) if self.offset else 0
        last = offset + sum((n - 1) * strides[a] for a, n in sizes.items())
        floats = last + 1
        if self.size is not None:
            floats = as_int(self.size(scope), self.size.where, 0)
            if last >= floats:
                raise ConfigError(
                    self.size.where,
                    f"{self.role}'s last element is at {last}, past the size of {floats} "
                    f"floats ({self.size.text})",
                )
        return Placement(strides, offset, floats)


def canonical(cfg: AttentionConfig, role: str) -> Placement:
    sizes = axis_sizes(cfg, role)
    return Placement(row_major(CANONICAL[role], sizes), 0, math.prod(sizes.values()))


def to_kernel(
    cfg: AttentionConfig, role: str, tensors: Mapping[str, Any], where: Placement | None = None
) -> bytes:
    """The role's buffer from its parts' canonical f32 bytes (where: None, canonical)."""
    where = where or canonical(cfg, role)
    names = parts(role)
    if len(names) == 1 and where.is_canonical(cfg, role):
        return bytes(tensors[role])
    sizes = axis_sizes(cfg, role)
    out = array("f", bytes(4 * where.floats))
    for p, name in enumerate(names):
        src = _floats(tensors[name])
        axes, own = _part_axes(role, sizes)
        want = math.prod(own[a] for a in axes)
        if len(src) != want:
            raise ValueError(f"{name}: {len(src)} floats, its shape has {want}")
        offset = where.offset + p * where.strides.get(_digit(role), 0)
        relayout(src, 0, row_major(axes, own), out, offset, where.strides, own)
    return out.tobytes()


def from_kernel(
    cfg: AttentionConfig, role: str, data: bytes, where: Placement | None = None
) -> dict[str, bytes]:
    """The canonical f32 bytes of each part, read from the role's buffer."""
    where = where or canonical(cfg, role)
    names = parts(role)
    if len(names) == 1 and where.is_canonical(cfg, role):
        return {role: bytes(data)}
    src = _floats(data)
    sizes = axis_sizes(cfg, role)
    axes, own = _part_axes(role, sizes)
    out = {}
    for p, name in enumerate(names):
        dst = array("f", bytes(4 * math.prod(own.values())))
        offset = where.offset + p * where.strides.get(_digit(role), 0)
        relayout(src, offset, where.strides, dst, 0, row_major(axes, own), own)
        out[name] = dst.tobytes()
    return out


def relayout(
    src: array,
    src_offset: int,
    src_strides: Mapping[str, int],
    dst: array,
    dst_offset: int,
    dst_strides: Mapping[str, int],
    sizes: Mapping[str, int],
) -> None:
    """Copy the elements of a tensor with these axis lengths from one strided placement to
    another: dst[dst_offset + sum(i_a * dst_strides[a])] = src[src_offset + sum(i_a *
    src_strides[a])] for every index. The longest axis moves as one extended slice; the
    others are stepped through in Python."""
    axes = [a for a, n in sizes.items() if n > 1]
    if any(n == 0 for n in sizes.values()):
        return
    if not axes:
        dst[dst_offset] = src[src_offset]
        return
    run = max(axes, key=lambda a: sizes[a])
    n, s_step, d_step = sizes[run], src_strides[run], dst_strides[run]
    rest = [a for a in axes if a != run]
    for index in itertools.product(*(range(sizes[a]) for a in rest)):
        s = src_offset + sum(i * src_strides[a] for i, a in zip(index, rest, strict=True))
        d = dst_offset + sum(i * dst_strides[a] for i, a in zip(index, rest, strict=True))
        dst[d : d + (n - 1) * d_step + 1 : d_step] = src[s : s + (n - 1) * s_step + 1 : s_step]


def _part_axes(role: str, sizes: Mapping[str, int]) -> tuple[str, dict[str, int]]:
    """One part's canonical axes (the role's without the part digit) and their lengths."""
    axes = "".join(a for a in CANONICAL[role] if a.isalpha())
    return axes, {a: sizes[a] for a in axes}


def _digit(role: str) -> str:
    return "".join(a for a in CANONICAL[role] if a.isdigit())


def _floats(data: Any) -> array:
    a = array("f")
    a.frombytes(data)
    return a


def _axis_words(axes: str) -> str:
    words = {"B": "batch", "S": "position", "H": "head", "D": "head_dim"}
    return ", ".join(f"{a}: {words.get(a, 'part')}" for a in axes)


def _list(names: Iterable[str]) -> str:
    return ", ".join(names)
