"""A small async WebGPU layer with spec names.

`Device` is the interface; `browser` (navigator.gpu through Pyodide's JS bridge) and
host/gpu/native.py (wgpu-py, host-only) implement it. Kernels and runners use only this interface.
"""

from .device import (
    REQUIRED_LIMITS,
    Buffer,
    Device,
    DeviceLostError,
    GPUError,
    NoAdapterError,
    ShaderCompileError,
)

__all__ = [
    "REQUIRED_LIMITS",
    "Buffer",
    "Device",
    "DeviceLostError",
    "GPUError",
    "NoAdapterError",
    "ShaderCompileError",
]
