"""The case matrix on each runtime: O, LSE, dQ, dK, dV judged against float64 NumPy.

One test per case, variant and runtime, e.g.
`test_case[chromium-seed-d59-sq113-sk203-gqa6x2-causal]`. `-m smoke` runs the fast subset;
`--variant` and `--runtime` choose what is judged; `--draws N` judges each case on N input
draws; `--long` adds the GPU-sized cases. A case that a declared driver limitation covers
is skipped as unsupported on that driver; one that a declared kernel flaw covers is an
expected failure when it fails (py_harness/host/limitations.py).
"""

from __future__ import annotations

import pytest

from py_harness.host.cases import CASES, Case
from py_harness.host.evaluate import evaluate
from py_harness.host.limitations import case_coverage
from py_harness.host.report import outcome
from py_harness.host.sessions import Session

pytestmark = pytest.mark.browser


def _marks(case: Case) -> list[pytest.MarkDecorator]:
    return [m for m, on in ((pytest.mark.smoke, case.smoke), (pytest.mark.long, case.long)) if on]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=_marks(c)) for c in CASES])
def test_case(harness: Session, variant: str, case: Case, draws: int) -> None:
    covered = case_coverage(variant, harness.adapter_name(), case)
    if covered is not None and covered.status == "unsupported":
        pytest.skip(str(covered))
    results = [evaluate(case, harness, variant=variant, draw=d) for d in range(draws)]
    o = outcome(results, covered)
    if o.status == "known":
        pytest.xfail(o.detail)
    assert o.status == "pass", f"{case.id} ({variant}) on {harness.runtime}:\n{o.detail}"
