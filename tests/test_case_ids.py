"""Case ids name cases both ways: Case.id prints a case, parse_id reads it back (for
`--case ID` and pytest ids of cases outside the matrix); by_id prefers the matrix's case,
with its flags. Malformed ids, and ids of no valid case, are refused naming the part."""

from __future__ import annotations

import dataclasses

import pytest

from py_harness.config import ConfigError
from py_harness.host.judge.cases import (
    CASES,
    FOUND,
    ID_SYNTAX,
    Case,
    CaseIdError,
    by_id,
    parse_id,
    varlen,
)
from py_harness.host.judge.random_cases import random_case

FOUND_CASES = tuple(f.case for f in FOUND)
EVERY = CASES + FOUND_CASES

# Every matrix and found case's id as it was printed before ids became parseable (negative
# offsets became offn<n>, and floats lost `:g`'s exponent and 6-digit rounding): none of
# these may change, since results, docs and scripts name cases by them.
IDS_BEFORE = (
    "d64-sq128-sk128-b2-h4",
    "d1-sq17-sk17-h4",
    "d3-sq1-sk1-h4",
    "d16-sq17-sk17-gqa6x2-causal",
    "d111-sq203-sk113-mqa6x1",
    "d128-sq128-sk217-h4-win32",
    "d59-sq113-sk203-gqa6x2-causal",
    "d59-sq113-sk203-h4-causal-br",
    "d64-sq300-sk130-mqa6x1-causal",
    "d59-sq203-sk113-h4-win17",
    "d16-sq128-sk160-h2-win18",
    "d16-sq80-sk230-h2-off64-win64",
    "d16-sq40-sk48-h2-win1",
    "d64-sq130-sk300-h4-causal-br-win40",
    "d64-sq113-sk203-h4-mask-full",
    "d32-sq59-sk111-b2-h4-mask-batch",
    "d64-sq113-sk203-b2-h4-mask-keypad",
    "d16-sq59-sk111-b2-h4-mask-rows-inf",
    "d16-sq59-sk111-h4-causal-mask-rows-1e30",
    "d64-sq128-sk217-h4-drop0.17",
    "d59-sq113-sk203-gqa6x2-causal-drop0.17",
    "d16-sq64-sk64-h4-drop0.5",
    "d64-sq64-sk1031-h2",
    "d8-sq40-sk300-b2-gqa64x32",
    "d8-sq129-sk257-b2-h32-causal-br",
    "d8-sq40-sk257-b2-h32-off80-wl10-wr300",
    "d128-sq16-sk1024-mqa2x1",
    "d32-sq17-sk17-h4-off20-win8",
    "d32-sq40-sk17-h4-causal-off20-win6",
    "d32-sq66-sk128-h4-causal-br",
    "d16-sq128-sk130-h4-off1-win64",
    "d109-sq7-sk1-h3-win1",
    "d18-sq113-sk59-h2-causal",
    "d32-sq59-sk203-mqa3x1",
    "d16-sq256-sk256-h4-causal-win2",
    "d64-sq17-sk128-h4-big",
    "d32-sq5-sk17-gqa6x2-causal-big",
    "d64-sq40-sk77-gqa4x2-causal-shift",
    "d64-sq256-sk64-mqa16x1",
    "d32-sq300-sk70-mqa5x1",
    "d32-sq384-sk96-gqa8x2-causal",
    "d64-sq512-sk1-mqa4x1",
    "d64-sq4096-sk1-mqa16x1",
    "d64-sq1-sk2048-mqa4x1",
    "d128-sq1-sk4096-gqa8x2",
    "d59-sq203-sk113-gqa6x2-causal-br",
    "d48-sq113-sk203-h4-wl5-wr40",
    "d31-sq130-sk300-h4-br-wl200-wr3",
    "d32-sq130-sk300-h4-br-wr3",
    "d16-sq77-sk77-h2-wl0-wr0",
    "d16-sq200-sk300-mqa4x1-wl90-wr30",
    "d16-sq202-sk126-b2-mqa4x1-wl6-wr39",
    "d62-sq300-sk130-gqa4x2-causal-br-wl37",
    "d64-sq128-sk217-h4-cap2.5",
    "d32-sq17-sk128-h4-cap10-big",
    "d64-sq100-sk100-h4-wl1-wr0-cap50",
    "d59-sq203-sk113-b2-gqa6x2-causal-br-wl50-cap3-mask-keypad-drop0.17",
    "d64-sq113-sk203-b2-h4-br-alibi",
    "d59-sq203-sk113-b2-gqa6x2-causal-br-alibi-b",
    "d32-sq130-sk300-b2-h4-br-wl20-wr7-cap5-alibi-b",
    "d256-sq77-sk130-gqa4x2-causal-br",
    "d201-sq113-sk70-h3",
    "d256-sq130-sk127-h4-alibi",
    "d256-sq130-sk300-b2-mqa2x1-wl20-wr7-cap5-alibi-b-drop0.17",
    "d59-vq77.0.130.1.130-vk130.5.0.64.64-gqa6x2-causal",
    "d64-vq113.40.200-vk113.300.70-h4-wl30-wr5-cap4-alibi-b-drop0.17",
    "d201-vq330.0.77-vk70.5.64-gqa6x2",
    "d8-vq129.17.40-vk257.300.64-h64-causal",
    "d256-vq70.129-vk130.33-h2-causal-off3",
    "d64-sq4096-sk4096-mqa4x1-causal",
    "d128-sq1024-sk256-mqa32x1",
    "d256-sq2048-sk2048-h8-causal",
    "d1-sq65-sk187-b2-mqa16x1",
    "d1-sq65-sk187-b2-mqa16x1-drop0.17",
    "d4-sq128-sk17-gqa4x2-causal-br-cap10-mask-batch-drop0.9",
    "d2-sq159-sk20-mqa4x1-causal-mask-keypad-drop0.9",
)


def same_config(parsed: Case, case: Case) -> bool:
    """Configs equal but for the seed, which no id holds."""
    return parsed.config() == dataclasses.replace(case.config(), seed=parsed.seed)


def test_no_matrix_or_found_id_changed() -> None:
    assert tuple(c.id for c in EVERY) == IDS_BEFORE
    assert len(set(IDS_BEFORE)) == len(IDS_BEFORE)


@pytest.mark.parametrize("case", EVERY, ids=[c.id for c in EVERY])
def test_every_matrix_and_found_id_parses_back(case: Case) -> None:
    parsed = parse_id(case.id)
    assert parsed.id == case.id
    assert same_config(parsed, case)
    # flags that the id does not carry take their defaults
    assert (parsed.smoke, parsed.long, parsed.repeat_backward) == (False, False, False)
    assert not parsed.check_dropout_fraction and parsed.seed == Case(1, 1, 1).seed
    assert Case.parse(case.id) == parsed


@pytest.mark.parametrize(
    ("case_id", "fields"),
    [
        ("d64-sq100-sk100-h4-causal", {"head_dim": 64, "seq_q": 100, "causal": True}),
        ("d3-sq1-sk1-h1", {"head_dim": 3, "num_heads": 1, "num_kv_heads": 1}),
        (
            "d16-sq5-sk9-b3-gqa6x2-causal-br-off3",
            {"batch": 3, "num_heads": 6, "num_kv_heads": 2, "bottom_right": True, "offset": 3},
        ),
        ("d8-vq3.0.5-vk0.4.4-mqa4x1-wl2-wr0", {"lens_q": (3, 0, 5), "batch": 3, "seq_k": 4}),
        ("d16-sq59-sk111-b2-h4-mask-rows-inf", {"mask": "rows-inf", "batch": 2}),
        ("d16-sq59-sk111-h4-causal-mask-rows-1e30", {"mask": "rows-1e30", "causal": True}),
        ("d32-sq30-sk30-b2-h4-br-alibi-b", {"alibi": "batch", "bottom_right": True}),
        ("d32-sq30-sk30-h4-alibi", {"alibi": "head"}),
        ("d64-sq128-sk217-h4-cap2.5-drop0.17", {"softcap": 2.5, "dropout_p": 0.17}),
        ("d64-sq17-sk128-h4-cap10-big-shift", {"softcap": 10.0, "large_logits": True}),
        ("d32-sq40-sk17-h4-causal-offn20-win6", {"offset": -20, "window": 6}),
    ],
)
def test_ad_hoc_ids_parse_and_print_back(case_id: str, fields: dict[str, object]) -> None:
    case = parse_id(case_id)
    assert case.id == case_id
    assert {name: getattr(case, name) for name in fields} == fields


def test_an_id_without_heads_has_the_default_heads() -> None:
    assert parse_id("d64-sq10-sk10").id == "d64-sq10-sk10-h4"


@pytest.mark.parametrize(
    "case",
    [
        Case(16, 40, 17, causal=True, offset=-5),
        Case(16, 40, 17, offset=-123456, window_left=0, window_right=3),
        Case(16, 17, 17, softcap=1e-5, dropout_p=1e-7),
        Case(16, 17, 17, softcap=1e20, dropout_p=0.1234567891),
        Case(16, 17, 17, softcap=0.1 + 0.2),
        varlen(8, (0, 1, 0), (2, 0, 0), num_heads=8, num_kv_heads=2, offset=-1),
    ],
    ids=repr,
)
def test_ids_that_used_to_split_or_round_parse_back_exactly(case: Case) -> None:
    """A negative offset printed off-5 (two parts); `:g` printed 1e-05 (a '-') and kept 6
    digits (another case's softcap)."""
    assert parse_id(case.id) == case


def test_random_cases_parse_back() -> None:
    """explore's draws: every axis, negative offsets, empty sequences, odd floats."""
    for index in range(300):
        case = random_case(11, index, refusal=lambda cfg: None)
        parsed = parse_id(case.id)
        assert parsed.id == case.id
        assert same_config(parsed, case), case.id


@pytest.mark.parametrize(
    ("case_id", "said"),
    [
        ("d64-sq100-x3", "unknown part 'x3'; " + ID_SYNTAX),
        ("sq10-sk10-h4", "missing d<head_dim>"),
        ("d64-sq10-h4", "missing sk<seq_k>"),
        ("d64-vq3.4-h4", "missing vk<lens>"),
        ("d64-sq10-sk10-h4-causal-causal", "part 'causal' repeats 'causal'"),
        ("d64-sq10-sk10-h4-gqa4x2", "part 'gqa4x2' repeats 'h4'"),
        ("d64-sq10-sk10-mask-full-mask-batch", "part 'mask-batch' repeats 'mask-full'"),
        ("d64-sqx-sk10", "bad part 'sqx': sq<seq_q> takes a whole number"),
        ("d64-sq10-sk10-h4.5", "bad part 'h4.5'"),
        ("d64-sq10-sk10-cap1e-5", "bad part 'cap1e'"),
        ("d64-sq10-sk10-off-5", "bad part 'off'"),
        ("d64-sq10-sk10-bogus", "unknown part 'bogus'"),
        ("d64-sq10-sk10-", "unknown part ''"),
        ("d16-sq5-sk9-gqa6x4", "part 'gqa6x4': num_kv_heads: num_heads (6) must be a multiple"),
        ("d16-sq5-sk9-gqa2x4", "part 'gqa2x4': num_kv_heads: must be <= num_heads (2)"),
        ("d64-sq10-sk10-mask-nope", "unknown mask 'mask-nope'; masks: mask-full"),
        ("d64-sq10-sk10-mask-rows", "unknown mask 'mask-rows'"),
        ("d64-sq10-sk10-mask", "unknown mask 'mask'"),
        ("d0-sq10-sk10", "part 'd0': head_dim: must be >= 1"),
        ("d300-sq10-sk10", "part 'd300': head_dim: must be in [1, 256]"),
        ("d64-sq0-sk10", "part 'sq0': seq_q: must be >= 1"),
        ("d64-sq10-sk10-b0", "part 'b0': batch: must be >= 1"),
        ("d64-sq10-sk10-drop1", "part 'drop1': dropout_p"),
        ("d64-sq10-sk10-win3-wl2", "part 'win3': window: give either"),
        ("d64-vq0.0-vk1.1", "part 'vq0.0': seq_q: must be in [1,"),
        ("d64-vq1.2-vk3", "part 'vk3': lens_k: must hold batch = 2 lengths"),
        ("d64-vq1.2-vk3.4-mask-full", "part 'mask-full': mask"),
        ("d64-sq10-vk3", "part 'vk3' with 'sq10'"),
        ("d64-vq1-vk3-b2", "part 'b2' with 'vq1'"),
        pytest.param("d64-sq9" + "9" * 5000 + "-sk10", "bad part 'sq9", id="5001 digits"),
    ],
)
def test_malformed_ids_are_refused_naming_the_part(case_id: str, said: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_id(case_id)
    assert isinstance(info.value, CaseIdError) and not isinstance(info.value, KeyError)
    message = str(info.value)
    assert message.startswith(f"case id {case_id!r}: ")
    assert said in message


def test_by_id_keeps_a_matrix_case_with_its_flags() -> None:
    for case in CASES:
        assert by_id(case.id) is case
    control = by_id("d64-sq128-sk128-b2-h4")
    assert control.smoke and control.repeat_backward


def test_by_id_finds_a_matrix_case_written_another_way() -> None:
    assert by_id("d64-sq128-sk128-h4-b2") is CASES[0]


def test_by_id_parses_an_ad_hoc_id() -> None:
    case = by_id("d64-sq100-sk100-h4-causal")
    assert case not in CASES
    assert case == Case(64, 100, 100, causal=True)


def test_by_id_suggests_the_nearest_matrix_ids() -> None:
    with pytest.raises(ValueError) as info:
        by_id("d64-sq128-sk128-b2-h")
    message = str(info.value)
    assert message.startswith("no case 'd64-sq128-sk128-b2-h': unknown part 'h'; an id is")
    assert message.endswith("?") and "did you mean d64-sq128-sk128-b2-h4" in message
    suggested = message.rsplit("did you mean ", 1)[1].rstrip("?").split(", ")
    assert 1 <= len(suggested) <= 3 and all(s in {c.id for c in CASES} for s in suggested)


def test_by_id_suggests_nothing_for_an_id_like_no_other() -> None:
    with pytest.raises(ValueError, match="^no case 'zzz': unknown part 'zzz'") as info:
        by_id("zzz")
    assert "did you mean" not in str(info.value)


def test_num_kv_heads_defaults_to_num_heads() -> None:
    assert Case(64, 100, 100, num_heads=6).num_kv_heads == 6
    assert Case(64, 100, 100).num_kv_heads == Case(64, 100, 100).num_heads == 4
    assert Case(64, 100, 100) == Case(64, 100, 100, num_kv_heads=4)
    assert Case(64, 100, 100, num_heads=6).id == "d64-sq100-sk100-h6"
    assert Case(64, 100, 100, num_kv_heads=2).id == "d64-sq100-sk100-gqa4x2"


@pytest.mark.parametrize(
    ("make", "field", "said"),
    [
        (lambda: Case(64, 10, 10, num_heads=6, num_kv_heads=4), "num_kv_heads", "multiple"),
        (lambda: Case(64, 10, 10, num_heads=2, num_kv_heads=4), "num_kv_heads", "<= num_heads"),
        (lambda: Case(64, 10, 10, num_heads=0), "num_heads", ">= 1, got 0"),
        (lambda: Case(64, 10, 10, num_kv_heads=0), "num_kv_heads", ">= 1, got 0"),
        (lambda: Case(0, 10, 10), "head_dim", ">= 1, got 0"),
        (lambda: Case(64, 0, 10), "seq_q", ">= 1, got 0"),
        (lambda: Case(64, 10, -1), "seq_k", ">= 1, got -1"),
        (lambda: Case(64, 10, 10, batch=0), "batch", ">= 1, got 0"),
        (lambda: Case(64, 10, 10, mask="nope"), "mask", "unknown 'nope'"),
        (lambda: Case(64, 10, 10, alibi="slopes"), "alibi", "unknown 'slopes'"),
        (lambda: varlen(64, (1, 2), (3,)), "lens_k", "batch = 2 lengths"),
        (lambda: varlen(64, (1, -2), (3, 4)), "lens_q", ">= 0"),
        (lambda: Case(64, 5, 4, batch=1, lens_q=(3,), lens_k=(4,)), "seq_q", "longest"),
    ],
)
def test_an_invalid_case_is_refused_when_made(make, field: str, said: str) -> None:
    with pytest.raises(ConfigError) as info:
        make()
    assert isinstance(info.value, ValueError)
    assert info.value.argument == field and said in str(info.value)


def test_replace_revalidates() -> None:
    with pytest.raises(ConfigError, match="num_kv_heads"):
        dataclasses.replace(Case(64, 10, 10), num_heads=6)
