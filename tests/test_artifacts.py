"""A failing case leaves its artifacts under --output (host/artifacts.py): the inputs and
the kernel's outputs as .npz, the verdict, what the runtime printed, a page's Playwright
trace (--tracing retain-on-failure), and a replay command that fails the same way alone."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.fakes import planted_shaders

pytest_plugins = ["pytester"]
CASE = "d64-sq128-sk128-b2-h4"
BUG = "fwd-lse-off"  # the forward's LSE off by log(1 + 1e-3 / l): O is right, the LSE not


@pytest.mark.browser
@pytest.mark.parametrize(
    "runtime", [pytest.param(r, marks=pytest.mark.needs_runtime(r)) for r in ("wgpu", "chromium")]
)
def test_a_failing_case_leaves_arrays_verdict_console_and_a_replay(
    pytester: pytest.Pytester, runtime: str
) -> None:
    shaders = planted_shaders(pytester.path, BUG)
    pytester.makepyfile("def test_case(run_case, matrix_case):\n    run_case(matrix_case)\n")
    out = pytester.path / "arts"
    args = ["--runtime", runtime, "--variant", "seed", "--case", CASE, "--shaders", shaders]
    result = pytester.runpytest_subprocess(*args, "--output", out, "--tracing", "retain-on-failure")
    result.assert_outcomes(failed=1)
    [folder] = out.iterdir()
    assert runtime in folder.name and CASE in folder.name
    assert str(folder) in result.stdout.str()  # named under the failure
    inputs, outputs = np.load(folder / "inputs.npz"), np.load(folder / "outputs.npz")
    assert {"q", "k", "v", "d_out"} <= set(inputs.files)
    assert {"o", "lse", "bound_lse"} <= set(outputs.files)
    assert "lse: FAIL" in (folder / "verdict.txt").read_text()
    assert (folder / "console.log").is_file()
    # a page's Playwright trace (`playwright show-trace`): a zip of its trace events
    if runtime == "chromium":
        with zipfile.ZipFile(folder / "trace.zip") as trace:
            assert any(n.endswith(".trace") for n in trace.namelist()), trace.namelist()
    # the replay, alone, in a new process: the same case fails the same way
    replay = (folder / "replay.sh").read_text().splitlines()[-1]
    assert replay.startswith("exec py-harness check ") and str(shaders.resolve()) in replay
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("HARNESS_OUTPUTS_DIR", None)
    proc = subprocess.run(
        ["sh", str(folder / "replay.sh"), "--out", str(pytester.path / "replayed")],
        capture_output=True,
        text=True,
        env=env,
        cwd=pytester.path,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"{CASE}" in proc.stdout and "lse: FAIL" in proc.stdout, proc.stdout[-3000:]


@pytest.mark.browser
@pytest.mark.needs_runtime("wgpu")
def test_a_passing_case_leaves_nothing_unless_all_are_asked_for(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_case(run_case, matrix_case):\n    run_case(matrix_case)\n")
    args = ["--runtime", "wgpu", "--variant", "seed", "--case", CASE]
    pytester.runpytest_subprocess(*args, "--output", "a").assert_outcomes(passed=1)
    assert not (pytester.path / "a").exists()
    pytester.runpytest_subprocess(*args, "--output", "b", "--artifacts", "all")
    [folder] = (pytester.path / "b").iterdir()
    assert (folder / "verdict.txt").read_text().strip() == "pass"
