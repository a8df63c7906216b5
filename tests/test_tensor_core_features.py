"""scripts/tensor_core_features.py (docs/runtimes.md quotes what it found on an H100): each
part runs in a process of its own and reports its findings in the implementation's words,
here on the CPU drivers (SwiftShader for the Vulkan and Dawn parts, as Dawn runs here)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from py_harness.host.runtimes.registry import dawn_environment
from tests.native_child import ROOT


@pytest.mark.needs_runtime("dawn", "wgpu")
def test_each_part_reports_what_its_implementation_says() -> None:
    run = subprocess.run(
        [sys.executable, "scripts/tensor_core_features.py"],
        capture_output=True,
        text=True,
        env=dawn_environment(),
        cwd=ROOT,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    vulkan = next(line for line in lines if line.startswith("vulkan SwiftShader"))
    assert "'shaderFloat16': 0" in vulkan and "'storageInputOutput16': 0" in vulkan, vulkan
    assert "vulkan cooperative matrices: none" in lines
    # Dawn's own words for the refusal, not a guess of ours
    assert any(
        line.startswith("dawn device with shader-f16: refused: ")
        and "FeatureName::ShaderF16" in line
        for line in lines
    ), lines
    assert any(line.startswith("wgpu ") and "cooperative-matrix no" in line for line in lines)
