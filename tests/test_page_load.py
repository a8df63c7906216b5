"""web/harness/harness.html in headless Chromium: Pyodide + py-harness load, runHarness,
WebGPU adapter."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from py_harness.host import paths
from py_harness.host.dist import build_wheel, snapshot
from py_harness.host.serving import server

pytestmark = pytest.mark.browser

RESULTS = paths.output_dir().parent / "test-results"


@pytest.fixture(scope="module")
def page(chromium: Any, harness_server: str) -> Iterator[Any]:
    page = chromium.new_page()
    page.goto(f"{harness_server}/harness/harness.html")
    timings = page.evaluate("() => window.harnessReady")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "page_load_timings.json").write_text(json.dumps(timings, indent=1))
    print(f"harness timings (ms): {timings}")
    yield page
    page.close()


def test_timings_recorded(page: Any) -> None:
    timings = page.evaluate("() => window.harnessTimings")
    for key in ("pyodideLoadMs", "packageLoadMs", "importMs", "totalMs"):
        assert timings[key] >= 0, key


def test_pyodide_starts_from_the_snapshot(page: Any) -> None:
    """Where the build could make one (Node is there: setup installs it), Pyodide restores
    its memory after start-up instead of starting Python (host/dist/snapshot.py)."""
    if not (paths.dist_dir() / snapshot.SNAPSHOT_NAME).is_file():
        pytest.skip("no Pyodide snapshot was built (no Node)")
    timings = page.evaluate("() => window.harnessTimings")
    assert timings["snapshot"] is True and "snapshotError" not in timings, timings


def _boot_with_dist(chromium: Any, dist: Path) -> dict[str, Any]:
    """harnessTimings of a page served with `dist` as /dist/, once ready."""
    srv, url = server.start_server(port=0, routes={**server.default_routes(), "dist": dist})
    page = chromium.new_page()
    try:
        page.goto(f"{url}/harness/harness.html")
        return page.evaluate("() => window.harnessReady")
    finally:
        page.close()
        server.stop(srv)


@pytest.mark.slow
@pytest.mark.parametrize("snapshot_bytes", [None, b"not a memory snapshot"], ids=["none", "bad"])
def test_the_page_boots_without_a_usable_snapshot(
    chromium: Any, tmp_path: Path, snapshot_bytes: bytes | None
) -> None:
    """No snapshot (the build had no Node) or one Pyodide cannot restore: Pyodide starts
    Python itself, and says so."""
    built = build_wheel.build(log=lambda _msg: None)
    for f in (built.wheel, built.lockfile):
        shutil.copy(f, tmp_path)
    if snapshot_bytes is not None:
        (tmp_path / snapshot.SNAPSHOT_NAME).write_bytes(snapshot_bytes)
    timings = _boot_with_dist(chromium, tmp_path)
    assert timings["snapshot"] is False, timings
    assert ("snapshotError" in timings) == (snapshot_bytes is not None), timings


def test_ping_round_trip(page: Any) -> None:
    status, value, stack = page.evaluate("() => window.runHarness('ping', '{\"x\":1}')")
    assert (status, stack) == ("ok", None)
    reply = json.loads(value)
    assert reply["pong"] == {"x": 1}
    assert reply["python"].startswith("3.")


def test_missing_entry_is_an_error(page: Any) -> None:
    status, message, stack = page.evaluate("() => window.runHarness('no_such_entry', '{}')")
    assert status == "error"
    assert "no function 'no_such_entry'" in message and "ping" in message
    assert isinstance(stack, str)


def test_python_exception_gives_traceback(page: Any) -> None:
    # ping parses its argument: invalid JSON raises inside Python.
    status, message, stack = page.evaluate("() => window.runHarness('ping', 'not json')")
    assert status == "error"
    assert message.startswith("Traceback (most recent call last)")
    assert "JSONDecodeError" in message
    assert "PythonError" in stack


def test_webgpu_adapter(page: Any) -> None:
    info = page.evaluate(
        """async () => {
            if (!navigator.gpu) return null;
            const adapter = await navigator.gpu.requestAdapter();
            return adapter && {vendor: adapter.info.vendor, arch: adapter.info.architecture};
        }"""
    )
    assert info is not None, "navigator.gpu missing or requestAdapter() returned null"
    assert info["vendor"]


@pytest.mark.slow
def test_corrupt_wheel_fails_integrity(chromium: Any, tmp_path: Path) -> None:
    built = build_wheel.build(log=lambda _msg: None)
    shutil.copy(built.lockfile, tmp_path)
    (tmp_path / built.wheel.name).write_bytes(built.wheel.read_bytes() + b"tampered")
    srv, url = server.start_server(port=0, routes={**server.default_routes(), "dist": tmp_path})
    page = chromium.new_page()
    try:
        page.goto(f"{url}/harness/harness.html")
        message = page.evaluate("() => window.harnessReady.then(() => null, (e) => e.message)")
        assert message.startswith("harness failed to load: loadPackage('py-harness') failed")
    finally:
        page.close()
        server.stop(srv)


@pytest.mark.slow
def test_load_failure_rejects_ready(chromium: Any, tmp_path: Path) -> None:
    routes = {**server.default_routes(), "dist": tmp_path}  # no lock file: Pyodide cannot boot
    srv, url = server.start_server(port=0, routes=routes)
    page = chromium.new_page()
    try:
        page.goto(f"{url}/harness/harness.html")
        message = page.evaluate("() => window.harnessReady.then(() => null, (e) => e.message)")
        assert message.startswith("harness failed to load") and "pyodide-lock.json" in message
        status, value, _ = page.evaluate("() => window.runHarness('ping', '{}')")
        assert status == "error" and "harness failed to load" in value
    finally:
        page.close()
        server.stop(srv)
