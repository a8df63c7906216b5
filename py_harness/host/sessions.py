"""Host-side handles on a runtime: a page in a browser, or wgpu-py in this process.

Both speak the HarnessService JSON API (see py_harness/service.py), so a case runs
through the same code path everywhere; only the transport differs.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[2]
SHADER_DIR = ROOT / "shaders"
HARNESS_PAGE = "/web/harness.html"


class PageError(RuntimeError):
    """An exception raised inside the page; carries the Python traceback from Pyodide."""

    def __init__(self, entry: str, message: str, stack: str | None) -> None:
        super().__init__(f"{entry} failed in the page:\n{message}")
        self.page_message = message
        self.page_stack = stack


class Session(Protocol):
    runtime: str

    def call(self, entry: str, request: dict[str, Any]) -> dict[str, Any]: ...

    def adapter_name(self) -> str: ...


class _AdapterName:
    _adapter_name: str | None = None

    def adapter_name(self) -> str:
        """'vendor architecture device description' of the adapter, asked for once."""
        if self._adapter_name is None:
            info = self.call("adapter", {})["info"]
            keys = ("vendor", "architecture", "device", "description")
            self._adapter_name = " ".join(str(info.get(k, "")) for k in keys if info.get(k))
        return self._adapter_name


def shader_sources(directory: Path = SHADER_DIR) -> dict[str, str]:
    """Every .wgsl file in `directory`, by file name (the page gets them with each case)."""
    return {p.name: p.read_text() for p in sorted(directory.glob("*.wgsl"))}


class BrowserSession(_AdapterName):
    """A loaded harness page (Playwright sync API). `page` must be fresh."""

    def __init__(self, page: Any, base_url: str, runtime: str = "chromium") -> None:
        self.runtime = runtime
        self.page = page
        page.goto(base_url + HARNESS_PAGE)
        status, value, stack = page.evaluate(
            "() => window.harnessReady.then(() => ['ok', '', null],"
            " (e) => ['error', String(e && e.message || e), e && e.stack || null])"
        )
        if status != "ok":
            raise PageError("load", value, stack)
        self.load_timings = page.evaluate("() => window.harnessTimings || {}")

    def call(self, entry: str, request: dict[str, Any]) -> dict[str, Any]:
        status, value, stack = self.page.evaluate(
            "([entry, request]) => window.runHarness(entry, request)",
            [entry, json.dumps(request)],
        )
        if status != "ok":
            raise PageError(entry, value, stack)
        return json.loads(value)


class NativeSession(_AdapterName):
    """wgpu-py in this process (lavapipe / SwiftShader here, any Vulkan GPU elsewhere)."""

    runtime = "wgpu"

    def __init__(self) -> None:
        from ..gpu import native
        from ..service import HarnessService

        async def load_source(name: str) -> str:
            return (SHADER_DIR / name).read_text()

        # The service's coroutines run on a loop of their own in a worker thread: the
        # caller's thread may already run one (Playwright's sync API does).
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.service = HarnessService(native.request_device, load_source)

    def call(self, entry: str, request: dict[str, Any]) -> dict[str, Any]:
        method = getattr(self.service, entry)
        future = asyncio.run_coroutine_threadsafe(method(json.dumps(request)), self._loop)
        return json.loads(future.result())

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
