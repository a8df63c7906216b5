"""WGSL sources of the kernels and how they compose into shader modules.

A module is one or more .wgsl files joined in order (kernels.py says which). Every module
starts with fa2_common.wgsl (the params struct, the mask, the dropout hash, visibility,
the softcap); the seed's forward module adds the forward file, its backward module the
given backward file (which calls hash3 / dropout_scale). Compile messages are mapped back
from module lines to file:line:column.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property

from . import wgsl_source

COMMON_FILE = "fa2_common.wgsl"  # first in every module (after an `enable` file)
FORWARD_FILE = "flash_attention_v2.wgsl"
BACKWARD_FILE = "flash_attention_v2_backward.wgsl"


@dataclass(frozen=True)
class ShaderModuleSource:
    """One module's code, made of named parts in order (for line mapping)."""

    label: str
    parts: tuple[tuple[str, str], ...]  # (file name, text)

    @cached_property
    def code(self) -> str:
        return "\n".join(text for _, text in self.parts)

    @cached_property
    def digest(self) -> str:
        """sha256 of the code: a device's pipeline cache key, asked for on every case
        (hashing six of the fast variant's modules again took 0.3 ms on the 2-core machine)."""
        return hashlib.sha256(self.code.encode()).hexdigest()

    def entry_digest(self, entry_point: str) -> str:
        """sha256 of the code without the functions that entry_point never calls: a pipeline
        cache key under which modules that differ only in code the entry point cannot reach
        share one pipeline (a planted bug in a backward helper leaves the forward's as it
        was, and a driver's compile is the costliest part of a case on a CPU adapter). The
        code without its functions stays whole (constants, overrides, structs, variables)."""
        key = (self.digest, entry_point)
        if key not in _ENTRY_DIGESTS:
            _ENTRY_DIGESTS[key] = _reachable_digest(self.code, entry_point) or self.digest
        return _ENTRY_DIGESTS[key]

    def locate(self, line: int) -> tuple[str, int]:
        """Module line (1-based) -> (file name, line in that file)."""
        start = 1
        for name, text in self.parts:
            n = text.count("\n") + 1  # parts are joined with one newline
            if line < start + n:
                return name, line - start + 1
            start += n
        return self.parts[-1][0], line - start + 1


_ENTRY_DIGESTS: dict[tuple[str, str], str] = {}


def _reachable_digest(code: str, entry_point: str) -> str | None:
    """entry_digest's hash (None: see functions_reached)."""
    found = functions_reached(code, entry_point)
    if found is None:
        return None
    code, spans, reached = found
    kept, at = [], 0
    for fn, (start, end) in sorted(spans.items(), key=lambda item: item[1]):
        if fn not in reached:
            kept.append(code[at:start])
            at = end
    kept.append(code[at:])
    # tokens only: a comment's edit (blanked to spaces) or a layout's must not make a new key
    return hashlib.sha256(" ".join("".join(kept).split()).encode()).hexdigest()


def functions_reached(
    code: str, entry_point: str
) -> tuple[str, dict[str, tuple[int, int]], set[str]] | None:
    """(the code with its comments blanked, where each function is in it (from `fn` to the
    end of its body), the functions entry_point calls, itself and transitively), or None
    where no function is named entry_point (wgsl_source says what counts as a call)."""
    code = wgsl_source.strip_comments(code)
    fns = wgsl_source.functions(code)
    if entry_point not in fns:
        return None
    spans = {name: (fn.start, fn.end) for name, fn in fns.items()}
    return code, spans, wgsl_source.reached(code, fns, entry_point)


def compose(label: str, files: tuple[str, ...], sources: dict[str, str]) -> ShaderModuleSource:
    """The module made of `files` in order (e.g. forward + backward for the backward)."""
    missing = [f for f in files if f not in sources]
    if missing:
        raise KeyError(f"shader sources lack {missing}; have {sorted(sources)}")
    return ShaderModuleSource(label, tuple((f, sources[f]) for f in files))


def format_compile_messages(module: ShaderModuleSource, messages: list[dict]) -> str:
    """Render compilation messages as 'file:line:column: type: text' plus the source line.

    `messages` are dicts with the GPUCompilationMessage fields (type, message, lineNum, linePos).
    """
    out = []
    for msg in messages:
        line = int(msg.get("lineNum") or 0)
        col = int(msg.get("linePos") or 0)
        if line > 0:
            name, file_line = module.locate(line)
            text = module.code.split("\n")[line - 1] if line <= module.code.count("\n") + 1 else ""
            out.append(f"{name}:{file_line}:{col}: {msg.get('type', 'error')}: {msg['message']}")
            out.append(f"    {text.strip()}")
        else:
            out.append(f"{module.label}: {msg.get('type', 'error')}: {msg['message']}")
    return "\n".join(out)
