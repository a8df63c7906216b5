"""Where the host side finds its files, in a checkout or in an installed distribution.

In a checkout, shaders/ and web/ sit beside the package and outputs go to build/. An
installed distribution carries shaders/ and web/ inside the package (py_harness/host/_data/,
pyproject's force-include), builds the Pyodide wheel into a per-user cache, and writes
results under the current folder's build/. The npm packages (Pyodide, Dawn for Node) come
from HARNESS_NODE_MODULES, else a checkout's or the current folder's node_modules/, else the
cache that `py-harness setup` fills.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import __version__

PACKAGE_DIR = Path(__file__).resolve().parents[1]
_CHECKOUT = PACKAGE_DIR.parent
_DATA = Path(__file__).resolve().parent / "_data"
# A checkout runs its own files (edited shaders take effect without reinstalling).
IN_CHECKOUT = (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "shaders").is_dir()


def _data(name: str) -> Path:
    return _CHECKOUT / name if IN_CHECKOUT else _DATA / name


SHADER_DIR = _data("shaders")
WEB_DIR = _data("web")
# The harness's page plumbing (the test page, its glue, the Node runtime, the snapshot maker),
# and the demo page built on it: two folders, served under /harness/ and /demo/.
HARNESS_WEB_DIR = WEB_DIR / "harness"
DEMO_WEB_DIR = WEB_DIR / "demo"
# package.json and package-lock.json: the pinned npm packages (`py-harness setup`).
NPM_DIR = _CHECKOUT if IN_CHECKOUT else _DATA


def cache_dir() -> Path:
    """The per-user cache: $HARNESS_CACHE, else $XDG_CACHE_HOME/py-harness."""
    if os.environ.get("HARNESS_CACHE"):
        return Path(os.environ["HARNESS_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "py-harness"


def output_dir() -> Path:
    """Where commands write results by default: build/ of the checkout or the current folder."""
    return (_CHECKOUT if IN_CHECKOUT else Path.cwd()) / "build"


def dist_dir() -> Path:
    """The Pyodide wheel and its pyodide-lock.json (served under /dist/)."""
    if IN_CHECKOUT:
        return _CHECKOUT / "build" / "dist"
    return cache_dir() / f"dist-{__version__}"


def node_modules() -> Path:
    """The npm packages' folder: the first of HARNESS_NODE_MODULES, the checkout's, the
    current folder's, the cache's that holds Pyodide (else the cache's, to be filled)."""
    if os.environ.get("HARNESS_NODE_MODULES"):
        return Path(os.environ["HARNESS_NODE_MODULES"])
    candidates = [Path.cwd() / "node_modules", cache_dir() / "node_modules"]
    if IN_CHECKOUT:
        candidates.insert(0, _CHECKOUT / "node_modules")
    for folder in candidates:
        if (folder / "pyodide" / "pyodide-lock.json").is_file():
            return folder
    return candidates[0] if IN_CHECKOUT else cache_dir() / "node_modules"


def pyodide_dir() -> Path:
    return node_modules() / "pyodide"


def node_binary() -> str:
    """The Node.js to run: HARNESS_NODE, else `node` on the PATH."""
    return os.environ.get("HARNESS_NODE", "node")


def shader_sources(directory: Path = SHADER_DIR) -> dict[str, str]:
    """Every .wgsl file in `directory`, by file name (the page gets them with each case)."""
    return {p.name: p.read_text() for p in sorted(directory.glob("*.wgsl"))}


def cannot_write(folder: Path) -> str | None:
    """Why results cannot go into `folder` (None: they can; it is created). Asked before a
    run, whose results would otherwise be lost when they are written at its end."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot write {folder}: {exc}"
    return None if os.access(folder, os.W_OK) else f"cannot write {folder}: not writable"


def cannot_write_file(path: Path) -> str | None:
    """Why a results file cannot be written at `path` (None: it can; its folder is created)."""
    return f"cannot write {path}: a folder" if path.is_dir() else cannot_write(path.parent)
