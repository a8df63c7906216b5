"""How the host launches browsers for the harness (one place for flags and paths)."""

from __future__ import annotations

import os
import shutil
from typing import Any

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
