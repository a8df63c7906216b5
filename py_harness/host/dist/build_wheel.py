"""Build the Pyodide wheel (the in-browser part of py_harness) and a pyodide-lock.json
that lists it.

Usage: ``python -m py_harness.host.dist.build_wheel [--force]``

Outputs (served under ``/dist/``; host/paths.py's dist_dir: build/dist/ in a checkout):
  py_harness-<version>-py3-none-any.whl
  pyodide-lock.json   (Pyodide's own lock + a ``py-harness`` entry)
  pyodide-snapshot.bin  (Pyodide's memory after start-up, where Node can make it: snapshot.py)

The wheel holds what runs in the page: py_harness/ minus host/ (NumPy, wgpu, browsers, the
CLI, the installed data) and minus __main__.py, the command's entry point, which `python -m
py_harness` needs at the package's top and which imports the host's CLI. It is zipped here,
file by file with fixed timestamps, so the same sources give the same bytes and no build
backend is needed.

The lock entry's ``file_name`` is the bare wheel name (``--base-path`` = the wheel's folder).
Pyodide 314 resolves a relative ``file_name`` as ``new URL(file_name, packageBaseUrl)``;
``packageBaseUrl`` defaults to the folder of ``lockFileURL`` and must be given explicitly with
``lockFileContents`` (web/harness/harness.js passes the absolute URL of ``/dist/``). So the
wheel sits next to the lock file, and the lock works wherever /dist/ is mounted. Pyodide checks
the entry's sha256 (subresource integrity) when it downloads the wheel.

Rebuilding is skipped when a content hash of the inputs (the in-browser files, Pyodide's
lock file) matches the stamp left by the last build.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ... import __version__
from .. import paths
from .snapshot import ensure_snapshot

LOCK_NAME = "py-harness"  # key in pyodide-lock.json and the name given to loadPackage()
# Bump when the build recipe changes so old stamps stop matching.
RECIPE_VERSION = "2"
# The package's host-only folder, and the one host-only file outside it (the entry point).
HOST_DIR = "host"
ENTRY_POINT = "__main__.py"

HOW_TO_BUILD = (
    "Fetch Pyodide with `py-harness setup` (or `npm ci` in a checkout), then run "
    "`python -m py_harness.host.dist.build_wheel`."
)


class BuildError(RuntimeError):
    """The wheel or lock file could not be produced; the message says what to do."""


@dataclass(frozen=True)
class BuildResult:
    wheel: Path
    lockfile: Path
    digest: str
    rebuilt: bool


def in_browser_files() -> Iterator[Path]:
    """The package's files that run in the page, in a stable order: all but host/ and the
    entry point."""
    for path in sorted(paths.PACKAGE_DIR.rglob("*.py")):
        rel = path.relative_to(paths.PACKAGE_DIR)
        if rel.parts[0] in (HOST_DIR, ENTRY_POINT) or "__pycache__" in rel.parts:
            continue
        yield path


def source_digest() -> str:
    """Hash of everything that changes the wheel or the lock file."""
    h = hashlib.sha256(f"recipe {RECIPE_VERSION} {__version__}\n".encode())
    for path in [*in_browser_files(), paths.pyodide_dir() / "pyodide-lock.json"]:
        # Names are hashed too, so renames and deletions also trigger a rebuild.
        h.update(path.name.encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _read_stamp(stamp: Path) -> dict[str, str]:
    try:
        return json.loads(stamp.read_text())
    except (OSError, ValueError):
        return {}


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        out = f"{proc.stdout}{proc.stderr}".strip()
        raise BuildError(f"{what} failed ({' '.join(cmd)}):\n{out}\n{HOW_TO_BUILD}")


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def _build_wheel(out_dir: Path) -> Path:
    """A pure-Python wheel of the in-browser files (PEP 427), byte-reproducible."""
    dist_info = f"py_harness-{__version__}.dist-info"
    entries = [
        (f"py_harness/{p.relative_to(paths.PACKAGE_DIR).as_posix()}", p.read_bytes())
        for p in in_browser_files()
    ]
    entries += [
        (
            f"{dist_info}/METADATA",
            f"Metadata-Version: 2.1\nName: py-harness\nVersion: {__version__}\n"
            "Summary: the in-browser part of py-harness (runs in Pyodide)\n".encode(),
        ),
        (
            f"{dist_info}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: py_harness build_wheel\n"
            b"Root-Is-Purelib: true\nTag: py3-none-any\n",
        ),
        (f"{dist_info}/top_level.txt", b"py_harness\n"),
    ]
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in entries)
    entries.append((f"{dist_info}/RECORD", (record + f"{dist_info}/RECORD,,\n").encode()))
    wheel = out_dir / f"py_harness-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, data, zipfile.ZIP_DEFLATED)
    return wheel


def _pyodide_cli() -> str:
    # Prefer the CLI of the interpreter running us (a venv need not be activated).
    local = Path(sys.executable).with_name("pyodide")
    found = str(local) if local.exists() else shutil.which("pyodide")
    if found is None:
        raise BuildError(
            "the `pyodide` CLI (pyodide-build) is not installed: "
            f"pip install 'py-harness[browser]'. {HOW_TO_BUILD}"
        )
    return found


def input_lock() -> Path:
    """Pyodide's own pyodide-lock.json (from its npm package)."""
    return paths.pyodide_dir() / "pyodide-lock.json"


def _add_to_lock(wheel: Path, out_lock: Path) -> None:
    cmd = [_pyodide_cli(), "lockfile", "add-wheels", "--input", str(input_lock())]
    cmd += ["--output", str(out_lock), "--base-path", str(wheel.parent), str(wheel)]
    _run(cmd, "pyodide lockfile add-wheels")
    entry = json.loads(out_lock.read_text())["packages"].get(LOCK_NAME)
    # A bare file name is what makes the wheel resolve next to the lock file (see module doc).
    if entry is None or entry["file_name"] != wheel.name:
        raise BuildError(f"unexpected lock entry for {LOCK_NAME!r}: {entry}")


def build(force: bool = False, log: Callable[[str], None] = print) -> BuildResult:
    """Build the wheel and lock into paths.dist_dir() unless the stamp says they are current."""
    if not input_lock().exists():
        raise BuildError(f"{input_lock()} is missing. {HOW_TO_BUILD}")
    dist = paths.dist_dir()
    dist.mkdir(parents=True, exist_ok=True)
    out_lock, stamp_file = dist / "pyodide-lock.json", dist / ".build-stamp.json"
    # Serialize concurrent builds (server start, test sessions, xdist workers) on a file lock.
    with open(dist.parent / ".build_wheel.lock", "w") as lock_fd:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        ensure_snapshot(dist, log)
        digest = source_digest()
        stamp = _read_stamp(stamp_file)
        wheel = dist / stamp.get("wheel", "-")
        if not force and stamp.get("digest") == digest and wheel.exists() and out_lock.exists():
            log(f"build_wheel: up to date ({digest[:12]}): {wheel}")
            return BuildResult(wheel, out_lock, digest, rebuilt=False)

        with tempfile.TemporaryDirectory(dir=dist.parent) as tmp:
            # Build and register in a scratch folder, then swap in: a failed build never
            # leaves a half-written lock next to a stale wheel.
            new_wheel = _build_wheel(Path(tmp))
            new_lock = Path(tmp) / "pyodide-lock.json"
            _add_to_lock(new_wheel, new_lock)
            for old in dist.glob("py_harness-*.whl"):
                old.unlink()
            wheel = dist / new_wheel.name
            shutil.move(new_wheel, wheel)
            new_lock.replace(out_lock)
        stamp_file.write_text(json.dumps({"digest": digest, "wheel": wheel.name}, indent=1))
        log(f"build_wheel: built {wheel} and registered it as {LOCK_NAME!r} ({digest[:12]})")
        return BuildResult(wheel, out_lock, digest, rebuilt=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args(argv)
    try:
        build(force=args.force)
    except BuildError as exc:
        print(f"build_wheel: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
