"""Extra Chromium flags from HARNESS_CHROMIUM_ARGS (what a GPU machine needs: docs/runtimes.md,
"Chromium on an NVIDIA GPU"): parsed as shell words, refused with the variable's name when
malformed, and passed to the browser that `check` launches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from py_harness.host.runtimes.chromium import EXTRA_ARGS_VAR, extra_args_from_env

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
