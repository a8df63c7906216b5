"""The smoke suite must fail on every bug planted in the kernels (py_harness/host/mutants.py).

On each float path (WGSL compiler and driver: runtimes.float_path) the planted bugs run
once, on the first selected runtime that has it: Chromium, dawn and node all run Tint's
code on SwiftShader here, Firefox and wgpu naga's on lavapipe, and runtimes on one path
agree bit for bit, which the first test here checks on every run rather than assumes.
Selecting one runtime alone (`--runtime node`) runs the planted bugs on it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from py_harness.host.cases import SMOKE, by_id
from py_harness.host.evaluate import evaluate
from py_harness.host.limitations import case_coverage
from py_harness.host.mutants import FIRST_CATCH, MUTANTS, Mutant
from py_harness.host.runtimes import Launched, float_path, parse_runtimes, runtime
from py_harness.host.sessions import Session, shader_sources

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Float path -> the runtime the planted bugs ran on, in this test session.
_JUDGED_ON: dict[tuple[str, str], str] = {}
# Smoke cases of different kinds: the control, GQA with causal, a key-padding mask,
# dropout.
_SAME_BITS_CASES = [
    by_id(i)
    for i in (
        "d64-sq128-sk128-b2-h4",
        "d59-sq113-sk203-gqa6x2-causal",
        "d64-sq113-sk203-b2-h4-mask-keypad",
        "d64-sq128-sk217-h4-drop0.17",
    )
]


def test_runtimes_on_one_float_path_agree_bit_for_bit(
    request: pytest.FixtureRequest, launched: dict[str, Launched]
) -> None:
    outputs: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    for name in parse_runtimes(request.config.getoption("--runtime")):
        rt = runtime(name)
        if rt.missing():
            continue
        base_url = request.getfixturevalue("harness_server") if rt.needs_server else ""
        session = launched[name].new_session(base_url)
        try:
            got = {
                (case.id, v): evaluate(case, session, variant=v).outputs
                for case in _SAME_BITS_CASES
                for v in ("seed", "fast")
            }
            outputs.setdefault(float_path(session), []).append((name, got))
        finally:
            launched[name].close_session(session)
    shared = {path: members for path, members in outputs.items() if len(members) > 1}
    if not shared:
        pytest.skip("no two selected runtimes share a float path")
    for path, ((first, ref), *others) in shared.items():
        for name, got in others:
            for key, arrays in ref.items():
                for tensor, a in arrays.items():
                    b = got[key][tensor]
                    assert np.array_equal(a, b, equal_nan=True), (
                        f"{first} and {name} share {path} but {tensor} of {key} differs by "
                        f"up to {np.nanmax(np.abs(a - b)):.3g}: run the planted bugs on both"
                    )


def test_every_mutant_changes_the_source() -> None:
    sources = shader_sources()
    for mutant in MUTANTS:
        assert mutant.apply(sources) != sources, mutant.name
    # Every mutant has a recorded first catcher, and it is a smoke case.
    assert set(FIRST_CATCH) == {m.name for m in MUTANTS}
    assert set(FIRST_CATCH.values()) <= {c.id for c in SMOKE}


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_smoke_suite_catches(harness: Session, mutant: Mutant) -> None:
    path = float_path(harness)
    judged_on = _JUDGED_ON.setdefault(path, harness.runtime)
    if judged_on != harness.runtime:
        pytest.skip(f"{harness.runtime} runs {path[0]} on {path[1]}, as {judged_on} does")
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
