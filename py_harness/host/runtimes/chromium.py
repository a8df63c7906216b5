"""How the host launches browsers for the harness (one place for flags and paths)."""

from __future__ import annotations

import os
import shlex
import shutil
from typing import Any

from ...gpu.device import SWIFTSHADER_DAWN_DISABLED_TOGGLES

CHROMIUM_PATH = os.environ.get("HARNESS_CHROMIUM", "/usr/bin/chromium")
# docs/runtimes.md: WebGPU needs --enable-unsafe-webgpu; as root the sandbox must be off;
# the developer-features flag fills adapter.info.description; the rest keeps Chromium
# off the network (this machine has none, and refused connections slow start-up).
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--enable-unsafe-webgpu",
    "--enable-webgpu-developer-features",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    # Chromium's WebGPU has been SwiftShader on every machine the harness has met (with a
    # GPU too, headless: docs/runtimes.md), where this makes compiles 3-7 times faster;
    # on a GPU it moves the zeroing of workgroup memory from the driver into the shader.
    "--disable-dawn-features=" + ",".join(SWIFTSHADER_DAWN_DISABLED_TOGGLES),
)
INSTALL_HINT = "install it with: apt-get install chromium (or set HARNESS_CHROMIUM)"
# More flags for every launch, shell-quoted: what a machine's GPU needs (docs/runtimes.md,
# "Chromium on an NVIDIA GPU"), without editing this file or overriding the fixture.
EXTRA_ARGS_VAR = "HARNESS_CHROMIUM_ARGS"


def extra_args_from_env() -> tuple[str, ...]:
    """The flags in HARNESS_CHROMIUM_ARGS (shell words; none where unset)."""
    value = os.environ.get(EXTRA_ARGS_VAR, "")
    try:
        words = shlex.split(value)
    except ValueError as e:
        raise ValueError(f"{EXTRA_ARGS_VAR}: not shell words ({e}): {value!r}") from None
    if bad := [w for w in words if not w.startswith("--")]:
        raise ValueError(f"{EXTRA_ARGS_VAR}: each word must be a --flag, got {bad[0]!r}")
    return tuple(words)


def chromium_launch_args(headless: bool = True, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Keyword arguments for playwright's chromium.launch()."""
    if not (os.path.exists(CHROMIUM_PATH) or shutil.which(CHROMIUM_PATH)):
        raise FileNotFoundError(f"Chromium not found at {CHROMIUM_PATH}; {INSTALL_HINT}")
    return {
        "executable_path": CHROMIUM_PATH,
        "headless": headless,
        "args": [*CHROMIUM_ARGS, *extra_args_from_env(), *extra],
    }
