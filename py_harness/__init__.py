"""py_harness: drives WGSL FlashAttention-2 kernels through WebGPU.

The package itself is pure Python and runs inside Pyodide (no NumPy there); the host
side (references, judging, browsers, CLI) lives in py_harness.host and stays out of the
wheel.
"""

__version__ = "0.1.0"
