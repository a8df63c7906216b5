"""WGSL source read lexically: comments blanked, brackets matched, functions found, and the
functions an entry point reaches. The one scanner both sides use: the core keys its
pipeline cache by the code an entry point reaches (shaders.py), and the host reads a
kernel's declarations (host/wgsl_decls.py) and places rule-made edits (host/judge/mutation.py).

WGSL has no strings and no function pointers, so a name is all a call is: any identifier
in a body that names a function counts as a call (a local of that name keeps the function:
the safe side).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A function header: its attributes (@compute @workgroup_size(...)), then `fn name(`.
FN = re.compile(r"((?:@\s*\w+\s*(?:\([^()]*\))?\s*)*)\bfn\s+(\w+)\s*\(")
IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_COMMENT_MARKS = re.compile(r"(?=(//|/\*|\*/|\n))")  # overlapping: "//*" holds "/*" too
_PAIRS = {"(": ")", "[": "]", "{": "}"}


def strip_comments(source: str) -> str:
    """The source with // and (nested) /* */ comments blanked by spaces, newlines kept:
    offsets and line numbers of what remains are the file's."""
    out, at, depth, skip = [], 0, 0, 0
    for m in _COMMENT_MARKS.finditer(source):
        i, mark = m.start(), m[1]
        if i < skip:  # inside a mark taken, or a line comment
            continue
        if mark == "\n":
            if depth:  # blank the comment's part of this line, keep the newline
                out.append(" " * (i - at) + "\n")
                at = i + 1
        elif depth == 0 and mark == "//":
            end = source.find("\n", i)
            end = len(source) if end < 0 else end
            out.append(source[at:i] + " " * (end - i))
            at = skip = end
        elif mark == "/*":
            if depth == 0:
                out.append(source[at:i])
                at = i
            depth, skip = depth + 1, i + 2
        elif depth and mark == "*/":
            depth, skip = depth - 1, i + 2
            if depth == 0:
                out.append(" " * (i + 2 - at))
                at = i + 2
    tail = source[at:]
    out.append(tail if depth == 0 else re.sub(r"[^\n]", " ", tail))
    return "".join(out)


def closing_bracket(code: str, open_at: int) -> int:
    """Index of the bracket that closes the ( [ or { at open_at (brackets of every kind
    nest inside); len(code) where none does."""
    stack: list[str] = []
    for i in range(open_at, len(code)):
        ch = code[i]
        if ch in _PAIRS:
            stack.append(_PAIRS[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return i
    return len(code)


@dataclass(frozen=True)
class Function:
    """A function of comment-blanked code: where its `fn` keyword starts, the text of its
    attributes, and its body's span [body_start, end) (braces included; (0, 0) where it has
    no body)."""

    name: str
    attributes: str
    start: int
    name_at: int
    body_start: int
    end: int


def functions(code: str) -> dict[str, Function]:
    """The functions of comment-blanked code, by name, in the order they are defined."""
    found = {}
    for m in FN.finditer(code):
        # from the parameter list's '(' on: attributes inside the list hold parentheses too
        body = code.find("{", closing_bracket(code, m.end() - 1))
        span = (0, 0) if body < 0 else (body, closing_bracket(code, body) + 1)
        start = code.rfind("fn", 0, m.start(2))
        found[m[2]] = Function(m[2], m[1], start, m.start(2), *span)
    return found


def reached(code: str, fns: dict[str, Function], entry_point: str) -> set[str]:
    """The functions entry_point calls, itself and transitively (names not in fns are
    left out: an entry point the code does not define reaches nothing)."""
    todo, seen = [entry_point], set()
    while todo:
        fn = fns.get(todo.pop())
        if fn is None or fn.name in seen:
            continue
        seen.add(fn.name)
        todo.extend(set(IDENT.findall(code, fn.body_start, fn.end)) & fns.keys())
    return seen
