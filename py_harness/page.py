"""Entry points that the page glue (web/harness/harness.js) calls inside Pyodide.

`runHarness(entry, json)` in the page calls one of these module-level functions and
wraps the result as [status, value, stack]; `runHarnessExchange` calls call_blobs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from . import errors
from .gpu import browser
from .service import ENTRIES, HarnessService

_service = HarnessService(browser.request_device, lambda f: browser.fetch_text(f"../shaders/{f}"))


def _typed(entry: Callable[[str], Awaitable[str]]) -> Callable[[str], Awaitable[str]]:
    """The entry, answering a typed error with its record (errors.record), which
    harness-core.mjs throws as the call's error: the host rebuilds the same exception."""

    async def call(request_json: str) -> str:
        try:
            return await entry(request_json)
        except errors.TYPED as exc:
            return errors.record(exc) or ""

    return call


# Module-level names, for runHarness to look up: one per service entry.
globals().update({name: _typed(getattr(_service, name)) for name in ENTRIES})


async def call_blobs(entry: str, request_json: str, blobs: Any) -> Any:
    """An entry with its tensors as JS Uint8Arrays beside the JSON (HarnessService.call_blobs:
    run_case, time_case); returns the JS array [reply JSON, [Uint8Array, ...]], or a typed
    error's record (a string, which harness-core.mjs throws)."""
    try:
        reply, out = await _service.call_blobs(entry, request_json, browser.bytes_from_js(blobs))
    except errors.TYPED as exc:
        return errors.record(exc)
    return browser.reply_to_js(reply, out)
