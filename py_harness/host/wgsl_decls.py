"""A WGSL declaration scanner: resource variables, structs, constants and functions, each
with its file and line, and which resources an entry point uses.

Enough to check a variant file against its kernels (host/variant_file.py) without a WGSL
compiler: regular expressions over source whose comments are blanked out (lines kept).
"Uses" is static use as WGSL defines it, approximated by name: an identifier in the entry
point's body, or in the body of a function it calls (transitively), that names a
module-scope variable. A local that shadows a module-scope name counts as a use (the
harness then asks for one binding too many, which the check reports).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..wgsl_source import IDENT as _IDENT
from ..wgsl_source import functions, strip_comments

RO = "read-only-storage"  # GPUBufferBindingType names, as variant.py has them
RW = "storage"
UNIFORM = "uniform"

_RESOURCE = re.compile(
    r"((?:@\s*\w+\s*(?:\([^()]*\))?\s*)+)var\s*<\s*(\w+)\s*(?:,\s*(\w+)\s*)?>\s*(\w+)\s*:\s*([^;]+);"
)
_STRUCT = re.compile(r"\bstruct\s+(\w+)\s*\{([^}]*)\}")
_CONST = re.compile(r"\bconst\s+(\w+)\s*(?::\s*\w+\s*)?=\s*([^;]+);")
_INT = re.compile(r"\b(\d+)[iu]?\b")


@dataclass(frozen=True)
class Resource:
    """A module-scope `var` with @group/@binding (storage or uniform)."""

    name: str
    group: int | None
    binding: int | None
    space: str  # "storage" or "uniform"
    access: str  # "read" or "read_write" (storage), "" (uniform)
    type: str
    file: str
    line: int

    @property
    def kind(self) -> str:
        """The GPUBufferBindingType this declaration needs."""
        if self.space == "uniform":
            return UNIFORM
        return RW if self.access == "read_write" else RO

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Struct:
    name: str
    fields: tuple[tuple[str, str], ...]  # (name, type) in declaration order
    file: str
    line: int


@dataclass(frozen=True)
class Function:
    name: str
    attributes: str  # the text of its attributes (@compute @workgroup_size(...))
    body: str
    file: str
    line: int

    @property
    def is_compute(self) -> bool:
        return re.search(r"@\s*compute\b", self.attributes) is not None

    @property
    def workgroup_size_text(self) -> list[str]:
        m = re.search(r"@\s*workgroup_size\s*\(([^()]*)\)", self.attributes)
        return [p.strip() for p in m[1].split(",") if p.strip()] if m else []


@dataclass
class Module:
    """The declarations of a shader module made of files joined in order."""

    resources: list[Resource]
    structs: dict[str, Struct]
    consts: dict[str, str]  # name -> initializer text
    functions: dict[str, Function]
    files: tuple[str, ...]

    def used_names(self, entry: str) -> set[str]:
        """Identifiers in the entry point's body and every function it calls."""
        seen: set[str] = set()
        todo, names = [entry], set()
        while todo:
            fn = self.functions.get(todo.pop())
            if fn is None or fn.name in seen:
                continue
            seen.add(fn.name)
            idents = set(_IDENT.findall(fn.body))
            names |= idents
            todo.extend(i for i in idents if i in self.functions)
        return names

    def used_resources(self, entry: str) -> list[Resource]:
        names = self.used_names(entry)
        return [r for r in self.resources if r.name in names]

    def at_binding(self, binding: int, group: int = 0) -> list[Resource]:
        return [r for r in self.resources if r.group == group and r.binding == binding]

    def int_value(self, text: str) -> int | None:
        """An integer expression of literals, constants and + - * / ( ); None otherwise."""
        return _eval(text, self.consts, depth=0)

    def workgroup_size(self, entry: str) -> tuple[int, int, int] | None:
        """(x, y, z) of the entry's @workgroup_size, or None where it cannot be computed."""
        dims = [self.int_value(t) for t in self.functions[entry].workgroup_size_text]
        if not dims or None in dims:
            return None
        x, y, z = (*dims, 1, 1)[:3]
        return (x, y, z)


def scan(files: list[tuple[str, str]]) -> Module:
    """The declarations of the module made of (file name, text) parts in order."""
    module = Module([], {}, {}, {}, tuple(name for name, _ in files))
    for name, text in files:
        code = strip_comments(text)

        def line(pos: int, code: str = code) -> int:
            return code.count("\n", 0, pos) + 1

        for m in _RESOURCE.finditer(code):
            attrs, space, access, var, vtype = m.groups()
            if space not in ("storage", "uniform"):
                continue
            group = _attr_int(attrs, "group", module)
            binding = _attr_int(attrs, "binding", module)
            access = access or ("read" if space == "storage" else "")
            res = Resource(
                var, group, binding, space, access, vtype.strip(), name, line(m.start(4))
            )
            module.resources.append(res)
        for m in _STRUCT.finditer(code):
            fields = tuple(_struct_fields(m[2]))
            module.structs[m[1]] = Struct(m[1], fields, name, line(m.start()))
        for m in _CONST.finditer(code):
            module.consts[m[1]] = m[2]
        for fn in functions(code).values():
            body = code[fn.body_start : fn.end]
            module.functions[fn.name] = Function(
                fn.name, fn.attributes, body, name, line(fn.name_at)
            )
    return module


def function_source(source: str, *names: str) -> str:
    """The WGSL functions `names` as source defines them, each from `fn` to its closing brace
    (comments blanked), one after the other: for a generated kernel that calls what a file's
    kernels call. KeyError names a function the source does not define."""
    code = strip_comments(source)
    found = functions(code)
    texts = []
    for name in names:
        if name not in found:
            raise KeyError(f"no fn {name} in the source")
        texts.append(code[found[name].start : found[name].end])
    return "\n".join(texts)


def _attr_int(attrs: str, name: str, module: Module) -> int | None:
    m = re.search(rf"@\s*{name}\s*\(([^()]*)\)", attrs)
    return module.int_value(m[1]) if m else None


def _struct_fields(body: str) -> list[tuple[str, str]]:
    """(name, type) of each member; commas inside <...> (array<f32, 4>) do not split."""
    members, depth, start = [], 0, 0
    for i, ch in enumerate(body + ","):
        depth += (ch == "<") - (ch == ">")
        if ch == "," and depth == 0:
            members.append(body[start:i])
            start = i + 1
    out = []
    for member in members:
        member = re.sub(r"@\s*\w+\s*(\([^()]*\))?", " ", member).strip()
        if member:
            fname, _, ftype = member.partition(":")
            out.append((fname.strip(), ftype.strip()))
    return out


def _eval(text: str, consts: dict[str, str], depth: int) -> int | None:
    if depth > 16:  # a constant defined through itself, or a very deep chain
        return None
    values = {}
    for ident in set(_IDENT.findall(text)) - {"u", "i"}:
        if ident not in consts:
            return None
        value = _eval(consts[ident], consts, depth + 1)
        if value is None:
            return None
        values[ident] = value
    expr = _IDENT.sub(lambda m: str(values.get(m[0], m[0])), text)
    expr = _INT.sub(lambda m: m[1], expr)
    if not re.fullmatch(r"[\d\s+\-*/()]+", expr) or "**" in expr:  # no powers: no huge ints
        return None
    try:
        return int(eval(expr.replace("/", "//"), {"__builtins__": {}}))  # digits and + - * / ( )
    except (SyntaxError, ZeroDivisionError, TypeError):
        return None
