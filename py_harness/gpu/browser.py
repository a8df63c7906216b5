"""Browser backend: navigator.gpu through Pyodide's JS bridge.

The only module that imports `js` / `pyodide.ffi`. Descriptors are plain Python dicts,
converted to JS objects in `_js` alone.
"""

from __future__ import annotations

from typing import Any

import js  # type: ignore[import-not-found]
from pyodide.ffi import JsException, jsnull, to_js  # type: ignore[import-not-found]

from ..config import any_nonfinite
from ..shaders import ShaderModuleSource, format_compile_messages
from .device import (
    OPTIONAL_FEATURES,
    REQUIRED_LIMITS,
    Buffer,
    Bytes,
    ComputePass,
    Constants,
    Device,
    DeviceLostError,
    GPUError,
    Layout,
    NoAdapterError,
    Pipeline,
    ShaderCompileError,
    Span,
    device_limits,
    layout_entries,
    usage_flags,
)

_LIMITS = tuple(REQUIRED_LIMITS)


def _js(obj: Any) -> Any:
    """Python dicts/lists -> plain JS objects/arrays (JS objects inside pass through)."""
    return to_js(obj, dict_converter=js.Object.fromEntries)


def _absent(value: Any) -> bool:
    """JS null arrives as pyodide.ffi.jsnull, undefined as None."""
    return value is None or value is jsnull


def _usage(names: tuple[str, ...]) -> int:
    return usage_flags(names, js.GPUBufferUsage)


class BrowserDevice(Device):
    def __init__(self, adapter: Any, device: Any, info: dict[str, str]) -> None:
        limits = {name: int(getattr(device.limits, name)) for name in _LIMITS}
        features = frozenset(str(f) for f in js.Array.from_(device.features))
        super().__init__("browser", info, limits, features)
        self._device = device
        self._lost: str | None = None
        device.lost.then(self._on_lost)

    def _on_lost(self, info: Any) -> None:
        self._lost = f"{info.reason}: {info.message}"

    @property
    def lost(self) -> str | None:
        return self._lost

    def create_buffer(self, size: int, usage: tuple[str, ...], label: str) -> Buffer:
        handle = self._device.createBuffer(
            _js({"size": size, "usage": _usage(usage), "label": label})
        )
        return Buffer(handle, size, label, usage)

    def write_buffer(self, buffer: Buffer, data: Bytes) -> None:
        source = data.array if isinstance(data, JsBytes) else to_js(memoryview(data))
        self._device.queue.writeBuffer(buffer.handle, 0, source)

    def _encode_copy(
        self, encoder: Any, src: Buffer, dst: Buffer, dst_offset: int, nbytes: int
    ) -> None:
        encoder.copyBufferToBuffer(src.handle, 0, dst.handle, dst_offset, nbytes)

    async def _map_read(self, staging: Buffer, spans: list[Span], total: int) -> list[Bytes]:
        handle = staging.handle
        await self._scoped("mapAsync", handle.mapAsync(js.GPUMapMode.READ, 0, total))
        try:
            mapped = handle.getMappedRange(0, total)
            # One copy each, within JS: the reply takes them as they are (reply_to_js).
            return [JsBytes(js.Uint8Array.new(mapped, s.offset, s.nbytes).slice()) for s in spans]
        finally:
            handle.unmap()

    def destroy_buffer(self, buffer: Buffer) -> None:
        buffer.handle.destroy()

    def scan_nonfinite(self, tensors: list[Bytes]) -> list[bool]:
        return [t.nonfinite() if isinstance(t, JsBytes) else any_nonfinite(t) for t in tensors]

    def _clear_buffers(self, buffers: list[Buffer]) -> None:
        encoder = self._device.createCommandEncoder()
        for buf in buffers:
            encoder.clearBuffer(buf.handle)
        self._device.queue.submit(_js([encoder.finish()]))

    async def _create_pipeline(
        self, module: ShaderModuleSource, entry_point: str, layout: Layout, constants: Constants
    ) -> Pipeline:
        shader = self._device.createShaderModule(_js({"label": module.label, "code": module.code}))
        info = await shader.getCompilationInfo()
        messages = [
            {"type": m.type, "message": m.message, "lineNum": m.lineNum, "linePos": m.linePos}
            for m in info.messages
        ]
        if any(m["type"] == "error" for m in messages):
            raise ShaderCompileError(format_compile_messages(module, messages))
        self.push_error_scopes()
        bgl = self._device.createBindGroupLayout(
            _js({"entries": layout_entries(layout, js.GPUShaderStage.COMPUTE)})
        )
        pipeline_layout = self._device.createPipelineLayout(_js({"bindGroupLayouts": [bgl]}))
        await self._pop_scopes(f"layout({entry_point})")
        descriptor = {
            "label": entry_point,
            "layout": pipeline_layout,
            "compute": {"module": shader, "entryPoint": entry_point, "constants": constants},
        }
        handle = await self._scoped(
            f"createComputePipelineAsync({entry_point})",
            self._device.createComputePipelineAsync(_js(descriptor)),
        )
        return Pipeline(handle, bgl)

    def create_bind_group(self, pipeline: Pipeline, entries: dict[int, Buffer]) -> Any:
        descriptor = {
            "layout": pipeline.bind_group_layout,
            "entries": [
                {"binding": i, "resource": {"buffer": b.handle}} for i, b in sorted(entries.items())
            ],
        }
        return self._device.createBindGroup(_js(descriptor))

    def push_error_scopes(self) -> None:
        self._device.pushErrorScope("out-of-memory")
        self._device.pushErrorScope("validation")

    async def pop_error_scopes(self, where: str) -> None:
        await self._pop_scopes(where)

    def _timestamp_queries(self, count: int) -> Any:
        return self._device.createQuerySet(_js({"type": "timestamp", "count": count}))

    def _encoder(self) -> Any:
        return self._device.createCommandEncoder()

    def _encode_pass(self, encoder: Any, p: ComputePass, writes: tuple | None) -> None:
        descriptor: dict[str, Any] = {"label": p.label}
        if writes is not None:
            queries, begin, end = writes
            descriptor["timestampWrites"] = {
                "querySet": queries,
                "beginningOfPassWriteIndex": begin,
                "endOfPassWriteIndex": end,
            }
        cpass = encoder.beginComputePass(_js(descriptor))
        cpass.setPipeline(p.pipeline.handle)
        cpass.setBindGroup(0, p.bind_group)
        cpass.dispatchWorkgroups(*p.workgroups)
        cpass.end()

    def _resolve_queries(self, encoder: Any, queries: Any, count: int, into: Buffer) -> None:
        encoder.resolveQuerySet(queries, 0, count, into.handle, 0)

    async def _submit(self, encoder: Any) -> None:
        self._device.queue.submit(_js([encoder.finish()]))
        await self._pop_scopes("dispatch")

    async def _wait(self) -> None:
        await self._scoped("onSubmittedWorkDone", self._device.queue.onSubmittedWorkDone())

    def destroy(self) -> None:
        self._device.destroy()
        # Firefox resolves device.lost only after a round trip to its GPU process (about
        # 60 ms measured), so the next call would still take this device for a live one.
        self._lost = self._lost or "destroyed: device.destroy() was called"

    async def _scoped(self, where: str, promise: Any) -> Any:
        """Await a WebGPU promise inside validation / out-of-memory error scopes."""
        self.push_error_scopes()
        try:
            result = await promise
        except JsException as exc:
            await self._pop_scopes(where)
            self._raise_if_lost()
            raise GPUError("validation", str(exc), where) from None
        await self._pop_scopes(where)
        return result

    async def _pop_scopes(self, where: str) -> None:
        validation = await self._device.popErrorScope()
        oom = await self._device.popErrorScope()
        self._raise_if_lost()
        if not _absent(validation):
            raise GPUError("validation", str(validation.message), where)
        if not _absent(oom):
            raise GPUError("out-of-memory", str(oom.message), where)

    def _raise_if_lost(self) -> None:
        if self._lost is not None:
            reason, _, message = self._lost.partition(": ")
            raise DeviceLostError(reason, message)


async def request_device(power_preference: str = "high-performance") -> BrowserDevice:
    gpu = getattr(js.navigator, "gpu", None)
    if _absent(gpu):
        raise NoAdapterError("navigator.gpu is undefined in this page")
    adapter = await gpu.requestAdapter(_js({"powerPreference": power_preference}))
    if _absent(adapter):
        raise NoAdapterError("navigator.gpu.requestAdapter() returned null")
    have = {name: int(getattr(adapter.limits, name)) for name in _LIMITS}
    want = device_limits(have)
    features = [f for f in OPTIONAL_FEATURES if adapter.features.has(f)]
    device = await adapter.requestDevice(
        _js({"requiredLimits": want, "requiredFeatures": features})
    )
    ainfo = adapter.info
    info = {
        "vendor": str(ainfo.vendor),
        "architecture": str(ainfo.architecture),
        "device": str(getattr(ainfo, "device", "") or ""),
        "description": str(getattr(ainfo, "description", "") or ""),
        "backend": str(js.navigator.userAgent),
    }
    return BrowserDevice(adapter, device, info)


class JsBytes:
    """A JS Uint8Array that reads as bytes (PEP 688's __buffer__), copied into Python's
    memory only where Python reads it (judging a packed output, a digest, the base64 path)
    and then once. writeBuffer takes the array itself and the reply hands it back as it is,
    so a case's tensors cross into and out of WebAssembly memory not at all on the page's
    byte path (gpu/device.py's Bytes)."""

    # The finite scan reads the array in chunks of this many bytes (a multiple of 4): a
    # 16 MB tensor took 6-8 ms so, 12-23 ms as one copy and scan (Node, this machine kind).
    SCAN_CHUNK = 1 << 20

    def __init__(self, array: Any) -> None:
        self.array = array
        self._copy: bytes | None = None

    def __len__(self) -> int:
        return int(self.array.byteLength)

    def __buffer__(self, flags: int) -> memoryview:
        if self._copy is None:
            self._copy = self.array.to_bytes()
        return memoryview(self._copy)

    def nonfinite(self) -> bool:
        """Whether some float32 is Inf or NaN (config.any_nonfinite, chunk by chunk)."""
        if self._copy is not None:
            return any_nonfinite(self._copy)
        n, step = len(self), self.SCAN_CHUNK
        return any(
            any_nonfinite(self.array.subarray(at, min(at + step, n)).to_bytes())
            for at in range(0, n, step)
        )


def bytes_from_js(blobs: Any) -> list[JsBytes]:
    """JS Uint8Arrays (a request's tensors) as Bytes, not copied (JsBytes)."""
    return [JsBytes(blob) for blob in blobs]


def reply_to_js(reply: str, blobs: list[Bytes]) -> Any:
    """(reply JSON, blobs) as the JS array [reply, [Uint8Array, ...]]: a JsBytes as its own
    array, Python's bytes copied once out of Python's memory (a view of it would die when
    that memory grows)."""
    arrays = js.Array.new()
    for blob in blobs:
        if isinstance(blob, JsBytes):
            arrays.push(blob.array)
            continue
        array = js.Uint8Array.new(memoryview(blob).nbytes)
        array.assign(blob)
        arrays.push(array)
    return js.Array.of(reply, arrays)


async def fetch_text(url: str) -> str:
    response = await js.fetch(url)
    if not response.ok:
        raise OSError(f"GET {url}: HTTP {response.status}")
    return str(await response.text())
