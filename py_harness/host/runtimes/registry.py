"""The WebGPU runtimes the kernels are judged on, behind one interface.

A runtime is launched once (a browser process, or nothing for the others) and then opens
sessions: a fresh, loaded harness page, an in-process service (wgpu-py), or a child
process (Dawn through wgpudawn; Pyodide in Node on Dawn). pytest keeps one launch per test
session and one harness session per module; `check` does the same per runtime.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from ...gpu.device import SWIFTSHADER_DAWN_DISABLED_TOGGLES
from .. import paths
from .chromium import chromium_launch_args
from .sessions import BrowserSession, NativeSession, Session
from .workers import WorkerSession

# Dawn refuses lavapipe ("Vulkan shaderUniform*ArrayDynamicIndexing required"); Chromium
# ships SwiftShader's Vulkan driver, which it takes.
SWIFTSHADER_ICD = Path(
    os.environ.get("HARNESS_SWIFTSHADER_ICD", "/usr/lib/chromium/vk_swiftshader_icd.json")
)
_DRIVER_CHOICE = ("VK_ICD_FILENAMES", "VK_DRIVER_FILES")


class Launched(Protocol):
    def new_session(self, base_url: str) -> Session: ...

    def close_session(self, session: Session) -> None: ...


class Runtime(Protocol):
    name: str
    compiler: str  # "tint" (Dawn: Chromium, dawn, node) or "naga" (wgpu: Firefox, wgpu)
    needs_server: bool

    def missing(self) -> str | None:
        """Why this runtime cannot run here, with how to install it; None when it can."""

    def launch(self, **options: Any) -> contextlib.AbstractContextManager[Launched]: ...


# What the runtimes that run the harness's Python in Pyodide need from Python's side (the
# `browser` extra): module -> what it does there.
BROWSER_EXTRA = "pip install 'py-harness[browser]'"


def browser_extra_missing(*modules: str) -> str | None:
    """Which of the browser extra's modules is not installed, with how to install it."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            return f"the {module} package is not installed: {BROWSER_EXTRA}"
    return None


class _PlaywrightBrowser:
    def __init__(self, browser: Any, runtime: str, tracing: bool = False) -> None:
        self.browser = browser
        self.runtime = runtime
        self.tracing = tracing

    def new_session(self, base_url: str) -> Session:
        session = BrowserSession(
            self.browser.new_page, base_url, self.runtime, tracing=self.tracing
        )
        session.browser_version = f"{self.browser.browser_type.name} {self.browser.version}"
        return session

    def close_session(self, session: Session) -> None:
        session.close()  # type: ignore[attr-defined]


class Chromium:
    name = "chromium"
    compiler = "tint"  # the WGSL compiler inside
    needs_server = True

    def missing(self) -> str | None:
        if why := browser_extra_missing("playwright", "pyodide_build"):
            return why
        try:
            chromium_launch_args()
        except FileNotFoundError as exc:
            return str(exc)
        return None

    @contextlib.contextmanager
    def launch(self, **options: Any) -> Iterator[Launched]:
        """Chromium launched here, or, with ws_endpoint, reached through a browser server
        (`py-harness browser-server`, runtimes/browser_server.py) on this or another
        machine, which decides Chromium's path and flags; launch_args are then unused."""
        from playwright.sync_api import sync_playwright

        endpoint = options.get("ws_endpoint")
        with sync_playwright() as pw:
            if endpoint:
                browser = _connect(pw, endpoint)
            else:
                browser = pw.chromium.launch(
                    **(options.get("launch_args") or chromium_launch_args())
                )
            try:
                yield _PlaywrightBrowser(browser, self.name, bool(options.get("tracing")))
            finally:
                browser.close()


def _connect(pw: Any, endpoint: str) -> Any:
    """The browser of a Playwright browser server. expose_network="<loopback>" routes the
    remote browser's connections to 127.0.0.1 and localhost back through this connection, so
    it loads the pages from the harness server on this machine's loopback, as a secure
    context (http://127.0.0.1 is one), which WebGPU needs."""
    from playwright.sync_api import Error

    from .browser_server import redact

    try:
        return pw.chromium.connect(endpoint, expose_network="<loopback>", timeout=120_000)
    except Error as exc:
        raise ConnectionError(
            f"chromium: no browser from the browser server at {redact(endpoint)}: "
            f"{exc.message.strip()}\n(start one with `py-harness browser-server`; pass the "
            "endpoint it prints, query included)"
        ) from exc


class Firefox:
    """Firefox ESR (wgpu / Naga) over WebDriver BiDi: the same page and Pyodide code."""

    name = "firefox"
    compiler = "naga"  # the WGSL compiler inside
    needs_server = True

    def missing(self) -> str | None:
        from .firefox import firefox_missing

        return browser_extra_missing("websockets", "pyodide_build") or firefox_missing()

    @contextlib.contextmanager
    def launch(self, **options: Any) -> Iterator[Launched]:
        from .firefox import launch_firefox

        with launch_firefox() as browser:  # Chromium's launch_args do not apply
            yield browser


class _InProcess:
    def new_session(self, base_url: str) -> Session:
        return NativeSession()

    def close_session(self, session: Session) -> None:
        session.close()  # type: ignore[attr-defined]


class Wgpu:
    """wgpu-py (wgpu-native): lavapipe or SwiftShader here, any Vulkan GPU elsewhere."""

    name = "wgpu"
    compiler = "naga"  # the WGSL compiler inside
    needs_server = False

    def missing(self) -> str | None:
        if importlib.util.find_spec("wgpu") is None:
            return "wgpu-py is not installed: pip install 'py-harness[native]'"
        icd = os.environ.get("VK_ICD_FILENAMES")
        if not (Path("/usr/share/vulkan/icd.d").exists() or (icd and Path(icd).exists())):
            return "no Vulkan driver: apt-get install mesa-vulkan-drivers"
        return None

    @contextlib.contextmanager
    def launch(self, **options: Any) -> Iterator[Launched]:
        yield _InProcess()


def _gpu_present() -> bool:
    """Whether this machine shows a GPU to Vulkan drivers: a DRM render node (Mesa's
    hardware drivers) or an NVIDIA device node. Without one, the only drivers that work
    are CPU ones: lavapipe, which Dawn refuses, and SwiftShader."""
    return any(Path("/dev/dri").glob("renderD*")) or Path("/dev/nvidia0").exists()


def dawn_environment() -> dict[str, str]:
    """The environment for a Dawn child: the caller's, with SwiftShader's Vulkan driver
    chosen where no driver is chosen already (VK_ICD_FILENAMES, VK_DRIVER_FILES) and no
    GPU is present; on a GPU machine the Vulkan loader's own choice stands."""
    env = dict(os.environ)
    if not any(env.get(k) for k in _DRIVER_CHOICE) and not _gpu_present():
        env["VK_ICD_FILENAMES"] = str(SWIFTSHADER_ICD)
    return env


def on_swiftshader(env: dict[str, str]) -> bool:
    """Whether a Dawn child with this environment gets SwiftShader: the Vulkan driver
    chosen names it (dawn_environment chooses it where there is no GPU)."""
    return any("swiftshader" in env.get(k, "").lower() for k in _DRIVER_CHOICE)


def _dawn_driver_missing() -> str | None:
    icd = dawn_environment().get("VK_ICD_FILENAMES")
    if icd == str(SWIFTSHADER_ICD) and not SWIFTSHADER_ICD.exists():
        return (
            "no Vulkan driver that Dawn takes (no GPU here, and Dawn refuses lavapipe): "
            f"apt-get install chromium (SwiftShader's driver, {SWIFTSHADER_ICD}), or name a "
            "driver with VK_ICD_FILENAMES"
        )
    return None


def native_worker_command(implementation: str) -> list[str]:
    """The command of a child process running a native backend ("wgpu" or "dawn")."""
    return [sys.executable, "-m", "py_harness.host.runtimes.native_worker", implementation]


def native_child_session(implementation: str, timeout_s: float) -> WorkerSession:
    """wgpu or Dawn in a child process of its own whose calls fail past timeout_s (the
    child is then killed and the next call starts another), where the in-process wgpu has
    nothing to stop a kernel that does not end."""
    env = dawn_environment() if implementation == "dawn" else dict(os.environ)
    command = native_worker_command(implementation)
    return WorkerSession(command, implementation, env, timeout_s=timeout_s, takes_blobs=True)


class _Workers:
    """Sessions in child processes, each started with the same command; both children
    (Dawn's native worker, Node) take a case's tensors as bytes (workers.py)."""

    def __init__(self, command: list[str], runtime: str, env: dict[str, str]) -> None:
        self.command, self.runtime, self.env = command, runtime, env

    def new_session(self, base_url: str) -> Session:
        return WorkerSession(self.command, self.runtime, self.env, takes_blobs=True)

    def close_session(self, session: Session) -> None:
        session.close()  # type: ignore[attr-defined]


class Dawn:
    """Dawn (Chromium's WebGPU implementation, Tint compiling WGSL) through wgpudawn: the
    native backend in a child process, on SwiftShader here, any Vulkan GPU elsewhere."""

    name = "dawn"
    compiler = "tint"  # the WGSL compiler inside
    needs_server = False

    def missing(self) -> str | None:
        if importlib.util.find_spec("wgpudawn") is None:
            return "wgpudawn is not installed: pip install 'py-harness[native]'"
        return _dawn_driver_missing()

    @contextlib.contextmanager
    def launch(self, **options: Any) -> Iterator[Launched]:
        yield _Workers(native_worker_command(self.name), self.name, dawn_environment())


NODE_HARNESS = paths.HARNESS_WEB_DIR / "node-harness.mjs"
NODE_PACKAGES = ("pyodide/pyodide.mjs", "webgpu/package.json")
NODE_POLL_SPIN = "HARNESS_NODE_POLL_SPIN_MS"
NODE_POLL_SPIN_MS = "2"


class Node:
    """The page's own Python (the wheel in Pyodide, gpu/browser.py) in Node, with Dawn's
    npm `webgpu` package as navigator.gpu: Chromium's WebGPU without a browser."""

    name = "node"
    compiler = "tint"  # the WGSL compiler inside
    needs_server = False

    @staticmethod
    def binary() -> str:
        return paths.node_binary()

    def missing(self) -> str | None:
        if why := browser_extra_missing("pyodide_build"):  # the page's wheel is built here
            return why
        node = self.binary()
        if shutil.which(node) is None:
            return f"{node} not found: apt-get install nodejs (or set HARNESS_NODE)"
        for pkg in NODE_PACKAGES:
            if not (paths.node_modules() / pkg).exists():
                return f"{paths.node_modules() / pkg} is missing: run `py-harness setup`"
        return _dawn_driver_missing()

    @contextlib.contextmanager
    def launch(self, **options: Any) -> Iterator[Launched]:
        from ..dist.build_wheel import build

        build(log=lambda _msg: None)  # the wheel and lock that Pyodide installs from
        env = dawn_environment()
        command = [self.binary(), str(NODE_HARNESS), *self.options(env)]
        yield _Workers(command, self.name, self.environment(env))

    @staticmethod
    def options(env: dict[str, str]) -> list[str]:
        """node-harness.mjs's Dawn options for a child with this environment."""
        if on_swiftshader(env):
            return ["disable-dawn-features=" + ",".join(SWIFTSHADER_DAWN_DISABLED_TOGGLES)]
        return []

    @staticmethod
    def environment(env: dict[str, str]) -> dict[str, str]:
        """The child's environment: where the wheel and the npm packages are and, on
        SwiftShader, how long a wait for the GPU spins before its ticks go on a 1 ms timer
        (NODE_POLL_SPIN_MS; web/harness/node-harness.mjs says why). On a GPU they spin throughout:
        the timer costs milliseconds per dispatch there (docs/runtimes.md). A value in
        the caller's environment stands."""
        spin = {NODE_POLL_SPIN: NODE_POLL_SPIN_MS} if on_swiftshader(env) else {}
        where = {
            "HARNESS_NODE_MODULES": str(paths.node_modules()),
            "HARNESS_DIST_DIR": str(paths.dist_dir()),
        }
        return {**spin, **env, **where}


# In order of their cold start, which is the order "all" runs them in: the first verdict of
# a run comes from the quickest (measured by `check --variant seed --case
# d64-sq128-sk128-b2-h4` per runtime; the figures: docs/records/ci.md, runtimes.md).
RUNTIMES: dict[str, Runtime] = {r.name: r for r in (Wgpu(), Dawn(), Node(), Firefox(), Chromium())}


# CPU drivers, as adapter names spell them in every implementation.
_CPU_DRIVERS = ("swiftshader", "llvmpipe")


def float_path(session: Session) -> tuple[str, str]:
    """(WGSL compiler, driver) of a session: runtimes on the same pair run the same machine
    code, so their outputs agree bit for bit (tests/test_planted_bugs.py checks that this
    holds before relying on it). The driver is the CPU driver's name, else the adapter's
    device name with case and punctuation dropped ("NVIDIA H200", "nvidia-h200")."""
    name = session.adapter_name().lower()
    driver = next((d for d in _CPU_DRIVERS if d in name), "")
    if not driver:
        device = str(session.adapter()["info"].get("device", "")) or name
        driver = re.sub(r"[^a-z0-9]", "", device.lower())
    return runtime(session.runtime).compiler, driver


def runtime(name: str) -> Runtime:
    if name not in RUNTIMES:
        raise ValueError(f"--runtime: unknown {name!r}; known: {', '.join(RUNTIMES)}")
    return RUNTIMES[name]


def parse_runtimes(spec: str) -> list[str]:
    """'chromium,wgpu' -> names, checked; 'all' -> every runtime."""
    names = list(RUNTIMES) if spec == "all" else [s.strip() for s in spec.split(",") if s.strip()]
    for name in names:
        runtime(name)
    return names
