"""Which files the server hands out, and how: only what the pages load.

/harness/ -> web/harness/ (the test page the runtimes open and its glue), /demo/ -> web/demo/
(the demo page), /shaders/ -> shaders/, /pyodide/ -> node_modules/pyodide/, /dist/ -> the
Pyodide wheel, its pyodide-lock.json and Pyodide's snapshot (host/paths.py locates each). A
file is served when its route allows its name: the pages' own HTML, scripts and styles, the
WGSL, the five files Pyodide's loader fetches, the wheel, the lock and the snapshot. Pyodide's
console.html (which loads jQuery from a CDN), its README, package.json, .d.ts and .map files,
and web/harness/'s node-harness.mjs and pyodide-snapshot.mjs (Node's, read from disk) are
never served, though they sit in the same folders.
"""

from __future__ import annotations

import fnmatch
import mimetypes
from http import HTTPStatus
from pathlib import Path
from urllib.parse import unquote

from .. import paths

# route -> the file names it serves (fnmatch patterns, one folder deep: no subfolders).
SERVED: dict[str, tuple[str, ...]] = {
    "harness": ("harness.html", "harness.js", "harness-core.mjs"),
    "demo": ("*.html", "*.js", "*.css"),
    "shaders": ("*.wgsl",),
    "pyodide": (
        "pyodide.js",
        "pyodide.mjs",
        "pyodide.asm.mjs",
        "pyodide.asm.wasm",
        "python_stdlib.zip",
        "pyodide-lock.json",
    ),
    "dist": ("*.whl", "pyodide-lock.json", "pyodide-snapshot.bin"),
}

# Explicit types: mimetypes depends on /etc/mime.types and misses .wasm/.mjs/.wgsl on some
# systems; Pyodide needs application/wasm for streaming compilation.
MIME_TYPES = {
    ".wasm": "application/wasm",
    ".mjs": "text/javascript",
    ".js": "text/javascript",
    ".json": "application/json",
    ".whl": "application/zip",
    ".zip": "application/zip",
    ".wgsl": "text/plain; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
# web/ and shaders/ are edited while the server runs, dist/ is rebuilt: never cached.
# pyodide/ is pinned by package-lock.json; a day (not "immutable") so a version bump still lands.
CACHE_CONTROL = {"pyodide": "public, max-age=86400"}
NO_STORE = "no-store"


def default_routes() -> dict[str, Path]:
    """The five folders the pages use (host/paths.py says where each one is)."""
    return {
        "harness": paths.HARNESS_WEB_DIR,
        "demo": paths.DEMO_WEB_DIR,
        "shaders": paths.SHADER_DIR,
        "pyodide": paths.pyodide_dir(),
        "dist": paths.dist_dir(),
    }


def content_type(path: Path) -> str:
    known = MIME_TYPES.get(path.suffix.lower())
    return known or mimetypes.guess_type(path.name)[0] or "application/octet-stream"


def served(route: str, name: str) -> bool:
    """Whether `route` hands out a file called `name` (SERVED's patterns, case-sensitive)."""
    return any(fnmatch.fnmatchcase(name, p) for p in SERVED.get(route, ()))


def resolve(routes: dict[str, Path], raw: str) -> tuple[HTTPStatus, str, Path | None]:
    """Map a request path (query already split off) to a served regular file inside its
    route folder: (OK, route, file), or (error status, route, None)."""
    try:
        path = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        return HTTPStatus.BAD_REQUEST, "", None
    # NUL truncates paths in C APIs; a backslash is a separator on Windows.
    if "\0" in path or "\\" in path or not path.startswith("/"):
        return HTTPStatus.FORBIDDEN, "", None
    route, _, rest = path[1:].partition("/")
    base = routes.get(route)
    if base is None or not rest or rest.endswith("/"):  # directories: no listings
        return HTTPStatus.NOT_FOUND, route, None
    parts = rest.split("/")
    # Decoded before checking, so %2e%2e and ..%2f are caught; empty parts would let
    # "/demo//etc/passwd" name an absolute path.
    if any(p in ("", ".", "..") for p in parts):
        return HTTPStatus.FORBIDDEN, route, None
    if len(parts) != 1 or not served(route, parts[0]):
        return HTTPStatus.NOT_FOUND, route, None
    try:
        target = base.joinpath(parts[0]).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        return HTTPStatus.NOT_FOUND, route, None
    if not target.is_relative_to(base):  # symlink leading outside the route folder
        return HTTPStatus.FORBIDDEN, route, None
    if not target.is_file():
        return HTTPStatus.NOT_FOUND, route, None
    return HTTPStatus.OK, route, target
