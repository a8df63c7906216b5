"""Which Chromium runs and how: extra flags from HARNESS_CHROMIUM_ARGS (what a GPU machine
needs: docs/runtimes.md, "Chromium on an NVIDIA GPU"), parsed as shell words, refused with
the variable's name when malformed and passed to the browser that `check` launches; the
binary (HARNESS_CHROMIUM, Debian's, else Playwright's own build), a Playwright channel,
--headed and --slowmo; and the browser's version in the results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from py_harness.host.runtimes import chromium
from py_harness.host.runtimes.chromium import EXTRA_ARGS_VAR, extra_args_from_env

pytest_plugins = ["pytester"]

AGENT = "py-harness flags test"


def test_flags_are_shell_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EXTRA_ARGS_VAR, f"--use-webgpu-adapter=default  --user-agent='{AGENT}'")
    assert extra_args_from_env() == ("--use-webgpu-adapter=default", f"--user-agent={AGENT}")
    monkeypatch.delenv(EXTRA_ARGS_VAR)
    assert extra_args_from_env() == ()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("--user-agent='unclosed", "HARNESS_CHROMIUM_ARGS: not shell words"),
        ("--enable-unsafe-webgpu use-angle=vulkan", "each word must be a --flag, got 'use-angle"),
    ],
)
def test_malformed_flags_are_refused(
    monkeypatch: pytest.MonkeyPatch, value: str, message: str
) -> None:
    monkeypatch.setenv(EXTRA_ARGS_VAR, value)
    with pytest.raises(ValueError, match=message):
        extra_args_from_env()


@pytest.mark.needs_runtime("chromium")
@pytest.mark.browser
def test_check_launches_chromium_with_the_flags(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "py_harness", "check", "--runtime", "chromium", "--out", out]
    cmd += ["--variant", "seed", "--case", "d1-sq17-sk17-h4"]
    env = {**os.environ, EXTRA_ARGS_VAR: f'--user-agent="{AGENT}"'}
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    # The page reports navigator.userAgent as its adapter's backend.
    results = json.loads((out / "results.json").read_text())
    assert results["adapters"]["chromium"]["backend"] == AGENT
    # and which browser build ran the case
    assert results["adapters"]["chromium"]["browser"].startswith("chromium "), results


def _playwright_build(root: Path) -> None:
    """A stand-in for Playwright's Chromium of this Playwright's revision under root."""
    import playwright

    listed = Path(playwright.__file__).parent / "driver" / "package" / "browsers.json"
    [rev] = [
        b["revision"] for b in json.loads(listed.read_text())["browsers"] if b["name"] == "chromium"
    ]
    (root / f"chromium-{rev}" / "chrome-linux64").mkdir(parents=True)
    (root / f"chromium-{rev}" / "chrome-linux64" / "chrome").write_text("")


def test_the_binary_is_harness_chromium_then_debians_then_playwrights(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("HARNESS_CHROMIUM", raising=False)
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path))
    monkeypatch.setattr(chromium, "DEBIAN_CHROMIUM", str(tmp_path / "no-chromium"))
    with pytest.raises(FileNotFoundError, match="py-harness setup --browsers"):
        chromium.chromium_launch_args()
    _playwright_build(tmp_path)  # Playwright launches its own when given no path
    assert "executable_path" not in chromium.chromium_launch_args()
    monkeypatch.setattr(chromium, "DEBIAN_CHROMIUM", sys.executable)  # a binary that exists
    assert chromium.chromium_launch_args()["executable_path"] == sys.executable
    monkeypatch.setenv("HARNESS_CHROMIUM", str(tmp_path / "named"))  # named: that or nothing
    with pytest.raises(FileNotFoundError, match="named"):
        chromium.chromium_launch_args()


def test_a_channel_headed_and_slowmo_reach_the_launch(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "def test_args(chromium_launch_args):\n"
        "    assert chromium_launch_args['channel'] == 'msedge'\n"
        "    assert 'executable_path' not in chromium_launch_args\n"
        "    assert chromium_launch_args['headless'] is False\n"
        "    assert chromium_launch_args['slow_mo'] == 250\n"
    )
    args = ["--browser-channel", "msedge", "--headed", "--slowmo", "250"]
    pytester.runpytest(*args).assert_outcomes(passed=1)
