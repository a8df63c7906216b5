"""`python -m py_harness check` end to end on wgpu-py: statuses, draws, the limitations'
reproducers, and what it writes (results.json, JUnit XML)."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from py_harness.host import check, limitations
from py_harness.host.runtimes import runtime

pytestmark = pytest.mark.browser  # needs a WebGPU runtime (wgpu-py here)

ON_LAVAPIPE = "d111-sq203-sk113-mqa6x1"  # the seed needs 72,754 loop passes there
FLAW = "d109-sq7-sk1-h3-win1"  # the seed's K scaling: one visible key per row
PLAIN = "d1-sq17-sk17-h4"


@pytest.fixture(autouse=True)
def _wgpu() -> None:
    reason = runtime("wgpu").missing()
    if reason:
        pytest.skip(reason)


def _check(tmp_path: Path, *args: str) -> tuple[int, dict, ET.Element]:
    code = check.main(["--runtime", "wgpu", "--out", str(tmp_path), *args])
    results = json.loads((tmp_path / "results.json").read_text())
    return code, results, ET.parse(tmp_path / "results.xml").getroot()


def test_statuses_draws_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cases = [arg for c in (PLAIN, FLAW, ON_LAVAPIPE) for arg in ("--case", c)]
    code, results, junit = _check(tmp_path, "--variant", "seed", "--draws", "3", *cases)
    out = capsys.readouterr().out
    by = {r["case"]: r for r in results["results"]}
    adapter = " ".join(results["adapters"]["wgpu"].values())
    assert code == 0 and results["draws"] == 3, out
    assert by[PLAIN]["status"] == "pass" and by[PLAIN]["draws"] == 3
    assert len(by[PLAIN]["draw_ratios"]) == 3 and set(by[PLAIN]["draw_ratios"][0]) == {
        "o",
        "lse",
        "dq",
        "dk",
        "dv",
    }
    assert max(max(r.values()) for r in by[PLAIN]["draw_ratios"]) == by[PLAIN]["worst_ratio"]
    # the flaw is declared for every adapter: its reproducer ran, and its case is pass or known
    assert by["limitation:seed-k-scaling"]["status"] == "pass"
    assert by[FLAW]["status"] in ("pass", "known")
    if by[FLAW]["status"] == "known":
        assert by[FLAW]["failed_draws"] >= 1 and "seed-k-scaling" in by[FLAW]["detail"]
    lavapipe = "llvmpipe" in adapter
    assert by[ON_LAVAPIPE]["status"] == ("unsupported" if lavapipe else "pass")
    assert ("limitation:lavapipe-loop-budget" in by) == lavapipe
    if lavapipe:
        assert "draws" in by[ON_LAVAPIPE] and by[ON_LAVAPIPE]["draws"] == 0  # not run
        assert f"UNSUP {ON_LAVAPIPE}" in out and "72,754 loop passes" in out
        skipped = junit.find(f".//testcase[@name='{ON_LAVAPIPE}']/skipped")
        assert "unsupported on this driver (lavapipe-loop-budget)" in skipped.get("message")
    suite = junit.find("testsuite")
    assert suite.get("failures") == "0" and suite.get("errors") == "0"


def test_a_stale_declaration_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = dataclasses.replace(
        limitations.SEED_SCALING,
        name="test-gone",
        reproduce=lambda session: (False, "the probe found nothing"),
    )
    monkeypatch.setattr(check, "LIMITATIONS", (gone,))
    code, results, junit = _check(tmp_path, "--variant", "seed", "--case", PLAIN)
    row = next(r for r in results["results"] if r["case"] == "limitation:test-gone")
    assert code == 1 and row["status"] == "stale"
    assert "no longer reproduces: the probe found nothing" in row["detail"]
    assert junit.find("testsuite").get("failures") == "1"
