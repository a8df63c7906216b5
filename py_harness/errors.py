"""Errors that keep their type across every boundary (wgpu-py's typed errors): a
ConfigError, a WGSL compile error with file:line:column, a validation or out-of-memory
error, a lost device or a missing adapter raised in a page, in Node or in a worker process
reaches the host as the same class with the same fields, not as a traceback to search.

A boundary that cannot pass Python objects (the page's JavaScript, a child's pipe) sends
`record(exc)`, a JSON text; the host rebuilds the exception with `rebuilt(text)`. Other
exceptions (a harness bug) still cross as their traceback, in the runtime's own error.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable

from .config import ConfigError
from .gpu.device import DeviceLostError, GPUError, NoAdapterError, ShaderCompileError

# The key that tells a record from any other text: a traceback never starts with it.
KEY = "harness_error"
# Each typed error, subclasses first: its fields, and how to build it from them.
_FIELDS: dict[type[Exception], tuple[Callable[[Exception], list], Callable[..., Exception]]] = {
    ConfigError: (lambda e: [e.argument, e.detail], ConfigError),
    ShaderCompileError: (lambda e: [e.driver_message], ShaderCompileError),
    DeviceLostError: (lambda e: [e.reason, e.lost_message], DeviceLostError),
    GPUError: (lambda e: [e.kind, e.driver_message, e.where], GPUError),
    NoAdapterError: (lambda e: [e.detail], NoAdapterError),
}
TYPED = tuple(_FIELDS)
_BY_NAME = {cls.__name__: cls for cls in _FIELDS}


def record(exc: BaseException) -> str | None:
    """The JSON text that carries a typed error across a boundary (its class, its fields
    and where it was raised); None for any other exception."""
    cls = next((c for c in type(exc).__mro__ if c in _FIELDS), None)
    if cls is None:
        return None
    fields, _ = _FIELDS[cls]
    raised = "".join(traceback.format_exception(exc)).rstrip()
    return json.dumps({KEY: cls.__name__, "fields": fields(exc), "traceback": raised})


def rebuilt(text: str, where: str) -> Exception | None:
    """The exception a record describes (a note says where it was raised, with its
    traceback there), or None where text is no record."""
    if not text.startswith("{" + json.dumps(KEY)):
        return None
    try:
        doc = json.loads(text)
        cls = _BY_NAME[doc[KEY]]
        exc = _FIELDS[cls][1](*doc["fields"])
    except (ValueError, KeyError, TypeError):
        return None
    exc.add_note(f"raised in {where}:\n{doc.get('traceback', '')}")
    return exc
