"""judge_case reuses a case's float64 reference, float32 baselines and sums of |terms|
across runtimes and variants (verdict.ReferenceCache): the same verdicts, computed once per
distinct input, within a byte budget, and never changed by a caller."""

from __future__ import annotations

import numpy as np
import pytest

from py_harness.host.judge import verdict
from py_harness.host.judge.cases import by_id
from py_harness.host.judge.inputs import make_inputs

CASE = by_id("d59-sq113-sk203-gqa6x2-causal")


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How often the reference is computed (one entry per references() call in float64)."""
    calls: list[int] = []
    real = verdict.references

    def references(cfg, x, dtype, **kw):  # type: ignore[no-untyped-def]
        if dtype is np.float64:
            calls.append(1)
        return real(cfg, x, dtype, **kw)

    monkeypatch.setattr(verdict, "references", references)
    return calls


def _outputs(cfg, x):  # type: ignore[no-untyped-def]
    """A kernel's outputs stand-in: the float32 baseline itself (it passes)."""
    return verdict.references(cfg, x, np.float32)


def test_second_judging_of_the_same_inputs_reuses_the_reference(counted: list[int]) -> None:
    cache = verdict.ReferenceCache(1 << 30)
    cfg, x = CASE.config(), make_inputs(CASE)
    first = cache.get(cfg, x)
    again = cache.get(cfg, {n: a.copy() for n, a in x.items()})  # equal values, new arrays
    assert len(counted) == 1 and again is first and len(cache) == 1
    # Any change to the inputs (one float, or another draw) is another entry.
    changed = {n: a.copy() for n, a in x.items()}
    changed["v"].flat[77] += np.float32(1e-3)
    other = cache.get(cfg, changed)
    assert len(counted) == 2 and not np.array_equal(other[0]["o"], first[0]["o"])
    cache.get(cfg, make_inputs(CASE, draw=1))
    assert len(counted) == 3 and len(cache) == 3


def test_cached_arrays_are_read_only() -> None:
    cache = verdict.ReferenceCache(1 << 30)
    ref64, base, terms = cache.get(CASE.config(), make_inputs(CASE))
    with pytest.raises(ValueError, match="read-only"):
        ref64["dq"][0] = 0.0
    with pytest.raises(ValueError, match="read-only"):
        base["seq32"]["o"][0] = 0.0
    with pytest.raises(ValueError, match="read-only"):
        terms["dk"][0] = 0.0


def test_budget_evicts_least_recently_used_and_skips_what_exceeds_it(counted: list[int]) -> None:
    cfg = CASE.config()
    draws = [make_inputs(CASE, draw=d) for d in range(3)]
    one = verdict.ReferenceCache(1 << 30)
    one.get(cfg, draws[0])
    size = one._bytes
    cache = verdict.ReferenceCache(2 * size)  # room for two entries
    for x in (draws[0], draws[1], draws[0], draws[2]):  # draw 1 is the least recently used
        cache.get(cfg, x)
    assert len(cache) == 2 and cache._bytes == 2 * size
    computed = len(counted)
    cache.get(cfg, draws[0])
    assert len(counted) == computed  # kept
    cache.get(cfg, draws[1])
    assert len(counted) == computed + 1  # evicted, computed again
    small = verdict.ReferenceCache(size - 1)
    small.get(cfg, draws[0])
    assert len(small) == 0 and small._bytes == 0


def test_reused_reference_gives_the_same_verdict() -> None:
    cfg, x = CASE.config(), make_inputs(CASE)
    got = _outputs(cfg, x)
    got["dk"] = got["dk"] * np.float32(1.001)  # one wrong gradient
    plain, _ = verdict.judge_outputs(cfg, x, got)
    for _ in range(2):  # computed, then reused
        reused, _ = verdict.judge_outputs(cfg, x, got, reuse=True)
        assert [r.to_json() for r in reused] == [r.to_json() for r in plain]
    assert [r.passed for r in plain] == [True, True, True, False, True]
