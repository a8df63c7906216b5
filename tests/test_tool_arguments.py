"""What the tools refuse before a run starts, by option: an output they cannot write (each
writes its results when its run ends, minutes to hours later: found 2026-12-06, every tool
lost them there; the plugin's --harness-json: tests/test_plugin.py), and names only a run
would have found wrong. `bench`'s sizes and counts:
tests/test_bench.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from py_harness.host.runtimes import browser_server
from py_harness.host.serving import serve
from py_harness.host.tools import bench, check, explore, mutate, stability
from tests.fakes import refusal_text


def _tools(blocked: Path) -> list[tuple[str, Callable[[list[str]], int], list[str]]]:
    return [
        ("check --out", check.main, ["--runtime", "wgpu", "--out", str(blocked)]),
        ("explore --out", explore.main, ["--runtime", "wgpu", "--out", str(blocked)]),
        ("mutate --out", mutate.main, ["--runtime", "wgpu", "--out", str(blocked)]),
        ("stability --out", stability.main, ["--out", str(blocked)]),
        ("bench --json", bench.main, ["--no-torch", "--json", str(blocked / "b.json")]),
        ("bench --plot", bench.main, ["--no-torch", "--plot", str(blocked / "b.svg")]),
    ]


@pytest.mark.usefixtures("no_runtime")
@pytest.mark.parametrize("which", [name for name, _, _ in _tools(Path())])
def test_an_output_it_cannot_write_is_refused_before_the_run(
    which: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    blocked = tmp_path / "a-file"  # a file where the output folder should be
    blocked.write_text("")
    _, tool, argv = next(t for t in _tools(blocked) if t[0] == which)
    with pytest.raises(SystemExit) as exc:
        tool(argv)
    said = refusal_text(exc.value.code, capsys.readouterr().err)
    option = which.split()[1]
    assert f"{option}: cannot write {blocked}" in said, said


@pytest.mark.usefixtures("no_runtime")
def test_bench_refuses_a_json_path_that_is_a_folder(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=f"--json: cannot write {tmp_path}: a folder"):
        bench.main(["--no-torch", "--json", str(tmp_path)])


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--case", "d1-no-such"], "--case: no case 'd1-no-such'"),
        (
            ["--variant", "seed,nope"],
            "--variant: unknown 'nope'; known: seed, fast, fast_f16, fast_f16x2",
        ),
        (
            ["--variant", ","],
            "--variant: name at least one of seed, fast, fast_f16, fast_f16x2, or all",
        ),
    ],
)
def test_stability_refuses_names_before_any_profile_runs(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Each profile's check refused them only after its runtime had started, and the tally
    read "0 judged draws: 0 false FAILs"."""
    with pytest.raises(SystemExit) as exc:
        stability.main([*argv, "--out", str(tmp_path)])
    assert exc.value.code == 2 and says in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # no profile ran


@pytest.mark.parametrize("tool", [serve.main, browser_server.main], ids=["serve", "browser-server"])
def test_a_port_outside_tcps_range_is_refused(tool, capsys: pytest.CaptureFixture) -> None:
    for bad in ("65536", "-1", "x"):
        with pytest.raises(SystemExit) as exc:
            tool(["--port", bad])
        assert exc.value.code == 2
        assert f"argument --port: must be an integer in [0, 65535], got '{bad}'" in (
            capsys.readouterr().err
        )


def test_the_tools_that_run_built_in_variants_only_choose_among_them(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Found by a fresh clone's CI (2026-12-06): with a file's variant loaded in the same
    process, stability's and bench's `all` and their messages took it in."""
    from py_harness.host import variants

    before = variants.snapshot()
    try:
        variants.load_file(Path(__file__).parents[1] / "examples/packed-kv/kernels/packed_kv.toml")
        assert bench._variant_names("all") == ["seed", "fast", "fast_f16", "fast_f16x2"]
        with pytest.raises(SystemExit) as exc:
            stability.main(["--variant", ",", "--out", str(tmp_path)])
        said = refusal_text(exc.value.code, capsys.readouterr().err)
        names = "seed, fast, fast_f16, fast_f16x2"
        assert f"--variant: name at least one of {names}, or all" in said, said
    finally:
        variants.restore(before)
