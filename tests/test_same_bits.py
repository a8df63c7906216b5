"""`py-harness same-bits`: the bits of two copies of the kernels compared case by case."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from py_harness.host.judge.mutants import MUTANTS
from py_harness.host.paths import SHADER_DIR, shader_sources
from py_harness.host.tools import same_bits

ROOT = Path(__file__).resolve().parents[1]
CASE = "d64-sq128-sk128-b2-h4"  # the control case


def _same_bits(old: Path, case: str = CASE) -> subprocess.CompletedProcess[str]:
    # Through the command line, as a kernel developer runs it (cli.COMMANDS registers it).
    command = [sys.executable, "-m", "py_harness", "same-bits", str(old), "--case", case]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)


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


@pytest.mark.usefixtures("no_runtime")
@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["--case", "d9-x"], "--case: unknown d9-x"),
        (["NO-SUCH-FOLDER"], "NO-SUCH-FOLDER is not a folder"),
    ],
)
def test_what_it_refuses_is_named_before_a_runtime_starts(
    argv: list[str], why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        same_bits.main([str(tmp_path), *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert why in err and err.startswith("usage: py-harness same-bits"), err
