"""Native backends: the wgpu-py API in CPython, on either of two WebGPU implementations.

- "wgpu": wgpu-py itself, on wgpu-native (naga compiles WGSL; the engine inside Firefox);
- "dawn": wgpudawn, the same API on Dawn (Tint compiles WGSL; the engine inside Chromium).

The only module that imports either. Methods are async to match the browser backend;
underneath they use the sync calls, which is what CPython callers want.
"""

from __future__ import annotations

import contextlib
import importlib
import re
from types import ModuleType
from typing import Any

from ... import dtypes
from ...gpu.device import (
    OPTIONAL_FEATURES,
    REQUIRED_LIMITS,
    SWIFTSHADER_DAWN_DISABLED_TOGGLES,
    Buffer,
    Bytes,
    ComputePass,
    Constants,
    Device,
    GPUError,
    Layout,
    NoAdapterError,
    Pipeline,
    ShaderCompileError,
    Span,
    device_limits,
    is_swiftshader,
    layout_entries,
    staged_bytes,
    usage_flags,
)
from ...shaders import ShaderModuleSource, format_compile_messages
from . import host_memory

# f16 tensors cross in this process: NumPy's conversions (the same bits as struct's, which
# the page keeps) instead of a Python float per value.
dtypes.use_converters(host_memory.f16_from_f32, host_memory.f32_from_f16)

# Implementation name -> (Python module, what the adapter line calls it).
IMPLEMENTATIONS: dict[str, tuple[str, str]] = {
    "wgpu": ("wgpu", "wgpu-native"),
    "dawn": ("wgpudawn", "Dawn"),
}

_NAGA_LOCATION = re.compile(r"wgsl:(\d+):(\d+)")
# Tint: "Error while parsing WGSL: :2:11 error: missing initializer ..."
_TINT_LOCATION = re.compile(r":(\d+):(\d+) error: (.*)")
# WebGPU spec names -> wgpu-py's names ("maxBufferSize" -> "max-buffer-size").
_LIMIT_NAMES = {
    name: re.sub(r"([A-Z])", lambda m: "-" + m[1].lower(), name) for name in REQUIRED_LIMITS
}


def load(implementation: str) -> ModuleType:
    """The wgpu-py API module of an implementation ("wgpu" or "dawn")."""
    if implementation not in IMPLEMENTATIONS:
        known = ", ".join(IMPLEMENTATIONS)
        raise ValueError(f"implementation: unknown {implementation!r}; known: {known}")
    gpu = importlib.import_module(IMPLEMENTATIONS[implementation][0])
    if implementation == "dawn":
        _unquantized_timestamps(gpu)
    return gpu


def _unquantized_timestamps(gpu: ModuleType) -> None:
    """Dawn rounds timestamp queries down to 2^16 ns steps (its timestamp_quantization
    toggle, on by default against timing attacks on the web; measured on the H200), which
    makes short passes read 0 or 65.5 us. Chromium turns it off under
    --enable-webgpu-developer-features, as the chromium runtime runs; so do we, before
    the instance exists (it takes toggles only then)."""
    from wgpudawn.backends.dawn import extras  # type: ignore[import-not-found]

    with contextlib.suppress(RuntimeError):  # the instance exists: set before, by us
        extras.set_instance_extras(disable_toggles=["timestamp_quantization"])


class NativeDevice(Device):
    def __init__(self, gpu: ModuleType, implementation: str, adapter: Any, device: Any) -> None:
        info = _adapter_info(gpu, implementation, dict(adapter.info))
        limits = {spec: device.limits[name] for spec, name in _LIMIT_NAMES.items()}
        super().__init__(implementation, info, limits, frozenset(device.features))
        self._gpu = gpu
        self._device = device
        self._lost: str | None = None
        # Reading this tiny buffer waits for the queue: wgpu-py 0.32's
        # on_submitted_work_done_sync raises a cffi TypeError (docs/runtimes.md).
        self._fence = device.create_buffer(size=4, usage=gpu.BufferUsage.COPY_SRC)

    def create_buffer(self, size: int, usage: tuple[str, ...], label: str) -> Buffer:
        handle = self._guard(
            "createBuffer", lambda: self._device.create_buffer(size=size, usage=self._usage(usage))
        )
        return Buffer(handle, size, label, usage)

    def _usage(self, names: tuple[str, ...]) -> int:
        return usage_flags(names, self._gpu.BufferUsage)

    def write_buffer(self, buffer: Buffer, data: bytes) -> None:
        self._device.queue.write_buffer(buffer.handle, 0, data)

    def write_buffers(self, writes: list[tuple[Buffer, Bytes]]) -> None:
        """Through one kept MAP_WRITE buffer: mapped, filled, copied from on the GPU. On the
        H200 queue.write_buffer of a case's 128 MB took 23-44 ms (wgpu-native) and 44-56
        ms (Dawn), each call staging through memory of its own (docs/records/gpu.md)."""
        data = iter(d for _, d in writes)
        for spans in self.staged([(buf, len(d)) for buf, d in writes]):
            self._upload_group(spans, [next(data) for _ in spans])

    def _upload_group(self, spans: list[Span], data: list[Bytes]) -> None:
        gpu, dev = self._gpu, self._device
        total = staged_bytes(spans)
        staging = self.upload_buffer(total).handle
        self._guard("mapAsync(WRITE)", lambda: staging.map_sync(gpu.MapMode.WRITE, 0, total))
        try:
            # write_mapped copies in one thread (wgpu-py, under the GIL); a writable view of
            # the mapped range (valid until unmap) lets the copies spread over threads.
            mapped = staging._experimental_get_mapped_range(0, total)
            slices = [mapped[s.offset : s.offset + s.nbytes] for s in spans]
            host_memory.copy_into(list(zip(slices, data, strict=True)))
            del mapped, slices
        finally:
            staging.unmap()
        encoder = dev.create_command_encoder()
        for s in spans:
            if s.nbytes:
                encoder.copy_buffer_to_buffer(staging, s.offset, s.buffer.handle, 0, s.nbytes)
        self._guard("submit(upload)", lambda: dev.queue.submit([encoder.finish()]))

    def _encode_copy(
        self, encoder: Any, src: Buffer, dst: Buffer, dst_offset: int, nbytes: int
    ) -> None:
        encoder.copy_buffer_to_buffer(src.handle, 0, dst.handle, dst_offset, nbytes)

    async def _map_read(self, staging: Buffer, spans: list[Span], total: int) -> list[Bytes]:
        handle = staging.handle
        self._guard("mapAsync", lambda: handle.map_sync(self._gpu.MapMode.READ, 0, total))
        try:
            mapped = handle.read_mapped(0, total, copy=False)  # valid until unmap
            data = host_memory.copy_out([mapped[s.offset : s.offset + s.nbytes] for s in spans])
            del mapped
        finally:
            handle.unmap()
        return data

    def destroy_buffer(self, buffer: Buffer) -> None:
        buffer.handle.destroy()

    def scan_nonfinite(self, tensors: list[Bytes]) -> list[bool]:
        return host_memory.nonfinite(tensors)

    def _clear_buffers(self, buffers: list[Buffer]) -> None:
        encoder = self._device.create_command_encoder()
        for buf in buffers:
            encoder.clear_buffer(buf.handle)
        self._guard("submit(clearBuffer)", lambda: self._device.queue.submit([encoder.finish()]))

    async def _create_pipeline(
        self, module: ShaderModuleSource, entry_point: str, layout: Layout, constants: Constants
    ) -> Pipeline:
        try:
            shader = self._device.create_shader_module(label=module.label, code=module.code)
        except self._gpu.GPUError as exc:
            raise ShaderCompileError(_compile_message(module, str(exc))) from None
        dev, compute = self._device, self._gpu.ShaderStage.COMPUTE

        def create() -> Pipeline:
            bgl = dev.create_bind_group_layout(entries=layout_entries(layout, compute))
            pipeline = dev.create_compute_pipeline(
                layout=dev.create_pipeline_layout(bind_group_layouts=[bgl]),
                compute={"module": shader, "entry_point": entry_point, "constants": constants},
            )
            return Pipeline(pipeline, bgl)

        return self._guard(f"createComputePipeline({entry_point})", create)

    def create_bind_group(self, pipeline: Pipeline, entries: dict[int, Buffer]) -> Any:
        return self._guard(
            "createBindGroup",
            lambda: self._device.create_bind_group(
                layout=pipeline.bind_group_layout,
                entries=[
                    {"binding": i, "resource": {"buffer": b.handle, "offset": 0, "size": b.size}}
                    for i, b in sorted(entries.items())
                ],
            ),
        )

    def _timestamp_queries(self, count: int) -> Any:
        return self._device.create_query_set(type=self._gpu.QueryType.timestamp, count=count)

    def _encoder(self) -> Any:
        return self._device.create_command_encoder()

    def _encode_pass(self, encoder: Any, p: ComputePass, writes: tuple | None) -> None:
        timestamp_writes = None
        if writes is not None:
            queries, begin, end = writes
            timestamp_writes = {
                "query_set": queries,
                "beginning_of_pass_write_index": begin,
                "end_of_pass_write_index": end,
            }
        cpass = encoder.begin_compute_pass(label=p.label, timestamp_writes=timestamp_writes)
        cpass.set_pipeline(p.pipeline.handle)
        cpass.set_bind_group(0, p.bind_group)
        cpass.dispatch_workgroups(*p.workgroups)
        cpass.end()

    def _resolve_queries(self, encoder: Any, queries: Any, count: int, into: Buffer) -> None:
        encoder.resolve_query_set(queries, 0, count, into.handle, 0)

    async def _submit(self, encoder: Any) -> None:
        # Errors raise at the call here (no scopes).
        dev = self._device
        self._guard("submit", lambda: dev.queue.submit([encoder.finish()]))

    async def _wait(self) -> None:
        self._guard("wait", lambda: self._device.queue.read_buffer(self._fence))

    def destroy(self) -> None:
        # wgpu-py 0.32 does not implement device.lost; record the loss ourselves so the
        # service replaces the device on the next call, as it does in the browser.
        self._lost = "destroyed: GPUDevice.destroy() was called"
        self._device.destroy()

    @property
    def lost(self) -> str | None:
        return self._lost

    def _guard(self, where: str, call: Any) -> Any:
        try:
            return call()
        except self._gpu.GPUOutOfMemoryError as exc:
            raise GPUError("out-of-memory", str(exc), where) from None
        except self._gpu.GPUError as exc:
            raise GPUError("validation", str(exc), where) from None


def _adapter_info(gpu: ModuleType, implementation: str, info: dict) -> dict[str, str]:
    label = IMPLEMENTATIONS[implementation][1]
    return {
        "vendor": str(info.get("vendor", "")),
        "architecture": str(info.get("architecture", "")),
        "device": str(info.get("device", "")),
        "description": str(info.get("description", "")),
        "type": str(info.get("adapter_type", "")),  # CPU, DiscreteGPU, ...
        "backend": f"{label} ({gpu.__name__} {gpu.__version__}) / {info.get('backend_type', '')}",
    }


def _compile_message(module: ShaderModuleSource, text: str) -> str:
    """The compiler's location mapped to file:line:col: Tint says ':LINE:COL error: what',
    naga 'wgsl:LINE:COL' in a caret diagram."""
    tint = _TINT_LOCATION.search(text)
    if tint:
        msg = {"type": "error", "message": tint[3], "lineNum": tint[1], "linePos": tint[2]}
        return format_compile_messages(module, [msg]) + "\n" + text
    found = _NAGA_LOCATION.search(text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # "Shader 'flash_bwd' parsing error: expected expression, found ';'" -> the part after it
    said = [
        ln.split("error: ", 1)[1] for ln in lines if ln.startswith("Shader ") and "error: " in ln
    ]
    summary = said[0] if said else lines[-1]
    if not found:
        return f"{module.label}: {text}"
    msg = {"type": "error", "message": summary, "lineNum": found[1], "linePos": found[2]}
    return format_compile_messages(module, [msg]) + "\n" + text


def required_limits(adapter: Any) -> dict[str, int]:
    """The limits to request of a wgpu-py adapter (device_limits), under wgpu-py's names."""
    have = {spec: adapter.limits[name] for spec, name in _LIMIT_NAMES.items()}
    return {_LIMIT_NAMES[k]: v for k, v in device_limits(have).items()}


async def request_device(
    power_preference: str = "high-performance", implementation: str = "wgpu"
) -> NativeDevice:
    gpu = load(implementation)
    try:
        adapter = gpu.gpu.request_adapter_sync(power_preference=power_preference)
    except RuntimeError as exc:  # Dawn raises where wgpu-native returns None
        raise NoAdapterError(f"{gpu.__name__}: {exc}") from None
    if adapter is None:
        raise NoAdapterError(f"{gpu.__name__} found no Vulkan/Metal/D3D12 adapter")
    required = required_limits(adapter)
    features = [f for f in OPTIONAL_FEATURES if f in adapter.features]
    options = {"required_limits": required, "required_features": features}
    info = dict(adapter.info)
    if implementation == "dawn" and is_swiftshader(info):
        from wgpudawn.backends.dawn import extras  # type: ignore[import-not-found]

        toggles = list(SWIFTSHADER_DAWN_DISABLED_TOGGLES)
        device = extras.request_device_sync(adapter, disable_toggles=toggles, **options)
    else:
        device = adapter.request_device_sync(**options)
    return NativeDevice(gpu, implementation, adapter, device)
