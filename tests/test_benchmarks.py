"""benchmarks/: the research probes and calibrations (docs/records/gpu.md, docs/runtimes.md
and docs/serving.md quote what they measured). None of the product depends on them, so CI
checks only that each still imports what it uses of py_harness and parses its arguments:
`--help` runs the module's imports and its argument parser, and nothing else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))


def test_the_benchmarks_are_found() -> None:
    assert len(BENCHMARKS) >= 10, BENCHMARKS


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda p: p.stem)
def test_each_benchmark_imports_and_answers_help(script: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(script), "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("usage: "), run.stdout[:500]
