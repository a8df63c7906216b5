"""The device interface every backend implements, and the errors it raises."""

from __future__ import annotations

import asyncio
import hashlib
import struct
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from ..config import F32_BYTES, buffer_bytes
from ..shaders import ShaderModuleSource

# The least the seed's kernels need (each entry point binds exactly 8 storage buffers and
# 16 KiB of workgroup memory: the defaults, with no headroom). Every limit named here is
# requested explicitly at the adapter's maximum, so big cases and variants that need
# more are judged against what the hardware has; variants state their own needs
# (kernels.py) and the runner checks them.
REQUIRED_LIMITS: dict[str, int] = {
    "maxStorageBuffersPerShaderStage": 8,
    "maxComputeWorkgroupStorageSize": 16384,
    "maxComputeInvocationsPerWorkgroup": 128,
    "maxComputeWorkgroupSizeX": 128,
    "maxBindingsPerBindGroup": 11,
    "maxStorageBufferBindingSize": 4,
    "maxBufferSize": 4,
    "maxComputeWorkgroupsPerDimension": 1,
}

# Dawn toggles turned off where Dawn runs on SwiftShader (every Tint runtime on a machine
# without a GPU, and Chromium's WebGPU everywhere it has run for us). By default Dawn
# leaves the zeroing of workgroup memory, which WGSL requires, to the driver
# (VK_KHR_zero_initialize_workgroup_memory). SwiftShader's JIT then takes 3 to 7 times
# as long to compile: 11.2 s for the seed's three pipelines against 1.6 s, 16.6 s against
# 5.3 s for the fast head_dim-64 set (docs/runtimes.md). With the toggle off, Tint
# writes the zeroing into the shader itself, as it does for drivers without the
# extension. Kernels see the same zeroed memory either way.
SWIFTSHADER_DAWN_DISABLED_TOGGLES = ("use_vulkan_zero_initialize_workgroup_memory_extension",)

ENABLE_WEBGPU_HINT = (
    "Enable WebGPU: Chromium needs --enable-unsafe-webgpu (and --no-sandbox as root) and a "
    "page served from http://127.0.0.1 or localhost (a secure context); Firefox needs the "
    "prefs dom.webgpu.enabled=true and gfx.webgpu.ignore-blocklist=true; native wgpu needs "
    "a Vulkan driver (apt-get install mesa-vulkan-drivers)."
)


class GPUError(RuntimeError):
    """A WebGPU error with the driver's words. kind: validation, out-of-memory, internal."""

    def __init__(self, kind: str, message: str, where: str = "") -> None:
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}{kind} error: {message}")
        self.kind = kind
        self.driver_message = message


class ShaderCompileError(GPUError):
    """WGSL that did not compile; the message carries file:line:column."""

    def __init__(self, message: str) -> None:
        super().__init__("compilation", message)


class DeviceLostError(GPUError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__("device-lost", f"{reason}: {message}")


class NoAdapterError(RuntimeError):
    def __init__(self, detail: str) -> None:
        super().__init__(f"no WebGPU adapter: {detail}. {ENABLE_WEBGPU_HINT}")


@dataclass
class Buffer:
    """A backend buffer handle with its size and usage."""

    handle: Any
    size: int
    label: str


@dataclass
class Pipeline:
    """A compute pipeline with the bind group layout it was made with."""

    handle: Any
    bind_group_layout: Any


@dataclass
class Span:
    """A read of a buffer's first `nbytes` into a staging buffer at `offset`."""

    buffer: Buffer
    offset: int
    nbytes: int


Layout = tuple[tuple[int, str], ...]  # (binding, GPUBufferBindingType) of group 0


@dataclass
class ComputePass:
    pipeline: Pipeline
    bind_group: Any
    workgroups: tuple[int, int, int]
    label: str = ""


class Device(ABC):
    """An open WebGPU device. Backends fill in the abstract methods."""

    def __init__(
        self,
        backend: str,
        adapter_info: dict[str, str],
        limits: dict[str, int],
        features: frozenset[str],
    ) -> None:
        self.backend = backend
        self.adapter_info = adapter_info
        self.limits = limits
        self.features = features
        self._pipelines: dict[tuple, Pipeline] = {}
        self.last_pass_ms: list[float] = []  # per pass, of the last timed run_passes
        self._readback: Buffer | None = None  # readback_buffer
        self._reading = asyncio.Lock()  # one read at a time through it

    # -- buffers -------------------------------------------------------------------
    @abstractmethod
    def create_buffer(self, size: int, usage: tuple[str, ...], label: str) -> Buffer:
        """usage: GPUBufferUsage flag names, e.g. ("STORAGE", "COPY_DST")."""

    @abstractmethod
    def write_buffer(self, buffer: Buffer, data: bytes) -> None: ...

    async def read_buffer(self, buffer: Buffer) -> bytes:
        """The whole buffer's bytes."""
        return (await self.read_buffers([(buffer, buffer.size)]))[0]

    async def read_buffers(self, reads: list[tuple[Buffer, int]]) -> list[bytes]:
        """The first `nbytes` of each (buffer, nbytes), nbytes a multiple of 4, through the
        device's staging buffer (readback_buffer) in groups of up to maxBufferSize bytes:
        one copy command per read, one submit and one map per group, and one copy out of
        the mapping per read (a map per output cost a queue round trip each, and copying
        the whole mapping out before slicing it copied every byte twice). One call at a
        time, as they share that buffer."""
        async with self._reading:
            return await self._read_spans(reads)

    async def _read_spans(self, reads: list[tuple[Buffer, int]]) -> list[bytes]:
        cap = self.limits.get("maxBufferSize", 0) or sum(n for _, n in reads)
        out: list[bytes] = []
        spans: list[Span] = []
        end = 0
        for buf, nbytes in reads:
            if spans and end + nbytes > cap:
                out += await self._read_group(spans, max(4, end))
                spans, end = [], 0
            spans.append(Span(buf, end, nbytes))
            end += nbytes
        if spans:
            out += await self._read_group(spans, max(4, end))  # a mapping is never empty
        return out

    def readback_buffer(self, size: int) -> Buffer:
        """The device's MAP_READ staging buffer of at least `size` bytes, replaced by a
        larger one where a read needs it. Kept, not made per read: on the H200 making a
        128 MB one took 29-41 ms (the driver pins host memory), its copy and map 3-6 ms
        (docs/results-h200.md)."""
        if self._readback is None or self._readback.size < size:
            if self._readback is not None:
                self.destroy_buffer(self._readback)
                self._readback = None
            self._readback = self.create_buffer(size, ("MAP_READ", "COPY_DST"), "readback")
        return self._readback

    @abstractmethod
    async def _read_group(self, spans: list[Span], total: int) -> list[bytes]:
        """read_buffers for the reads that share the staging buffer's first `total` bytes
        (their sum, at least 4): each span's buffer copied to its offset of
        readback_buffer(total), which is mapped once and sliced."""

    @abstractmethod
    def destroy_buffer(self, buffer: Buffer) -> None: ...

    def create_buffer_with_data(self, data: bytes, usage: tuple[str, ...], label: str) -> Buffer:
        # Sized as every buffer the kernels bind (config.buffer_bytes: whole vec4s, at least
        # one), zeros after the data.
        size = buffer_bytes(-(-len(data) // F32_BYTES))
        buf = self.create_buffer(size, (*usage, "COPY_DST"), label)
        if data:
            self.write_buffer(buf, data + b"\0" * (_align(len(data), 4) - len(data)))
        return buf

    # -- pipelines -----------------------------------------------------------------
    @abstractmethod
    async def _create_pipeline(
        self, module: ShaderModuleSource, entry_point: str, layout: Layout
    ) -> Pipeline:
        """Compile (errors as ShaderCompileError / GPUError) and create the pipeline
        with an explicit layout: group 0 holds `layout`'s buffer bindings."""

    async def compute_pipeline(
        self, module: ShaderModuleSource, entry_point: str, layout: Layout
    ) -> Pipeline:
        """The pipeline for (module code, entry point, layout), compiled once per device."""
        key = (hashlib.sha256(module.code.encode()).hexdigest(), entry_point, layout)
        if key not in self._pipelines:
            self._pipelines[key] = await self._create_pipeline(module, entry_point, layout)
        return self._pipelines[key]

    @abstractmethod
    def create_bind_group(self, pipeline: Pipeline, entries: dict[int, Buffer]) -> Any: ...

    # -- work ----------------------------------------------------------------------
    async def run_passes(self, passes: list[ComputePass]) -> float | None:
        """Encode, submit and wait for the passes inside validation / out-of-memory error
        scopes. Returns GPU time in ms from timestamp queries (the sum over passes), or
        None where the device lacks the timestamp-query feature. The backends supply the
        calls (the _encoder ... _submit_and_wait hooks); the order of work lives here."""
        self.push_error_scopes()
        n = 2 * len(passes)
        timed = self.has_timestamps
        if timed:
            queries = self._timestamp_queries(n)
            resolved = self.create_buffer(8 * n, ("QUERY_RESOLVE", "COPY_SRC"), "timestamps")
        encoder = self._encoder()
        for i, p in enumerate(passes):
            self._encode_pass(encoder, p, (queries, 2 * i, 2 * i + 1) if timed else None)
        if timed:
            self._resolve_queries(encoder, queries, n, resolved)
        await self._submit_and_wait(encoder)
        if not timed:
            return None
        return await self.collect_pass_times(resolved, queries)

    # Hooks for run_passes, in the backend's own API.
    @abstractmethod
    def _timestamp_queries(self, count: int) -> Any: ...

    @abstractmethod
    def _encoder(self) -> Any: ...

    @abstractmethod
    def _encode_pass(self, encoder: Any, p: ComputePass, writes: tuple | None) -> None:
        """One compute pass; writes: (query set, begin index, end index) or None."""

    @abstractmethod
    def _resolve_queries(self, encoder: Any, queries: Any, count: int, into: Buffer) -> None: ...

    @abstractmethod
    async def _submit_and_wait(self, encoder: Any) -> None:
        """Submit the work, close the error scopes (raising what they caught), and wait."""

    async def collect_pass_times(self, resolved: Buffer, queries: Any) -> float:
        """Read resolved timestamps (see pass_times_ms), then free the buffer and query set.
        Returns the sum; each pass's time stays in last_pass_ms (for the benchmark)."""
        try:
            self.last_pass_ms = pass_times_ms(await self.read_buffer(resolved))
            return sum(self.last_pass_ms)
        finally:
            self.destroy_buffer(resolved)
            queries.destroy()

    @property
    def has_timestamps(self) -> bool:
        return "timestamp-query" in self.features

    def push_error_scopes(self) -> None:
        """Open validation and out-of-memory error scopes (browser); native raises at once."""
        return None

    async def pop_error_scopes(self, where: str) -> None:
        """Close the scopes from push_error_scopes; raise GPUError for what they caught."""
        return None

    @abstractmethod
    def destroy(self) -> None:
        """Destroy the device (a test of device-loss handling uses this)."""

    @property
    def lost(self) -> str | None:
        """The loss reason once the device is lost, else None."""
        return None


def _align(n: int, to: int) -> int:
    return -(-n // to) * to


def device_limits(adapter_limits: dict[str, int]) -> dict[str, int]:
    """The limits to request: each of REQUIRED_LIMITS at the adapter's maximum."""
    for name, need in REQUIRED_LIMITS.items():
        have = adapter_limits.get(name, 0)
        if have < need:
            raise GPUError("limits", f"adapter's {name} is {have}; the kernels need {need}")
    return {name: adapter_limits[name] for name in REQUIRED_LIMITS}


def usage_flags(names: tuple[str, ...], flags: Any) -> int:
    """The OR of buffer-usage flags named as the spec names them ("STORAGE", "COPY_SRC"),
    read from a backend's flag namespace (GPUBufferUsage, wgpu.BufferUsage)."""
    value = 0
    for name in names:
        value |= getattr(flags, name)
    return value


def layout_entries(layout: Layout, compute_stage: int) -> list[dict]:
    """GPUBindGroupLayoutEntry dicts for buffer bindings visible to the compute stage."""
    return [
        {"binding": i, "visibility": compute_stage, "buffer": {"type": kind}} for i, kind in layout
    ]


def pass_times_ms(resolved: bytes) -> list[float]:
    """(end - begin) of each pass from resolved timestamp queries (u64 ns pairs), in ms."""
    stamps = struct.unpack(f"<{len(resolved) // 8}Q", resolved)
    # A pass whose end reads before its begin (a counter reset) counts as 0, not negative.
    return [max(0, end - begin) / 1e6 for begin, end in zip(stamps[::2], stamps[1::2], strict=True)]
