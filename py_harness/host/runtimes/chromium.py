"""How the host launches browsers for the harness (one place for flags and paths)."""

from __future__ import annotations

import os
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


def chromium_launch_args(headless: bool = True, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Keyword arguments for playwright's chromium.launch()."""
    if not (os.path.exists(CHROMIUM_PATH) or shutil.which(CHROMIUM_PATH)):
        raise FileNotFoundError(f"Chromium not found at {CHROMIUM_PATH}; {INSTALL_HINT}")
    return {
        "executable_path": CHROMIUM_PATH,
        "headless": headless,
        "args": [*CHROMIUM_ARGS, *extra],
    }
