"""A test's report made in a child process of a native runtime's environment (Dawn's driver
is chosen before it loads, so a dawn device cannot share the test's process), read back as
JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from py_harness.host.runtimes.registry import dawn_environment

ROOT = Path(__file__).resolve().parents[1]


# The native implementations, for @pytest.mark.parametrize("impl", NATIVE): each skipped,
# with its runtime's reason, where it is not installed (the plugin's needs_runtime).
NATIVE = [pytest.param(name, marks=pytest.mark.needs_runtime(name)) for name in ("wgpu", "dawn")]


def child_report(impl: str, module: str, function: str, timeout: int = 300) -> Any:
    """`asyncio.run(module.function(impl))` in a child process, its JSON result (the test
    parametrized over NATIVE)."""
    code = (
        f"import asyncio, json; from {module} import {function}; "
        f"print(json.dumps(asyncio.run({function}({impl!r}))))"
    )
    env = dawn_environment() if impl == "dawn" else None
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
        check=True,
    ).stdout
    return json.loads(out.splitlines()[-1])
