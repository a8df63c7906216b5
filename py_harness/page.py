"""Entry points that the page glue (web/harness.js) calls inside Pyodide.

`runHarness(entry, json)` in the page calls one of these module-level functions and
wraps the result as [status, value, stack]; `runHarnessExchange` calls call_blobs.
"""

from __future__ import annotations

from typing import Any

from .gpu import browser
from .service import ENTRIES, HarnessService

_service = HarnessService(browser.request_device, lambda f: browser.fetch_text(f"../shaders/{f}"))

# Module-level names, for runHarness to look up: one per service entry.
globals().update({name: getattr(_service, name) for name in ENTRIES})


async def call_blobs(entry: str, request_json: str, blobs: Any) -> Any:
    """An entry with its tensors as JS Uint8Arrays beside the JSON (HarnessService.call_blobs:
    run_case, time_case); returns the JS array [reply JSON, [Uint8Array, ...]]."""
    reply, out = await _service.call_blobs(entry, request_json, browser.bytes_from_js(blobs))
    return browser.reply_to_js(reply, out)
