"""scripts/same_bits.py: the bits of two copies of the kernels compared case by case."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from py_harness.host.judge.mutants import MUTANTS
from py_harness.host.paths import SHADER_DIR, shader_sources

ROOT = Path(__file__).resolve().parents[1]
CASE = "d64-sq128-sk128-b2-h4"  # the control case


def _same_bits(old: Path, case: str = CASE) -> subprocess.CompletedProcess[str]:
    script = [sys.executable, str(ROOT / "scripts/same_bits.py"), str(old), "--case", case]
    return subprocess.run(script, capture_output=True, text=True, timeout=300, cwd=ROOT)


@pytest.mark.needs_runtime("wgpu")
def test_a_copy_is_the_same_bits_and_a_planted_bug_is_not(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(SHADER_DIR, copy)
    same = _same_bits(copy)
    assert same.returncode == 0 and f"{CASE}: same" in same.stdout, same.stdout + same.stderr
    # a planted precision bug (exp through a 5-digit log2(e)): O's bits move
    bug = next(m for m in MUTANTS if m.name == "fast-exp-5digits")
    (copy / bug.file).write_text(bug.apply(shader_sources(copy))[bug.file])
    moved = _same_bits(copy)
    assert moved.returncode == 1, moved.stdout + moved.stderr
    line = next(ln for ln in moved.stdout.splitlines() if ln.startswith(f"{CASE}: "))
    assert line.startswith(f"{CASE}: o: ") and "elements differ, most" in line, line


def test_an_unknown_case_is_named(tmp_path: Path) -> None:
    out = _same_bits(tmp_path, "d9-x")
    assert out.returncode == 2 and "--case: unknown d9-x" in out.stderr, out.stderr
