"""WGSL sources of the kernels and how they compose into shader modules.

A module is one or more .wgsl files joined in order (kernels.py says which). The seed's
forward file compiles alone; its backward module is the forward file followed by the
backward file (the backward calls the forward's hash3 / dropout_scale). Compile messages
are mapped back from module lines to file:line:column.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property

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

    def locate(self, line: int) -> tuple[str, int]:
        """Module line (1-based) -> (file name, line in that file)."""
        start = 1
        for name, text in self.parts:
            n = text.count("\n") + 1  # parts are joined with one newline
            if line < start + n:
                return name, line - start + 1
            start += n
        return self.parts[-1][0], line - start + 1


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
