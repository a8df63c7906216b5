"""A page that crashes while bringing up WebGPU (the `adapter` entry, which runs no kernel)
is given one more try on a fresh page, with a warning that names the crash; a crash in any
other entry, or a second one, fails the call. Pages here are stand-ins for Playwright's, so
the crash comes exactly where each test puts it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Error as PlaywrightError

from py_harness.host.runtimes.sessions import BrowserSession, PageCrashWarning, PageError

ADAPTER = {"backend": "stand-in", "info": {}, "limits": {}, "features": [], "variants": {}}


class _Reply:
    def __init__(self, value: list[Any]) -> None:
        self._value = value

    def json_value(self) -> list[Any]:
        return self._value


class StandInPage:
    """Loads like the harness page; its calls crash the renderer (as Chromium reports it:
    the "crash" event, then the waiting call's error) while `crashes` says so."""

    def __init__(self, crashes: Callable[[str], bool]) -> None:
        self._crashes = crashes
        self._on_crash: list[Callable[[Any], None]] = []

    def on(self, event: str, handler: Callable[[Any], None]) -> None:
        assert event in ("crash", "console", "pageerror"), event
        if event == "crash":
            self._on_crash.append(handler)

    def goto(self, url: str) -> None:
        pass

    def evaluate(self, script: str, *args: Any) -> Any:
        return ["ok", "", None] if "harnessReady" in script else {}

    def wait_for_function(self, script: str, arg: list[Any], **_: Any) -> _Reply:
        _call_id, _function, (entry, *_rest) = arg
        if self._crashes(entry):
            for handler in self._on_crash:
                handler(self)
            raise PlaywrightError("Page.wait_for_function: Target crashed")
        value = ADAPTER if entry == "adapter" else {"entry": entry}
        return _Reply(["ok", json.dumps(value), None])

    def close(self) -> None:
        pass


def session_with_crashes(plan: list[str]) -> BrowserSession:
    """A session whose n-th call crashes its page where plan[n] is "crash"."""
    calls = iter(plan)
    return BrowserSession(
        lambda: StandInPage(lambda _entry: next(calls, "ok") == "crash"), base_url=""
    )


def test_a_crash_bringing_up_webgpu_is_retried_once_and_named() -> None:
    session = session_with_crashes(["crash"])
    with pytest.warns(PageCrashWarning, match=r"crashed in 'adapter'.*Target crashed"):
        assert session.adapter()["backend"] == "stand-in"
    assert session.pages_opened == 2


def test_a_second_crash_bringing_up_webgpu_fails_the_call() -> None:
    session = session_with_crashes(["crash", "crash"])
    with pytest.warns(PageCrashWarning), pytest.raises(PageError, match="the page crashed"):
        session.adapter()
    assert session.pages_opened == 2


def test_a_crash_in_a_call_that_may_run_a_kernel_is_not_retried() -> None:
    session = session_with_crashes(["ok", "crash"])
    session.adapter()
    with pytest.raises(PageError, match=r"run_case failed(.|\n)*the page crashed"):
        session.call("run_case", {})
    assert session.pages_opened == 1  # the next call opens a fresh page
    assert session.call("ping", {}) == {"entry": "ping"}
    assert session.pages_opened == 2
