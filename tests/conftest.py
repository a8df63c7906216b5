"""Fixtures as a chain with explicit scopes.

server and browsers per session, a loaded harness (page) per module, state per test.
Chromium's launch flags live in one overridable fixture, `chromium_launch_args`.
Runtimes are chosen with `--runtime chromium,wgpu` (default: all); one that is not
installed is skipped with how to install it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from py_harness.host.browsers import chromium_launch_args as default_launch_args
from py_harness.host.runtimes import RUNTIMES, Launched, parse_runtimes, runtime
from py_harness.host.sessions import Session
from py_harness.kernels import VARIANTS, variant


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runtime",
        default="all",
        help=f"comma-separated WebGPU runtimes: {', '.join(RUNTIMES)} (default: all)",
    )
    parser.addoption(
        "--variant",
        default="all",
        help=f"comma-separated kernel variants: {', '.join(VARIANTS)} (default: all)",
    )
    parser.addoption(
        "--draws",
        type=int,
        default=1,
        help="judge each matrix case on N seeded input draws (default 1: draw 0)",
    )
    parser.addoption(
        "--long", action="store_true", help="also run the long cases (GPU-sized; slow on CPUs)"
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--draws") < 1:
        raise pytest.UsageError(f"--draws: must be >= 1, got {config.getoption('--draws')}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--long"):
        return
    skip = pytest.mark.skip(reason="a long case: run with --long (GPU-sized; slow on CPUs)")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def draws(pytestconfig: pytest.Config) -> int:
    """How many input draws each matrix case is judged on (--draws)."""
    return pytestconfig.getoption("--draws")


@pytest.fixture(scope="session")
def harness_server() -> Iterator[str]:
    """The harness server on a free loopback port, with the wheel and lock built."""
    from py_harness.host.build_wheel import build
    from py_harness.host.server import start_server, stop

    build(log=lambda _msg: None)
    server, base_url = start_server()
    yield base_url
    stop(server)


@pytest.fixture(scope="session")
def chromium_launch_args() -> dict[str, Any]:
    """Override this fixture to change Chromium's path or flags."""
    return default_launch_args()


@pytest.fixture(scope="session")
def launched(chromium_launch_args: dict[str, Any]) -> Iterator[dict[str, Launched]]:
    """Each runtime launched at most once per test session, on first use."""
    with contextlib.ExitStack() as stack:

        class Lazy(dict):
            def __missing__(self, name: str) -> Launched:
                rt = runtime(name)
                self[name] = stack.enter_context(rt.launch(launch_args=chromium_launch_args))
                return self[name]

        yield Lazy()


@pytest.fixture(scope="session")
def chromium(launched: dict[str, Launched]) -> Any:
    """The session's Playwright Chromium browser (for tests that drive pages themselves)."""
    reason = runtime("chromium").missing()
    if reason:
        pytest.skip(reason)
    return launched["chromium"].browser  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def harness(request: pytest.FixtureRequest, launched: dict[str, Launched]) -> Iterator[Session]:
    """A loaded harness on the runtime the test is parametrized with (one per module)."""
    rt = runtime(request.param)
    reason = rt.missing()
    if reason:
        pytest.skip(f"{rt.name} not available: {reason}")
    base_url = request.getfixturevalue("harness_server") if rt.needs_server else ""
    handle = launched[rt.name]
    session = handle.new_session(base_url)
    yield session
    handle.close_session(session)


def selected_variants(config: pytest.Config) -> list[str]:
    spec = config.getoption("--variant")
    names = list(VARIANTS) if spec == "all" else [s.strip() for s in spec.split(",")]
    for name in names:
        variant(name)  # unknown names fail here, with the known ones listed
    return names


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "harness" in metafunc.fixturenames:
        names = parse_runtimes(metafunc.config.getoption("--runtime"))
        metafunc.parametrize("harness", names, indirect=True, scope="module")
    if "variant" in metafunc.fixturenames:
        metafunc.parametrize("variant", selected_variants(metafunc.config))
