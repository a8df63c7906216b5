"""What one run of a variant dispatches, worked out before any GPU work.

A kernel written to its own conventions declares them as expressions over the
configuration (its dispatch grid, its uniform structs' fields, its scratch buffers' sizes,
strided layouts, pipeline constants): RunPlan evaluates all of them for one case, so an
expression that fails, a buffer over the device's binding limit or a grid over its
workgroup limit is refused with the declaration named, and nothing has been uploaded. The
runner then only reads the plan. Also here: the tensors' trip between the host's canonical
layout and the kernels' (layouts.py), the LSE's units included.

Pure Python: runs in Pyodide.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import dtypes, layouts
from .config import F32_BYTES, PACKED, AttentionConfig, ConfigError
from .expr import Number
from .params import expression_scope, pack_params, pack_struct
from .sizing import binding_cap, buffer_bytes, buffer_sizes
from .variant import Kernel, Variant

# WebGPU's default maxComputeWorkgroupsPerDimension, where a device reports none.
DEFAULT_WORKGROUPS_PER_DIMENSION = 65535
# An LSE at or above this is a row with no visible key (reference.EMPTY_LSE is 3e38): its
# units are not converted, so it stays "huge" (compare.LSE_SENTINEL_MIN) either way.
EMPTY_LSE_MIN = 1e38
EMPTY_LSE = 3e38
LN2 = math.log(2.0)
# What a scratch buffer that need not start zeroed is filled with: NaN in every float.
POISON = b"\xff"


@dataclass(frozen=True)
class Split:
    """How a variant's backward splits its work on a device: dq_slots partial sums of dQ
    (Variant.dq_slots; 0: none), or one per key tile in the band layout of dq_band_rows
    rows each (Variant.dq_band_rows; 0: not), and kv_parts copies of dK and dV
    (Variant.kv_parts)."""

    dq_slots: int = 0
    kv_parts: int = 1
    dq_band_rows: int = 0

    @classmethod
    def of(cls, variant: Variant, cfg: AttentionConfig, limits: Mapping[str, int]) -> Split:
        cap = binding_cap(dict(limits))
        band = variant.dq_band_rows(cfg, cap)
        return cls(variant.dq_slots(cfg, cap, band), variant.kv_parts(cfg, cap, band), band)


def kernel_key(kernel: Kernel) -> tuple[str, tuple[str, ...]]:
    """A kernel's identity within a variant and its specialisations."""
    return (kernel.entry_point, kernel.files)


def uniform_key(kernel: Kernel, binding: int) -> str:
    """The name of the buffer holding a kernel's uniform struct at a binding: "params" for
    the variant's shared layout, else one per kernel and binding."""
    if binding not in kernel.uniforms:
        return "params"
    return f"params/{kernel.entry_point}/{'+'.join(kernel.files)}/{binding}"


@dataclass
class RunPlan:
    """One case's dispatch: each pass's workgroups, uniform bytes and constants, each
    buffer's elements ("floats": f32 or f16, Variant.dtypes) and each declared layout's
    placement."""

    variant: Variant
    cfg: AttentionConfig
    split: Split
    scope: dict[str, Number]
    placements: dict[str, layouts.Placement] = field(default_factory=dict)
    floats: dict[str, int] = field(default_factory=dict)
    uniforms: dict[str, bytes] = field(default_factory=dict)
    grids: dict[tuple[str, tuple[str, ...]], tuple[int, int, int]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        variant: Variant,
        cfg: AttentionConfig,
        split: Split,
        limits: Mapping[str, int] | None = None,
    ) -> RunPlan:
        """The plan of a run of cfg with the variant's own kernels (a specialisation: the
        one for_head_dim chose), checked against the device's limits where given."""
        scope = expression_scope(cfg, split.dq_band_rows, split.dq_slots, split.kv_parts)
        plan = cls(variant, cfg, split, scope)
        plan.placements = {r: lay.placement(cfg, scope) for r, lay in variant.layouts.items()}
        known = [r for r in variant.storage_roles if r not in variant.scratch]
        sizes = buffer_sizes(cfg, known, split.dq_slots, split.kv_parts, split.dq_band_rows)
        for role in variant.storage_roles:
            if role in plan.placements:
                plan.floats[role] = plan.placements[role].floats
            elif role in variant.scratch:
                plan.floats[role] = variant.scratch[role].floats(scope)
            else:
                plan.floats[role] = sizes[role]
        for k in variant.own_kernels:
            plan.grids[kernel_key(k)] = k.workgroups(cfg, split.dq_slots, split.kv_parts, scope)
            for n, (role, _) in k.bindings.items():
                if role == "params":
                    key = uniform_key(k, n)
                    if n in k.uniforms:
                        plan.uniforms[key] = pack_struct(k.uniforms[n], cfg, scope)
                    else:
                        plan.uniforms[key] = pack_params(cfg, variant.params, split.dq_band_rows)
            k.constants(cfg, False, scope)  # an expression that fails, fails here
        if limits is not None:
            plan.check(limits)
        return plan

    def check(self, limits: Mapping[str, int]) -> None:
        """Refuse buffers over one binding's limit and grids over the workgroups a dispatch
        may have per dimension, naming the role or the pass and the limit."""
        cap = binding_cap(dict(limits))
        for role in self.floats:
            nbytes = self.buffer_bytes(role)
            if nbytes > cap:
                what = f"scratch.{role}" if role in self.variant.scratch else role
                raise ConfigError(
                    what,
                    f"needs a {nbytes}-byte buffer, over the device limit of {cap} bytes "
                    "(maxStorageBufferBindingSize / maxBufferSize)",
                )
        most = limits.get("maxComputeWorkgroupsPerDimension", DEFAULT_WORKGROUPS_PER_DIMENSION)
        for k in self.variant.own_kernels:
            grid = self.grids[kernel_key(k)]
            for axis, count in zip("xyz", grid, strict=True):
                if count > most:
                    how = f" ({k.grid['xyz'.index(axis)]})" if k.grid else ""
                    raise ConfigError(
                        f"{k.entry_point}.grid",
                        f"{count} workgroups along {axis}{how}, over the device's "
                        f"maxComputeWorkgroupsPerDimension of {most}",
                    )

    def data_bytes(self, role: str) -> int:
        """The bytes of a role's elements in its dtype, in whole 4-byte words."""
        return -(-self.floats[role] * dtypes.item_bytes(self.variant.dtype(role)) // 4) * 4

    def buffer_bytes(self, role: str) -> int:
        """The bytes of the buffer that holds a role (sizing.buffer_bytes: whole vec4s)."""
        return buffer_bytes(-(-self.data_bytes(role) // F32_BYTES))

    # ---- tensors in, tensors out --------------------------------------------------------
    def input_bytes(self, role: str, tensors: Mapping[str, bytes]) -> bytes:
        """A role's buffer contents from the host's canonical float32 tensors: in the
        variant's layout and dtype; O and the LSE for a backward-only variant in its units
        (lse_from: the maximum as the LSE and the sum 1, so that exp(s - max) / sum is P)."""
        dtype, raw = self.variant.dtype(role), self._input_f32(role, tensors)
        if dtype != "f32" and (role == "lse" or role in self.variant.lse_from):
            # an empty row's sentinel (3e38) is past f16's range: inf serves it as well
            raw = array("f", (x if x < EMPTY_LSE_MIN else math.inf for x in _floats(raw)))
            raw = raw.tobytes()
        out = dtypes.encode(raw, dtype, role)
        return out + bytes(-len(out) % 4)  # writes are of whole 4-byte words (odd f16 counts)

    def _input_f32(self, role: str, tensors: Mapping[str, bytes]) -> bytes:
        v = self.variant
        lse = tensors.get("lse", b"")
        if v.lse_from and role == v.lse_from[1]:  # the row sum
            ones = array("f", [1.0]) * (len(lse) // 4)
            return self._to_kernel("lse", {"lse": ones.tobytes()})
        if role == "lse" or (v.lse_from and role == v.lse_from[0]):
            return self._to_kernel("lse", {"lse": to_units(lse, v.lse)})
        if role in PACKED or role in self.placements:
            return self._to_kernel(role, tensors)
        return bytes(tensors.get(role, b""))

    def _to_kernel(self, role: str, tensors: Mapping[str, bytes]) -> bytes:
        return layouts.to_kernel(self.cfg, role, tensors, self.placements.get(role))

    def output_bytes(self, role: str, data: bytes) -> dict[str, bytes]:
        """The canonical float32 tensors a role's buffer holds (a packed role's parts, the
        LSE in natural-log units)."""
        data = dtypes.decode(data, self.variant.dtype(role))
        got = layouts.from_kernel(self.cfg, role, data, self.placements.get(role))
        if role == "lse":
            got["lse"] = from_units(got["lse"], self.variant.lse)
        return got

    def derived_lse(self, maximum: bytes, total: bytes) -> bytes:
        """The LSE from a forward's row maximum and row sum (Variant.lse_from), each laid out
        as the LSE: max + log(sum), in natural-log units; a row whose sum is not positive is
        a row without a visible key."""
        where = self.placements.get("lse")
        m_role, s_role = self.variant.lse_from
        m = dtypes.decode(maximum, self.variant.dtype(m_role))
        s = dtypes.decode(total, self.variant.dtype(s_role))
        m = _floats(layouts.from_kernel(self.cfg, "lse", m, where)["lse"])
        s = _floats(layouts.from_kernel(self.cfg, "lse", s, where)["lse"])
        base = 2.0 if self.variant.lse == "log2" else math.e
        out = array("f", bytes(4 * len(m)))
        for i, (mi, si) in enumerate(zip(m, s, strict=True)):
            if si > 0 and math.isfinite(mi) and math.isfinite(si):
                out[i] = _clamp((mi + math.log(si, base)) * math.log(base))
            else:
                out[i] = EMPTY_LSE
        return out.tobytes()


def to_units(lse: bytes, units: str) -> bytes:
    """Natural-log LSE values in the kernel's units (an empty row's sentinel kept)."""
    if units != "log2":
        return bytes(lse)
    vals = _floats(lse)
    return array("f", (x if x >= EMPTY_LSE_MIN else x / LN2 for x in vals)).tobytes()


def from_units(lse: bytes, units: str) -> bytes:
    """The kernel's LSE values in natural-log units (an empty row's sentinel kept)."""
    if units != "log2":
        return bytes(lse)
    vals = _floats(lse)
    return array("f", (x if x >= EMPTY_LSE_MIN else _clamp(x * LN2) for x in vals)).tobytes()


def _clamp(x: float) -> float:
    """A float that fits float32 (array("f") raises OverflowError past its range)."""
    return max(-3.4e38, min(3.4e38, x)) if math.isfinite(x) else x


def _floats(data: bytes) -> array:
    a = array("f")
    a.frombytes(data)
    return a
