"""How the host launches browsers for the harness (one place for flags and paths)."""

from __future__ import annotations

import glob
import json
import os
import shlex
import shutil
from pathlib import Path
from typing import Any

from ...gpu.device import SWIFTSHADER_DAWN_DISABLED_TOGGLES

DEBIAN_CHROMIUM = "/usr/bin/chromium"
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
INSTALL_HINT = (
    "install it with: apt-get install chromium, or Playwright's with `py-harness setup "
    "--browsers`, or set HARNESS_CHROMIUM to a Chromium binary"
)
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


def playwright_browser_installed(name: str = "chromium") -> bool:
    """Whether Playwright's own build of `name` (`playwright install`, into
    PLAYWRIGHT_BROWSERS_PATH or ~/.cache/ms-playwright) is there for the revision this
    Playwright drives (its browsers.json)."""
    import playwright

    listed = Path(playwright.__file__).parent / "driver" / "package" / "browsers.json"
    try:
        browsers = json.loads(listed.read_text())["browsers"]
        revision = next(b["revision"] for b in browsers if b["name"] == name)
    except (OSError, ValueError, KeyError, StopIteration):
        return False
    root = os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or str(Path.home() / ".cache/ms-playwright")
    folder = name.replace("-", "_")
    return bool(glob.glob(os.path.join(glob.escape(root), f"{folder}-{revision}", "*", "*")))


def chromium_binary() -> str | None:
    """The Chromium to launch: HARNESS_CHROMIUM, else Debian's, else None where Playwright's
    own build is installed (Playwright launches it when given no path). FileNotFoundError,
    with how to install one, where there is none."""
    named = os.environ.get("HARNESS_CHROMIUM")
    for path in [named] if named else [DEBIAN_CHROMIUM]:
        if os.path.exists(path) or shutil.which(path):
            return path
    if not named and playwright_browser_installed("chromium"):
        return None
    raise FileNotFoundError(f"Chromium not found at {named or DEBIAN_CHROMIUM}; {INSTALL_HINT}")


def chromium_launch_args(
    headless: bool = True,
    extra: tuple[str, ...] = (),
    channel: str | None = None,
    slow_mo: float = 0.0,
) -> dict[str, Any]:
    """Keyword arguments for playwright's chromium.launch(): the binary chromium_binary
    finds, or an installed Chrome or Edge by Playwright's channel name (chrome, chrome-beta,
    msedge, ...); headless unless asked; slow_mo milliseconds between Playwright's steps."""
    args: dict[str, Any] = {
        "headless": headless,
        "args": [*CHROMIUM_ARGS, *extra_args_from_env(), *extra],
    }
    if channel:
        args["channel"] = channel
    elif (path := chromium_binary()) is not None:
        args["executable_path"] = path
    if slow_mo:
        args["slow_mo"] = slow_mo
    return args
