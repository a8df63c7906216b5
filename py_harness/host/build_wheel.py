"""Build the py-harness wheel and a pyodide-lock.json that lists it.

Usage: ``python -m py_harness.host.build_wheel [--force]``

Outputs (served by server.py under ``/dist/``):
  build/dist/py_harness-<version>-py3-none-any.whl
  build/dist/pyodide-lock.json   (Pyodide's own lock + a ``py-harness`` entry)

The lock entry's ``file_name`` is the bare wheel name (``--base-path`` = the wheel's folder).
Pyodide 314 resolves a relative ``file_name`` as ``new URL(file_name, packageBaseUrl)``;
``packageBaseUrl`` defaults to the folder of ``lockFileURL`` and must be given explicitly with
``lockFileContents`` (web/harness.js passes the absolute URL of ``/dist/``). So the wheel sits
next to the lock file, and the lock works wherever /dist/ is mounted. Pyodide checks the
entry's sha256 (subresource integrity) when it downloads the wheel.

Rebuilding is skipped when a content hash of the inputs (py_harness/ minus host/, pyproject.toml,
Pyodide's lock file) matches the stamp left by the last build.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "py_harness"
DIST_DIR = ROOT / "build" / "dist"
PYODIDE_DIR = ROOT / "node_modules" / "pyodide"
INPUT_LOCK = PYODIDE_DIR / "pyodide-lock.json"
OUTPUT_LOCK = DIST_DIR / "pyodide-lock.json"
STAMP = DIST_DIR / ".build-stamp.json"
LOCK_NAME = "py-harness"  # key in pyodide-lock.json and the name given to loadPackage()
# Bump when the build recipe changes so old stamps stop matching.
RECIPE_VERSION = "1"

HOW_TO_BUILD = (
    "Set up with `npm ci` (Pyodide in node_modules/) and, in a Python >= 3.12 venv, "
    "`pip install -e '.[dev]'` (pyodide-build, hatchling); then run "
    "`python -m py_harness.host.build_wheel`."
)


class BuildError(RuntimeError):
    """The wheel or lock file could not be produced; the message says what to do."""


@dataclass(frozen=True)
class BuildResult:
    wheel: Path
    lockfile: Path
    digest: str
    rebuilt: bool


def _source_files() -> Iterator[Path]:
    for path in sorted(PACKAGE_DIR.rglob("*")):
        rel = path.relative_to(PACKAGE_DIR)
        if not path.is_file() or rel.parts[0] == "host":
            continue
        if "__pycache__" in rel.parts or path.suffix in {".pyc", ".pyo"}:
            continue
        yield path


def source_digest() -> str:
    """Hash of everything that changes the wheel or the lock file."""
    h = hashlib.sha256(f"recipe {RECIPE_VERSION}\n".encode())
    inputs = [*_source_files(), ROOT / "pyproject.toml", INPUT_LOCK]
    for path in inputs:
        # Names are hashed too, so renames and deletions also trigger a rebuild.
        h.update(path.relative_to(ROOT).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _read_stamp() -> dict[str, str]:
    try:
        return json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return {}


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        out = f"{proc.stdout}{proc.stderr}".strip()
        raise BuildError(f"{what} failed ({' '.join(cmd)}):\n{out}\n{HOW_TO_BUILD}")


def _build_wheel(out_dir: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-w", str(out_dir)]
    cmd += ["-q", "--disable-pip-version-check"]
    # With hatchling installed locally, skip the isolated build env: offline and ~1 s faster.
    if importlib.util.find_spec("hatchling") is not None:
        cmd.append("--no-build-isolation")
    _run(cmd, "pip wheel")
    wheels = list(out_dir.glob("py_harness-*.whl"))
    if len(wheels) != 1:
        raise BuildError(f"expected one py_harness wheel in {out_dir}, found {wheels}")
    return wheels[0]


def _pyodide_cli() -> str:
    # Prefer the CLI of the interpreter running us (a venv need not be activated).
    local = Path(sys.executable).with_name("pyodide")
    found = str(local) if local.exists() else shutil.which("pyodide")
    if found is None:
        raise BuildError(f"the `pyodide` CLI (pyodide-build) is not installed. {HOW_TO_BUILD}")
    return found


def _add_to_lock(wheel: Path, out_lock: Path) -> None:
    cmd = [_pyodide_cli(), "lockfile", "add-wheels", "--input", str(INPUT_LOCK)]
    cmd += ["--output", str(out_lock), "--base-path", str(wheel.parent), str(wheel)]
    _run(cmd, "pyodide lockfile add-wheels")
    entry = json.loads(out_lock.read_text())["packages"].get(LOCK_NAME)
    # A bare file name is what makes the wheel resolve next to the lock file (see module doc).
    if entry is None or entry["file_name"] != wheel.name:
        raise BuildError(f"unexpected lock entry for {LOCK_NAME!r}: {entry}")


def build(force: bool = False, log: Callable[[str], None] = print) -> BuildResult:
    """Build the wheel and lock into build/dist/ unless the stamp says they are current."""
    if not INPUT_LOCK.exists():
        raise BuildError(f"{INPUT_LOCK.relative_to(ROOT)} is missing. {HOW_TO_BUILD}")
    DIST_DIR.mkdir(parents=True, exist_ok=True)
    # Serialize concurrent builds (server start + test session) on one file lock.
    with open(DIST_DIR.parent / ".build_wheel.lock", "w") as lock_fd:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        digest = source_digest()
        stamp = _read_stamp()
        wheel = DIST_DIR / stamp.get("wheel", "-")
        if not force and stamp.get("digest") == digest and wheel.exists() and OUTPUT_LOCK.exists():
            log(f"build_wheel: up to date ({digest[:12]}): {wheel.relative_to(ROOT)}")
            return BuildResult(wheel, OUTPUT_LOCK, digest, rebuilt=False)

        with tempfile.TemporaryDirectory(dir=DIST_DIR.parent) as tmp:
            # Build and register in a scratch folder, then swap in: a failed build never
            # leaves a half-written lock next to a stale wheel.
            new_wheel = _build_wheel(Path(tmp))
            new_lock = Path(tmp) / "pyodide-lock.json"
            _add_to_lock(new_wheel, new_lock)
            for old in DIST_DIR.glob("py_harness-*.whl"):
                old.unlink()
            wheel = DIST_DIR / new_wheel.name
            shutil.move(new_wheel, wheel)
            new_lock.replace(OUTPUT_LOCK)
        STAMP.write_text(json.dumps({"digest": digest, "wheel": wheel.name}, indent=1))
        log(f"build_wheel: built {wheel.relative_to(ROOT)} and registered it as {LOCK_NAME!r}")
        log(f"build_wheel: lock file {OUTPUT_LOCK.relative_to(ROOT)} ({digest[:12]})")
        return BuildResult(wheel, OUTPUT_LOCK, digest, rebuilt=True)


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
