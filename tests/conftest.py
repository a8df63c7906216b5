"""Fixtures as a chain with explicit scopes.

server and browser per session, page (a loaded harness) per module, state per test.
Launch flags live in one overridable fixture, `chromium_launch_args`. Runtimes are chosen
with `--runtime chromium,wgpu`; one that is not installed is skipped with how to install it.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from py_harness.host.browsers import chromium_launch_args as default_launch_args
from py_harness.host.sessions import BrowserSession, NativeSession, Session

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-results"
RUNTIMES = ("chromium", "wgpu")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runtime",
        default="chromium,wgpu",
        help="comma-separated WebGPU runtimes to judge the kernels on: chromium, wgpu",
    )


def selected_runtimes(config: pytest.Config) -> list[str]:
    names = [r.strip() for r in config.getoption("--runtime").split(",") if r.strip()]
    for name in names:
        if name not in RUNTIMES:
            raise pytest.UsageError(f"--runtime: unknown {name!r}; known: {', '.join(RUNTIMES)}")
    return names


def runtime_missing(name: str) -> str | None:
    """Why a runtime cannot run here (with how to install it), or None."""
    if name == "chromium":
        try:
            default_launch_args()
        except FileNotFoundError as exc:
            return str(exc)
        return None
    if importlib.util.find_spec("wgpu") is None:
        return "wgpu-py is not installed: pip install wgpu (see pyproject's dev extra)"
    icds = [
        Path("/usr/share/vulkan/icd.d"),
        Path(os.environ.get("VK_ICD_FILENAMES", "/nonexistent")),
    ]
    if not any(p.exists() for p in icds):
        return "no Vulkan driver: apt-get install mesa-vulkan-drivers"
    return None


@pytest.fixture(scope="session")
def harness_server() -> Iterator[str]:
    """The harness server on a free loopback port, with the wheel and lock built."""
    from py_harness.host.build_wheel import build
    from py_harness.host.check import load_server_module

    build(log=lambda _msg: None)
    server_module = load_server_module()
    server, base_url = server_module.start_server()
    yield base_url
    server_module.stop(server)


@pytest.fixture(scope="session")
def chromium_launch_args() -> dict[str, Any]:
    """Override this fixture to change Chromium's path or flags."""
    return default_launch_args()


@pytest.fixture(scope="session")
def chromium(chromium_launch_args: dict[str, Any]) -> Iterator[Any]:
    reason = runtime_missing("chromium")
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(**chromium_launch_args)
        yield browser
        browser.close()


def open_session(request: pytest.FixtureRequest, runtime: str) -> Iterator[Session]:
    reason = runtime_missing(runtime)
    if reason:
        pytest.skip(f"{runtime} not available: {reason}")
    if runtime == "wgpu":
        session = NativeSession()
        yield session
        session.close()
        return
    browser = request.getfixturevalue("chromium")
    base_url = request.getfixturevalue("harness_server")
    page = browser.new_page()
    try:
        yield BrowserSession(page, base_url)
    finally:
        page.close()


@pytest.fixture(scope="module")
def harness(request: pytest.FixtureRequest) -> Iterator[Session]:
    """A loaded harness on the runtime the test is parametrized with (one per module)."""
    yield from open_session(request, request.param)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "harness" in metafunc.fixturenames:
        metafunc.parametrize(
            "harness", selected_runtimes(metafunc.config), indirect=True, scope="module"
        )
