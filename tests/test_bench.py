"""`python -m py_harness bench`: its arithmetic, its plot, its imports, and one tiny run."""

from __future__ import annotations

import dataclasses
import json
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from py_harness.config import AttentionConfig
from py_harness.gpu.device import pass_times_ms
from py_harness.host.paths import shader_sources
from py_harness.host.runtimes.registry import runtime
from py_harness.host.tools.ablate import ABLATIONS, ablated_sources
from py_harness.host.tools.bench_impls import flops
from py_harness.host.tools.bench_plot import write_svg
from py_harness.kernels import VARIANTS
from tests.fakes import own_thread, planted_shaders, refusal_text

ROOT = Path(__file__).resolve().parents[1]


def test_flops_follow_the_brief() -> None:
    cfg = AttentionConfig(1, 16, 4096, 4096, 64)
    fwd, bwd = flops(cfg)
    assert fwd == 4 * 16 * 4096 * 4096 * 64 and bwd == 2.5 * fwd
    causal = AttentionConfig(1, 16, 4096, 4096, 64, causal=True)
    assert flops(causal) == (fwd / 2, bwd / 2)


def test_svg_has_a_line_per_implementation_and_panel(tmp_path: Path) -> None:
    rows = [
        {"impl": impl, "seq": s, "head_dim": 64, "causal": c, "fwd_ms": s / k, "bwd_ms": s / k}
        for impl, k in (("seed", 1), ("fast", 4), ("torch-cuda", 9))
        for s in (1024, 2048)
        for c in (False, True)
    ]
    path = tmp_path / "bench.svg"
    write_svg(path, rows, title="a <GPU> & more")
    root = ET.parse(path).getroot()  # well-formed XML, title escaped
    lines = root.findall("{http://www.w3.org/2000/svg}polyline")
    assert len(lines) == 3 * 2 * 2  # implementations x (forward, backward) x causal


def test_bench_imports_neither_pytest_nor_playwright() -> None:
    code = (
        "import sys, py_harness.__main__, py_harness.host.tools.bench; "
        "bad = [m for m in ('pytest', 'playwright', 'torch') if m in sys.modules]; "
        "sys.exit(str(bad) if bad else 0)"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


@pytest.mark.parametrize("name", [n for n in ABLATIONS if n != "baseline"])
def test_each_ablation_still_applies_to_the_shaders(name: str) -> None:
    # Mutant.apply raises when an edit's anchor is gone (a kernel edit broke the tool).
    assert ablated_sources(name) != shader_sources()


def test_pass_times_are_per_pass_and_never_negative() -> None:
    stamps = struct.pack("<6Q", 100, 2_000_100, 7, 5, 10, 500_010)
    assert pass_times_ms(stamps) == [2.0, 0.0, 0.5]


# wgpu-py in this process; Pyodide in Node on Dawn through a child process (the worker
# transport and the timing loop in the wheel; the seed alone: Tint on SwiftShader takes
# half a minute to compile the fast variant's specialisations).
@pytest.mark.slow
@pytest.mark.parametrize(("name", "variants"), [("wgpu", ("seed", "fast")), ("node", ("seed",))])
def test_tiny_bench_writes_table_json_and_plot(
    tmp_path: Path, capsys, name: str, variants: tuple[str, ...]
) -> None:
    why = runtime(name).missing()
    if why:
        pytest.skip(why)
    from py_harness.host.tools.bench import main

    out_json, out_svg = tmp_path / "b.json", tmp_path / "b.svg"
    argv = ["--seq", "17,40", "--head-dim", "16", "--heads", "2", "--runs", "1"]
    argv += ["--warmup", "0", "--causal", "yes", "--no-torch", "--verify", "--runtime", name]
    argv += ["--json", str(out_json), "--plot", str(out_svg), "--variant", ",".join(variants)]
    assert own_thread(main, argv) == 0
    doc = json.loads(out_json.read_text())
    assert doc["meta"]["runtime"] == name
    # no path of this machine: the built-in shaders by name, not the file's own location
    assert doc["meta"]["args"]["shaders"] == "built-in" and "json" not in doc["meta"]["args"]
    impls = {(r["impl"], r["seq"]) for r in doc["rows"]}
    assert impls == {(i, s) for i in (*variants, "numpy-f32") for s in (17, 40)}
    assert all(r["fwd_ms"] > 0 and r["bwd_ms"] > 0 for r in doc["rows"])
    # Each variant row breaks its time down by pass (one run: the medians are that run's).
    for r in doc["rows"]:
        if r["impl"] in VARIANTS:
            chosen = VARIANTS[r["impl"]].for_head_dim(16)
            passes = r["extra"]["pass_ms"]
            # all but the pass adding dK/dV copies: one part per key tile here
            cfg = AttentionConfig(1, 2, r["seq"], r["seq"], 16, causal=True)
            assert chosen.kv_parts(cfg, 2**31) == 1
            every = (chosen.forward, *chosen.backward)
            assert list(passes) == [k.entry_point for k in every if not k.adds_kv_parts]
            assert sum(passes.values()) == pytest.approx(r["fwd_ms"] + r["bwd_ms"], rel=1e-9)
            # a full case on new buffers, and one on the buffers it gave back: each its own
            # wall time beyond its own GPU time (one run: it may beat the passes' medians)
            assert r["extra"]["case_wall_ms"] > r["extra"]["case_overhead_ms"] > 0
            assert r["extra"]["case_fresh_overhead_ms"] > 0
    assert [v["passed"] for v in doc["verify"]] == [True] * len(variants)
    assert set(doc["compile_ms"]) == set(variants)
    ET.parse(out_svg)
    assert "ms on new buffers" in capsys.readouterr().out
    # The roofline reads the same JSON: every pass of every variant row, with the limits
    # the bench recorded
    from py_harness.host.tools import roofline

    assert doc["meta"]["limits"]["maxStorageBufferBindingSize"] > 0
    points = roofline.pass_points(doc)
    assert len(points) == sum(len((r.get("extra") or {}).get("pass_ms", {})) for r in doc["rows"])
    assert roofline.main([str(out_json), "--plot", str(tmp_path / "r.svg")]) == 0
    ET.parse(tmp_path / "r.svg")


# (arguments, what the refusal says): each names its option and the limit.
BAD_ARGUMENTS = [
    (["--seq", "0"], "argument --seq: must be comma-separated integers >= 1, got '0'"),
    (["--seq", "64,x"], "argument --seq: must be comma-separated integers >= 1"),
    (["--heads", "0"], "argument --heads: must be an integer >= 1, got '0'"),
    (["--runs", "0"], "argument --runs: must be an integer >= 1, got '0'"),
    (["--lengths", "5,-1"], "argument --lengths: must be comma-separated integers >= 0"),
    (["--head-dim", "300"], "--head-dim: must be in [1, 256], got 300"),
    (["--window-left", "-5"], "--window-left: must be in [-1, 268435456], got -5"),
    (["--heads", "4", "--kv-heads", "3"], "--kv-heads: num_heads (4) must be a multiple"),
    (["--batch", "40000", "--heads", "2"], "--batch x --heads: must be in [1, 65535], got 80000"),
    (["--lengths", "0,0"], "--lengths: the longest sequence must be in [1, 268435456], got 0"),
    (["--variant", "seed", "--softcap", "5"], "--variant seed: seed does not support softcap"),
    (
        ["--variant", ","],
        "--variant: name at least one of seed, fast, fast_f16, fast_f16x2, or all",
    ),
    (["--shaders", "/no/such/folder"], "--shaders: /no/such/folder is not a folder"),
]


@pytest.mark.parametrize(
    ("argv", "says"), [pytest.param(a, s, id=" ".join(a)) for a, s in BAD_ARGUMENTS]
)
@pytest.mark.usefixtures("no_runtime")
def test_bad_arguments_are_refused_by_option_before_a_runtime_starts(
    argv: list[str], says: str, capsys: pytest.CaptureFixture
) -> None:
    """Before this was checked, `bench --seq 0` or `--head-dim 300` started the runtime,
    compiled every pipeline, skipped each size with the configuration's field name, wrote
    an empty table and exited 0; `--heads 0` and `--runs 0` quietly took the defaults."""
    from py_harness.host.tools.ablate import main as ablate
    from py_harness.host.tools.bench import main

    for tool in (main, ablate):
        if tool is ablate and not {"--seq", "--head-dim", "--heads"} >= set(argv[::2]):
            continue  # ablate takes the sizes only
        with pytest.raises(SystemExit) as exc:
            tool([*argv, "--runtime", "wgpu"] if tool is main else argv)
        said = refusal_text(exc.value.code, capsys.readouterr().err)
        assert says in said, said


def test_what_one_kind_of_adapters_defaults_allows_is_left_to_the_adapter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--kv-heads 8 without --heads fits a GPU's default 16 heads, not a CPU adapter's 4:
    not refused before the adapter is known (its sizes are then skipped one by one)."""
    from py_harness.host.tools import bench

    parsed: list = []
    monkeypatch.setattr(bench, "run", lambda args: parsed.append(args) or 0)
    bench.main(["--kv-heads", "8"])
    bench.refuse_what_cannot_run(parsed[0])  # no SystemExit
    bench.main(["--kv-heads", "8", "--heads", "4"])
    with pytest.raises(SystemExit, match=r"--kv-heads: must be in \[1, 4\], got 8"):
        bench.refuse_what_cannot_run(parsed[1])


def test_ablate_refuses_an_unknown_ablation_by_name(capsys: pytest.CaptureFixture) -> None:
    from py_harness.host.tools.ablate import main as ablate

    with pytest.raises(SystemExit) as exc:
        ablate(["--only", "baseline,no-such"])
    assert exc.value.code == 2
    assert "--only: unknown no-such; known: baseline" in capsys.readouterr().err


@pytest.mark.needs_runtime("wgpu")
def test_a_run_that_measures_nothing_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Sizes the configuration allows but the device's limits do not are skipped one by
    one (a sweep goes on past them); a table with no row of a variant is a failure."""
    from py_harness.host.tools.bench import main

    argv = ["--runtime", "wgpu", "--variant", "seed", "--seq", "400000", "--head-dim", "128"]
    argv += ["--heads", "16", "--causal", "no", "--no-torch", "--numpy-max-seq", "0", "--verify"]
    assert main([*argv, "--plot", "", "--json", str(tmp_path / "b.json")]) == 1
    out = capsys.readouterr().out
    assert "# skip seq 400000 D 128" in out and "# nothing measured" in out, out
    assert "# verify seed seq 400000 D 128 causal False: FAIL\n#   not run: " in out, out
    assert json.loads((tmp_path / "b.json").read_text())["rows"] == []


def test_seq_k_benchmarks_short_keys_and_wants_an_offset_with_causal(tmp_path: Path) -> None:
    from py_harness.host.tools.bench import main

    argv = ["--seq", "70", "--seq-k", "5", "--head-dim", "16", "--heads", "4", "--kv-heads", "1"]
    argv += ["--runs", "1", "--warmup", "0", "--no-torch", "--variant", "fast", "--runtime"]
    with pytest.raises(SystemExit, match="--seq-k with causal: give --causal-offset"):
        main([*argv, "wgpu", "--causal", "both"])
    if why := runtime("wgpu").missing():  # the refusal above needs no runtime
        pytest.skip(why)
    out = tmp_path / "b.json"
    assert own_thread(main, [*argv, "wgpu", "--causal", "no", "--verify", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [v["passed"] for v in doc["verify"]] == [True]
    # every pass the runner dispatched is timed: the pass adding the copies of dK and dV
    # only where the key tile's work is split (kv_parts > 1), as here with more queries
    fast = next(r for r in doc["rows"] if r["impl"] == "fast")
    assert "fa2f_bwd_dq_sum" in fast["extra"]["pass_ms"]
    assert "fa2f_bwd_kv_sum" not in fast["extra"]["pass_ms"]
    cfg = AttentionConfig(batch=1, num_heads=4, num_kv_heads=1, seq_q=70, seq_k=5, head_dim=16)
    assert VARIANTS["fast"].kv_parts(cfg, 2**31) == 1
    longer = ["--seq", "1100", *argv[2:]]
    assert own_thread(main, [*longer, "wgpu", "--causal", "no", "--json", str(out)]) == 0
    fast = next(r for r in json.loads(out.read_text())["rows"] if r["impl"] == "fast")
    assert VARIANTS["fast"].kv_parts(dataclasses.replace(cfg, seq_q=1100), 2**31) > 1
    assert "fa2f_bwd_kv_sum" in fast["extra"]["pass_ms"]


def _verify_report(tmp_path: Path, argv: list[str], bug: str, prefix: str) -> str:
    """Run bench --verify with the shipped shaders (it must pass) and with the planted bug
    (it must fail); the failing run's report line that starts with `prefix`."""
    from py_harness.host.tools.bench import main

    if why := runtime("wgpu").missing():
        pytest.skip(why)
    argv = [*argv, "--runs", "1", "--warmup", "0", "--no-torch", "--plot=", "--verify"]
    argv += ["--runtime", "wgpu", "--json", str(tmp_path / "b.json")]
    assert own_thread(main, argv) == 0
    assert own_thread(main, [*argv, "--shaders", str(planted_shaders(tmp_path, bug))]) == 1
    doc = json.loads((tmp_path / "b.json").read_text())
    [line] = [r for r in doc["verify"][0]["reports"] if r.startswith(prefix)]
    return line


def test_verify_with_shifted_logits_catches_an_lse_that_overflows(tmp_path: Path) -> None:
    """--logits shifted draws the matrix's `shift` inputs (rows past exp's float32 range):
    the seed's kernels pass it, and fail it with their LSE taken as log(exp(m) l)."""
    argv = ["--seq", "100", "--head-dim", "64", "--heads", "2", "--causal", "yes"]
    argv += ["--variant", "seed", "--logits", "shifted"]
    lse = _verify_report(tmp_path, argv, "fwd-lse-exp-of-max", "lse")
    assert "FAIL" in lse and "inf" in lse, lse


def test_verify_runs_the_backward_twice_and_wants_the_same_bits(tmp_path: Path) -> None:
    """A first round of dQ's partial sums that adds instead of storing passes one backward
    (the buffers start at zero) and fails the second: --verify runs it twice."""
    argv = ["--seq", "128", "--batch", "2", "--head-dim", "64", "--heads", "4"]
    argv += ["--causal", "no", "--variant", "fast"]
    twice = _verify_report(tmp_path, argv, "fast-dq-first-round-adds", "backward twice")
    assert "FAIL: the bits differ" in twice, twice


def test_verify_with_dropout_catches_a_forward_that_drops_nothing(tmp_path: Path) -> None:
    """--dropout P runs the kernels with the matrix's dropout (its hash, seed 1234) and
    judges them against the reference's same mask."""
    argv = ["--seq", "100", "--head-dim", "64", "--heads", "2", "--causal", "yes"]
    from py_harness.host.tools.bench import main

    with pytest.raises(SystemExit, match=r"--dropout: a probability in \[0, 1\), got 1.0"):
        main([*argv, "--variant", "seed", "--dropout", "1.0", "--runtime", "wgpu"])
    argv += ["--variant", "seed", "--dropout", "0.17"]
    o = _verify_report(tmp_path, argv, "fwd-no-dropout", "o")
    assert "FAIL" in o, o


def test_verify_with_a_mask_and_a_causal_offset_catches_an_edge_off_by_one(
    tmp_path: Path,
) -> None:
    """--mask keypad and --causal-offset (Sq != Sk, queries 40 keys in) run and judge the
    kernels with the matrix's padded keys and that causal edge; torch would get both as
    one attn_mask. A forward whose causal edge hides the diagonal key fails on O."""
    from py_harness.host.tools.bench import main

    with pytest.raises(SystemExit, match=r"--mask: not with --lengths"):
        main(["--lengths", "30,40", "--mask", "keypad", "--runtime", "wgpu"])
    argv = ["--seq", "96", "--seq-k", "130", "--batch", "2", "--head-dim", "32", "--heads", "2"]
    argv += ["--causal", "yes", "--causal-offset", "40", "--mask", "keypad", "--variant", "seed"]
    o = _verify_report(tmp_path, argv, "fwd-causal-edge", "o")
    assert "FAIL" in o, o
