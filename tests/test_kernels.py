"""The case matrix on each runtime: O, LSE, dQ, dK, dV judged against float64 NumPy.

One test per case, variant and runtime, e.g.
`test_case[chromium-seed-d59-sq113-sk203-gqa6x2-causal]`. `-m smoke` runs the fast subset;
`--variant` and `--runtime` choose what is judged.
"""

from __future__ import annotations

import pytest

from py_harness.host.cases import CASES, Case, known_failure
from py_harness.host.evaluate import evaluate
from py_harness.host.sessions import Session

pytestmark = pytest.mark.browser


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c.id, marks=[pytest.mark.smoke] if c.smoke else []) for c in CASES],
)
def test_case(harness: Session, variant: str, case: Case) -> None:
    result = evaluate(case, harness, variant=variant)
    known = known_failure(variant, harness.adapter_name(), case)
    if known and not result.passed:
        pytest.xfail(known)
    assert not known, f"known failure now passes; remove it from KNOWN_FAILURES: {known}"
    assert result.passed, f"{case.id} ({variant}) on {harness.runtime}:\n{result.failures()}"
