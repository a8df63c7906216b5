"""`py-harness merge`: results of `check` from several runtimes and machines joined into
one report (tools/merge.py): each runtime on each machine is an implementation, and every
pair of them is compared over the cases both ran, from the outputs `check` keeps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CASE = "d16-sq59-sk111-b2-h4-mask-rows-inf"


def _check(out: Path, runtime: str, machine: str) -> Path:
    cmd = [sys.executable, "-m", "py_harness", "check", "--runtime", runtime, "--out", str(out)]
    env = {**os.environ, "HARNESS_MACHINE": machine}
    proc = subprocess.run(
        [*cmd, "--variant", "fast", "--case", CASE], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out / "results.json"


def _merge(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "py_harness", "merge", *args]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.browser
@pytest.mark.needs_runtime("wgpu", "dawn")
def test_results_of_two_machines_merge_into_one_table_of_pairs(tmp_path: Path) -> None:
    # wgpu on two "machines" (the same one here, under two names: the same bits), and
    # dawn on the second: three implementations, three pairs, the folders moved first
    # (the outputs are found relative to each results file)
    a = _check(tmp_path / "made" / "a", "wgpu", "cpu-box")
    b = _check(tmp_path / "made" / "b", "wgpu,dawn", "gpu-box")
    (tmp_path / "made").rename(tmp_path / "copied")
    a, b = (tmp_path / "copied" / p.parent.name / p.name for p in (a, b))
    page = tmp_path / "merged.html"
    proc = _merge(str(a), str(b), "--json", str(tmp_path / "merged.json"), "--html", str(page))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert merged["implementations"] == ["wgpu@cpu-box", "wgpu@gpu-box", "dawn@gpu-box"]
    pairs = {tuple(p["runtimes"]): p for p in merged["pairs"]}
    assert set(pairs) == {
        ("wgpu@cpu-box", "wgpu@gpu-box"),
        ("dawn@gpu-box", "wgpu@cpu-box"),
        ("dawn@gpu-box", "wgpu@gpu-box"),
    }
    same = pairs[("wgpu@cpu-box", "wgpu@gpu-box")]
    assert same["cases"] == 1 and same["same_bits"] == 1, same
    other = pairs[("dawn@gpu-box", "wgpu@cpu-box")]
    assert other["cases"] == 1 and other["worst"]["case"] == CASE
    assert 0 <= other["worst"]["ratio_to_bound"] < 1, other  # both pass: within the bound
    assert "wgpu@cpu-box vs wgpu@gpu-box  1/1 same bits" in proc.stdout, proc.stdout
    assert "dawn@gpu-box" in page.read_text() and "<table>" in page.read_text()


def test_a_file_that_is_no_results_is_refused_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "results.json"
    bad.write_text(json.dumps({"rows": []}))
    proc = _merge(str(bad))
    assert proc.returncode == 1 and f"{bad}: not a results file" in proc.stdout, proc.stdout
    proc = _merge(str(tmp_path / "missing.json"))
    assert proc.returncode == 1 and "cannot read results" in proc.stdout, proc.stdout
    proc = _merge(str(bad), "--html", "/proc/no/page.html")
    assert proc.returncode == 2 and "--html: cannot write" in proc.stderr, proc.stderr
