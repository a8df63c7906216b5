"""The case matrix on each runtime: O, LSE, dQ, dK, dV judged against float64 NumPy, through
the harness's pytest plugin exactly as a project with its own kernels uses it.

One test per case, variant and runtime, e.g.
`test_case[chromium-seed-d59-sq113-sk203-gqa6x2-causal]`. `-m smoke` runs the fast subset;
`--variant` and `--runtime` choose what is judged; `--draws N` judges each case on N input
draws; `--long` adds the GPU-sized cases. What a declared driver limitation covers is
skipped as unsupported; a declared kernel flaw's failure is an expected failure
(py_harness/host/judge/limitations.py); a stale declaration fails test_limitation.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from py_harness.host.judge.cases import Case
from py_harness.host.judge.limitations import Limitation

pytestmark = pytest.mark.browser


def test_case(run_case: Callable[[Case], object], matrix_case: Case) -> None:
    run_case(matrix_case)


def test_limitation(check_limitation: Callable[[Limitation], None], limitation: Limitation) -> None:
    check_limitation(limitation)
