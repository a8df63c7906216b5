"""Typed errors cross every boundary as themselves (py_harness/errors.py): each class's
record rebuilds the same class with the same fields, and anything else stays a traceback."""

from __future__ import annotations

import pytest

from py_harness import errors
from py_harness.config import ConfigError
from py_harness.gpu.device import DeviceLostError, GPUError, NoAdapterError, ShaderCompileError

RAISED = [
    ConfigError("q", "holds nan at flat index 5"),
    ShaderCompileError("f.wgsl:3:7: error: expected ';'\n    let x = ;"),
    DeviceLostError("destroyed", "Device was destroyed."),
    GPUError("validation", "binding 0 is read-only", "flash_fwd"),
    NoAdapterError("navigator.gpu is undefined in this page"),
]


@pytest.mark.parametrize("exc", RAISED, ids=lambda e: type(e).__name__)
def test_a_typed_error_is_rebuilt_as_its_class_with_its_fields(exc: Exception) -> None:
    try:
        raise exc
    except Exception as raised:
        text = errors.record(raised)
    assert text is not None
    back = errors.rebuilt(text, "chromium's 'run_case'")
    assert type(back) is type(exc)
    assert str(back) == str(exc)
    assert vars(back) == vars(exc) | {"__notes__": back.__notes__}
    # where it was raised, with its traceback there, for a reader of the failure
    assert "raised in chromium's 'run_case'" in back.__notes__[0]
    assert "Traceback" in back.__notes__[0]


def test_other_exceptions_and_texts_are_no_records() -> None:
    assert errors.record(KeyError("x")) is None
    assert errors.rebuilt("Traceback (most recent call last):\n  ...", "node") is None
    assert errors.rebuilt('{"harness_error": "NoSuchError", "fields": []}', "node") is None
    assert errors.rebuilt('{"harness_error": "ConfigError", "fields": [1]}', "node") is None


def test_a_subclass_crosses_as_its_nearest_typed_base() -> None:
    class OwnCompileError(ShaderCompileError):
        pass

    text = errors.record(OwnCompileError("k.wgsl:1:1: error: x"))
    assert text is not None
    assert type(errors.rebuilt(text, "dawn")) is ShaderCompileError
