"""WGSL sources of the kernels and how they compose into shader modules.

The forward file compiles alone. The backward module is the forward file followed
by the backward file (the backward calls the forward's hash3 / dropout_scale).
Compile messages are mapped back from module lines to file:line:column.
"""

from __future__ import annotations

from dataclasses import dataclass

FORWARD_FILE = "flash_attention_v2.wgsl"
BACKWARD_FILE = "flash_attention_v2_backward.wgsl"
SHADER_FILES = (FORWARD_FILE, BACKWARD_FILE)


@dataclass(frozen=True)
class ShaderModuleSource:
    """One module's code, made of named parts in order (for line mapping)."""

    label: str
    parts: tuple[tuple[str, str], ...]  # (file name, text)

    @property
    def code(self) -> str:
        return "\n".join(text for _, text in self.parts)

    def locate(self, line: int) -> tuple[str, int]:
        """Module line (1-based) -> (file name, line in that file)."""
        start = 1
        for name, text in self.parts:
            n = text.count("\n") + 1  # parts are joined with one newline
            if line < start + n:
                return name, line - start + 1
            start += n
        return self.parts[-1][0], line - start + 1


def forward_module(sources: dict[str, str]) -> ShaderModuleSource:
    return ShaderModuleSource("flash_fwd", ((FORWARD_FILE, sources[FORWARD_FILE]),))


def backward_module(sources: dict[str, str]) -> ShaderModuleSource:
    return ShaderModuleSource(
        "flash_bwd",
        ((FORWARD_FILE, sources[FORWARD_FILE]), (BACKWARD_FILE, sources[BACKWARD_FILE])),
    )


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
