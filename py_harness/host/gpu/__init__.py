"""The native WebGPU backends, host-only: `native` (the gpu.Device interface on wgpu-py,
over wgpu-native or Dawn) and `host_memory` (its copies and scans of large tensors in
NumPy). They live under host/ because neither can run in Pyodide."""
