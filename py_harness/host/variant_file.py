"""Variant files: a team's own WGSL attention kernels, declared in TOML and checked against
their WGSL before anything runs (docs/own-kernels.md has a walk-through).

    name = "packed_kv"                      # letters, digits, _ . - (not a built-in's name)
    description = "K and V in one buffer"   # optional
    files = ["fwd.wgsl"]                    # WGSL joined in order into each kernel's module
                                            # (paths relative to this file; optional when
                                            # every kernel names its own)
    params = ["batch_size", "num_heads", ...]  # the uniform struct's fields in order
                                            # (optional: the harness's own layout)
    supports = ["causal", "mask"]           # required: what configurations may use, of
                                            # causal causal_offset window mask dropout gqa
                                            # bottom_right window_lr softcap alibi varlen
    max_head_dim = 128                      # optional (default 128, most 256)
    [required_limits]                       # optional: device limits the kernels need
    maxComputeWorkgroupStorageSize = 16384

    [forward]                               # one kernel: writes o and lse
    entry_point = "flash_fwd"
    files = ["fwd.wgsl"]                    # optional: overrides the top-level files
    bindings = { q = 0, kv = 1, o = 3, lse = 4, params = 8, mask = 9 }  # role = binding
    rows = "seq_q"                          # rows tiled along y: seq_q, seq_k (or slots)
    heads = "num_heads"                     # workgroups along z = batch x num_heads|kv_heads
    rows_per_workgroup = 128                # optional: default the @workgroup_size product
    cols_per_workgroup = 128                # optional: workgroups along x = ceil(head_dim /
                                            # this), each its block of output columns
                                            # (default: one, all of head_dim)
    key_parts = false                       # optional, backward: x also counts parts of
                                            # each key tile; part p writes copy p of dk, dv
                                            # (variant.Kernel.key_parts)
    gemms = 2                               # optional: score-matrix GEMMs per visible
                                            # (query, key) pair, for `py-harness roofline`
    dq_sums = false                         # optional (default true): the pass touches
                                            # only the row stats of the scratch, not dQ's
                                            # partial sums (roofline's traffic)
    whole_tiles = "WHOLE"                   # optional: a bool override of the module set
                                            # to true where every tile of rows_per_workgroup
                                            # x cols_per_workgroup is inside the tensors
                                            # (variant.Kernel.whole_tiles)
    adds_kv_parts = true                    # optional, backward: the pass adds the copies
                                            # of dk, dv; not dispatched with one part
    rolled_loops = "ROLLED"                 # optional: a bool override of the module set
                                            # to true on CPU drivers, for loops that GPUs
                                            # get written out (variant.Kernel.rolled_loops)

    [[backward]]                            # one table per pass, dispatched in order
    ...

The roles (config.ROLES): inputs q k v d_out mask alibi_slopes (the slopes zero-padded to
config.ALIBI_SLOTS floats: it may be a var<uniform> array<vec4<f32>, 4096>), seqlens (a
variable-length batch's sequences, config.pack_seqlens: a var<uniform>
array<vec4<u32>, 4096>; the varlen feature needs it bound), packed inputs
kv ([B, Sk, Hkv, 2, D]) and qkv ([B, S, 3, H, D]), params (the uniform struct), outputs o
lse dq dk dv, packed gradients dkv and dqkv (the layouts of kv and qkv; the runner splits
them), and stats (the backward's scratch: [Delta, LSE] per query row, B x H x Sq
vec2<f32>).

A binding's kind (read-only storage, read-write storage, uniform) is taken from its WGSL
declaration, never written twice. load() refuses, naming this file and the WGSL file:line:
a missing file or entry point, an entry point that is not @compute, a role bound to a
binding its module does not declare in group 0, a resource the entry point uses that no
role is bound to (or outside group 0), unknown roles, keys and features, an output (o and
lse in the forward; dq dk dv dkv dqkv) on a read-only binding, params on anything but a
uniform (or a role other than alibi_slopes and seqlens on one), a params struct whose
fields differ from `params` (names, order or types), more storage buffers or invocations per
workgroup
than the declared (or WebGPU's default) limits. An input bound read-write is accepted: the
buffers are fresh for each run and a kernel that wrote its inputs would fail the judge,
not corrupt it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import ROLES, ConfigError
from ..kernels import VARIANTS
from ..params import DEFAULT_PARAMS, KNOWN_PARAMS, WGSL_TYPE, check_layout
from ..variant import (
    FEATURES,
    GRADIENT_ROLES,
    RO,
    SEED_MAX_HEAD_DIM,
    UNIFORM,
    Kernel,
    Variant,
    binding_kind_error,
)
from .wgsl_decls import Module, Resource, scan

TOP_KEYS = (
    "name",
    "description",
    "files",
    "params",
    "supports",
    "max_head_dim",
    "required_limits",
    "limitations_of",
    "forward",
    "backward",
)
KERNEL_KEYS = (
    "entry_point",
    "files",
    "bindings",
    "rows",
    "heads",
    "rows_per_workgroup",
    "cols_per_workgroup",
    "key_parts",
    "gemms",
    "dq_sums",
    "whole_tiles",
    "adds_kv_parts",
    "rolled_loops",
)
# WebGPU's default limits, which a kernel needs no declaration to stay within.
DEFAULT_LIMITS = {
    "maxStorageBuffersPerShaderStage": 8,
    "maxComputeInvocationsPerWorkgroup": 256,
    "maxComputeWorkgroupSizeX": 256,
    "maxComputeWorkgroupSizeY": 256,
    "maxComputeWorkgroupSizeZ": 64,
}


class VariantFileError(ValueError):
    """A variant file that does not agree with itself or with its WGSL."""


@dataclass(frozen=True)
class LoadedVariant:
    variant: Variant
    sources: dict[str, str]  # file name as the TOML writes it -> WGSL text
    path: Path
    # A built-in variant whose loop nest and numerics this one keeps (a port or a re-layout
    # of it): its declared limitations (judge/limitations.py) apply to this one too.
    limitations_of: str = ""

    def request(self) -> dict[str, Any]:
        """What a service request carries for this variant (service.py's `variant`)."""
        return {"variant": self.variant.to_dict(), "sources": dict(self.sources)}


def load(path: Path) -> LoadedVariant:
    """Read, check and build the variant a TOML file declares (see the module docstring)."""
    path = Path(path)
    where = str(path)
    try:
        doc = tomllib.loads(path.read_text())
    except OSError as exc:
        raise VariantFileError(f"{where}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise VariantFileError(f"{where}: not valid TOML: {exc}") from None
    _known_keys(where, "", doc, TOP_KEYS)
    for key in ("name", "supports", "forward", "backward"):
        if key not in doc:
            raise VariantFileError(f"{where}: `{key}` is missing")
    supports = _str_list(where, "supports", doc["supports"])
    unknown = [f for f in supports if f not in FEATURES]
    if unknown:
        raise VariantFileError(
            f"{where}: supports: unknown {unknown}; known: {', '.join(FEATURES)}"
        )
    params = tuple(_str_list(where, "params", doc.get("params", list(DEFAULT_PARAMS))))
    try:
        check_layout(params)  # before the WGSL: an unknown name is the file's own mistake
    except ConfigError as exc:
        raise VariantFileError(f"{where}: {exc}") from None
    limits = doc.get("required_limits", {})
    if not isinstance(limits, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in limits.values()
    ):
        raise VariantFileError(f"{where}: required_limits: must be a table of limit = int")
    limitations_of = doc.get("limitations_of", "")
    if limitations_of not in ("", *VARIANTS):
        raise VariantFileError(
            f"{where}: limitations_of: {limitations_of!r} is not a built-in variant; "
            f"known: {', '.join(VARIANTS)}"
        )
    if not isinstance(doc["backward"], list):
        raise VariantFileError(f"{where}: backward: must be an array of tables, [[backward]]")

    sources: dict[str, str] = {}
    tables = [("[forward]", doc["forward"])]
    tables += [(f"[[backward]] #{i + 1}", t) for i, t in enumerate(doc["backward"])]
    kernels = []
    for label, table in tables:
        checker = _KernelCheck(path, label, table, doc.get("files"), sources)
        kernels.append(checker.kernel(params, {**DEFAULT_LIMITS, **limits}, label == "[forward]"))
    try:
        variant = Variant(
            doc["name"],
            doc.get("description", ""),
            kernels[0],
            tuple(kernels[1:]),
            required_limits=dict(limits),
            params=params,
            supports=frozenset(supports),
            max_head_dim=doc.get("max_head_dim", SEED_MAX_HEAD_DIM),
        )
    except ConfigError as exc:
        raise VariantFileError(f"{where}: {exc}") from None
    return LoadedVariant(variant, sources, path, limitations_of)


class _KernelCheck:
    """One [forward] / [[backward]] table, checked against the module its files make."""

    def __init__(
        self, path: Path, label: str, table: Any, files: Any, sources: dict[str, str]
    ) -> None:
        self.where = f"{path}: {label}"
        if not isinstance(table, dict):
            raise VariantFileError(f"{self.where}: must be a table")
        _known_keys(str(path), f"{label} ", table, KERNEL_KEYS)
        for key in ("entry_point", "bindings", "rows", "heads"):
            if key not in table:
                raise VariantFileError(f"{self.where}: `{key}` is missing")
        self.table = table
        self.entry = table["entry_point"]
        self.where = f"{path}: {label} ({self.entry})"
        names = _str_list(self.where, "files", table.get("files", files or []))
        if not names:
            raise VariantFileError(f"{self.where}: no WGSL files (set `files`, here or on top)")
        for name in names:
            if name not in sources:
                try:
                    sources[name] = (path.parent / name).read_text()
                except OSError as exc:
                    raise VariantFileError(f"{self.where}: {name}: {exc.strerror}") from None
        self.files = tuple(names)
        self.module: Module = scan([(n, sources[n]) for n in names])

    def fail(self, message: str) -> None:
        raise VariantFileError(f"{self.where}: {message}")

    def kernel(self, params: tuple[str, ...], limits: dict[str, Any], forward: bool) -> Kernel:
        fn = self.module.functions.get(self.entry)
        if fn is None:
            self.fail(f"entry point {self.entry!r} is not defined in {', '.join(self.files)}")
        if not fn.is_compute:
            self.fail(f"{fn.file}:{fn.line}: fn {self.entry} is not a @compute entry point")
        roles = self._roles()
        used = self.module.used_resources(self.entry)
        self._unmapped(used, set(roles.values()))
        bindings = {n: (role, self._kind(role, n, used)) for role, n in roles.items()}
        for n, (role, kind) in sorted(bindings.items()):
            self._access(role, n, kind, used, forward)
        if "params" in roles:
            self._params(params, self._decl(roles["params"], used))
        storage = sum(1 for r in used if r.kind != UNIFORM)
        if storage > limits["maxStorageBuffersPerShaderStage"]:
            self.fail(
                f"uses {storage} storage buffers; declare required_limits."
                f"maxStorageBuffersPerShaderStage = {storage} (default 8)"
            )
        rows = self._workgroup(limits)
        try:
            return Kernel(
                self.entry,
                self.files,
                bindings,
                self.table["rows"],
                self.table["heads"],
                self.table.get("rows_per_workgroup", rows),
                self.table.get("cols_per_workgroup", 0),
                self.table.get("key_parts", False),
                self.table.get("gemms", 0),
                self.table.get("dq_sums", True),
                self.table.get("whole_tiles", ""),
                self.table.get("adds_kv_parts", False),
                self.table.get("rolled_loops", ""),
            )
        except ConfigError as exc:
            raise VariantFileError(f"{self.where}: {exc}") from None

    def _roles(self) -> dict[str, int]:
        table = self.table["bindings"]
        if not isinstance(table, dict):
            self.fail("bindings: must be an inline table, { role = binding, ... }")
        for role, n in table.items():
            if role not in ROLES:
                self.fail(f"bindings: unknown role {role!r}; known: {', '.join(ROLES)}")
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                self.fail(f"bindings.{role}: must be a binding number (int >= 0), got {n!r}")
        twice = sorted({n for n in table.values() if list(table.values()).count(n) > 1})
        if twice:
            self.fail(f"bindings: binding {twice[0]} is given two roles")
        return dict(table)

    def _kind(self, role: str, n: int, used: list[Resource]) -> str:
        """The binding's kind, from the declaration the entry point uses at n (or, when it
        uses none, the declarations at n, if they agree)."""
        mine = [r for r in used if r.binding == n and r.group == 0]
        decls = mine or self.module.at_binding(n)
        if not decls:
            self.fail(
                f"bindings.{role} = {n}: no @group(0) @binding({n}) is declared in "
                f"{', '.join(self.files)}"
            )
        kinds = {r.kind for r in decls}
        if len(kinds) > 1:
            places = ", ".join(f"{r.name} at {r.where}" for r in decls)
            self.fail(
                f"bindings.{role} = {n}: the entry point uses none of the declarations at "
                f"binding {n} ({places}) and they differ in access: bind only what it uses"
            )
        return kinds.pop()

    def _unmapped(self, used: list[Resource], mapped: set[int]) -> None:
        for r in used:
            if r.group != 0:
                self.fail(
                    f"{r.where}: {r.name} is in @group({r.group}); the harness binds group 0 only"
                )
            if r.binding not in mapped:
                self.fail(
                    f"{r.where}: the entry point uses {r.name} (@binding({r.binding})), which "
                    f"`bindings` gives no role"
                )

    def _decl(self, n: int, used: list[Resource]) -> Resource:
        """The declaration at binding n: the one the entry point uses, else the first."""
        return next((r for r in used if r.binding == n), None) or self.module.at_binding(n)[0]

    def _access(self, role: str, n: int, kind: str, used: list[Resource], forward: bool) -> None:
        decl = self._decl(n, used)
        at = f"{decl.name} at {decl.where}"
        if kind == UNIFORM or role == "params":
            wrong = binding_kind_error(role, kind)
            if wrong:
                self.fail(f"bindings.{role} = {n}: {at} is declared {kind}; {wrong}")
        written = role in GRADIENT_ROLES or (forward and role in ("o", "lse"))
        if written and kind == RO:
            self.fail(
                f"bindings.{role} = {n}: {at} is read-only, but this kernel writes {role}: "
                "declare it var<storage, read_write>"
            )

    def _params(self, params: tuple[str, ...], uniform: Resource) -> None:
        struct = self.module.structs.get(uniform.type)
        if struct is None:
            self.fail(f"{uniform.where}: {uniform.name}'s type {uniform.type} is not a struct")
        names = [f for f, _ in struct.fields]
        at = f"{struct.file}:{struct.line}"
        if names != list(params):
            diff = next(
                (i for i, (a, b) in enumerate(zip(names, params, strict=False)) if a != b),
                min(len(names), len(params)),
            )
            wgsl = names[diff] if diff < len(names) else "(end)"
            toml = params[diff] if diff < len(params) else "(end)"
            self.fail(
                f"params: struct {struct.name} ({at}) declares {names}; the file's params are "
                f"{list(params)}: field {diff} is {wgsl} in the WGSL, {toml} in params"
            )
        for fname, ftype in struct.fields:
            want = WGSL_TYPE[KNOWN_PARAMS[fname]] if fname in KNOWN_PARAMS else None
            if (want and ftype != want) or (not want and ftype not in ("u32", "i32", "f32")):
                self.fail(
                    f"params: struct {struct.name} ({at}) declares {fname}: {ftype}; the "
                    f"harness packs it as {want or 'a 4-byte u32 of zero'}"
                )

    def _workgroup(self, limits: dict[str, Any]) -> int | None:
        """The invocations per workgroup, checked against the limits (None: not known)."""
        size = self.module.workgroup_size(self.entry)
        if size is None:
            if "rows_per_workgroup" not in self.table:
                self.fail("set rows_per_workgroup: the @workgroup_size is not a constant here")
            return None
        total = size[0] * size[1] * size[2]
        checks = [("maxComputeInvocationsPerWorkgroup", total)]
        checks += [(f"maxComputeWorkgroupSize{a}", s) for a, s in zip("XYZ", size, strict=True)]
        for name, value in checks:
            if value > limits[name]:
                self.fail(
                    f"@workgroup_size{size} needs {name} >= {value}: declare it in "
                    f"required_limits (WebGPU's default is {DEFAULT_LIMITS[name]})"
                )
        return total


def _known_keys(where: str, label: str, table: dict, known: tuple[str, ...]) -> None:
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise VariantFileError(
            f"{where}: {label}unknown key {unknown[0]!r}; known: {', '.join(known)}"
        )


def _str_list(where: str, key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise VariantFileError(f"{where}: {key}: must be a list of strings, got {value!r}")
    return value
