"""Cases `py-harness explore` drew on which a correct kernel once failed, each on the input
draw that failed (cases.FOUND): the rule was wrong there, not the kernel, and each passes
now on every runtime and variant that runs it. docs/verdict.md, "Cases nobody wrote", tells
what each showed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from py_harness.host.judge.cases import FOUND, Found

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("found", FOUND, ids=[f"{f.case.id}-draw{f.draw}" for f in FOUND])
def test_found_case_passes_on_its_draw(run_case: Callable[..., object], found: Found) -> None:
    run_case(found.case, draw=found.draw)
