"""Host-side handles on a runtime: a page in a browser, or wgpu-py in this process.

Both speak the HarnessService JSON API (see py_harness/service.py), so a case runs
through the same code path everywhere; only the transport differs.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ... import errors
from .. import exchange, paths

if TYPE_CHECKING:
    from ...gpu.device import Bytes
    from ...service import HarnessService

HARNESS_PAGE = "/harness/harness.html"
# Requests longer than this go to the page by fetch where this process serves it
# (exchange.py); shorter ones, and every request to a page served elsewhere, as an
# argument of the automation protocol's call.
INLINE_REQUEST_MAX = 256 * 2**10
# A page's reply frame may hold twice the request's bytes and this much more (the reply's
# JSON). A case's outputs are o and dQ (q's size each), dK and dV (k's and v's) and the
# LSE (q's divided by head_dim: as large as q at head_dim 1), so at most twice its inputs
# (q, k, v; 1.5 times with d_out, q's size again).
REPLY_TEXT_MAX = 2**20
# The entry that brings up a page's WebGPU device and runs no kernel. A renderer that
# crashes in it crashed on its own (Chromium has, rarely, at a new page's first call), so
# that call is made once more on a fresh page,
# with a PageCrashWarning that carries the crash's words. A crash in any other entry fails
# the call: a kernel or a case may be its cause, and that is a verdict.
RETRIED_AFTER_CRASH = frozenset({"adapter"})


class PageError(RuntimeError):
    """An exception raised inside the page; carries the Python traceback from Pyodide."""

    def __init__(self, entry: str, message: str, stack: str | None) -> None:
        super().__init__(f"{entry} failed in the page:\n{message}")
        self.page_message = message
        self.page_stack = stack


def page_error(entry: str, message: str, stack: str | None, runtime: str) -> Exception:
    """A failed call's exception: the typed error a record carries (a ConfigError, a
    compile error, ...: errors.rebuilt), else PageError with the runtime's words."""
    return errors.rebuilt(message, f"{runtime}'s {entry!r}") or PageError(entry, message, stack)


class PageCrashWarning(UserWarning):
    """A page crashed in a call that runs no kernel, and the call was made again."""


class Console:
    """What a runtime printed (a page's console and its uncaught errors, a worker's
    stderr), numbered, the last LINES kept: a failing case's artifacts take the lines
    printed since the case began (mark, since). Pumps on other threads may append."""

    LINES = 2000

    def __init__(self) -> None:
        self._lines: collections.deque[tuple[int, str]] = collections.deque(maxlen=self.LINES)
        self._numbers = itertools.count(1)
        self._last = 0

    def append(self, line: str) -> None:
        self._last = next(self._numbers)
        self._lines.append((self._last, line))

    def mark(self) -> int:
        return self._last

    def since(self, mark: int) -> list[str]:
        return [line for n, line in list(self._lines) if n > mark]


class Session(Protocol):
    runtime: str
    takes_blobs: bool  # whether it also has call_blobs (wire.Caller)

    def call(self, entry: str, request: dict[str, Any]) -> dict[str, Any]: ...

    def adapter(self) -> dict[str, Any]: ...

    def adapter_name(self) -> str: ...


class _AdapterName:
    takes_blobs = False  # whether it has call_blobs (wire.Caller)
    # What the runtime printed; a runtime that captures nothing keeps an empty one.
    console: Console
    _adapter: dict[str, Any] | None = None
    _adapter_name: str | None = None

    def adapter(self) -> dict[str, Any]:
        """The service's `adapter` reply (info, limits, features), asked for once."""
        if self._adapter is None:
            self._adapter = self.call("adapter", {})
        return self._adapter

    def adapter_name(self) -> str:
        """'vendor architecture device description' of the adapter."""
        if self._adapter_name is None:
            info = self.adapter()["info"]
            keys = ("vendor", "architecture", "device", "description")
            self._adapter_name = " ".join(str(info.get(k, "")) for k in keys if info.get(k))
        return self._adapter_name


def native_service(implementation: str) -> HarnessService:
    """The harness service on a native backend ("wgpu" or "dawn", host/gpu/native.py), with
    WGSL read from shaders/ where a request brings none."""
    from ...service import HarnessService
    from ..gpu import native

    async def load_source(name: str) -> str:
        return (paths.SHADER_DIR / name).read_text()

    async def request_device() -> native.NativeDevice:
        return await native.request_device(implementation=implementation)

    return HarnessService(request_device, load_source)


@contextlib.contextmanager
def staged_request(base_url: str, request_json: str) -> Iterator[tuple[str | None, str | None]]:
    """(request JSON, None) to pass inline, or (None, URL) the page fetches it from (once);
    a body the page never fetched is dropped on exit."""
    box = exchange.for_url(base_url) if len(request_json) > INLINE_REQUEST_MAX else None
    if box is None:
        yield request_json, None
        return
    path = box.put(request_json.encode())
    try:
        yield None, base_url + path
    finally:
        box.take(path)


@dataclass
class StagedBlobs:
    """One call's request frame waiting at request_url and its reply slot at reply_url."""

    request_url: str
    reply_url: str
    _box: exchange.Exchange
    _reply_path: str

    def reply(self, entry: str) -> tuple[dict[str, Any], list[memoryview]]:
        """The reply the page POSTed: (its JSON, its blobs)."""
        body = self._box.collect(self._reply_path)
        if body is None:
            raise PageError(entry, "the page answered but posted no reply", None)
        try:
            text, blobs = exchange.unpack(body)
        except ValueError as exc:
            raise PageError(entry, f"the page's reply is no frame: {exc}", None) from None
        return json.loads(text), blobs


@contextlib.contextmanager
def staged_blobs(
    base_url: str, request: dict[str, Any], blobs: Sequence[Bytes]
) -> Iterator[StagedBlobs]:
    """The request and its tensors as one frame for the page to fetch (once), and a slot
    for its reply frame (one POST, of at most twice the request's size and REPLY_TEXT_MAX);
    both dropped on exit. For a page that this process's server serves."""
    box = exchange.for_url(base_url)
    if box is None:
        raise ValueError(f"{base_url} is not served by this process: its pages take no blobs")
    body = exchange.pack(json.dumps(request), blobs)
    request_path = box.put(body, "application/octet-stream")
    reply_path = box.expect(2 * len(body) + REPLY_TEXT_MAX)
    try:
        yield StagedBlobs(base_url + request_path, base_url + reply_path, box, reply_path)
    finally:
        box.take(request_path)
        box.collect(reply_path)


class PageSession(_AdapterName):
    """What the browsers' sessions share: a call runs window[function](entry, ...args) in
    the page (web/harness/harness.js), which answers [status, value, stack]; `_run`, each
    browser's own, gets it there. Where this process's server serves the page, a large
    request goes by fetch (staged_request) and a case's tensors as bytes both ways
    (call_blobs: the page fetches them and POSTs its outputs back)."""

    _base_url: str

    def _serves_blobs(self) -> bool:
        return exchange.for_url(self._base_url) is not None

    def _run(self, entry: str, function: str, *args: str | None) -> str:
        """window[function](entry, *args)'s value; an error there raises PageError."""
        raise NotImplementedError

    def call(self, entry: str, request: dict[str, Any]) -> dict[str, Any]:
        with staged_request(self._base_url, json.dumps(request)) as (inline, url):
            if url is None:
                return json.loads(self._run(entry, "runHarness", inline))
            return json.loads(self._run(entry, "runHarnessFrom", url))

    def call_blobs(
        self, entry: str, request: dict[str, Any], blobs: Sequence[Bytes]
    ) -> tuple[dict[str, Any], list[memoryview]]:
        """The entry with the tensors as bytes beside the JSON (wire.Caller)."""
        with staged_blobs(self._base_url, request, blobs) as staged:
            self._run(entry, "runHarnessExchange", staged.request_url, staged.reply_url)
            return staged.reply(entry)


class BrowserSession(PageSession):
    """A harness page in a Playwright browser.

    A page that crashes, or hangs past the per-call timeout, fails that call alone: it is
    closed, and the next call opens and loads a fresh page.
    """

    def __init__(
        self,
        new_page: Callable[[], Any],
        base_url: str,
        runtime: str = "chromium",
        timeout_s: float = 300.0,
        tracing: bool = False,
    ) -> None:
        self.runtime = runtime
        self.tracing = tracing  # a Playwright trace per page, taken in chunks (trace_start)
        self.timeout_s = timeout_s
        self.pages_opened = 0
        self.console = Console()
        self.browser_version = ""  # the browser's name and version, where its launcher knows
        self._new_page = new_page
        self._base_url = base_url
        self.takes_blobs = self._serves_blobs()
        self._calls = itertools.count()
        self.page: Any = None
        self._open()

    def _open(self) -> None:
        page = self._new_page()
        self.page, self._crashed = page, False
        self.pages_opened += 1
        page.on("crash", lambda _page: setattr(self, "_crashed", True))
        page.on("console", lambda msg: self.console.append(f"{msg.type}: {msg.text}"))
        page.on("pageerror", lambda err: self.console.append(f"uncaught: {err}"))
        if self.tracing:  # actions, console and network; DOM snapshots show nothing here
            page.context.tracing.start(snapshots=False, screenshots=False)
        try:
            page.goto(self._base_url + HARNESS_PAGE)
            status, value, stack = page.evaluate(
                "() => window.harnessReady.then(() => ['ok', '', null],"
                " (e) => ['error', String(e && e.message || e), e && e.stack || null])"
            )
        except Exception:
            self.close()
            raise
        if status != "ok":
            self.close()
            raise page_error("load", value, stack, self.runtime)
        self.load_timings = page.evaluate("() => window.harnessTimings || {}")

    def close(self) -> None:
        if self.page is not None:
            with contextlib.suppress(Exception):  # a crashed page may not answer
                self.page.close()
            self.page = None

    def trace_start(self) -> bool:
        """Begin a trace chunk (a case's calls), where tracing is on; whether it began."""
        if not self.tracing or self.page is None:
            return False
        try:
            self.page.context.tracing.start_chunk()
        except Exception:  # a crashed page's context: no trace for this case
            return False
        return True

    def trace_stop(self, path: Path | None) -> bool:
        """End the chunk trace_start began: saved to path (a Playwright trace.zip, for
        `playwright show-trace`), or dropped; whether it was saved."""
        try:
            self.page.context.tracing.stop_chunk(**({"path": str(path)} if path else {}))
        except Exception:  # the page was replaced since (a crash): its trace went with it
            return False
        return path is not None

    def _run(self, entry: str, function: str, *args: str | None) -> str:
        try:
            return self._run_once(entry, function, *args)
        except PageError as exc:
            if not (self._crashed and entry in RETRIED_AFTER_CRASH):
                raise
            warnings.warn(
                PageCrashWarning(
                    f"{self.runtime}'s page crashed in {entry!r}, which runs no kernel; made "
                    f"the call again on a fresh page. {exc.page_message}"
                ),
                stacklevel=2,
            )
        return self._run_once(entry, function, *args)

    def _run_once(self, entry: str, function: str, *args: str | None) -> str:
        from playwright.sync_api import Error as PlaywrightError

        if self.page is None or self._crashed:
            self.close()
            self._open()
        call_id = next(self._calls)
        try:
            # One wait_for_function both starts the call (on its first poll) and waits for
            # the result: Playwright enforces its timeout from outside the page, so a page
            # stuck in a loop cannot hang the host (a plain evaluate would wait forever).
            handle = self.page.wait_for_function(
                """([id, fn, args]) => {
                    const calls = (window.__calls ||= {});
                    if (!(id in calls)) {
                        calls[id] = null;
                        window[fn](...args).then((r) => { calls[id] = r; });
                    }
                    return calls[id];
                }""",
                arg=[call_id, function, [entry, *args]],
                timeout=self.timeout_s * 1e3,
                polling=20,
            )
            status, value, stack = handle.json_value()
            self.page.evaluate("(id) => { delete window.__calls[id]; }", call_id)
        except PlaywrightError as exc:
            what = "crashed" if self._crashed else "did not answer"
            if "Timeout" in type(exc).__name__:
                what = f"did not answer within {self.timeout_s:g} s"
            self.close()  # the next call gets a fresh page
            raise PageError(entry, f"the page {what}: {exc}", None) from None
        if status != "ok":
            raise page_error(entry, value, stack, self.runtime)
        return value


class NativeSession(_AdapterName):
    """wgpu-py in this process (lavapipe / SwiftShader here, any Vulkan GPU elsewhere)."""

    runtime = "wgpu"
    takes_blobs = True  # run_on sends tensors as bytes (call_blobs): not even a copy here

    def __init__(self) -> None:
        # The service's coroutines run on a loop of their own in a worker thread: the
        # caller's thread may already run one (Playwright's sync API does).
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.service = native_service("wgpu")
        self.console = Console()  # wgpu-native prints nowhere we read

    def call(self, entry: str, request: dict[str, Any]) -> dict[str, Any]:
        method = getattr(self.service, entry)
        future = asyncio.run_coroutine_threadsafe(method(json.dumps(request)), self._loop)
        return json.loads(future.result())

    def call_blobs(
        self, entry: str, request: dict[str, Any], blobs: list[Bytes]
    ) -> tuple[dict[str, Any], list[Bytes]]:
        """An entry with the tensors as bytes (HarnessService.call_blobs; wire.Caller)."""
        coro = self.service.call_blobs(entry, json.dumps(request), blobs)
        reply, out = asyncio.run_coroutine_threadsafe(coro, self._loop).result()
        return json.loads(reply), out

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
