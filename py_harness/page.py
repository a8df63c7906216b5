"""Entry points that the page glue (web/harness.js) calls inside Pyodide.

`runHarness(entry, json)` in the page calls one of these module-level functions and
wraps the result as [status, value, stack].
"""

from __future__ import annotations

from .gpu import browser
from .service import ENTRIES, HarnessService

_service = HarnessService(browser.request_device, lambda f: browser.fetch_text(f"../shaders/{f}"))

# Module-level names, for runHarness to look up: one per service entry.
globals().update({name: getattr(_service, name) for name in ENTRIES})
