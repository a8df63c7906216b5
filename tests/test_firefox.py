"""What only the firefox runtime has: the install hint, the adapter name taken from wgpu's
log (the page's adapter.info is empty there), and a hung tab replaced by a fresh one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from py_harness.host.runtimes import firefox
from py_harness.host.runtimes.firefox import FirefoxSession
from py_harness.host.runtimes.registry import Launched, runtime
from py_harness.host.runtimes.sessions import PageError


def test_missing_firefox_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(firefox, "FIREFOX_PATH", "/nonexistent/firefox-esr")
    reason = runtime("firefox").missing()
    assert reason and "apt-get install firefox-esr" in reason, reason


@pytest.fixture(scope="module")
def ff(request: pytest.FixtureRequest, launched: dict[str, Launched]) -> Iterator[FirefoxSession]:
    if "firefox" not in request.config.harness_runtimes:
        pytest.skip("firefox not selected by --runtime")
    reason = runtime("firefox").missing()
    if reason:
        pytest.skip(f"firefox not available: {reason}")
    handle = launched["firefox"]
    session = handle.new_session(request.getfixturevalue("harness_server"))
    assert isinstance(session, FirefoxSession)
    yield session
    handle.close_session(session)


@pytest.mark.browser
def test_adapter_is_named_from_wgpus_log(ff: FirefoxSession) -> None:
    name = ff.adapter_name()
    # e.g. 'firefox/wgpu llvmpipe (LLVM 15.0.6, 256 bits) Mesa 22.3.6 (LLVM 15.0.6) Vulkan'
    assert name.startswith("firefox/wgpu ") and "not logged" not in name, name


@pytest.mark.browser
def test_hung_tab_fails_that_call_and_the_next_gets_a_fresh_tab(ff: FirefoxSession) -> None:
    tabs = ff.pages_opened
    ff.timeout_s, saved = 3.0, ff.timeout_s
    try:
        ff._eval("() => { setTimeout(() => { for (;;) {} }, 0); }")
        with pytest.raises(PageError, match="did not answer within 3 s"):
            ff.call("ping", {})
    finally:
        ff.timeout_s = saved
    assert "pong" in ff.call("ping", {})
    assert ff.pages_opened == tabs + 1
