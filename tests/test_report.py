"""The disagreement report: where two runtimes' outputs differ most, against the bound
(the H200's three implementations agree bit for bit, so a report of 0 must mean equal).
Outputs reach it as the .npz files the plugin saves, as they do from pytest-xdist workers."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np

from py_harness.host.judge.inputs import CaseResult
from py_harness.host.judge.report import disagreements, save_outputs

SHAPE = (1, 5, 2, 3)


def _row(folder: Path, runtime: str, outputs: dict[str, np.ndarray]) -> dict:
    reports = [SimpleNamespace(name=n, bound=1e-6) for n in ("o", "lse", "dq", "dk", "dv")]
    result = CaseResult("c", runtime, "fast", reports, {}, "wall-clock", outputs=outputs)
    path = save_outputs(result, folder, "fast")
    return {"case": "c", "runtime": runtime, "variant": "fast", "outputs_file": str(path)}


def _outputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {n: rng.standard_normal(SHAPE).astype(np.float32) for n in ("o", "dq", "dk", "dv")}
    return out | {"lse": rng.standard_normal((1, 2, 5)).astype(np.float32)}


def test_identical_outputs_differ_by_zero(tmp_path: Path) -> None:
    a = _outputs()
    b = {n: x.copy() for n, x in a.items()}
    [row] = disagreements([_row(tmp_path, "wgpu", a), _row(tmp_path, "dawn", b)])
    assert row["max_abs_diff"] == 0.0 and row["ratio_to_bound"] == 0.0


def test_the_worst_difference_is_found_with_its_tensor_runtimes_and_index(tmp_path: Path) -> None:
    a = _outputs()
    b = {n: x.copy() for n, x in a.items()}
    c = {n: x.copy() for n, x in a.items()}
    b["dk"][0, 3, 1, 2] += np.float32(5e-6)  # one element: 5x the bound
    c["dq"][0, 1, 0, 0] += np.float32(2e-6)
    rows = [_row(tmp_path, "wgpu", a), _row(tmp_path, "dawn", b), _row(tmp_path, "node", c)]
    [row] = disagreements(rows)
    assert row["tensor"] == "dk" and row["at"] == [0, 3, 1, 2]
    assert set(row["runtimes"]) in ({"wgpu", "dawn"}, {"dawn", "node"})
    assert row["ratio_to_bound"] > 4.9
