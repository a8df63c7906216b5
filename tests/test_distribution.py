"""The distribution as a team installs it: built from this checkout, installed into a clean
virtual environment outside it, and used from the example project (examples/packed-kv: its
own kernels, bindings unlike the seed's) through the pytest plugin and `py-harness check`,
on wgpu and chromium. Nothing from the checkout is importable there: only the npm packages
(Pyodide) are shared, through HARNESS_NODE_MODULES, as a team's CI would after
`py-harness setup`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from py_harness.host import paths
from py_harness.host.runtimes.registry import runtime

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "packed-kv"
CONTROL = "d64-sq128-sk128-b2-h4"
pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _run(cmd: list, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """(the venv's python, the environment to run it in)."""
    for name in ("wgpu", "chromium"):
        reason = runtime(name).missing()
        if reason:
            pytest.skip(f"{name}: {reason}")
    tmp = tmp_path_factory.mktemp("distribution")
    build = [sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "-q", "-w", tmp / "dist"]
    proc = _run([*build, "--no-build-isolation"], tmp, dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    [wheel] = (tmp / "dist").glob("py_harness-*.whl")
    # The interpreter under this venv, not the venv's own (a venv inside a venv is fine, but
    # its base must be a real installation).
    base = Path(sysconfig.get_config_var("BINDIR")) / "python3"
    assert _run([base, "-m", "venv", tmp / "venv"], tmp, dict(os.environ)).returncode == 0
    python = tmp / "venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = _run([python, "-m", "pip", "install", "-q", f"{wheel}[native]"], tmp, env)
    assert proc.returncode == 0, proc.stderr
    env |= {"HARNESS_NODE_MODULES": str(paths.node_modules()), "HARNESS_CACHE": str(tmp / "c")}
    env["HARNESS_WHEEL"] = str(wheel)
    yield python, env


def _add_browser_extra(python: Path, env: dict[str, str]) -> None:
    wheel = env["HARNESS_WHEEL"]
    proc = _run([python, "-m", "pip", "install", "-q", f"{wheel}[native,browser]"], Path("/"), env)
    assert proc.returncode == 0, proc.stderr


def test_native_only_installs_no_browser_tooling_and_says_what_a_page_needs(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """[native] alone: no pyodide-build, Playwright or websockets; the native runtimes
    judge; the page runtimes say which extra they need. (Runs before the test below adds
    the browser extra to the same environment.)"""
    python, env = installed
    modules = ("pyodide_build", "playwright", "websockets", "pkginfo")
    code = f"import importlib.util as u; print([m for m in {modules} if u.find_spec(m)])"
    proc = _run([python, "-c", code], Path("/"), env)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr
    check = [python, "-m", "py_harness", "check", "--runtime", "wgpu", "--case", CONTROL]
    proc = _run([*check, "--variant", "seed", "--out", tmp_path / "out"], tmp_path, env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    proc = _run([python, "-m", "py_harness", "check", "--runtime", "chromium"], tmp_path, env)
    assert "py-harness[browser]" in proc.stdout + proc.stderr, proc.stdout[-2000:]


def test_installed_package_is_not_the_checkout(installed: tuple[Path, dict[str, str]]) -> None:
    python, env = installed
    code = "import py_harness.host.paths as p; print(p.PACKAGE_DIR, p.IN_CHECKOUT, p.SHADER_DIR)"
    proc = _run([python, "-c", code], Path("/"), env)
    where, in_checkout, shaders = proc.stdout.split()
    assert str(python.parents[1]) in where and in_checkout == "False", proc.stderr
    assert (Path(shaders) / "flash_attention_v2_backward.wgsl").is_file()


def test_example_project_passes_on_wgpu_and_chromium(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    python, env = installed
    _add_browser_extra(python, env)
    project = tmp_path / "packed-kv"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("build", "__pycache__"))
    # The CI recipe's test step (examples/ci/test-step.sh), as a team's CI runs it: the
    # venv's commands first on PATH, on this runner's runtimes.
    step = ROOT / "examples" / "ci" / "test-step.sh"
    ci = env | {"PATH": f"{python.parent}:{env['PATH']}", "HARNESS_RUNTIMES": "wgpu,chromium"}
    proc = _run(["sh", step], project, ci | {"HARNESS_MACHINE": "ci-box"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ran = json.loads((project / "test-results" / "results-ci-box.json").read_text())
    assert {r["runtime"] for r in ran["results"]} == {"wgpu", "chromium"}, ran["results"]
    assert " failed" not in proc.stdout and " passed" in proc.stdout
    # Both runtimes judged the project's variant: the plugin's matrix names it per runtime.
    assert "py-harness: packed_kv, case x runtime" in proc.stdout, proc.stdout[-3000:]
    # The check command, from the installed distribution, on the same variant file: one
    # case (the smoke subset on wgpu has just been judged through the plugin).
    check = [python, "-m", "py_harness", "check", "--runtime", "wgpu", "--case", CONTROL]
    check += ["--variant", "packed_kv", "--variant-file", "kernels/packed_kv.toml"]
    proc = _run(check, project, env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    [out] = (project / "build" / "check").glob("packed_kv--wgpu--*")  # variant, runtime, machine
    results = json.loads((out / "results.json").read_text())
    judged = [r for r in results["results"] if not r["case"].startswith("limitation:")]
    assert [(r["case"], r["status"]) for r in judged] == [(CONTROL, "pass")], results
