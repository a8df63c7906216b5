"""The smoke suite must fail on every bug planted in the kernels (py_harness/host/mutants.py)."""

from __future__ import annotations

import pytest

from py_harness.host.cases import SMOKE
from py_harness.host.evaluate import evaluate
from py_harness.host.limitations import case_coverage
from py_harness.host.mutants import FIRST_CATCH, MUTANTS, Mutant
from py_harness.host.sessions import Session, shader_sources

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_every_mutant_changes_the_source() -> None:
    sources = shader_sources()
    for mutant in MUTANTS:
        assert mutant.apply(sources) != sources, mutant.name
    # Every mutant has a recorded first catcher, and it is a smoke case.
    assert set(FIRST_CATCH) == {m.name for m in MUTANTS}
    assert set(FIRST_CATCH.values()) <= {c.id for c in SMOKE}


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_smoke_suite_catches(harness: Session, mutant: Mutant) -> None:
    sources = mutant.apply(shader_sources())
    caught = []
    first = FIRST_CATCH.get(mutant.name)
    # Only cases where the unmodified kernels get a verdict count: not those a declared
    # driver limitation or kernel flaw covers on this adapter.
    adapter = harness.adapter_name()
    judged = [c for c in SMOKE if case_coverage(mutant.variant, adapter, c) is None]
    ordered = sorted(judged, key=lambda c: c.id != first)  # the known catcher first
    for case in ordered:  # stop at the first case that fails: one is enough
        result = evaluate(case, harness, sources=sources, variant=mutant.variant)
        if not result.passed:
            caught.append(f"{case.id}: {result.failures().splitlines()[0]}")
            break
    assert caught, f"no smoke case fails with the planted bug {mutant.name}"
