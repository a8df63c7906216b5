"""The configuration validator, fuzzed: every configuration is either refused with a clear
error naming its argument, or runs and passes the rule. No crash, no hang."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from py_harness.config import AttentionConfig, ConfigError, validate
from py_harness.host.engine import evaluate
from py_harness.host.judge.cases import ALIBI_KINDS, MASK_KINDS, Case, varlen
from py_harness.host.judge.limitations import case_coverage
from py_harness.host.runtimes.sessions import Session
from py_harness.host.variants import get, refusal

ARGUMENTS = set(AttentionConfig.__dataclass_fields__) | {"mask", "batch * num_heads"}
anything = st.one_of(
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
)
small_int = st.one_of(st.integers(-3, 300), anything)


# derandomize: CI sees the same examples every run; a failure is reproducible, not luck.
@settings(max_examples=600, deadline=None, derandomize=True)
@given(
    batch=small_int,
    num_heads=small_int,
    seq_q=small_int,
    seq_k=small_int,
    head_dim=small_int,
    num_kv_heads=st.one_of(st.none(), small_int),
    causal=st.one_of(st.booleans(), anything),
    causal_offset=small_int,
    window=small_int,
    mask_shape=st.one_of(st.none(), st.lists(st.integers(-1, 300), max_size=5).map(tuple)),
    dropout_p=st.one_of(st.floats(-1, 2), anything),
    seed=st.one_of(st.integers(-1, 2**33), anything),
    scale=st.one_of(st.none(), st.floats(), anything),
    cu_seqlens_q=st.one_of(st.none(), st.lists(st.integers(-2, 300), max_size=5).map(tuple)),
    cu_seqlens_k=st.one_of(st.none(), st.lists(st.integers(-2, 300), max_size=5).map(tuple)),
)
def test_validate_refuses_with_a_named_argument_or_accepts(**kw: object) -> None:
    try:
        validate(AttentionConfig(**kw))
    except ConfigError as err:
        assert err.argument in ARGUMENTS
        assert str(err).startswith(f"{err.argument}: ") and len(str(err)) > len(err.argument) + 8
        return
    # Accepted: then it is inside every documented limit.
    cfg = AttentionConfig(**kw)
    assert 1 <= cfg.head_dim <= 256 and cfg.num_heads % cfg.kv_heads == 0
    assert 0.0 <= cfg.dropout_p < 1.0 and (cfg.scale is None or math.isfinite(cfg.scale))


heads = st.sampled_from([(1, 1), (2, 2), (4, 2), (6, 2), (6, 1), (3, 3)])


def dense_cases(supports: frozenset[str]) -> st.SearchStrategy[Case]:
    """Small dense cases; FlashAttention-2's axes (bottom-right with Sq > Sk, (left, right)
    windows, softcap, ALiBi) drawn only where the variant declares them, so that a variant
    without them is fuzzed as often on the axes it has."""

    def axis(feature: str, on: st.SearchStrategy, off: st.SearchStrategy) -> st.SearchStrategy:
        return on if feature in supports else off

    symmetric = st.sampled_from([0, 0, 1, 3, 16]).map(lambda w: (w, -1, -1))
    left_right = st.tuples(st.just(0), st.sampled_from([-1, 0, 5, 40]), st.sampled_from([-1, 0, 9]))
    return st.builds(
        lambda hd, h, sq, sk, b, causal, br, off, win, mask, p, cap, alibi, seed: Case(
            head_dim=hd,
            seq_q=sq,
            seq_k=sk,
            num_heads=h[0],
            num_kv_heads=h[1],
            batch=b,
            causal=causal,
            # Sq > Sk (a negative offset: the first rows see no key) only where supported
            bottom_right=br and (sk >= sq or "bottom_right" in supports),
            offset=0 if br else off,
            window=win[0],
            window_left=win[1],
            window_right=win[2],
            mask=mask,
            dropout_p=p,
            softcap=cap,
            alibi=alibi,
            seed=seed,
        ),
        st.integers(1, 256),
        heads,
        st.integers(1, 40),
        st.integers(1, 70),
        st.integers(1, 2),
        st.booleans(),
        st.booleans(),
        st.integers(0, 30),
        axis("window_lr", symmetric | left_right, symmetric),
        st.sampled_from(MASK_KINDS),
        st.sampled_from([0.0, 0.0, 0.17, 0.5]),
        axis("softcap", st.sampled_from([0.0, 0.0, 3.0]), st.just(0.0)),
        axis("alibi", st.sampled_from(ALIBI_KINDS), st.just("none")),
        st.integers(0, 2**32 - 1),
    )


# Runs on a runtime: the same examples every run, no deadline (CPU adapters are slow).
RUN_SETTINGS = settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.browser
@RUN_SETTINGS
@given(data=st.data())
def test_valid_configurations_run_and_pass(
    harness: Session, variant: str, data: st.DataObject
) -> None:
    case = data.draw(dense_cases(get(variant).supports), label="case")
    validate(case.config())
    if refusal(variant, case.config()):
        return  # what the variant does not support (the seed: head_dim over 128)
    covered = case_coverage(variant, harness.adapter_name(), case)
    if covered is not None and covered.status == "unsupported":
        return  # not a verdict on the kernel
    result = evaluate(case, harness, variant=variant)
    assert result.passed or covered, f"{case.id} ({variant}):\n{result.failures()}"


# Variable-length batches: 1 to 4 sequences of 0 to 70 queries and keys each (at least one
# of each overall), with every axis a varlen batch may combine.
varlen_cases = st.builds(
    lambda hd, h, lens, causal, off, wl, wr, cap, alibi, p: varlen(
        hd,
        tuple(q for q, _ in lens),
        tuple(k for _, k in lens),
        num_heads=h[0],
        num_kv_heads=h[1],
        causal=causal,
        offset=off,
        window_left=wl,
        window_right=wr,
        softcap=cap,
        alibi=alibi,
        dropout_p=p,
    ),
    st.integers(1, 256),
    heads,
    st.lists(st.tuples(st.integers(0, 70), st.integers(0, 70)), min_size=1, max_size=4).filter(
        lambda lens: max(q for q, _ in lens) > 0 and max(k for _, k in lens) > 0
    ),
    st.booleans(),
    st.integers(-20, 20),
    st.sampled_from([-1, -1, 0, 5]),
    st.sampled_from([-1, -1, 0, 9]),
    st.sampled_from([0.0, 0.0, 3.0]),
    st.sampled_from(ALIBI_KINDS),
    st.sampled_from([0.0, 0.0, 0.17]),
)


@pytest.mark.browser
@settings(RUN_SETTINGS, max_examples=8)
@given(case=varlen_cases)
def test_valid_varlen_batches_run_and_pass(harness: Session, variant: str, case: Case) -> None:
    validate(case.config())
    if refusal(variant, case.config()):
        return  # the seed supports no variable-length batch
    result = evaluate(case, harness, variant=variant)
    assert result.passed, f"{case.id} ({variant}):\n{result.failures()}"
