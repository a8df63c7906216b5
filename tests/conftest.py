"""The project's own test options, and the fixtures shared by the demo page's test modules
(one ready page per module)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.demo_page import demo_page


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--planted-bugs-every-path",
        action="store_true",
        help="run every planted bug on every float path, not only mutants.PATH_DEPENDENT "
        "beyond the first (tests/test_planted_bugs.py)",
    )


@pytest.fixture
def no_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting a runtime fails the test: what a tool refuses, it refuses before one (the
    tools that bound engine.open_session at import, too)."""
    from py_harness.host import engine
    from py_harness.host.tools import explore, mutate

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a runtime was started for what should have been refused first")

    for module in (engine, explore, mutate):
        monkeypatch.setattr(module, "open_session", refuse)


@pytest.fixture(scope="module")
def demo(chromium: Any, harness_server: str) -> Iterator[Any]:
    """A ready demo page for the module (Pyodide starts and pipelines compile once)."""
    yield from demo_page(chromium, harness_server)
