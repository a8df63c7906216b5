"""Fixtures shared by the demo page's test modules: one ready page per module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.demo_page import demo_page


@pytest.fixture(scope="module")
def demo(chromium: Any, harness_server: str) -> Iterator[Any]:
    """A ready demo page for the module (Pyodide starts and pipelines compile once)."""
    yield from demo_page(chromium, harness_server)
