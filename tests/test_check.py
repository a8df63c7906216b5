"""`py-harness check` end to end on wgpu-py, as a user runs it (a new process): statuses,
draws, the limitations' reproducers, and what it writes (results.json from the plugin,
results.xml from pytest's JUnit writer)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.needs_runtime("wgpu")]

ON_LAVAPIPE = "d111-sq203-sk113-mqa6x1"  # the seed needs 72,754 loop passes there
FLAW = "d109-sq7-sk1-h3-win1"  # the seed's K scaling: one visible key per row
PLAIN = "d1-sq17-sk17-h4"
# A pytest plugin that replaces the declared limitations with one that no longer reproduces.
STALE_PLUGIN = """
import dataclasses
from py_harness.host import reproducers
from py_harness.host.judge import limitations

def pytest_configure(config):
    gone = dataclasses.replace(limitations.SEED_SCALING, name="test-gone")
    reproducers.REPRODUCERS[gone.name] = lambda session: (False, "the probe found nothing")
    limitations.LIMITATIONS = (gone,)
"""


def _check(tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "py_harness", "check", "--runtime", "wgpu", "--out", str(out)]
    proc = subprocess.run(
        [*cmd, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    results = json.loads((out / "results.json").read_text())
    return proc, results, ET.parse(out / "results.xml").getroot()


def test_statuses_draws_and_reports(tmp_path: Path) -> None:
    cases = [arg for c in (PLAIN, FLAW, ON_LAVAPIPE) for arg in ("--case", c)]
    proc, results, junit = _check(tmp_path, "--variant", "seed", "--draws", "3", *cases)
    out = proc.stdout
    by = {r["case"]: r for r in results["results"]}
    adapter = " ".join(results["adapters"]["wgpu"].values())
    assert proc.returncode == 0 and results["draws"] == 3, out
    assert by[PLAIN]["status"] == "pass" and by[PLAIN]["draws"] == 3
    ratios = by[PLAIN]["draw_ratios"]
    assert len(ratios) == 3 and set(ratios[0]) == {"o", "lse", "dq", "dk", "dv"}
    assert max(max(r.values()) for r in ratios) == by[PLAIN]["worst_ratio"]
    # the flaw is declared for every adapter: its reproducer ran, and its case is pass or known
    assert by["limitation:seed-k-scaling"]["status"] == "pass"
    assert by[FLAW]["status"] in ("pass", "known")
    if by[FLAW]["status"] == "known":
        assert by[FLAW]["failed_draws"] >= 1 and "seed-k-scaling" in by[FLAW]["detail"]
    lavapipe = "llvmpipe" in adapter
    assert by[ON_LAVAPIPE]["status"] == ("unsupported" if lavapipe else "pass")
    assert ("limitation:lavapipe-loop-budget" in by) == lavapipe
    # the matrix printed at the end names every case that ran
    assert "py-harness: seed, case x runtime" in out and PLAIN in out.split("case x runtime")[1]
    if lavapipe:
        assert by[ON_LAVAPIPE]["draws"] == 0  # not run
        skipped = junit.find(f".//testcase[@name='test_case[wgpu-seed-{ON_LAVAPIPE}]']/skipped")
        assert "unsupported on this driver (lavapipe-loop-budget)" in skipped.get("message")
        assert "72,754 loop passes" in skipped.get("message")
    suite = junit.find("testsuite")
    assert suite.get("failures") == "0" and suite.get("errors") == "0"


def test_a_stale_declaration_fails(tmp_path: Path) -> None:
    (tmp_path / "stale_plugin.py").write_text(STALE_PLUGIN)
    env = {"PYTHONPATH": str(tmp_path)}
    args = ("--variant", "seed", "--case", PLAIN, "--", "-p", "stale_plugin")
    proc, results, junit = _check(tmp_path, *args, env=env)
    row = next(r for r in results["results"] if r["case"] == "limitation:test-gone")
    assert proc.returncode == 1 and row["status"] == "stale", proc.stdout
    assert "no longer reproduces: the probe found nothing" in row["detail"]
    assert junit.find("testsuite").get("failures") == "1"


def test_runs_where_pytest_does_not_load_the_plugin_itself(tmp_path: Path) -> None:
    # As from a checkout on PYTHONPATH, with no distribution registering the plugin, on a
    # GPU machine without Chromium (the native runtimes need none: it stopped every case
    # with "Chromium not found" at setup).
    env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "HARNESS_CHROMIUM": str(tmp_path / "none")}
    proc, results, _ = _check(tmp_path, "--variant", "seed", "--case", PLAIN, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [r["status"] for r in results["results"] if r["case"] == PLAIN] == ["pass"]
