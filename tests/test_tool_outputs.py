"""Each tool writes its results when its run ends (minutes to hours of it): an output it
cannot write is refused by its option before the run starts, not found at the end with the
results lost (found 2026-12-06: every tool did the latter)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from py_harness.host.tools import bench, check, explore, mutate, stability


def _tools(blocked: Path) -> list[tuple[str, Callable[[list[str]], int], list[str]]]:
    return [
        ("check --out", check.main, ["--runtime", "wgpu", "--out", str(blocked)]),
        ("explore --out", explore.main, ["--runtime", "wgpu", "--out", str(blocked)]),
        ("mutate --out", mutate.main, ["--runtime", "wgpu", "--out", str(blocked)]),
        ("stability --out", stability.main, ["--out", str(blocked)]),
        ("bench --json", bench.main, ["--no-torch", "--json", str(blocked / "b.json")]),
        ("bench --plot", bench.main, ["--no-torch", "--plot", str(blocked / "b.svg")]),
    ]


@pytest.mark.parametrize("which", [name for name, _, _ in _tools(Path())])
def test_an_output_it_cannot_write_is_refused_before_the_run(
    which: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from py_harness.host import engine

    def no_session(*args: object, **kwargs: object) -> None:
        raise AssertionError("a runtime was started for a run whose results cannot be kept")

    monkeypatch.setattr(engine, "open_session", no_session)
    blocked = tmp_path / "a-file"  # a file where the output folder should be
    blocked.write_text("")
    _, tool, argv = next(t for t in _tools(blocked) if t[0] == which)
    with pytest.raises(SystemExit) as exc:
        tool(argv)
    said = capsys.readouterr().err if exc.value.code == 2 else str(exc.value.code)
    option = which.split()[1]
    assert f"{option}: cannot write {blocked}" in said, said


def test_the_plugin_refuses_a_harness_json_it_cannot_write(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing(): pass")
    (pytester.path / "a-file").write_text("")
    for target in ("a-file/results.json", "."):
        result = pytester.runpytest("--harness-json", target)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert "--harness-json: cannot write" in result.stderr.str()
