"""`py-harness explore`: random cases are valid, supported, reproducible by (seed, index)
and spread over every axis the variant declares; end to end on wgpu-py, a clean kernel
passes and a planted bug fails with a replay command that fails alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from py_harness.config import validate
from py_harness.host.judge.cases import Case
from py_harness.host.judge.random_cases import case_literal, random_case, work
from py_harness.host.variants import get
from tests.fakes import planted_shaders

DRAWS = 300


def draws(name: str, **kw: int) -> list:
    return [random_case(7, i, refusal=get(name).refusal, **kw) for i in range(DRAWS)]


@pytest.mark.parametrize("name", ["seed", "fast"])
def test_every_draw_is_valid_supported_and_within_the_limits(name: str) -> None:
    for case in draws(name, max_len=90, max_work=3_000_000):
        cfg = case.config()
        validate(cfg)
        assert get(name).refusal(cfg) is None, case.id
        assert max(case.seq_q, case.seq_k) <= 90 and work(cfg) <= 3_000_000, case.id


def test_a_draw_depends_on_its_seed_and_index_alone() -> None:
    refusal = get("fast").refusal
    assert random_case(3, 41, refusal=refusal) == random_case(3, 41, refusal=refusal)
    assert len({random_case(3, i, refusal=refusal) for i in range(20)}) == 20
    assert random_case(4, 41, refusal=refusal) != random_case(3, 41, refusal=refusal)


def test_a_case_prints_as_the_python_that_makes_it() -> None:
    for case in draws("fast")[:60]:
        assert eval(case_literal(case), {"Case": Case}) == case


def test_the_fast_variant_is_drawn_on_every_axis_it_declares() -> None:
    cases = draws("fast")
    cfgs = [c.config() for c in cases]
    seen = {
        "varlen with an empty sequence": any(c.lens_q and 0 in c.lens_q + c.lens_k for c in cases),
        "negative causal offset": any(f.causal and f.causal_offset < 0 for f in cfgs),
        "(left, right) window": any(f.window_left >= 0 and f.window_right >= 0 for f in cfgs),
        "softcap": any(f.softcap for f in cfgs),
        "per-batch ALiBi": any(c.alibi == "batch" for c in cases),
        "head_dim over 128": any(f.head_dim > 128 for f in cfgs),
        "32 heads or more over fewer kv heads": any(
            f.num_heads >= 32 and f.kv_heads < f.num_heads for f in cfgs
        ),
        "a mask": any(f.mask_shape for f in cfgs),
        "dropout": any(f.dropout_p for f in cfgs),
        "a repeated backward": any(c.repeat_backward for c in cases),
        "large logits": any(c.large_logits for c in cases),
        "scores past exp's range": any(c.shifted_scores for c in cases),
        "a key tile's edge": any(f.seq_k in (63, 64, 65) for f in cfgs),
    }
    assert all(seen.values()), [axis for axis, hit in seen.items() if not hit]


def _explore(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "py_harness", "explore", "--runtime", "wgpu", "--out", str(out)]
    proc = subprocess.run([*cmd, *args], capture_output=True, text=True)
    return proc, json.loads((out / "results.json").read_text())


@pytest.mark.needs_runtime("wgpu")
@pytest.mark.browser  # needs a WebGPU runtime (wgpu-py here)
def test_a_planted_bug_fails_and_its_replay_fails_alone(tmp_path: Path) -> None:
    common = ["--variant", "seed", "--seed", "5", "--count", "4", "--max-len", "70"]
    proc, clean = _explore(tmp_path, *common)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(clean["results"]) == 4
    assert {r["status"] for r in clean["results"]} <= {"pass", "known", "unsupported"}

    folder = planted_shaders(tmp_path, "bwd-dq-missing-scale")
    proc, planted = _explore(tmp_path, *common, "--shaders", str(folder))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failed = [r for r in planted["results"] if r["status"] == "fail"]
    assert failed and all("dq: FAIL" in r["detail"] for r in failed), proc.stdout
    replay = re.search(r"replay with `py-harness explore (.*?)`", proc.stdout)
    assert replay, proc.stdout
    proc, alone = _explore(tmp_path, *replay.group(1).split())
    assert proc.returncode == 1 and [r["case"] for r in alone["results"]] == [failed[0]["case"]]
