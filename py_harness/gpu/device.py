"""The device interface every backend implements, and the errors it raises."""

from __future__ import annotations

import collections.abc
import struct
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from ..config import scan_each
from ..shaders import ShaderModuleSource
from ..sizing import data_buffer_bytes

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
# Adapter features a device asks for where the adapter offers them: timestamps give GPU
# time per pass (without them the runner times on the wall clock); shader-f16 lets a
# variant with f16 tensors (Variant.dtypes) run.
OPTIONAL_FEATURES = ("timestamp-query", "shader-f16")
SWIFTSHADER_DAWN_DISABLED_TOGGLES = ("use_vulkan_zero_initialize_workgroup_memory_extension",)


def is_swiftshader(adapter_info: dict[str, str]) -> bool:
    """Whether the adapter is SwiftShader (Dawn and Chromium name it in the architecture,
    wgpu in the device)."""
    named = f"{adapter_info.get('architecture', '')} {adapter_info.get('device', '')}"
    return "swiftshader" in named.lower()


def rolls_loops(adapter_info: dict[str, str]) -> bool:
    """Whether runs on this adapter keep the GEMMs' inner loops as loops (Kernel.rolled_loops):
    the CPU drivers, SwiftShader and Mesa's lavapipe (llvmpipe in the device name), compile
    and run them in less time than the steps GPUs get written out. Firefox's page sees an
    empty adapter.info, so it runs the written-out steps even on lavapipe."""
    return is_swiftshader(adapter_info) or "llvmpipe" in adapter_info.get("device", "").lower()


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
        self.where = where


class ShaderCompileError(GPUError):
    """WGSL that did not compile; the message carries file:line:column."""

    def __init__(self, message: str) -> None:
        super().__init__("compilation", message)


class DeviceLostError(GPUError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__("device-lost", f"{reason}: {message}")
        self.reason = reason
        self.lost_message = message


class NoAdapterError(RuntimeError):
    def __init__(self, detail: str) -> None:
        super().__init__(f"no WebGPU adapter: {detail}. {ENABLE_WEBGPU_HINT}")
        self.detail = detail


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


# Readback buffers kept for the next reads: a forward's and a backward's outputs can be on
# their way at once (Device.submit).
KEPT_READBACKS = 2

# What a read returns and a write takes: bytes, a memoryview of host memory (the native
# backends' threaded copy, host/gpu/host_memory.py) or a JS array in the browser (browser.JsBytes);
# each reads as a buffer and has a len() in bytes.
Bytes = bytes | memoryview | collections.abc.Buffer

Layout = tuple[tuple[int, str], ...]  # (binding, GPUBufferBindingType) of group 0
Constants = dict[str, float]  # pipeline-overridable constants by name (GPUPipelineConstantValue)


@dataclass
class ComputePass:
    pipeline: Pipeline
    bind_group: Any
    workgroups: tuple[int, int, int]
    label: str = ""


@dataclass
class Submitted:
    """Work that Device.submit submitted: its timestamps (first) and reads staged in
    `staging` at `spans` where the device has timestamps; reads that did not fit in one
    staging buffer, or all of them without timestamps, in `reads`, read by collect."""

    staging: Buffer | None = None
    spans: list[Span] = field(default_factory=list)
    reads: list[tuple[Buffer, int]] = field(default_factory=list)
    wall_ms: float = 0.0  # submit and wait, without timestamps
    resolved: Buffer | None = None  # the timestamps' (with the query set: freed by collect)
    queries: Any = None


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
        self._upload: Buffer | None = None  # upload_buffer's
        self._readbacks: list[Buffer] = []  # free readback buffers, smallest first
        self._spares: list[Buffer] = []  # released by the last case (acquire_buffers)

    # -- buffers -------------------------------------------------------------------
    @abstractmethod
    def create_buffer(self, size: int, usage: tuple[str, ...], label: str) -> Buffer:
        """usage: GPUBufferUsage flag names, e.g. ("STORAGE", "COPY_DST")."""

    @abstractmethod
    def write_buffer(self, buffer: Buffer, data: Bytes) -> None: ...

    async def read_buffer(self, buffer: Buffer) -> Bytes:
        """The whole buffer's bytes."""
        return (await self.read_buffers([(buffer, buffer.size)]))[0]

    async def read_buffers(self, reads: list[tuple[Buffer, int]]) -> list[Bytes]:
        """The first `nbytes` of each (buffer, nbytes), nbytes a multiple of 4, through
        staging buffers (readback_buffer) in groups of up to maxBufferSize bytes: one copy
        command per read, one submit and one map per group, and one copy out of the
        mapping per read (a map per output cost a queue round trip each, and copying the
        whole mapping out before slicing it copied every byte twice)."""
        out: list[Bytes] = []
        for spans in self.staged(reads):
            total = staged_bytes(spans)
            staging = self.readback_buffer(total)
            try:
                encoder = self._encoder()
                self._encode_reads(encoder, spans, staging)
                self.push_error_scopes()
                await self._submit(encoder)
                out += await self._map_read(staging, spans, total)
            finally:
                self.give_back_readback(staging)
        return out

    def _encode_reads(self, encoder: Any, spans: list[Span], staging: Buffer) -> None:
        for s in spans:
            if s.nbytes:
                self._encode_copy(encoder, s.buffer, staging, s.offset, s.nbytes)

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
        """A MAP_READ staging buffer of at least `size` bytes that no read is using: a kept
        one (give_back_readback), else a new one. Kept, not made per read: on the H200
        making a 128 MB one took 29-41 ms (the driver pins host memory), its copy and map
        3-6 ms (docs/records/gpu.md). Two can be in use at once (Device.submit: a
        forward's outputs on their way while the backward runs)."""
        fits = [b for b in self._readbacks if b.size >= size]
        if fits:
            buf = min(fits, key=lambda b: b.size)
            self._readbacks.remove(buf)
            return buf
        return self.create_buffer(size, ("MAP_READ", "COPY_DST"), "readback")

    def give_back_readback(self, buffer: Buffer) -> None:
        """Keep a readback buffer for the next read; past KEPT_READBACKS the smallest go."""
        self._readbacks.append(buffer)
        self._readbacks.sort(key=lambda b: b.size)
        while len(self._readbacks) > KEPT_READBACKS:
            self.destroy_buffer(self._readbacks.pop(0))

    def upload_buffer(self, size: int) -> Buffer:
        """The device's MAP_WRITE staging buffer of at least `size` bytes (the native
        backends' write_buffers), replaced by a larger one where an upload needs it."""
        if self._upload is None or self._upload.size < size:
            if self._upload is not None:
                self.destroy_buffer(self._upload)
            self._upload = self.create_buffer(size, ("MAP_WRITE", "COPY_SRC"), "upload")
        return self._upload

    def write_buffers(self, writes: list[tuple[Buffer, Bytes]]) -> None:
        """Each (buffer, data) written at the buffer's start, data a multiple of 4 bytes.
        Here write_buffer each (in the browser writeBuffer copies once out of its JS array
        memory); the native backends go through one kept staging buffer."""
        for buf, data in writes:
            self.write_buffer(buf, data)

    @abstractmethod
    def _encode_copy(
        self, encoder: Any, src: Buffer, dst: Buffer, dst_offset: int, nbytes: int
    ) -> None:
        """copyBufferToBuffer(src, 0, dst, dst_offset, nbytes)."""

    @abstractmethod
    async def _map_read(self, staging: Buffer, spans: list[Span], total: int) -> list[Bytes]:
        """Map the staging buffer's first `total` bytes for reading (waiting for the work
        that fills it), copy each span's bytes out, unmap."""

    @abstractmethod
    def destroy_buffer(self, buffer: Buffer) -> None: ...

    @abstractmethod
    def _clear_buffers(self, buffers: list[Buffer]) -> None:
        """Fill the buffers with zeros (GPUCommandEncoder.clearBuffer), one submit."""

    def scan_nonfinite(self, tensors: list[Bytes]) -> list[bool]:
        """Whether each tensor holds an Inf or NaN: the finite-input check the runner makes
        before any GPU work (config.check_input_bytes's scan; the native backends spread
        all of a case's tensors over threads at once)."""
        return scan_each(tensors)

    # -- a case's buffers, reused by the next case of the same sizes -----------------
    def acquire_buffers(self, wanted: dict[str, tuple[int, tuple[str, ...]]]) -> dict[str, Buffer]:
        """Zero-filled buffers, by name, of the (size, usage) asked: buffers that the last
        case released (release_buffers) where one matches, cleared on the GPU, else new
        ones. The released buffers that none of these take are destroyed first, so a case
        never holds more memory than its own buffers. On the H200 at S = 4096, head_dim 128,
        creating a case's buffers took 16-25 ms and destroying them 19-22 ms (wgpu;
        docs/records/gpu.md). On an error the buffers made or taken so far are destroyed."""
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
        # Sized as every buffer the kernels bind (sizing.buffer_bytes: whole vec4s, at least
        # one), zeros after the data.
        buf = self.create_buffer(data_buffer_bytes(data), (*usage, "COPY_DST"), label)
        if data:
            self.write_buffer(buf, data + b"\0" * (_align(len(data), 4) - len(data)))
        return buf

    # -- pipelines -----------------------------------------------------------------
    @abstractmethod
    async def _create_pipeline(
        self, module: ShaderModuleSource, entry_point: str, layout: Layout, constants: Constants
    ) -> Pipeline:
        """Compile (errors as ShaderCompileError / GPUError) and create the pipeline
        with an explicit layout (group 0 holds `layout`'s buffer bindings) and the
        pipeline-overridable constants given (GPUProgrammableStage.constants)."""

    async def compute_pipeline(
        self,
        module: ShaderModuleSource,
        entry_point: str,
        layout: Layout,
        constants: Constants | None = None,
    ) -> Pipeline:
        """The pipeline for (the module's code that the entry point reaches, entry point,
        layout, constants), compiled once per device (ShaderModuleSource.entry_digest)."""
        constants = constants or {}
        key = (
            module.entry_digest(entry_point),
            entry_point,
            layout,
            tuple(sorted(constants.items())),
        )
        if key not in self._pipelines:
            self._pipelines[key] = await self._create_pipeline(
                module, entry_point, layout, constants
            )
        return self._pipelines[key]

    def compiled(self) -> set[tuple[str, tuple[tuple[str, float], ...]]]:
        """(entry point, sorted constants) of every pipeline compiled on this device: which
        forms of a kernel a run asked for (tests/test_kernel_forms.py)."""
        return {(entry_point, constants) for _, entry_point, _, constants in self._pipelines}

    @abstractmethod
    def create_bind_group(self, pipeline: Pipeline, entries: dict[int, Buffer]) -> Any: ...

    # -- work ----------------------------------------------------------------------
    async def run_passes(self, passes: list[ComputePass]) -> float | None:
        """Encode, submit and wait for the passes inside validation / out-of-memory error
        scopes. Returns GPU time in ms from timestamp queries (the sum over passes), or
        None where the device lacks the timestamp-query feature."""
        ms, _ = await self.run_and_read(passes, [])
        return ms if self.has_timestamps else None

    async def run_and_read(
        self, passes: list[ComputePass], reads: list[tuple[Buffer, int]]
    ) -> tuple[float, list[Bytes]]:
        """run_passes, then read_buffers(reads): (GPU ms, the reads' bytes); submit then
        collect."""
        return await self.collect(await self.submit(passes, reads))

    async def submit(self, passes: list[ComputePass], reads: list[tuple[Buffer, int]]) -> Submitted:
        """Encode the passes inside validation / out-of-memory error scopes, then copies of
        their resolved timestamps and of the reads into a readback buffer of their own, in
        the same command buffer, and submit; collect waits and reads. A dispatch and its
        reads so cost one submit and one map, not a wait, a map for the timestamps and a
        map for the outputs; and the next work can be submitted before this work's
        outputs are copied out (the runner submits the backward before it reads the
        forward's outputs). Without timestamps this waits for the work, timed on the wall
        clock, and collect reads after. The backends supply the calls (the _encoder ...
        _submit hooks); the order of work lives here."""
        self.push_error_scopes()
        n = 2 * len(passes)
        timed = self.has_timestamps
        if timed:
            queries = self._timestamp_queries(n)
            resolved = self.create_buffer(8 * n, ("QUERY_RESOLVE", "COPY_SRC"), "timestamps")
        encoder = self._encoder()
        for i, p in enumerate(passes):
            self._encode_pass(encoder, p, (queries, 2 * i, 2 * i + 1) if timed else None)
        if not timed:
            t0 = time.perf_counter()
            await self._submit(encoder)
            await self._wait()
            return Submitted(reads=list(reads), wall_ms=(time.perf_counter() - t0) * 1e3)
        self._resolve_queries(encoder, queries, n, resolved)
        first, *more = self.staged([(resolved, 8 * n), *reads])
        staging = self.readback_buffer(staged_bytes(first))
        rest = [(s.buffer, s.nbytes) for g in more for s in g]
        work = Submitted(staging, first, rest, resolved=resolved, queries=queries)
        try:
            self._encode_reads(encoder, first, staging)
            await self._submit(encoder)
        except BaseException:
            self.discard(work)
            raise
        return work

    async def collect(self, work: Submitted) -> tuple[float, list[Bytes]]:
        """Wait for submitted work and read its outputs: (GPU ms, or the wall ms of submit
        and wait without timestamps; the reads' bytes). Each pass's ms stay in
        last_pass_ms (for the benchmark)."""
        if work.staging is None:
            return work.wall_ms, (await self.read_buffers(work.reads) if work.reads else [])
        try:
            stamps, *data = await self._map_read(work.staging, work.spans, staged_bytes(work.spans))
        finally:
            self.discard(work)
        if work.reads:  # past one staging buffer's size
            data += await self.read_buffers(work.reads)
        self.last_pass_ms = pass_times_ms(stamps)
        return sum(self.last_pass_ms), data

    def discard(self, work: Submitted) -> None:
        """Give back what submitted work holds, uncollected (on an error before collect)."""
        if work.staging is not None:
            self.give_back_readback(work.staging)
        if work.resolved is not None:
            self.destroy_buffer(work.resolved)
            work.queries.destroy()

    # Hooks for run_and_read, in the backend's own API.
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
    async def _submit(self, encoder: Any) -> None:
        """Submit the work and close the error scopes (raising what they caught)."""

    @abstractmethod
    async def _wait(self) -> None:
        """Wait for the queue's work to finish."""

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


def staged_bytes(spans: list[Span]) -> int:
    """The bytes of a staging buffer that a group of spans fills (at least 4)."""
    return max(4, spans[-1].offset + spans[-1].nbytes)


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
