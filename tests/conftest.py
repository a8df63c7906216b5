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


@pytest.fixture(scope="module")
def demo(chromium: Any, harness_server: str) -> Iterator[Any]:
    """A ready demo page for the module (Pyodide starts and pipelines compile once)."""
    yield from demo_page(chromium, harness_server)
