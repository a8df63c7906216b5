"""Envelopes (py_harness/envelope.py) and the case matrix generated inside them
(host/judge/generated.py): every case inside, every value an axis allows covered, enough
cases, the same ones every time, ids that parse back; what lies outside is named by rule."""

from __future__ import annotations

from dataclasses import replace

import pytest

from py_harness.config import AttentionConfig, ConfigError
from py_harness.envelope import Envelope
from py_harness.host.judge import generated
from py_harness.host.judge.cases import CASES, parse_id
from py_harness.kernels import SEED


def enveloped(**env: object) -> object:
    """The seed's declaration with an envelope (features: causal alone unless given)."""
    supports = env.pop("supports", frozenset({"causal"}))
    return replace(SEED, name="own", supports=supports, envelope=Envelope.from_dict(env))


def cfg(**kw: object) -> AttentionConfig:
    return AttentionConfig(
        **{"batch": 1, "num_heads": 4, "seq_q": 64, "seq_k": 64, "head_dim": 64, **kw}
    )


@pytest.mark.parametrize(
    ("env", "config", "words", "inside"),
    [
        ({"head_dim": [32, 64]}, cfg(head_dim=59), "head_dim in [32, 64] (head_dim=59)", cfg()),
        ({"seq_q": {"max": 100}}, cfg(seq_q=128), "seq_q <= 100 (seq_q=128)", cfg()),
        ({"seq_k": {"multiple_of": 64}}, cfg(seq_k=65), "seq_k a multiple of 64 (seq_k=65)", cfg()),
        (
            {"group": [1], "supports": frozenset({"gqa"})},
            cfg(num_kv_heads=2),
            "group in [1] (group=2)",
            cfg(),
        ),
        ({"causal": "required"}, cfg(), "causal only (causal=False)", cfg(causal=True)),
        ({"causal": "refused"}, cfg(causal=True), "never causal (causal=True)", cfg()),
        (
            {"require": ["seq_q == seq_k"]},
            cfg(seq_k=65),
            "seq_q == seq_k (seq_k=65, seq_q=64)",
            cfg(),
        ),
    ],
)
def test_a_configuration_outside_is_named_by_its_rule(
    env: dict, config: AttentionConfig, words: str, inside: AttentionConfig
) -> None:
    v = enveloped(**env)
    why = v.refusal(config)
    assert why == f"own: outside the envelope: {words}", why
    assert v.refusal(inside) is None


@pytest.mark.parametrize(
    ("d", "argument", "words"),
    [
        ({"head_dims": [64]}, "envelope.head_dims", "unknown key"),
        ({"head_dim": [0]}, "envelope.head_dim", "ints in [1, 256]"),
        ({"head_dim": []}, "envelope.head_dim", "a list of ints"),
        ({"seq_q": {"max": 0}}, "envelope.seq_q.max", "[1, 268435456]"),
        ({"seq_q": {"min": 5, "max": 6, "multiple_of": 8}}, "envelope.seq_q", "allows no value"),
        ({"causal": "sometimes"}, "envelope.causal", "either, required, refused"),
        ({"require": ["seq_q = seq_k"]}, "envelope.require[0]", "syntax"),
        ({"require": ["sq == seq_k"]}, "envelope.require[0]", "unknown name 'sq'"),
        ({"dtype": "f16"}, "envelope.dtype", "the file's top-level dtypes"),
        ({"tiles": [0]}, "envelope.tiles", "[1, 4096]"),
    ],
)
def test_a_bad_envelope_is_refused_naming_its_key(d: dict, argument: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        Envelope.from_dict(d)
    assert err.value.argument == argument and words in str(err.value), str(err.value)


CAUSAL_SELF_ATTENTION = {
    "head_dim": [64],
    "causal": "required",
    "require": ["seq_q == seq_k", "num_kv_heads == num_heads"],
}


def test_a_causal_self_attention_kernel_gets_thirty_cases_and_more() -> None:
    v = enveloped(**CAUSAL_SELF_ATTENTION)
    cases = generated.generated_cases(v)
    assert len(cases) >= 30
    assert all(v.refusal(c.config()) is None for c in cases)
    assert all(c.causal and c.seq_q == c.seq_k and c.head_dim == 64 for c in cases)
    # the fixed matrix has only three cases such a kernel can run, none causal
    assert sum(v.refusal(c.config()) is None for c in CASES) <= 3


@pytest.mark.parametrize(
    "env",
    [
        CAUSAL_SELF_ATTENTION,
        {"head_dim": [16, 32, 64], "require": ["seq_q == seq_k"]},
        {
            "head_dim": {"min": 8, "max": 128, "multiple_of": 8},
            "supports": frozenset({"causal", "gqa"}),
        },
        {"seq_q": {"multiple_of": 64, "max": 512}, "seq_k": {"multiple_of": 64, "max": 512}},
        {"tiles": [48], "group": [1, 2], "supports": frozenset({"gqa"})},
    ],
)
def test_every_value_an_axis_allows_appears_and_the_ids_are_stable(env: dict) -> None:
    v = enveloped(**dict(env))
    cases = generated.generated_cases(v)
    axes = generated._axes(v, v.envelope)
    for name, values in axes.items():
        seen = {generated._value(c, name) for c in cases}
        missing = [x for x in values if x not in seen]
        # a value no case inside the envelope and the work budget can hold is left out
        assert not missing or all(_no_case_holds(v, name, x) for x in missing), (name, missing)
    ids = [c.id for c in cases]
    assert len(set(ids)) == len(ids)
    assert ids == [c.id for c in generated.generated_cases(v)]  # the same every time
    assert all(parse_id(i).id == i for i in ids)  # and each replays with --case
    assert sum(c.smoke for c in cases) == min(generated.SMOKE_SIZE, len(cases))
    assert all(generated._cheap(c) for c in cases)


def _no_case_holds(v: object, name: str, value: object) -> bool:
    return (
        generated._with(generated._axes(v, v.envelope), generated._inside(v), {name: value}, "x")
        is None
    )


def test_the_fixed_matrix_stays_the_matrix_of_a_variant_without_an_envelope() -> None:
    assert generated.matrix(SEED) == CASES
    v = enveloped(**CAUSAL_SELF_ATTENTION)
    inside = [c for c in CASES if v.refusal(c.config()) is None]
    assert generated.matrix(v)[: len(inside)] == tuple(inside)
    outside = generated.outside(v)
    assert len(outside) + len(inside) == len(CASES)
    assert all(why.startswith("outside the envelope: ") for _, why in outside)


def test_an_envelope_that_only_shapes_outside_the_budget_allow_generates_nothing() -> None:
    v = enveloped(seq_q={"min": 4000}, seq_k={"min": 4000})
    assert generated.generated_cases(v) == ()
