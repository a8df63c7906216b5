"""Variant files: a team's own WGSL attention kernels, declared in TOML as their authors wrote
them (layouts, dispatch grids, uniform structs, scratch buffers, envelope) and checked
against their WGSL and over their envelope's cases before anything runs.

docs/own-kernels.md is the schema and a walk-through. load() refuses, naming this file and
line and, where one is at fault, the WGSL file:line: a missing file or entry point, an entry
point that is not @compute, a role bound to a binding its module does not declare in group
0, a resource the entry point uses that no role is bound to (or outside group 0), unknown
roles, keys and features, an output on a read-only binding, a uniform struct field with no
value or of another type, more storage buffers or invocations than the declared (or
WebGPU's default) limits; then, over every case of the variant's matrix (its envelope's,
judge/generated.py), an expression that cannot be evaluated, a grid past the workgroups a
dispatch may have, a buffer past one binding's default limit, and an envelope no case fits.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import ROLES, AttentionConfig, ConfigError
from ..dtypes import Arithmetic
from ..envelope import AXES, Envelope
from ..kernels import VARIANTS
from ..layouts import Layout
from ..params import DEFAULT_PARAMS, KNOWN_PARAMS, SCOPE_NAMES, WGSL_TYPE, check_layout, make_fields
from ..run_plan import RunPlan, Split
from ..variant import (
    FEATURES,
    GRADIENT_ROLES,
    LSE_UNITS,
    RO,
    SEED_MAX_HEAD_DIM,
    UNIFORM,
    UNIFORM_ROLES,
    Kernel,
    Scratch,
    Variant,
    binding_kind_error,
)
from .judge.cases import Case, by_id
from .judge.generated import matrix
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
    "layouts",
    "lse",
    "lse_from",
    "scratch",
    "envelope",
    "dtypes",
    "arithmetic",
    "cases",
    "forward",
    "backward",
)
KERNEL_KEYS = (
    "entry_point",
    "files",
    "bindings",
    "grid",
    "params",
    "overrides",
    "loop_passes",
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
    "maxStorageBufferBindingSize": 1 << 27,
    "maxBufferSize": 1 << 28,
    "maxComputeWorkgroupsPerDimension": 65535,
}
HEAD_DIM_FIELD = "{head_dim}"  # in a file name: one module per head_dim of the envelope


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
    # The file's own cases (`cases = [ids]`), judged beside its matrix.
    cases: tuple[Case, ...] = ()

    def request(self) -> dict[str, Any]:
        """What a service request carries for this variant (service.py's `variant`)."""
        return {"variant": self.variant.to_dict(), "sources": dict(self.sources)}


def load(path: Path) -> LoadedVariant:
    """Read, check and build the variant a TOML file declares (docs/own-kernels.md)."""
    path = Path(path)
    try:
        text = path.read_text()
        doc = tomllib.loads(text)
    except OSError as exc:
        raise VariantFileError(f"{path}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise VariantFileError(f"{path}: not valid TOML: {exc}") from None
    return _File(path, text, doc).load()


class _File:
    """One variant file: its tables, where each is in the text, and what they declare."""

    def __init__(self, path: Path, text: str, doc: dict[str, Any]) -> None:
        self.path, self.doc = path, doc
        self.lines = _Lines(text)
        self.sources: dict[str, str] = {}
        self.checks: list[_KernelCheck] = []
        self.dtypes: dict[str, str] = {}

    def fail(self, message: str, table: str = "", key: str = "", nth: int = 0) -> None:
        line = self.lines.find(table, key, nth)
        raise VariantFileError(f"{self.path}{f':{line}' if line else ''}: {message}")

    def config_error(self, exc: ConfigError) -> None:
        """A ConfigError from the variant's checks, placed at the table and key it names."""
        self.fail(str(exc), *_place(exc.argument))

    def load(self) -> LoadedVariant:
        doc = self.doc
        _known_keys(self, "", doc, TOP_KEYS)
        for key in ("name", "supports"):
            if key not in doc:
                self.fail(f"`{key}` is missing")
        if "forward" not in doc and "backward" not in doc:
            self.fail("declare a [forward] (or [[forward]] passes), [[backward]] passes, or both")
        supports = _str_list(self, "supports", doc["supports"])
        if unknown := [f for f in supports if f not in FEATURES]:
            self.fail(f"supports: unknown {unknown}; known: {', '.join(FEATURES)}", "", "supports")
        params = doc.get("params", {})
        if isinstance(params, list):
            params = tuple(_str_list(self, "params", params))
            try:
                check_layout(params)  # before the WGSL: an unknown name is the file's own
            except ConfigError as exc:
                self.fail(str(exc), "", "params")
        elif not isinstance(params, dict):
            self.fail("params: a list of field names, or a table of field = expression")
        limits = doc.get("required_limits", {})
        if not isinstance(limits, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in limits.values()
        ):
            self.fail("required_limits: must be a table of limit = int", "required_limits")
        limitations_of = doc.get("limitations_of", "")
        if limitations_of not in ("", *VARIANTS):
            self.fail(
                f"limitations_of: {limitations_of!r} is not a built-in variant; "
                f"known: {', '.join(VARIANTS)}",
                "",
                "limitations_of",
            )
        backward = doc.get("backward", [])
        if not isinstance(backward, list):
            self.fail("backward: must be an array of tables, [[backward]]", "", "backward")
        interface = self._interface()
        envelope = interface.get("envelope")
        head_dims = self._head_dims(envelope)
        every_limit = {**DEFAULT_LIMITS, **limits}
        made = {}
        forward = doc.get("forward", [])
        several = isinstance(forward, list)
        for hd in head_dims or [0]:
            kernels: dict[str, Any] = {}
            kernels["forward"] = tuple(
                self._kernel(
                    f"[[forward]] #{i + 1}" if several else "[forward]", "forward", i, t, hd
                )
                for i, t in enumerate(forward if several else [forward])
            )
            kernels["backward"] = tuple(
                self._kernel(f"[[backward]] #{i + 1}", "backward", i, t, hd)
                for i, t in enumerate(backward)
            )
            made[hd] = kernels
        for checker in self.checks:
            checker.check(params, every_limit, interface.get("scratch", {}))
        if isinstance(params, dict):
            self._params_used(params)
        variant = self._variant(doc, made, head_dims, supports, params, limits, interface)
        cases = self._cases()
        loaded = LoadedVariant(variant, self.sources, self.path, limitations_of, cases)
        self._dry_run(variant, every_limit, cases)
        return loaded

    def _params_used(self, params: dict[str, Any]) -> None:
        """Every field the [params] table values belongs to some pass's uniform struct."""
        fields = {f for c in self.checks for f in c.struct_fields}
        for name in params:
            if name not in fields:
                structs = "; ".join(sorted({c.struct_text for c in self.checks if c.struct_text}))
                self.fail(
                    f"params.{name}: no uniform struct bound as params has a field {name} "
                    f"({structs or 'no pass binds params'})",
                    "params",
                    name,
                )

    def _kernel(self, label: str, table: str, nth: int, spec: Any, head_dim: int) -> _KernelCheck:
        check = _KernelCheck(self, label, table, nth, spec, head_dim)
        self.checks.append(check)
        return check

    def _interface(self) -> dict[str, Any]:
        """layouts, lse, lse_from, scratch, envelope, dtypes and arithmetic, each checked."""
        doc, out = self.doc, {}
        try:
            layouts = doc.get("layouts", {})
            if not isinstance(layouts, dict):
                self.fail("layouts: a table of role = layout", "", "layouts")
            out["layouts"] = {
                r: Layout.parse(r, s, SCOPE_NAMES, f"layouts.{r}") for r, s in layouts.items()
            }
            scratch = doc.get("scratch", {})
            if not isinstance(scratch, dict):
                self.fail("scratch: tables [scratch.NAME] with size = expr", "", "scratch")
            out["scratch"] = {n: Scratch.from_dict(b, f"scratch.{n}") for n, b in scratch.items()}
            if "envelope" in doc:
                out["envelope"] = Envelope.from_dict(doc["envelope"])
            dtypes = doc.get("dtypes", {})
            if not isinstance(dtypes, dict):
                self.fail('dtypes: a table of role = "f16" (or "f32")', "", "dtypes")
            out["dtypes"] = self.dtypes = dict(dtypes)
            out["arithmetic"] = Arithmetic.from_dict(doc.get("arithmetic", {}))
        except ConfigError as exc:
            self.config_error(exc)
        lse = doc.get("lse", "ln")
        if lse not in LSE_UNITS:
            self.fail(f"lse: one of {', '.join(LSE_UNITS)}, got {lse!r}", "", "lse")
        out["lse"] = lse
        out["lse_from"] = tuple(_str_list(self, "lse_from", doc.get("lse_from", [])))
        return out

    def _head_dims(self, envelope: Envelope | None) -> list[int]:
        """The head_dims a file with one module per head_dim ({head_dim} in a file name)
        generates: its envelope's head_dim values."""
        forward = self.doc.get("forward", [])
        tables = [*(forward if isinstance(forward, list) else [forward])]
        tables += self.doc.get("backward", [])
        names = [*self.doc.get("files", [])]
        names += [f for t in tables if isinstance(t, dict) for f in t.get("files", [])]
        if not any(isinstance(n, str) and HEAD_DIM_FIELD in n for n in names):
            return []
        axis = envelope.axis("head_dim") if envelope else None
        if axis is None or not axis.values:
            self.fail(
                f"files name {HEAD_DIM_FIELD}: give the head_dims they are made for as "
                "envelope.head_dim = [..] (a list)",
                "envelope" if envelope else "",
            )
        return list(axis.values)  # type: ignore[union-attr]

    def _variant(
        self,
        doc: dict[str, Any],
        made: dict[int, dict[str, Any]],
        head_dims: list[int],
        supports: list[str],
        params: Any,
        limits: dict[str, int],
        interface: dict[str, Any],
    ) -> Variant:
        legacy = isinstance(params, tuple)
        default_max = max(head_dims) if head_dims else SEED_MAX_HEAD_DIM
        envelope = interface.get("envelope")
        if envelope and not head_dims and envelope.axis("head_dim").values:
            default_max = max(envelope.axis("head_dim").values)

        def build(kernels: dict[str, Any], hd: int) -> Variant:
            return Variant(
                doc["name"],
                doc.get("description", ""),
                kernels["forward"][0].kernel if kernels["forward"] else None,
                tuple(k.kernel for k in kernels["backward"]),
                required_limits=dict(limits),
                params=params if legacy else DEFAULT_PARAMS,
                supports=frozenset(supports),
                max_head_dim=doc.get("max_head_dim", hd or default_max),
                forward_after=tuple(k.kernel for k in kernels["forward"][1:]),
                **interface,
            )

        try:
            if not head_dims:
                return build(made[0], 0)
            specs = tuple((hd, build(made[hd], hd)) for hd in head_dims)
            top = max(head_dims)
            return Variant(**{**_fields_of(dict(specs)[top]), "by_head_dim": specs})
        except ConfigError as exc:
            self.config_error(exc)
        raise AssertionError  # fail() raised

    def _cases(self) -> tuple[Case, ...]:
        ids = _str_list(self, "cases", self.doc.get("cases", []))
        out = []
        for case_id in ids:
            try:
                out.append(by_id(case_id))
            except (KeyError, ValueError) as exc:
                self.fail(f"cases: {exc.args[0]}", "", "cases")
        return tuple(out)

    def _dry_run(self, variant: Variant, limits: dict[str, int], cases: tuple[Case, ...]) -> None:
        """Every expression evaluated, every grid and buffer checked against WebGPU's
        default limits (or the file's required_limits) over the variant's matrix, before
        anything runs anywhere; an envelope no case fits is refused."""
        every = (*matrix(variant), *cases)
        inside = [c for c in every if variant.refusal(c.config()) is None]
        largest = _largest(variant, inside)
        if variant.envelope is not None and not inside:
            self.fail(
                "envelope: no case of the harness's lies inside it (the generated matrix is "
                "empty): widen an axis or drop a requirement",
                "envelope",
            )
        for case in inside + ([largest] if largest else []):
            cfg: AttentionConfig = case.config()
            chosen = variant.for_head_dim(cfg.head_dim, limits)
            try:
                split = Split.of(chosen, cfg, limits)
                RunPlan.of(chosen, cfg, split, limits)
            except ConfigError as exc:
                what = "the largest case" if case is largest else "case"
                self.fail(
                    f"{what} {case.id} (inside the envelope) cannot run: {exc}; change the "
                    "declaration, or narrow the envelope (or raise required_limits)",
                    *_place(exc.argument),
                )


class _KernelCheck:
    """One [forward] / [[backward]] table, checked against the module its files make."""

    def __init__(
        self, file: _File, label: str, table: str, nth: int, spec: Any, head_dim: int
    ) -> None:
        self.file, self.label, self.table_name, self.nth = file, label, table, nth
        self.where = label
        if not isinstance(spec, dict):
            self.fail("must be a table")
        self.spec = spec
        _known_keys(file, f"{label} ", spec, KERNEL_KEYS, table, nth)
        need = ("entry_point", "bindings") + (() if "grid" in spec else ("rows", "heads"))
        for key in need:
            if key not in spec:
                self.fail(f"`{key}` is missing" + (" (or give a grid)" if key == "rows" else ""))
        self.entry = spec["entry_point"]
        self.where = f"{label} ({self.entry})"
        names = _str_list(file, "files", spec.get("files", file.doc.get("files", [])))
        if not names:
            self.fail("no WGSL files (set `files`, here or on top)")
        names = [n.replace(HEAD_DIM_FIELD, str(head_dim)) for n in names]
        for name in names:
            if name not in file.sources:
                try:
                    file.sources[name] = (file.path.parent / name).read_text()
                except OSError as exc:
                    self.fail(f"{name}: {exc.strerror}", "files")
        self.files = tuple(names)
        self.module: Module = scan([(n, file.sources[n]) for n in names])
        self.kernel: Kernel  # set by check()
        self.struct_fields: set[str] = set()  # of the structs it binds as params
        self.struct_text = ""

    def fail(self, message: str, key: str = "") -> None:
        self.file.fail(f"{self.where}: {message}", self.table_name, key, self.nth)

    def check(self, params: Any, limits: dict[str, Any], scratch: dict[str, Any]) -> None:
        fn = self.module.functions.get(self.entry)
        if fn is None:
            self.fail(
                f"entry point {self.entry!r} is not defined in {', '.join(self.files)}",
                "entry_point",
            )
        if not fn.is_compute:
            self.fail(f"{fn.file}:{fn.line}: fn {self.entry} is not a @compute entry point")
        roles = self._roles(scratch)
        used = self.module.used_resources(self.entry)
        self._unmapped(used, {n for ns in roles.values() for n in ns})
        bindings = {n: (role, self._kind(role, n, used)) for role, ns in roles.items() for n in ns}
        forward = self.table_name == "forward"
        for n, (role, kind) in sorted(bindings.items()):
            self._access(role, n, kind, used, forward, scratch)
        uniforms = {}
        for n in roles.get("params", ()):
            decl = self._decl(n, used)
            if isinstance(params, tuple):
                self._legacy_params(params, decl)
            else:
                uniforms[n] = self._struct_fields(params, decl)
        storage = sum(1 for r in used if r.kind != UNIFORM)
        if storage > limits["maxStorageBuffersPerShaderStage"]:
            self.fail(
                f"uses {storage} storage buffers; declare required_limits."
                f"maxStorageBuffersPerShaderStage = {storage} (default 8)"
            )
        rows = self._workgroup(limits)
        grid = self.spec.get("grid", [])
        if not isinstance(grid, list) or len(grid) not in (0, 3):
            self.fail(f"grid: three expressions (x, y, z), got {grid!r}", "grid")
        overrides = self.spec.get("overrides", {})
        if not isinstance(overrides, dict):
            self.fail("overrides: a table of NAME = expression", "overrides")
        try:
            self.kernel = Kernel(
                self.entry,
                self.files,
                bindings,
                self.spec.get("rows", "seq_q"),
                self.spec.get("heads", "num_heads"),
                self.spec.get("rows_per_workgroup", rows or 1),
                self.spec.get("cols_per_workgroup", 0),
                self.spec.get("key_parts", False),
                self.spec.get("gemms", 0),
                self.spec.get("dq_sums", True),
                self.spec.get("whole_tiles", ""),
                self.spec.get("adds_kv_parts", False),
                self.spec.get("rolled_loops", ""),
                tuple(grid),
                uniforms,
                overrides,
                self.spec.get("loop_passes", ""),
            )
        except ConfigError as exc:
            self.fail(str(exc), exc.argument.split(".")[0].split("[")[0])

    def _roles(self, scratch: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        table = self.spec["bindings"]
        if not isinstance(table, dict):
            self.fail("bindings: must be an inline table, { role = binding, ... }", "bindings")
        out: dict[str, tuple[int, ...]] = {}
        for role, n in table.items():
            if role not in ROLES and role not in scratch:
                known = ", ".join(ROLES)
                own = ", ".join(scratch) or "none declared"
                self.fail(
                    f"bindings: unknown role {role!r}; known: {known}, and the scratch "
                    f"buffers ([scratch.NAME]: {own})",
                    "bindings",
                )
            numbers = n if role == "params" and isinstance(n, list) else [n]
            for b in numbers:
                if isinstance(b, bool) or not isinstance(b, int) or b < 0:
                    self.fail(
                        f"bindings.{role}: must be a binding number (int >= 0), got {n!r}",
                        "bindings",
                    )
            out[role] = tuple(numbers)
        every = [b for ns in out.values() for b in ns]
        twice = sorted({b for b in every if every.count(b) > 1})
        if twice:
            self.fail(f"bindings: binding {twice[0]} is given two roles", "bindings")
        return out

    def _kind(self, role: str, n: int, used: list[Resource]) -> str:
        """The binding's kind, from the declaration the entry point uses at n (or, when it
        uses none, the declarations at n, if they agree)."""
        mine = [r for r in used if r.binding == n and r.group == 0]
        decls = mine or self.module.at_binding(n)
        if not decls:
            self.fail(
                f"bindings.{role} = {n}: no @group(0) @binding({n}) is declared in "
                f"{', '.join(self.files)}",
                "bindings",
            )
        kinds = {r.kind for r in decls}
        if len(kinds) > 1:
            places = ", ".join(f"{r.name} at {r.where}" for r in decls)
            self.fail(
                f"bindings.{role} = {n}: the entry point uses none of the declarations at "
                f"binding {n} ({places}) and they differ in access: bind only what it uses",
                "bindings",
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
                    f"`bindings` gives no role",
                    "bindings",
                )

    def _decl(self, n: int, used: list[Resource]) -> Resource:
        """The declaration at binding n: the one the entry point uses, else the first."""
        return next((r for r in used if r.binding == n), None) or self.module.at_binding(n)[0]

    def _access(
        self,
        role: str,
        n: int,
        kind: str,
        used: list[Resource],
        forward: bool,
        scratch: dict[str, Any],
    ) -> None:
        decl = self._decl(n, used)
        at = f"{decl.name} at {decl.where}"
        if role in scratch:
            self._element_type(role, n, decl)
            if kind == UNIFORM:
                self.fail(f"bindings.{role} = {n}: {at} is a uniform; scratch is storage")
            return
        self._element_type(role, n, decl)
        if kind == UNIFORM or role == "params":
            wrong = binding_kind_error(role, kind)
            if wrong:
                self.fail(f"bindings.{role} = {n}: {at} is declared {kind}; {wrong}", "bindings")
        written = role in GRADIENT_ROLES or (forward and role in ("o", "lse"))
        if written and kind == RO:
            self.fail(
                f"bindings.{role} = {n}: {at} is read-only, but this kernel writes {role}: "
                "declare it var<storage, read_write>",
                "bindings",
            )

    def _element_type(self, role: str, n: int, decl: Resource) -> None:
        """A storage binding of f16 elements for a role the file declares f16, and of f32
        ones for the others (the harness fills and reads the buffer in that type)."""
        declared = self.file.dtypes.get(role, "f32")
        found = re.findall(r"\b(f16|f32)\b", decl.type)
        if role in UNIFORM_ROLES or not found or found[-1] == declared:
            return
        fix = f'dtypes.{role} = "{found[-1]}"' if found[-1] == "f16" else f"drop dtypes.{role}"
        self.fail(
            f"bindings.{role} = {n}: {decl.name} at {decl.where} holds {found[-1]} "
            f"({decl.type}), but {role} is {declared} here: {fix}, or change the WGSL",
            "bindings",
        )

    def _legacy_params(self, params: tuple[str, ...], uniform: Resource) -> None:
        """`params = [names]`: the struct must hold exactly these of the harness's fields."""
        struct = self._struct(uniform)
        names = [f for f, _ in struct.fields]
        at = f"{struct.file}:{struct.line}"
        if names != list(params):
            diff = next(
                (i for i, (a, b) in enumerate(zip(names, params, strict=False)) if a != b),
                min(len(names), len(params)),
            )
            wgsl = names[diff] if diff < len(names) else "(end)"
            toml = params[diff] if diff < len(params) else "(end)"
            self.file.fail(
                f"params: struct {struct.name} ({at}) declares {names}; the file's params are "
                f"{list(params)}: field {diff} is {wgsl} in the WGSL, {toml} in params",
                "",
                "params",
            )
        for fname, ftype in struct.fields:
            want = WGSL_TYPE[KNOWN_PARAMS[fname]] if fname in KNOWN_PARAMS else None
            if (want and ftype != want) or (not want and ftype not in ("u32", "i32", "f32")):
                self.file.fail(
                    f"params: struct {struct.name} ({at}) declares {fname}: {ftype}; the "
                    f"harness packs it as {want or 'a 4-byte u32 of zero'}",
                    "",
                    "params",
                )

    def _struct_fields(self, values: dict[str, Any], uniform: Resource) -> tuple:
        """The kernel's own struct, each field valued by the file's [params] table (the
        kernel's own `params` table first), the harness's field of the same name, or zero
        padding."""
        struct = self._struct(uniform)
        self.struct_fields |= {f for f, _ in struct.fields}
        self.struct_text = f"struct {struct.name}: {', '.join(f for f, _ in struct.fields)}"
        own = self.spec.get("params", {})
        if not isinstance(own, dict):
            self.fail("params: a table of field = expression", "params")
        merged = {k: v for k, v in values.items() if k in dict(struct.fields)} | own
        try:
            return make_fields(struct.name, list(struct.fields), merged, "params")
        except ConfigError as exc:
            at = f"struct {struct.name} at {struct.file}:{struct.line}"
            self.file.fail(f"{self.where}: {exc} ({at})", "params", exc.argument.split(".")[-1])
        raise AssertionError

    def _struct(self, uniform: Resource) -> Any:
        struct = self.module.structs.get(uniform.type)
        if struct is None:
            self.fail(f"{uniform.where}: {uniform.name}'s type {uniform.type} is not a struct")
        return struct

    def _workgroup(self, limits: dict[str, Any]) -> int | None:
        """The invocations per workgroup, checked against the limits (None: not known)."""
        size = self.module.workgroup_size(self.entry)
        if size is None:
            if "rows_per_workgroup" not in self.spec and "grid" not in self.spec:
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


class _Lines:
    """Where tables and keys are in a TOML text (tomllib gives no positions): the line of
    each [table] / [[table]] header (by name and occurrence) and of each key in it."""

    _HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*(\.|=)")

    def __init__(self, text: str) -> None:
        self.headers: list[tuple[str, int]] = [("", 0)]
        self.keys: list[dict[str, int]] = [{}]
        for number, line in enumerate(text.splitlines(), 1):
            if m := self._HEADER.match(line):
                self.headers.append((m[1], number))
                self.keys.append({})
            elif m := self._KEY.match(line):
                self.keys[-1].setdefault(m[1], number)

    def find(self, table: str, key: str = "", nth: int = 0) -> int:
        """The line of `key` in the nth table named `table` ("" : the top), else of the
        table's header; 0 where neither is found."""
        seen = -1
        for i, (name, number) in enumerate(self.headers):
            if name == table:
                seen += 1
                if seen == nth:
                    return self.keys[i].get(key, number) if key else number
        if table and "." in table:  # [scratch.D] written as a key of [scratch]
            return self.find(table.split(".")[0], table.split(".")[1])
        return self.keys[0].get(table, 0) if table else 0  # an inline table: table = {..}


def _largest(variant: Variant, cases: list[Case]) -> Case | None:
    """The envelope's largest case, planned though never run (a scratch buffer or a grid
    that grows past the device's limits shows there first): each axis at its declared
    maximum, or the largest of the matrix's cases where it declares none; with seq_k made
    seq_q (or the K/V heads the heads) where that alone brings it inside. None without an
    envelope, or where no such case lies inside it."""
    env = variant.envelope
    if env is None or not cases:
        return None

    def top(name: str, seen: list[int]) -> int:
        axis = env.axis(name)
        if axis.values:
            return max(axis.values)
        return axis.hi if axis.hi < AXES[name][1] else max(seen)

    hd = top("head_dim", [c.head_dim for c in cases])
    sq = top("seq_q", [c.seq_q for c in cases])
    sk = top("seq_k", [c.seq_k for c in cases])
    heads = top("num_heads", [c.num_heads for c in cases])
    batch = top("batch", [c.batch for c in cases])
    group = max(c.num_heads // c.num_kv_heads for c in cases)
    causal = any(c.causal for c in cases)
    tries = [(sq, sk, group), (sq, sq, group), (sk, sk, group), (sq, sq, 1), (sk, sk, 1)]
    for q, k, g in tries:
        try:
            case = Case(
                hd,
                q,
                k,
                num_heads=heads,
                num_kv_heads=max(1, heads // g),
                batch=batch,
                causal=causal,
            )
        except ValueError:
            continue
        if variant.refusal(case.config()) is None:
            return case
    return None


def _place(argument: str) -> tuple[str, str]:
    """The table and key a ConfigError's argument names (e.g. scratch.D.size)."""
    parts = re.split(r"[.\[]", argument)
    if parts[0] == "scratch" and len(parts) > 1:
        return f"scratch.{parts[1]}", parts[2] if len(parts) > 2 else ""
    if parts[0] in ("envelope", "params", "layouts", "dtypes", "arithmetic"):
        return parts[0], parts[1] if len(parts) > 1 else ""
    return "", parts[0]


def _fields_of(v: Variant) -> dict[str, Any]:
    return {name: getattr(v, name) for name in v.__dataclass_fields__}


def _known_keys(
    file: _File, label: str, table: dict, known: tuple[str, ...], name: str = "", nth: int = 0
) -> None:
    unknown = sorted(set(table) - set(known))
    if unknown:
        file.fail(
            f"{label}unknown key {unknown[0]!r}; known: {', '.join(known)}", name, unknown[0], nth
        )


def _str_list(file: _File, key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        file.fail(f"{key}: must be a list of strings, got {value!r}", "", key)
    return value
