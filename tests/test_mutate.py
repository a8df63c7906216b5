"""`py-harness mutate`: the rule-made edits are single, in code, of every operator, and
replayable by id; the precision operator's error is what it says; end to end on wgpu-py an
edit the cases catch is killed, an equivalent one survives with the kernels' bits, and one
the compiler refuses is counted apart."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from py_harness.host.judge.mutation import OPERATORS, edits
from py_harness.host.paths import shader_sources
from py_harness.host.tools.mutate import choose_edits, parser
from py_harness.kernels import variant
from py_harness.wgsl_source import strip_comments
from tests.fakes import planted_shaders

SOURCES = shader_sources()
SEED_FILES = list(variant("seed").files)
FAST_FILES = [f for f in variant("fast").files if f.startswith("fa2_fast")]


@pytest.mark.parametrize("files", [SEED_FILES, FAST_FILES], ids=["seed", "fast"])
def test_each_edit_changes_one_place_in_code_and_has_its_own_id(files: list[str]) -> None:
    every = edits(SOURCES, files)
    assert len({e.id for e in every}) == len(every)
    for e in every:
        text = SOURCES[e.file]
        assert text[e.start : e.end] == e.old and e.new != e.old, e.id
        # in code: the comment-blanked text holds the same characters there
        assert strip_comments(text)[e.start : e.end] == e.old, e.id
        # where its id says
        line = text.split("\n")[e.line - 1]
        assert line[e.col - 1 :].startswith(e.old.split("\n")[0]), e.id
        after = e.apply(SOURCES)
        assert after[e.file] == text[: e.start] + e.new + text[e.end :]
        assert {f: t for f, t in after.items() if f != e.file} == {
            f: t for f, t in SOURCES.items() if f != e.file
        }


def test_every_operator_finds_places_in_the_seed_kernels() -> None:
    found = {e.operator for e in edits(SOURCES, SEED_FILES)}
    assert found == set(OPERATORS), set(OPERATORS) - found


def test_compare_and_sign_leave_arrows_shifts_and_templates_alone() -> None:
    text = (
        "fn f(a: vec4<f32>) -> u32 {\nlet x = a >> 2u; // a < b\n"
        "return select(1u, 2u, x < 3u) + y << 1u;\n}\n"
    )
    got = {(e.operator, e.old, e.new) for e in edits({"k.wgsl": text}, ["k.wgsl"])}
    assert ("compare", "<", "<=") in got
    assert sum(op == "compare" for op, _, _ in got) == 1  # the comment's `<` is not code
    assert ("select", "1u, 2u", "2u, 1u") in got and ("sign", "+", "-") in got
    assert not any(old in (">", "->", ">>", "<<") for _, old, _ in got)


def test_digits_rounds_long_constants_to_five_where_the_float_changes() -> None:
    # 0.50000001 is 0.5 in float32 either way: no edit; 0.5 has too few digits
    text = "let a = 1.442695;\nlet b = 0.50000001;\nlet c = 0.5;\nlet d = 5.70498872745e-3;\n"
    got = [(e.old, e.new) for e in edits({"k.wgsl": text}, ["k.wgsl"], ["digits"])]
    assert got == [("1.442695", "1.4427e+00"), ("5.70498872745e-3", "5.7050e-03")]


def test_precision_keeps_about_16_bits_and_spares_integers_and_constants() -> None:
    text = "let u: u32 = 3u;\nvar z = vec4<f32>(0.0);\nlet p = exp(s - m);\nacc += p * v;\n"
    got = [e for e in edits({"k.wgsl": text}, ["k.wgsl"], ["precision"])]
    assert [e.old.strip() for e in got] == ["exp(s - m)", "p * v"]
    # The WGSL formula, evaluated in float32: every value moves, by at most 2^-16 relatively.
    x = np.random.default_rng(0).standard_normal(100_000).astype(np.float32) * np.float32(3)
    four = np.float32(4099.0)
    e = (x * four - np.floor(x * four) - np.float32(0.5)) * np.float32(3.0e-5)
    y = x * (np.float32(1) + e)
    rel = np.abs(y.astype(np.float64) / x - 1)
    assert rel.max() <= 2.0**-16 and np.median(rel) > 2.0**-20


def test_sample_and_shards_partition_the_edits() -> None:
    ap = parser()
    every = choose_edits(ap.parse_args(["--variant", "seed"]), SOURCES)
    shards = [
        choose_edits(ap.parse_args(["--variant", "seed", "--shard", f"{k}/3"]), SOURCES)
        for k in range(3)
    ]
    assert sorted(e.id for s in shards for e in s) == sorted(e.id for e in every)
    sample = choose_edits(
        ap.parse_args(["--variant", "seed", "--sample", "20", "--seed", "4"]), SOURCES
    )
    again = choose_edits(
        ap.parse_args(["--variant", "seed", "--sample", "20", "--seed", "4"]), SOURCES
    )
    assert sample == again and len(sample) == 20 and set(sample) <= set(every)
    ranges = choose_edits(
        ap.parse_args(["--variant", "seed", "--function", "fa*_key_range"]), SOURCES
    )
    assert {e.function for e in ranges} == {"fa2_key_range", "fab2_key_range"}


def _mutate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "py_harness", "mutate", "--out", str(tmp_path / "out"), *args]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--operator", "compare,typo"], "--operator: unknown ['typo']"),
        (["--only", "flash_attention_v2.wgsl:1:1:compare"], "--only: no edit"),
        (["--file", "nope.wgsl"], "--file: 'nope.wgsl'"),
        (["--shard", "2/2"], "--shard"),
        (["--runtime", "safari"], "--runtime: unknown"),
        (["--case", "d1-no-such-case"], "d1-no-such-case"),
        (["--function", "no_such_fn*"], "--function: no edit"),
        (["--call-timeout", "5", "--runtime", "chromium"], "--call-timeout: for the native"),
        (["--call-timeout", "0"], "--call-timeout"),
    ],
)
def test_bad_arguments_are_refused_by_name_before_any_run(
    tmp_path: Path, args: list[str], named: str
) -> None:
    proc = _mutate(tmp_path, "--variant", "seed", *args)
    assert proc.returncode == 2 and named in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


# Edits of the seed's kernels (the given file never changes, so their ids stay): the dK/dV
# pass's running max turned into a min (caught), a K load that reads one float past the
# row into a lane that meets zeros (equivalent), the forward's running max perturbed (the
# softmax does not depend on it: other bits, within the bound), and an index made a float
# (not WGSL).
KILLED = "flash_attention_v2_backward.wgsl:210:13:min-max"
EQUIVALENT = "flash_attention_v2_backward.wgsl:76:12:compare"
WITHIN_BOUND = "flash_attention_v2.wgsl:132:25:precision"
NOT_WGSL = "flash_attention_v2_backward.wgsl:225:10:precision"


@pytest.mark.needs_runtime("wgpu")
@pytest.mark.browser  # needs a WebGPU runtime (wgpu-py here)
def test_killed_equivalent_within_bound_and_refused_edits_are_told_apart(tmp_path: Path) -> None:
    only = [a for e in (KILLED, EQUIVALENT, WITHIN_BOUND, NOT_WGSL) for a in ("--only", e)]
    proc = _mutate(tmp_path, "--variant", "seed", "--case", "d64-sq128-sk128-b2-h4", *only)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # one survived
    rows = {
        r["id"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())["results"]
    }
    assert rows[KILLED]["status"] == "killed" and rows[KILLED]["ratio"] > 1
    assert rows[EQUIVALENT]["status"] == "survived" and rows[EQUIVALENT]["bits"] == "same"
    assert rows[WITHIN_BOUND]["status"] == "survived" and rows[WITHIN_BOUND]["bits"] == "differ"
    assert 0 < rows[WITHIN_BOUND]["ratio"] <= 1
    assert rows[NOT_WGSL]["status"] == "not compiled"
    assert re.search(r"SURVIVED \(bits same\): " + re.escape(EQUIVALENT), proc.stdout)


@pytest.mark.needs_runtime("wgpu")
@pytest.mark.browser  # needs a WebGPU runtime (wgpu-py here)
def test_a_case_the_kernels_fail_without_an_edit_kills_nothing(tmp_path: Path) -> None:
    folder = planted_shaders(tmp_path, "bwd-dq-missing-scale")  # the backward file: other ids stay
    proc = _mutate(
        tmp_path, "--variant", "seed", "--shaders", str(folder), "--only", WITHIN_BOUND,
        "--case", "d64-sq128-sk128-b2-h4",
    )  # fmt: skip
    assert "# d64-sq128-sk128-b2-h4 fails without an edit" in proc.stdout, proc.stdout
    [row] = json.loads((tmp_path / "out" / "results.json").read_text())["results"]
    assert row["status"] == "unjudged" and proc.returncode == 1, row


@pytest.mark.needs_runtime("wgpu")
@pytest.mark.browser  # needs a WebGPU runtime (wgpu-py here)
def test_a_case_past_the_call_timeout_is_the_edits_error_and_the_next_gets_a_fresh_child(
    tmp_path: Path,
) -> None:
    # On a GPU an edit can make a loop all but endless; a timeout shorter than any case's
    # run stands in for it here (lavapipe cuts loops short).
    proc = _mutate(
        tmp_path, "--variant", "seed", "--call-timeout", "0.01", "--only", WITHIN_BOUND,
        "--only", EQUIVALENT, "--case", "d64-sq128-sk128-b2-h4",
    )  # fmt: skip
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["results"]
    assert [r["status"] for r in rows] == ["error", "error"], proc.stdout + proc.stderr
    assert all("within 0.01 s" in r["detail"] for r in rows), rows
