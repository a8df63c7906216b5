"""Entry points that the page glue (web/harness.js) calls inside Pyodide.

`runHarness(entry, json)` in the page calls one of these module-level functions and
wraps the result as [status, value, stack].
"""

from __future__ import annotations

from .gpu import browser
from .service import HarnessService

_service = HarnessService(browser.request_device, lambda f: browser.fetch_text(f"../shaders/{f}"))

ping = _service.ping
adapter = _service.adapter
compile_kernels = _service.compile_kernels
validate_config = _service.validate_config
run_case = _service.run_case
probe_loops = _service.probe_loops
destroy_device = _service.destroy_device
