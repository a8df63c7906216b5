"""Mutants made by rule (mutation testing): every place in a kernel's WGSL where one operator
would make a slip of the kind that gets into real kernels, as an Edit.

The planted bugs (mutants.py) are the slips someone thought of; these are all of one kind
at every place they fit, so a case matrix is measured by the edits nobody chose. An Edit
changes one token or expression of one file, outside comments. Operators:

- compare: `<` <-> `<=`, `>` <-> `>=`, `==` <-> `!=` (a range's end, an empty row's test);
- plus-one / minus-one: an integer literal n in an expression -> n + 1 / n - 1;
- sign: a binary `+` <-> `-` (and `+=` <-> `-=`);
- min-max: `min(` <-> `max(`;
- select: `select(a, b, c)` -> `select(b, a, c)` (WGSL's order is false first);
- barrier: a `workgroupBarrier();` or `storageBarrier();` removed;
- precision: a float value bound by `let`, `var` or an assignment, perturbed by up to
  2^-16 relatively (each element differently: an intermediate kept to about 16 bits);
- digits: a float literal of more than 5 significant digits rounded to 5, where that
  changes its float32 value (log2(e) as 1.4427).

Edits are made on the text alone, so some do not compile (precision on an integer, say):
the compiler, not this module, tells them apart (`py-harness mutate` reports them as not
compiled). Binary operators are recognised by the spaces around them (ruff-like WGSL
style), which keeps `->`, `>>` and `vec4<f32>` out.
"""

from __future__ import annotations

import bisect
import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ...wgsl_source import closing_bracket, functions, strip_comments

OPERATORS = (
    "compare",
    "plus-one",
    "minus-one",
    "sign",
    "min-max",
    "select",
    "barrier",
    "precision",
    "digits",
)

_COMPARE_SWAP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
_COMPARE = re.compile(r"(?<=\s)(<=|>=|==|!=|<|>)(?=\s)")
_SIGN = re.compile(r"(?<=\s)(\+|-)(=?)(?=\s)")
# An integer literal (decimal, optional u / i suffix) that is an operand: after an operator,
# an opening bracket or a comma, not part of a name, a float or a hex literal.
_INT = re.compile(r"(?<=[\s(\[,])(\d+)([ui]?)(?![\w.])")
_INT_BEFORE = re.compile(r"(?:[-+*/%<>=&|^!(\[,]|\bin|\breturn)\s*$")
_MIN_MAX = re.compile(r"\b(min|max)\(")
_SELECT = re.compile(r"\bselect\(")
_BARRIER = re.compile(r"\b(?:workgroupBarrier|storageBarrier)\(\);")
_FLOAT = re.compile(r"(?<![\w.])(\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)(f?)(?![\w.])")
# A value bound or assigned: `let x = E;`, `var x: f32 = E;`, `x[i] += E;` (E to the `;` or,
# in a for header, to the closing paren).
_BIND = re.compile(r"\b(?:let|var)\s+\w+\s*(?::\s*([\w<>, ]+?))?\s*=\s*")
_ASSIGN = re.compile(r"(?<=[\w\])])\s*(=|\+=|-=|\*=)\s+(?!=)")
_INTEGER_TYPES = re.compile(r"^(?:u32|i32|bool|vec\d<(?:u32|i32|bool)>)$")
_CONSTANT = re.compile(r"(?:[\w<>]+\()?\s*-?[\d.]+(?:[eE][-+]?\d+)?[uif]?\s*\)?")
# Where a literal is a type's size, an attribute's argument or a constant's definition.
_NO_INT_LINE = re.compile(r"^\s*(?:@|const\s|override\s|struct\s)|array<|@workgroup_size")


@dataclass(frozen=True)
class Edit:
    """Text [start, end) of `file` replaced by `new`; line and col (1-based) say where."""

    file: str
    start: int
    end: int
    new: str
    operator: str
    line: int
    col: int
    old: str
    function: str = ""  # the fn it lies in ("" outside any)

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}:{self.col}:{self.operator}"

    def apply(self, sources: dict[str, str]) -> dict[str, str]:
        text = sources[self.file]
        if text[self.start : self.end] != self.old:
            raise ValueError(f"{self.id}: the file no longer holds {self.old!r} there")
        return {**sources, self.file: text[: self.start] + self.new + text[self.end :]}

    def describe(self) -> str:
        where = f" (fn {self.function})" if self.function else ""
        return f"{self.id}{where}  {_short(self.old)!r} -> {_short(self.new)!r}"


def _short(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _top_level_args(code: str, open_at: int) -> list[tuple[int, int]]:
    """Spans of the comma-separated arguments of the call whose ( is at open_at."""
    spans, depth, start, close = [], 0, open_at + 1, closing_bracket(code, open_at)
    if close == len(code):
        raise ValueError(f"unbalanced bracket at {open_at}")
    for i in range(open_at + 1, close + 1):
        ch = code[i]
        if ch in "([":
            depth += 1
        elif ch in ")]" and depth:
            depth -= 1
        elif (ch == "," and not depth) or i == close:
            spans.append((start, i))
            start = i + 1
    return spans


def _value_end(code: str, start: int) -> int:
    """Where the expression starting at `start` ends: the `;` at its depth, or the `)`
    that closes an enclosing bracket (a for header's update)."""
    depth = 0
    for i in range(start, len(code)):
        ch = code[i]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if not depth:
                return i
            depth -= 1
        elif ch in ";{" and not depth:
            return i
    return len(code)


def perturbed(expr: str) -> str:
    """expr (f32 or a vector of f32) times 1 + e, |e| <= 2^-16, e different per element and
    per value (from the value's own digits), so that no two errors cancel by construction."""
    e = expr.strip()
    return f"(({e}) * (1.0 + (fract(({e}) * 4099.0) - 0.5) * 3.0e-5))"


def _five_digits(literal: str) -> str | None:
    """The literal rounded to 5 significant digits, where it has more and that changes its
    float32 value (a 12-digit coefficient cut by one digit is the same float); else None."""
    mantissa = literal.lower().partition("e")[0]
    if len(mantissa.replace(".", "").strip("0")) <= 5:
        return None
    shorter = f"{float(literal):.4e}"
    if struct.pack("<f", float(shorter)) == struct.pack("<f", float(literal)):
        return None
    return shorter


def _edits_in(file: str, text: str, operators: set[str]) -> Iterator[Edit]:
    code = strip_comments(text)
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    fns = list(functions(code).values())
    fn_starts = [fn.start for fn in fns]

    def edit(start: int, end: int, new: str, operator: str) -> Edit:
        line = bisect.bisect_right(starts, start) - 1
        i = bisect.bisect_right(fn_starts, start) - 1
        fn = fns[i].name if i >= 0 else ""
        col = start - starts[line] + 1
        return Edit(file, start, end, new, operator, line + 1, col, text[start:end], fn)

    def precision(start: int) -> Iterator[Edit]:
        end = _value_end(code, start)
        expr = text[start:end]
        # a constant (`0.0`, `vec4<f32>(0.0)`, `1u`) is the digits operator's: x (1 + e) of
        # a literal is only another literal, and of 0 the same one
        if expr.strip() and not _CONSTANT.fullmatch(expr.strip()):
            yield edit(start, end, perturbed(expr), "precision")

    def line_of(pos: int) -> str:
        a = code.rfind("\n", 0, pos) + 1
        b = code.find("\n", pos)
        return code[a : b if b >= 0 else len(code)]

    if "compare" in operators:
        for m in _COMPARE.finditer(code):
            yield edit(m.start(), m.end(), _COMPARE_SWAP[m.group(1)], "compare")
    if operators & {"plus-one", "minus-one"}:
        for m in _INT.finditer(code):
            if _NO_INT_LINE.search(line_of(m.start())):
                continue
            if not _INT_BEFORE.search(code[max(0, m.start() - 12) : m.start()]):
                continue
            n, suffix = int(m.group(1)), m.group(2)
            if "plus-one" in operators:
                yield edit(m.start(), m.end(), f"{n + 1}{suffix}", "plus-one")
            if "minus-one" in operators and n > 0:
                yield edit(m.start(), m.end(), f"{n - 1}{suffix}", "minus-one")
    if "sign" in operators:
        for m in _SIGN.finditer(code):
            new = ("-" if m.group(1) == "+" else "+") + m.group(2)
            yield edit(m.start(), m.end(), new, "sign")
    if "min-max" in operators:
        for m in _MIN_MAX.finditer(code):
            yield edit(m.start(1), m.end(1), "max" if m.group(1) == "min" else "min", "min-max")
    if "select" in operators:
        for m in _SELECT.finditer(code):
            args = _top_level_args(code, m.end() - 1)
            if len(args) == 3:
                (a0, a1), (b0, b1) = args[0], args[1]
                first, second = text[a0:a1].strip(), text[b0:b1].strip()
                if first != second:
                    yield edit(a0, b1, f"{second}, {first}", "select")
    if "barrier" in operators:
        for m in _BARRIER.finditer(code):
            yield edit(m.start(), m.end(), "", "barrier")
    if "precision" in operators:
        for m in _BIND.finditer(code):
            declared = (m.group(1) or "").strip()
            if _INTEGER_TYPES.match(declared) or line_of(m.start()).lstrip().startswith("const"):
                continue
            yield from precision(m.end())
        for m in _ASSIGN.finditer(code):
            if code[m.end(1) - 2 : m.end(1)] in ("==", "!=", "<=", ">="):
                continue
            if re.search(r"\b(?:let|var|const)\b[^;=]*$", code[max(0, m.start() - 80) : m.start()]):
                continue  # a declaration's `=`: _BIND's
            yield from precision(m.end())
    if "digits" in operators:
        for m in _FLOAT.finditer(code):
            shorter = _five_digits(m.group(1))
            if shorter is not None:
                yield edit(m.start(1), m.end(1), shorter, "digits")


def edits(
    sources: dict[str, str], files: Iterable[str], operators: Iterable[str] = OPERATORS
) -> list[Edit]:
    """Every edit of the operators in the files, in file order, then by place; ids unique."""
    ops = set(operators)
    unknown = ops - set(OPERATORS)
    if unknown:
        raise ValueError(f"--operator: unknown {sorted(unknown)}; known: {', '.join(OPERATORS)}")
    out: list[Edit] = []
    for file in files:
        if file not in sources:
            raise ValueError(f"--file: {file!r} is not among {', '.join(sorted(sources))}")
        out += sorted(_edits_in(file, sources[file], ops), key=lambda e: (e.start, e.operator))
    return list({e.id: e for e in out}.values())
