"""GPU-side errors reach the host as exceptions with the driver's words and a location."""

from __future__ import annotations

import pytest

from py_harness.gpu.device import GPUError, ShaderCompileError
from py_harness.host.judge.cases import CONTROL
from py_harness.host.judge.inputs import make_inputs
from py_harness.host.paths import shader_sources
from py_harness.host.runtimes.sessions import Session
from py_harness.host.wire import run_on
from py_harness.shaders import BACKWARD_FILE, COMMON_FILE, FORWARD_FILE

pytestmark = pytest.mark.browser


def broken(file: str, line_no: int) -> tuple[dict[str, str], int]:
    """The shader sources with a syntax error planted on 1-based line `line_no` of `file`."""
    sources = shader_sources()
    lines = sources[file].split("\n")
    lines[line_no - 1] = "let broken = ;" + lines[line_no - 1]
    return {**sources, file: "\n".join(lines)}, line_no


@pytest.mark.parametrize(
    ("file", "line_no"), [(COMMON_FILE, 60), (FORWARD_FILE, 120), (BACKWARD_FILE, 200)]
)
def test_compile_error_names_file_line_and_column(
    harness: Session, file: str, line_no: int
) -> None:
    sources, line = broken(file, line_no)
    # raised in a page, in Node or in a worker, it comes back as the same class
    with pytest.raises(ShaderCompileError) as err:
        run_on(harness, CONTROL.config(), make_inputs(CONTROL), sources=sources)
    # The module is forward + backward; the location must be mapped back to the file.
    assert f"{file}:{line}:" in err.value.driver_message, err.value


def test_harness_keeps_working_after_an_error(harness: Session) -> None:
    sources, _ = broken(FORWARD_FILE, 120)
    with pytest.raises(ShaderCompileError):
        run_on(harness, CONTROL.config(), make_inputs(CONTROL), sources=sources)
    reply = run_on(harness, CONTROL.config(), make_inputs(CONTROL))
    assert set(reply["arrays"]) == {"o", "lse", "dq", "dk", "dv"}


def test_pipeline_validation_error_carries_the_drivers_words(harness: Session) -> None:
    # Valid WGSL that disagrees with the declared layout (q declared read_write where
    # kernels.py binds it read-only): pipeline creation fails validation, inside an error
    # scope in the browser, as an exception on wgpu-py.
    sources = shader_sources()
    sources[FORWARD_FILE] = sources[FORWARD_FILE].replace(
        "var<storage, read> fa2_q", "var<storage, read_write> fa2_q", 1
    )
    with pytest.raises(GPUError) as err:
        run_on(harness, CONTROL.config(), make_inputs(CONTROL), sources=sources)
    assert not isinstance(err.value, ShaderCompileError), err.value
    assert err.value.kind == "validation", err.value
    assert "flash_fwd" in str(err.value), err.value  # where: the pipeline it was creating
    reply = run_on(harness, CONTROL.config(), make_inputs(CONTROL))  # the next case runs
    assert set(reply["arrays"]) == {"o", "lse", "dq", "dk", "dv"}
