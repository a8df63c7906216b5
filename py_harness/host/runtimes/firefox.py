"""Firefox (wgpu / Naga) driven over WebDriver BiDi: launch, one tab per harness session.

Why BiDi straight to Firefox rather than Playwright or Selenium: docs/runtimes.md,
"Firefox: why WebDriver BiDi". The page and the Pyodide code are the ones Chromium runs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .bidi import BidiConnection, BidiError
from .sessions import HARNESS_PAGE, Console, PageError, PageSession, page_error

FIREFOX_PATH = os.environ.get("HARNESS_FIREFOX", "/usr/bin/firefox-esr")
INSTALL_HINT = (
    "apt-get install firefox-esr (or set HARNESS_FIREFOX) and pip install websockets "
    "(pinned in pyproject's dev extra)"
)
LAUNCH_TIMEOUT_S = 60.0
# One case on lavapipe takes seconds; a hung GPU or page must still end the call.
CALL_TIMEOUT_S = 300.0  # as BrowserSession's

# WebGPU is off by default in ESR and its blocklist rejects CPU adapters (docs/runtimes.md).
# The Remote Agent already applies its "recommended" test prefs; the rest keep Firefox off
# the network (none here: failed lookups slow start-up) and keep our tab's timers (Pyodide's
# event loop) unthrottled.
PREFS: dict[str, bool | int | str] = {
    "dom.webgpu.enabled": True,
    "gfx.webgpu.ignore-blocklist": True,
    "app.normandy.api_url": "",
    "app.update.disabledForTesting": True,
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.downloads.enabled": False,
    "browser.search.update": False,
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.page": 0,
    "datareporting.policy.dataSubmissionEnabled": False,
    "datareporting.healthreport.uploadEnabled": False,
    "extensions.update.enabled": False,
    "messaging-system.rsexperimentloader.enabled": False,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "dom.min_background_timeout_value": 0,
    "dom.timeout.enable_budget_timer_throttling": False,
    "dom.max_script_run_time": 0,
}
# wgpu_core logs the adapter it picked at info level; the page's adapter.info is empty in
# Firefox, so this log line is where the adapter's name comes from.
ENV = {"MOZ_LOG": "wgpu_core::instance:3", "MOZ_CRASHREPORTER_DISABLE": "1"}
_ADAPTER_LOG = re.compile(
    r'Request adapter result AdapterInfo \{ name: "([^"]*)".*?driver_info: "([^"]*)", '
    r"backend: (\w+)"
)


def firefox_missing() -> str | None:
    """Why Firefox cannot run here, with how to install it; None when it can."""
    if not (os.path.exists(FIREFOX_PATH) or shutil.which(FIREFOX_PATH)):
        return f"Firefox not found at {FIREFOX_PATH}; {INSTALL_HINT}"
    if importlib.util.find_spec("websockets") is None:
        return f"the websockets package is missing; {INSTALL_HINT}"
    return None


class FirefoxBrowser:
    """A running Firefox with one BiDi session; opens a tab per harness session."""

    def __init__(self, process: subprocess.Popen[bytes], profile: Path) -> None:
        self.process = process
        self.log_path = profile / "firefox.log"
        self.bidi: BidiConnection | None = None
        self.launch_s = 0.0
        self.closed_cleanly = False
        self.version = ""  # "firefox 153.8.0esr", from the BiDi session's capabilities

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        tail = "\n".join(text.splitlines()[-lines:])
        return f"\nfirefox exit code {self.process.poll()}; log tail:\n{tail}"

    def logged_adapter(self) -> str:
        """'llvmpipe (LLVM 15.0.6, 256 bits) Mesa 22.3.6 (LLVM 15.0.6) Vulkan', from the
        log line wgpu_core writes on requestAdapter(); '' when there is none yet."""
        with contextlib.suppress(OSError):
            found = _ADAPTER_LOG.findall(self.log_path.read_text(errors="replace"))
            if found:
                return " ".join(part for part in found[-1] if part)
        return ""

    def new_session(self, base_url: str) -> FirefoxSession:
        session = FirefoxSession(self, base_url)
        session.browser_version = self.version.strip()
        return session

    def close_session(self, session: Any) -> None:
        session.close()


class FirefoxSession(PageSession):
    """A harness page in a Firefox tab; the same call() contract as BrowserSession.

    As there, a call that hangs past the timeout, or whose tab dies, fails alone: the tab
    is closed and the next call opens and loads a fresh one.
    """

    runtime = "firefox"

    def __init__(
        self, browser: FirefoxBrowser, base_url: str, timeout_s: float = CALL_TIMEOUT_S
    ) -> None:
        assert browser.bidi is not None
        self.browser = browser
        self.bidi = browser.bidi
        self.timeout_s = timeout_s
        self.pages_opened = 0
        self.console = Console()  # BiDi's log events are not subscribed to
        self._base_url = base_url
        self.takes_blobs = self._serves_blobs()
        self.context: str | None = None
        self._open()

    def _open(self) -> None:
        t0 = time.perf_counter()
        self.context = self.bidi.command("browsingContext.create", {"type": "tab"})["context"]
        self.pages_opened += 1
        try:
            self.bidi.command(
                "browsingContext.navigate",
                {"context": self.context, "url": self._base_url + HARNESS_PAGE, "wait": "complete"},
            )
            status, value, stack = self._eval(
                "() => window.harnessReady.then(() => ['ok', '', null],"
                " (e) => ['error', String(e && e.message || e), e && e.stack || null])"
            )
            if status != "ok":
                raise page_error("load", value, stack, self.runtime)
            self.load_timings = self._eval("() => window.harnessTimings || {}")
        except BaseException:
            self.close()
            raise
        self.ready_s = time.perf_counter() - t0

    def close(self) -> None:
        if self.context is not None:
            with contextlib.suppress(Exception):  # a dead tab or browser may not answer
                self.bidi.command("browsingContext.close", {"context": self.context}, 10)
            self.context = None

    def _eval(self, declaration: str, *args: str) -> Any:
        assert self.context is not None
        # BiDi hands back objects as typed trees; one JSON string is simpler and exact.
        wrapped = f"(...a) => Promise.resolve(({declaration})(...a)).then(JSON.stringify)"
        text = self.bidi.call_function(self.context, wrapped, *args, timeout_s=self.timeout_s)
        return None if text is None else json.loads(text)  # JSON.stringify(undefined)

    def _run(self, entry: str, function: str, *args: str | None) -> str:
        if self.context is None:
            self._open()
        try:
            status, value, stack = self._eval(
                "(fn, ...args) => window[fn](...args)", function, entry, *args
            )
        except (TimeoutError, BidiError, ConnectionError) as exc:
            what = (
                f"did not answer within {self.timeout_s:g} s"
                if isinstance(exc, TimeoutError)
                else "failed"
            )
            self.close()  # the next call gets a fresh tab
            raise PageError(entry, f"the page {what}: {exc}", None) from None
        if status != "ok":
            raise page_error(entry, value, stack, self.runtime)
        return value

    def adapter_name(self) -> str:
        """adapter.info is empty in Firefox: 'firefox/wgpu' plus the adapter wgpu logged."""
        if not super().adapter_name():  # asks the page, which requests the adapter
            logged = self.browser.logged_adapter() or "(adapter not logged)"
            self._adapter_name = f"firefox/wgpu {logged}"
        return self._adapter_name or ""


def _wait_for_port(browser: FirefoxBrowser, profile: Path) -> int:
    """The Remote Agent writes its port here once it listens (--remote-debugging-port=0)."""
    marker = profile / "WebDriverBiDiServer.json"
    deadline = time.monotonic() + LAUNCH_TIMEOUT_S
    while time.monotonic() < deadline:
        if browser.process.poll() is not None:
            raise RuntimeError(f"Firefox exited during start-up{browser.log_tail()}")
        with contextlib.suppress(OSError, ValueError, KeyError):  # absent or half-written
            return int(json.loads(marker.read_text())["ws_port"])
        time.sleep(0.05)
    raise TimeoutError(
        f"Firefox's BiDi server not up after {LAUNCH_TIMEOUT_S:.0f} s{browser.log_tail()}"
    )


@contextlib.contextmanager
def launch_firefox(headless: bool = True) -> Iterator[FirefoxBrowser]:
    """Firefox with a throw-away profile and the WebGPU prefs, a BiDi session open."""
    from websockets.sync.client import connect

    t0 = time.perf_counter()
    profile = Path(tempfile.mkdtemp(prefix="harness-firefox-"))
    prefs = "".join(f"user_pref({json.dumps(k)}, {json.dumps(v)});\n" for k, v in PREFS.items())
    (profile / "user.js").write_text(prefs)
    args = [FIREFOX_PATH, "--no-remote", "--profile", str(profile), "--remote-debugging-port=0"]
    if headless:
        args.append("--headless")
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, profile, ignore_errors=True)
        log = stack.enter_context((profile / "firefox.log").open("wb"))
        # A file, not a pipe: nobody has to drain it, and it keeps the adapter log line.
        process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, **ENV},
        )  # fmt: skip
        browser = FirefoxBrowser(process, profile)
        stack.callback(_stop, browser)
        port = _wait_for_port(browser, profile)
        # No keepalive pings (ping_interval=None): the socket goes to our own child process,
        # whose end closes it, and every BiDi call has its own timeout. The pings would
        # also come from a thread of websockets' drawing on the process-wide `random` every
        # 20 s: Hypothesis blames the strategy it is drawing from when the state moves
        # under it, which one CI run reported in tests/test_fuzz.py (the likely cause; 45 s
        # of that test beside an open session did not show it again).
        url = f"ws://127.0.0.1:{port}/session"
        ws = stack.enter_context(
            connect(url, max_size=None, open_timeout=LAUNCH_TIMEOUT_S, ping_interval=None)
        )
        browser.bidi = BidiConnection(ws, CALL_TIMEOUT_S, browser.log_tail)
        made = browser.bidi.command("session.new", {"capabilities": {}}, LAUNCH_TIMEOUT_S)
        caps = made.get("capabilities", {}) if isinstance(made, dict) else {}
        browser.version = f"{caps.get('browserName', 'firefox')} {caps.get('browserVersion', '')}"
        # Asks Firefox to quit before the socket closes (ExitStack runs this first).
        stack.callback(_close_browser, browser)
        browser.launch_s = time.perf_counter() - t0
        yield browser


def _close_browser(browser: FirefoxBrowser) -> None:
    assert browser.bidi is not None
    with contextlib.suppress(Exception):  # already gone: _stop still reaps the process
        browser.bidi.command("browser.close", {}, 10)
        browser.closed_cleanly = True


def _stop(browser: FirefoxBrowser) -> None:
    process = browser.process
    try:
        # After browser.close Firefox quits by itself; otherwise (start-up failed) don't wait.
        process.wait(timeout=15 if browser.closed_cleanly else 0)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
