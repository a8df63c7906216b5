"""Runs the attention kernels on any Device: validate, upload, dispatch, read back."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

from . import packing, shaders
from .config import (
    HOST_INPUTS,
    PACKED,
    AttentionConfig,
    ConfigError,
    binding_cap,
    buffer_bytes,
    buffer_sizes,
    check_input_bytes,
    data_buffer_bytes,
    pack_seqlens,
    validate,
    validate_sizes,
)
from .gpu.device import Buffer, Bytes, ComputePass, Device, Pipeline, Submitted, rolls_loops
from .kernels import SEED, Kernel, Variant
from .params import pack_params

GRADIENTS = ("dq", "dk", "dv")
PACKED_INPUTS = ("kv", "qkv")  # built from the host's tensors (packing.py)


@dataclass
class RunResult:
    outputs: dict[str, Bytes]  # o, lse and, with backward, dq, dk, dv (f32 little-endian)
    timings_ms: dict[str, float]
    timing_source: str  # "timestamp-query" (GPU time of the passes) or "wall-clock"
    # One sha256 of dq|dk|dv per backward run, where there are several to compare.
    backward_digests: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Split:
    """How a variant's backward splits its work on a device: dq_slots partial sums of dQ
    (Variant.dq_slots; 0: none), or one per key tile in the band layout of dq_band_rows
    rows each (Variant.dq_band_rows; 0: not), and kv_parts copies of dK and dV
    (Variant.kv_parts)."""

    dq_slots: int = 0
    kv_parts: int = 1
    dq_band_rows: int = 0

    @classmethod
    def of(cls, variant: Variant, cfg: AttentionConfig, limits: dict[str, int]) -> Split:
        cap = binding_cap(limits)
        band = variant.dq_band_rows(cfg, cap)
        return cls(variant.dq_slots(cfg, cap, band), variant.kv_parts(cfg, cap, band), band)


class AttentionRunner:
    """Runs one kernel variant, from one set of WGSL sources, on one device."""

    def __init__(self, device: Device, sources: dict[str, str], variant: Variant = SEED) -> None:
        self.device = device
        self.variant = variant
        # Kernel.constants' adapter-dependent choice, made once per device
        self.rolled_loops = rolls_loops(device.adapter_info)
        # Keyed by entry point and files: a variant's head_dim specialisations share entry
        # point names.
        self.modules = {
            (k.entry_point, k.files): shaders.compose(k.entry_point, k.files, sources)
            for k in variant.kernels
        }

    async def pipeline(self, kernel: Kernel, cfg: AttentionConfig | None = None) -> Pipeline:
        """The kernel's pipeline, with the constants a run of cfg (or of any config, without
        cfg) sets on this device (Kernel.constants)."""
        module = self.modules[(kernel.entry_point, kernel.files)]
        constants = kernel.constants(cfg, self.rolled_loops)
        return await self.device.compute_pipeline(
            module, kernel.entry_point, kernel.layout, constants
        )

    def check_limits(self) -> None:
        for name, need in self.variant.required_limits.items():
            have = self.device.limits.get(name, 0)
            if have < need:
                raise ConfigError(
                    "variant",
                    f"{self.variant.name} needs {name} >= {need}; this device has {have}",
                )

    async def prepare(
        self, kernels: tuple[Kernel, ...] | None = None, cfg: AttentionConfig | None = None
    ) -> float:
        """Compile the pipelines now (default: all of the variant's that the device can run;
        for a run of cfg where given; cached per device); returns the time it took in ms."""
        self.check_limits()
        t0 = time.perf_counter()
        every = self.variant.kernels_for(self.device.limits)
        for kernel in every if kernels is None else kernels:
            await self.pipeline(kernel, cfg)
        return (time.perf_counter() - t0) * 1e3

    async def run(
        self,
        cfg: AttentionConfig,
        tensors: dict[str, Bytes],
        *,
        backward: bool = True,
        backward_runs: int = 1,
    ) -> RunResult:
        """tensors: q, k, v (and d_out for backward, mask when cfg.mask_shape) as f32 bytes."""
        # All checks come before any GPU work: bad input loses nothing.
        validate(cfg)
        refusal = self.variant.refusal(cfg)
        if refusal:
            raise ConfigError("variant", refusal)
        # Only the head_dim specialisation this run dispatches (JIT compilers are slow).
        chosen = self.variant.for_head_dim(cfg.head_dim, self.device.limits)
        # before the tensors are looked at: a too-large case needs none
        validate_sizes(cfg, self.device.limits, chosen.storage_roles)
        check_input_bytes(cfg, tensors, self.device.scan_nonfinite)
        if backward and "d_out" not in tensors:
            check_input_bytes(cfg, {**tensors, "d_out": b""})
        self.check_limits()
        if not 1 <= backward_runs <= 16:
            raise ValueError(f"backward_runs: must be in [1, 16], got {backward_runs}")

        split = Split.of(chosen, cfg, self.device.limits)
        # A forward alone compiles no backward pipeline: where the compiler works at
        # pipeline creation (Tint on SwiftShader) that is most of a small case's time.
        kernels = (chosen.forward, *(chosen.backward if backward else ()))
        timings = {"compile_ms": await self.prepare(kernels, cfg)}
        dev = self.device
        bufs: dict[str, Buffer] = {}
        try:
            dev.push_error_scopes()
            bufs = create_buffers(dev, cfg, tensors, split, chosen)
            await dev.pop_error_scopes("buffers")

            # Run -1 is the forward, runs 0.. the backward. Each is submitted before the
            # one before it is read (Device.submit): the GPU starts the backward while the
            # forward's outputs are copied out.
            reads = {-1: OutputReads.of(cfg, bufs, ("o", "lse"))}
            reads |= dict.fromkeys(
                range(backward_runs if backward else 0), OutputReads.of(cfg, bufs, GRADIENTS)
            )
            outputs: dict[str, Bytes] = {}
            digests: list[str] = []
            pending: list[tuple[int, Submitted]] = []
            last = max(reads)
            try:
                for run in reads:
                    kernels = chosen.backward if run >= 0 else (chosen.forward,)
                    passes = await self.passes(cfg, kernels, bufs, split)
                    pending.append((run, await dev.submit(passes, reads[run].reads)))
                    while pending and (len(pending) > 1 or run == last):
                        done, work = pending.pop(0)
                        ms, data = await dev.collect(work)  # which releases it, raising or not
                        got = reads[done].unpack(cfg, data)
                        if done <= 0:  # the forward's outputs, the first backward's
                            timings["backward_ms" if done == 0 else "forward_ms"] = ms
                            outputs.update(got)
                        if done >= 0 and backward_runs > 1:  # runs compared bit for bit
                            digests.append(_digest(got))
            finally:
                for _, work in pending:
                    dev.discard(work)
            source = "timestamp-query" if dev.has_timestamps else "wall-clock"
            return RunResult(outputs, timings, source, digests)
        finally:
            dev.release_buffers(list(bufs.values()))

    async def passes(
        self,
        cfg: AttentionConfig,
        kernels: tuple[Kernel, ...],
        bufs: dict[str, Buffer],
        split: Split,
    ) -> list[ComputePass]:
        """One compute pass per kernel, bound to the runner's buffers (create_buffers)."""
        out = []
        for kernel in kernels:
            grid = kernel.workgroups(cfg, split.dq_slots, split.kv_parts)
            if not all(grid):  # a pass with nothing to do here (Kernel.adds_kv_parts)
                continue
            pipeline = await self.pipeline(kernel, cfg)
            entries = {i: bufs[name] for i, (name, _) in kernel.bindings.items()}
            group = self.device.create_bind_group(pipeline, entries)
            out.append(ComputePass(pipeline, group, grid, kernel.entry_point))
        return out


def create_buffers(
    dev: Device,
    cfg: AttentionConfig,
    tensors: dict[str, Bytes],
    split: Split,
    variant: Variant = SEED,
) -> dict[str, Buffer]:
    """The buffers the variant's kernels bind, by role, sized by config.buffer_sizes: the
    inputs uploaded (packed ones built from their parts; an absent one, e.g. no mask, as a
    placeholder), params packed in the variant's layout, the outputs and scratch zeroed.
    Taken from the device's released buffers where they match (Device.acquire_buffers):
    give them back with release_buffers (done here on an error)."""
    sizes = buffer_sizes(
        cfg, variant.storage_roles, split.dq_slots, split.kv_parts, split.dq_band_rows
    )
    wanted: dict[str, tuple[int, tuple[str, ...]]] = {}
    data: dict[str, bytes] = {}
    for role, floats in sizes.items():
        if role == "seqlens":  # from the config, like params
            data[role] = pack_seqlens(cfg)
            wanted[role] = (data_buffer_bytes(data[role]), ("UNIFORM", "COPY_DST"))
            continue
        if role in PACKED_INPUTS:
            data[role] = packing.pack(cfg, role, tensors)
        elif role in HOST_INPUTS:
            data[role] = tensors.get(role, b"")  # absent: d_out for a forward alone, no mask
        else:  # written by the kernels: outputs and the scratch (COPY_DST: cleared for reuse)
            wanted[role] = (buffer_bytes(floats), ("STORAGE", "COPY_SRC", "COPY_DST"))
            continue
        if role == "alibi_slopes":  # whole even when absent: a fixed-size uniform array
            wanted[role] = (buffer_bytes(floats), ("UNIFORM", "STORAGE", "COPY_DST"))
        else:
            wanted[role] = (buffer_bytes(floats if data[role] else 0), ("STORAGE", "COPY_DST"))
    if variant.binds("params"):
        data["params"] = pack_params(cfg, variant.params, split.dq_band_rows)
        wanted["params"] = (data_buffer_bytes(data["params"]), ("UNIFORM", "COPY_DST"))
    bufs = dev.acquire_buffers(wanted)
    try:  # whole floats and u32s (check_input_bytes, pack_params, pack_seqlens)
        dev.write_buffers([(bufs[role], raw) for role, raw in data.items() if raw])
    except BaseException:
        dev.release_buffers(list(bufs.values()))
        raise
    return bufs


@dataclass(frozen=True)
class OutputReads:
    """How to read named outputs: each role's buffer read for exactly its tensor's floats
    (buffers are allocated in whole vec4s), a packed gradient split after (packing.py)."""

    names: tuple[str, ...]
    roles: tuple[str, ...]  # the buffers read, in order
    parts: dict[str, list[str]]  # role -> the names read out of it
    reads: list[tuple[Buffer, int]]  # Device.read_buffers's (buffer, nbytes)

    @classmethod
    def of(
        cls, cfg: AttentionConfig, bufs: dict[str, Buffer], names: tuple[str, ...]
    ) -> OutputReads:
        parts = {role: [n for n in PACKED.get(role, (role,)) if n in names] for role in bufs}
        roles = tuple(role for role, wanted in parts.items() if wanted)
        sizes = buffer_sizes(cfg, roles)
        return cls(names, roles, parts, [(bufs[role], 4 * sizes[role]) for role in roles])

    def unpack(self, cfg: AttentionConfig, data: list[Bytes]) -> dict[str, Bytes]:
        out: dict[str, Bytes] = {}
        for role, raw in zip(self.roles, data, strict=True):
            got = packing.unpack(cfg, role, raw) if role in PACKED else {role: raw}
            out.update((n, got[n]) for n in self.parts[role])
        return {n: out[n] for n in self.names}  # Variant's checks: each is bound, whole or packed


async def read_outputs(
    dev: Device, cfg: AttentionConfig, bufs: dict[str, Buffer], names: tuple[str, ...]
) -> dict[str, Bytes]:
    """The named outputs' bytes, read in one batch (Device.read_buffers; OutputReads)."""
    reads = OutputReads.of(cfg, bufs, names)
    return reads.unpack(cfg, await dev.read_buffers(reads.reads))


def _digest(grads: dict[str, Bytes]) -> str:
    h = hashlib.sha256()
    for name in GRADIENTS:
        h.update(grads[name])
    return h.hexdigest()
