"""FlashAttention's acceptance rule (host/judge/compare.py) on synthetic kernel results."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from py_harness.host.judge.compare import ATOL_FLOOR, FACTORS, U32, element_bounds, judge
from py_harness.host.judge.reference import attention_bwd_ref, attention_ref, attention_term_sums

pytestmark = pytest.mark.filterwarnings("error")
NAMES = ("o", "lse", "dq", "dk", "dv")


def _run(q, k, v, d_out, dtype, **kw):
    o, lse = attention_ref(q, k, v, **kw, dtype=dtype)
    return dict(
        zip(NAMES, (o, lse, *attention_bwd_ref(q, k, v, o, d_out, **kw, dtype=dtype)), strict=True)
    )


@pytest.fixture(scope="module")
def case():
    """float32 inputs (what a kernel gets), the float64 and float32 references."""
    rng = np.random.default_rng(0)
    b, sq, sk, h, hkv, d = 2, 33, 47, 4, 2, 16
    q, d_out = rng.standard_normal((2, b, sq, h, d), dtype=np.float32)
    k, v = rng.standard_normal((2, b, sk, hkv, d), dtype=np.float32)
    mask = rng.standard_normal((b, 1, sq, sk)).astype(np.float32)
    mask[1, 0, 4] = -np.inf  # an empty row: lse sentinel
    kw = dict(mask=mask, causal=True, causal_offset=14, dropout_p=0.17, seed=3)
    inputs = (q, k, v, d_out)
    return inputs, kw, _run(*inputs, np.float64, **kw), _run(*inputs, np.float32, **kw)


@pytest.fixture(scope="module")
def terms(case):
    """Each output's sums of |terms| (the LSE has none)."""
    inputs, kw, ref, _ = case
    return attention_term_sums(*inputs, **kw) | {"lse": np.zeros_like(ref["lse"])}


def test_factors_and_floor_are_defined_once():
    assert FACTORS == {"o": 2, "lse": 2, "dq": 3, "dk": 3, "dv": 3}
    assert 0 < ATOL_FLOOR <= 1e-5


def test_float32_results_pass(case):
    _, _, ref, same = case
    for n in NAMES:
        rep = judge(n, same[n], ref[n], same[n])  # an honest float32 computation
        assert rep.passed and rep.ratio < 0.5 and rep.baseline_err > 0, str(rep)
        assert rep.factor == FACTORS[n] and rep.nan_count == 0
        rep = judge(n, ref[n].astype(np.float32), ref[n], same[n])  # correctly rounded
        assert rep.passed, str(rep)
    # The sentinel rows are left out: the float32 3e38 differs from the float64 one.
    assert judge("lse", same["lse"], ref["lse"], same["lse"]).worst_index[:2] != (1, 0)


def test_failure_names_the_worst_element(case):
    _, _, ref, same = case
    bad = ref["dq"].copy()
    bad[1, 20, 3, 7] += 3e-4
    bad[0, 2, 1, 1] += 1e-4
    rep = judge("dq", bad, ref["dq"], same["dq"])
    assert not rep.passed and rep.ratio > 1
    assert rep.worst_index == (1, 20, 3, 7)
    assert rep.expected == ref["dq"][1, 20, 3, 7] and rep.actual == bad[1, 20, 3, 7]
    assert rep.max_abs_err == pytest.approx(3e-4, rel=1e-6)
    line = str(rep)
    assert line.startswith("dq: FAIL max abs 0.0003 at (1, 20, 3, 7): expected ")
    pattern = r"bound (\S+) = 3 x (\S+) \(f32\) \+ 1e-06; ratio (\S+)$"
    bound, base, ratio = (float(x) for x in re.search(pattern, line).groups())
    assert bound == pytest.approx(3 * base + 1e-6, rel=0.05) and ratio > 1


def test_the_least_accurate_baseline_sets_the_bound(case):
    _, _, ref, same = case
    worse = ref["dq"] + 2 * (same["dq"] - ref["dq"])  # twice the float32 error
    got = ref["dq"] + 5 * (same["dq"] - ref["dq"])
    rep = judge("dq", got, ref["dq"], {"a": same["dq"], "b": worse})
    assert rep.baseline == "b" and "(b)" in str(rep)
    assert rep.baseline_err == pytest.approx(
        2 * judge("dq", got, ref["dq"], same["dq"]).baseline_err
    )
    assert rep.passed and not judge("dq", got, ref["dq"], {"a": same["dq"]}).passed
    with pytest.raises(ValueError, match="baseline b"):
        judge("dq", got, ref["dq"], {"a": same["dq"], "b": worse[:, :-1]})


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_fails(case, value):
    _, _, ref, same = case
    bad = ref["o"].astype(np.float32)
    bad[0, 3, 2, 5] = value
    rep = judge("o", bad, ref["o"], same["o"])
    assert not rep.passed and rep.nan_count == 1 and rep.worst_index == (0, 3, 2, 5)
    assert "1 non-finite" in str(rep)


def test_shape_mismatch_fails(case):
    _, _, ref, same = case
    rep = judge("dk", ref["dk"][:, :-1], ref["dk"], same["dk"])
    assert not rep.passed and rep.worst_index is None
    assert "shape" in str(rep) and "FAIL" in str(rep)
    with pytest.raises(ValueError):  # a reference of the wrong shape is a harness bug
        judge("dk", ref["dk"], ref["dk"], same["dk"][:, :-1])


def test_lse_sentinel_rule(case):
    _, _, ref, same = case
    assert (ref["lse"][1, :, 4] == 3e38).all()
    lse = same["lse"].copy()
    lse[1, :, 4] = np.inf  # any value >= 1e38 will do for an empty row
    assert judge("lse", lse, ref["lse"], same["lse"]).passed
    lse[1, 2, 4] = 0.0  # an empty row given a finite lse
    rep = judge("lse", lse, ref["lse"], same["lse"])
    assert not rep.passed and rep.sentinel_misses == 1 and rep.worst_index == (1, 2, 4)
    lse = same["lse"].copy()
    lse[0, 1, 9] = 3e38  # a non-empty row reported as empty
    rep = judge("lse", lse, ref["lse"], same["lse"])
    assert not rep.passed and rep.worst_index == (0, 1, 9)


@pytest.mark.parametrize(
    "bug",
    [
        dict(causal_offset=15),
        dict(causal_offset=13),
        dict(scale=1.01 / 4),
        dict(seed=4),
        dict(dropout_p=0.18),
    ],
    ids=["causal_edge+1", "causal_edge-1", "scale_1pct", "dropout_seed", "dropout_p"],
)
def test_real_bugs_are_not_hidden_by_the_floor_or_the_terms(case, terms, bug):
    inputs, kw, ref, same = case
    buggy = _run(*inputs, np.float32, **{**kw, **bug})
    failed = [
        n for n in NAMES if not judge(n, buggy[n], ref[n], same[n], term_sums=terms[n]).passed
    ]
    assert "o" in failed and "dq" in failed, failed


def test_a_long_cancelling_element_is_bounded_by_its_terms(case, terms):
    """Where u * sum |terms| of one element exceeds the baselines' worst error, that element
    may err up to factor times it; every other element keeps the baselines' bound."""
    _, _, ref, _ = case
    r, t = ref["dv"], terms["dv"]
    big = np.unravel_index(np.argmax(t), t.shape)  # the element with the longest sum
    small = np.unravel_index(np.argmin(np.where(t > 0, t, np.inf)), t.shape)
    base = r.copy()  # a baseline that happens to sum every element well
    base[small] += 0.1 * U32 * t[big]

    def dv(at, size, sums=t):  # the reference, one element off by size x u sum|terms|[big]
        got = r.copy()
        got[at] += size * U32 * t[big]
        return judge("dv", got, r, base, floor=0.0, term_sums=sums)

    assert not dv(big, 2.5, sums=None).passed  # the baselines' rule alone
    rep = dv(big, 2.5)  # within 3 x its u sum|terms|, 25 x the baseline's worst error
    assert rep.passed and rep.worst_index == big and rep.term_err == U32 * t[big]
    assert rep.bound == pytest.approx(3 * U32 * t[big]) and "u sum|terms|" in str(rep)
    assert "(its baseline" in str(rep) and ", f32) + " in str(rep)
    rep = dv(big, 3.5)
    assert not rep.passed and rep.worst_index == big and rep.ratio == pytest.approx(3.5 / 3)
    # Elsewhere the element's own: the error that passed on the longest sum fails here.
    rep = dv(small, 2.5)
    assert not rep.passed and rep.worst_index == small and rep.term_err < rep.baseline_err
    # The demo page's maps hold each element to its own bound: the longest sum's passes
    bounds = element_bounds(rep, t)
    assert bounds[small] == rep.bound and bounds[big] == pytest.approx(3 * U32 * t[big])
    # No element errs: the report gives the baselines' bound, not an arbitrary element's.
    rep = judge("dv", r, r, base, floor=0.0, term_sums=t)
    assert rep.passed and rep.term_err == 0 and rep.bound == 3 * rep.baseline_err
    with pytest.raises(ValueError, match="term_sums"):
        judge("dv", r, r, base, term_sums=t[:, :-1])


@pytest.mark.parametrize("name", NAMES)
def test_the_verdict_does_not_depend_on_the_chunks_it_is_judged_in(
    case, terms, name, monkeypatch
) -> None:
    # Judged a few elements at a time, an output gets the same report, field for field: the
    # worst element, its bound, the first non-finite element and the empty LSE rows.
    from py_harness.host.judge import compare

    _, _, ref, f32 = case
    rng = np.random.default_rng(5)
    got = f32[name] + rng.standard_normal(f32[name].shape).astype(np.float32) * 1e-6
    got.reshape(-1)[[7, got.size - 1]] = [np.nan, np.inf]
    live = ref[name] < 1e38
    worst = np.abs(f32[name] - ref[name])[live].max()
    near = np.where(live, ref[name] + worst, ref[name]).astype(np.float32)  # E off everywhere
    for actual, sums in ((f32[name], terms[name]), (near, None), (got, terms[name])):
        reports = []
        for chunk in (1 << 20, 5):
            monkeypatch.setattr(compare, "COMPARE_CHUNK", chunk)
            args = (name, actual, ref[name], {"blas32": f32[name]}, None, ATOL_FLOOR, sums)
            reports.append(judge(*args).to_json())
        assert json.dumps(reports[0]) == json.dumps(reports[1])  # NaN == NaN as text
