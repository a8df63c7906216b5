"""The WebGPU runtimes the kernels are judged on, behind one interface.

A runtime is launched once (a browser process, or nothing for wgpu-py) and then opens
sessions: a fresh, loaded harness page, or an in-process service. pytest keeps one launch
per test session and one harness session per module; `check` does the same per runtime.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from .browsers import chromium_launch_args
from .sessions import BrowserSession, NativeSession, Session


class Launched(Protocol):
    def new_session(self, base_url: str) -> Session: ...

    def close_session(self, session: Session) -> None: ...


class Runtime(Protocol):
    name: str
    needs_server: bool

    def missing(self) -> str | None:
        """Why this runtime cannot run here, with how to install it; None when it can."""

    def launch(self, **options: Any) -> contextlib.AbstractContextManager[Launched]: ...


class _PlaywrightBrowser:
    def __init__(self, browser: Any, runtime: str) -> None:
        self.browser = browser
        self.runtime = runtime

    def new_session(self, base_url: str) -> Session:
        return BrowserSession(self.browser.new_page, base_url, self.runtime)

    def close_session(self, session: Session) -> None:
        session.close()  # type: ignore[attr-defined]


class Chromium:
    name = "chromium"
    needs_server = True

    def missing(self) -> str | None:
        try:
            chromium_launch_args()
        except FileNotFoundError as exc:
            return str(exc)
        return None

    @contextlib.contextmanager
    def launch(self, **options: Any) -> Iterator[Launched]:
        from playwright.sync_api import sync_playwright

        args = options.get("launch_args") or chromium_launch_args()
        with sync_playwright() as pw:
            browser = pw.chromium.launch(**args)
            try:
                yield _PlaywrightBrowser(browser, self.name)
            finally:
                browser.close()


class Firefox:
    """Firefox ESR (wgpu / Naga) over WebDriver BiDi: the same page and Pyodide code."""

    name = "firefox"
    needs_server = True

    def missing(self) -> str | None:
        from .firefox import firefox_missing

        return firefox_missing()

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
    needs_server = False

    def missing(self) -> str | None:
        if importlib.util.find_spec("wgpu") is None:
            return "wgpu-py is not installed: pip install wgpu (pinned in pyproject's dev extra)"
        icd = os.environ.get("VK_ICD_FILENAMES")
        if not (Path("/usr/share/vulkan/icd.d").exists() or (icd and Path(icd).exists())):
            return "no Vulkan driver: apt-get install mesa-vulkan-drivers"
        return None

    @contextlib.contextmanager
    def launch(self, **options: Any) -> Iterator[Launched]:
        yield _InProcess()


RUNTIMES: dict[str, Runtime] = {r.name: r for r in (Chromium(), Firefox(), Wgpu())}


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
