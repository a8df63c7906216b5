"""The case matrix as tests on the plugin's fixtures (pytest_plugin.py): what `py-harness
check` runs. A project runs the same on its own kernels with two tests of its own (see
examples/), or by importing these."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .judge.cases import Case
from .judge.limitations import Limitation

pytestmark = pytest.mark.browser


def test_case(run_case: Callable[[Case], object], matrix_case: Case) -> None:
    run_case(matrix_case)


def test_limitation(check_limitation: Callable[[Limitation], None], limitation: Limitation) -> None:
    check_limitation(limitation)
