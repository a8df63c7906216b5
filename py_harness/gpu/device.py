"""The device interface every backend implements, and the errors it raises."""

from __future__ import annotations

import asyncio
import hashlib
import struct
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from ..config import any_nonfinite, data_buffer_bytes
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
    """A backend buffer handle with its size, label and usage (GPUBufferUsage flag names;
    the backends record them, and only a buffer whose usage is known can be reused)."""

    handle: Any
    size: int
    label: str
    usage: tuple[str, ...] = ()


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


# What a read returns: bytes (the browser), or a memoryview of host memory (the native
# backends' threaded copy, gpu/host_memory.py); either reads as a buffer.
Bytes = bytes | memoryview

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
        self._staging: dict[tuple[str, ...], Buffer] = {}  # staging_buffer's, by usage
        self._reading = asyncio.Lock()  # one read at a time through it
        self._spares: list[Buffer] = []  # released by the last case (acquire_buffers)

    # -- buffers -------------------------------------------------------------------
    @abstractmethod
    def create_buffer(self, size: int, usage: tuple[str, ...], label: str) -> Buffer:
        """usage: GPUBufferUsage flag names, e.g. ("STORAGE", "COPY_DST")."""

    @abstractmethod
    def write_buffer(self, buffer: Buffer, data: bytes) -> None: ...

    async def read_buffer(self, buffer: Buffer) -> Bytes:
        """The whole buffer's bytes."""
        return (await self.read_buffers([(buffer, buffer.size)]))[0]

    async def read_buffers(self, reads: list[tuple[Buffer, int]]) -> list[Bytes]:
        """The first `nbytes` of each (buffer, nbytes), nbytes a multiple of 4, through the
        device's staging buffer (readback_buffer) in groups of up to maxBufferSize bytes:
        one copy command per read, one submit and one map per group, and one copy out of
        the mapping per read (a map per output cost a queue round trip each, and copying
        the whole mapping out before slicing it copied every byte twice). One call at a
        time, as they share that buffer."""
        async with self._reading:
            return await self._read_spans(reads)

    async def _read_spans(self, reads: list[tuple[Buffer, int]]) -> list[Bytes]:
        out: list[Bytes] = []
        for spans in self.staged(reads):
            out += await self._read_group(spans, max(4, spans[-1].offset + spans[-1].nbytes))
        return out

    def staged(self, moves: list[tuple[Buffer, int]]) -> list[list[Span]]:
        """(buffer, nbytes) moves through a staging buffer, in order, in groups of up to
        maxBufferSize bytes: each move's offset in its group's staging buffer, a multiple
        of 8 (what mapAsync and getMappedRange take)."""
        cap = self.limits.get("maxBufferSize", 0) or sum(_align(n, 8) for _, n in moves)
        groups: list[list[Span]] = []
        at = 0
        for buf, nbytes in moves:
            if not groups or at + nbytes > cap:
                groups.append([])
                at = 0
            groups[-1].append(Span(buf, at, nbytes))
            at = _align(at + nbytes, 8)
        return groups

    def readback_buffer(self, size: int) -> Buffer:
        """The device's MAP_READ staging buffer of at least `size` bytes (staging_buffer).
        Kept, not made per read: on the H200 making a 128 MB one took 29-41 ms (the driver
        pins host memory), its copy and map 3-6 ms (docs/results-h200.md)."""
        return self.staging_buffer(size, ("MAP_READ", "COPY_DST"))

    def staging_buffer(self, size: int, usage: tuple[str, ...]) -> Buffer:
        """The device's staging buffer of this usage and at least `size` bytes, replaced by
        a larger one where a transfer needs it."""
        kept = self._staging.get(usage)
        if kept is None or kept.size < size:
            if kept is not None:
                del self._staging[usage]
                self.destroy_buffer(kept)
            label = "readback" if "MAP_READ" in usage else "upload"
            self._staging[usage] = self.create_buffer(size, usage, label)
        return self._staging[usage]

    def write_buffers(self, writes: list[tuple[Buffer, Bytes]]) -> None:
        """Each (buffer, data) written at the buffer's start, data a multiple of 4 bytes.
        Here write_buffer each (in the browser writeBuffer copies once out of WebAssembly
        memory); the native backends go through one kept staging buffer."""
        for buf, data in writes:
            self.write_buffer(buf, data)

    @abstractmethod
    async def _read_group(self, spans: list[Span], total: int) -> list[Bytes]:
        """read_buffers for the reads that share the staging buffer's first `total` bytes
        (their sum, at least 4): each span's buffer copied to its offset of
        readback_buffer(total), which is mapped once and sliced."""

    @abstractmethod
    def destroy_buffer(self, buffer: Buffer) -> None: ...

    @abstractmethod
    def _clear_buffers(self, buffers: list[Buffer]) -> None:
        """Fill the buffers with zeros (GPUCommandEncoder.clearBuffer), one submit."""

    def any_nonfinite(self, data: bytes) -> bool:
        """The finite-input check the runner makes before any GPU work
        (config.any_nonfinite; the native backends run it over threads)."""
        return any_nonfinite(data)

    # -- a case's buffers, reused by the next case of the same sizes -----------------
    def acquire_buffers(self, wanted: dict[str, tuple[int, tuple[str, ...]]]) -> dict[str, Buffer]:
        """Zero-filled buffers, by name, of the (size, usage) asked: buffers that the last
        case released (release_buffers) where one matches, cleared on the GPU, else new
        ones. The released buffers that none of these take are destroyed first, so a case
        never holds more memory than its own buffers. On the H200 at S = 4096, head_dim 128,
        creating a case's buffers took 16-25 ms and destroying them 19-22 ms (wgpu;
        docs/results-h200.md). On an error the buffers made or taken so far are destroyed."""
        spare: dict[tuple[int, tuple[str, ...]], list[Buffer]] = {}
        for buf in self._spares:
            spare.setdefault((buf.size, buf.usage), []).append(buf)
        taken = {name: spare[key].pop() for name, key in wanted.items() if spare.get(key)}
        self._spares = [buf for left in spare.values() for buf in left]
        self.destroy_released()
        out: dict[str, Buffer] = {}
        try:
            if taken:
                self._clear_buffers(list(taken.values()))
            for name, (size, usage) in wanted.items():
                out[name] = taken.pop(name, None) or self.create_buffer(size, usage, name)
                out[name].label = name
        except BaseException:
            for buf in (*out.values(), *taken.values()):
                self.destroy_buffer(buf)
            raise
        return out

    def release_buffers(self, buffers: list[Buffer]) -> None:
        """Keep the buffers for the next case's acquire_buffers; destroy those that cannot
        be cleared (no COPY_DST) or whose device is lost."""
        for buf in buffers:
            if "COPY_DST" in buf.usage and self.lost is None:
                self._spares.append(buf)
            else:
                self.destroy_buffer(buf)

    def destroy_released(self) -> None:
        """Destroy the buffers kept by release_buffers (the next case makes new ones)."""
        spares, self._spares = self._spares, []
        for buf in spares:
            self.destroy_buffer(buf)

    def create_buffer_with_data(self, data: bytes, usage: tuple[str, ...], label: str) -> Buffer:
        # Sized as every buffer the kernels bind (config.buffer_bytes: whole vec4s, at least
        # one), zeros after the data.
        buf = self.create_buffer(data_buffer_bytes(data), (*usage, "COPY_DST"), label)
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
