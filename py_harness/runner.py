"""Runs the attention kernels on any Device: validate, upload, dispatch, read back."""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field

from . import dtypes, layouts, shaders
from .config import (
    F32_BYTES,
    HOST_INPUTS,
    PACKED,
    AttentionConfig,
    ConfigError,
    check_input_bytes,
    pack_seqlens,
    validate,
)
from .gpu.device import Buffer, Bytes, ComputePass, Device, Pipeline, Submitted, rolls_loops
from .kernels import SEED, Kernel, Variant
from .run_plan import POISON, RunPlan, Split, kernel_key, uniform_key
from .sizing import buffer_bytes, buffer_sizes, data_buffer_bytes, validate_sizes

GRADIENTS = ("dq", "dk", "dv")
PACKED_INPUTS = ("kv", "qkv")  # built from the host's tensors (layouts.py)


@dataclass
class RunResult:
    outputs: dict[str, Bytes]  # the variant's outputs (Variant.outputs), f32 little-endian
    timings_ms: dict[str, float]
    timing_source: str  # "timestamp-query" (GPU time of the passes) or "wall-clock"
    # One sha256 of dq|dk|dv per backward run, where there are several to compare.
    backward_digests: list[str] = field(default_factory=list)


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
        missing = self.variant.missing_features(self.device.features)
        if missing:
            raise ConfigError("variant", f"{missing}; this adapter does not offer it")
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
            if cfg is None and kernel.overrides:  # its constants need a run's configuration
                continue
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
        """tensors: q, k, v (and d_out for backward, mask when cfg.mask_shape; o and lse for
        a backward-only variant) as f32 bytes in the host's canonical layouts."""
        # All checks come before any GPU work: bad input loses nothing.
        validate(cfg)
        refusal = self.variant.refusal(cfg)
        if refusal:
            raise ConfigError("variant", refusal)
        # Only the head_dim specialisation this run dispatches (JIT compilers are slow).
        chosen = self.variant.for_head_dim(cfg.head_dim, self.device.limits)
        # before the tensors are looked at: a too-large case needs none
        known = [r for r in chosen.storage_roles if r not in chosen.scratch]
        validate_sizes(cfg, self.device.limits, [r for r in known if r not in chosen.layouts])
        check_input_bytes(cfg, tensors, self.device.scan_nonfinite)
        for role, dtype in chosen.dtypes.items():  # f16 inputs: each value must fit
            for name in layouts.parts(role):
                if name in tensors and name in (*HOST_INPUTS, "o"):
                    dtypes.check_fits(tensors[name], dtype, name)
        backward = backward and bool(chosen.backward)
        if backward and "d_out" not in tensors:
            check_input_bytes(cfg, {**tensors, "d_out": b""})
        if chosen.forward is None:
            check_given_outputs(cfg, tensors)
        self.check_limits()
        if not 1 <= backward_runs <= 16:
            raise ValueError(f"backward_runs: must be in [1, 16], got {backward_runs}")

        split = Split.of(chosen, cfg, self.device.limits)
        plan = RunPlan.of(chosen, cfg, split, self.device.limits)
        # A forward alone compiles no backward pipeline: where the compiler works at
        # pipeline creation (Tint on SwiftShader) that is most of a small case's time.
        fwd = chosen.forward_passes
        kernels = (*fwd, *(chosen.backward if backward else ()))
        timings = {"compile_ms": await self.prepare(kernels, cfg)}
        dev = self.device
        bufs: dict[str, Buffer] = {}
        try:
            dev.push_error_scopes()
            bufs = create_buffers(dev, cfg, tensors, split, chosen, plan)
            await dev.pop_error_scopes("buffers")

            # Run -1 is the forward, runs 0.. the backward. Each is submitted before the
            # one before it is read (Device.submit): the GPU starts the backward while the
            # forward's outputs are copied out.
            made = tuple(n for n in chosen.outputs if n in ("o", "lse"))
            reads = {-1: OutputReads.of(plan, bufs, made)} if fwd else {}
            grads = OutputReads.of(plan, bufs, GRADIENTS) if backward else None
            reads |= dict.fromkeys(range(backward_runs if backward else 0), grads)
            outputs: dict[str, Bytes] = {}
            digests: list[str] = []
            pending: list[tuple[int, Submitted]] = []
            last = max(reads)
            try:
                for run in reads:
                    kernels = chosen.backward if run >= 0 else fwd
                    passes = await self.passes(cfg, kernels, bufs, split, plan)
                    pending.append((run, await dev.submit(passes, reads[run].reads)))
                    while pending and (len(pending) > 1 or run == last):
                        done, work = pending.pop(0)
                        ms, data = await dev.collect(work)  # which releases it, raising or not
                        got = reads[done].unpack(data)
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
        plan: RunPlan | None = None,
    ) -> list[ComputePass]:
        """One compute pass per kernel, bound to the runner's buffers (create_buffers)."""
        out = []
        for kernel in kernels:
            if plan is not None and kernel_key(kernel) in plan.grids:
                grid = plan.grids[kernel_key(kernel)]
            else:
                grid = kernel.workgroups(cfg, split.dq_slots, split.kv_parts)
            if not all(grid):  # a pass with nothing to do here (Kernel.adds_kv_parts)
                continue
            pipeline = await self.pipeline(kernel, cfg)
            entries = {
                i: bufs[_buffer_name(kernel, i, role)] for i, (role, _) in kernel.bindings.items()
            }
            group = self.device.create_bind_group(pipeline, entries)
            out.append(ComputePass(pipeline, group, grid, kernel.entry_point))
        return out


def _buffer_name(kernel: Kernel, binding: int, role: str) -> str:
    return uniform_key(kernel, binding) if role == "params" else role


def check_given_outputs(cfg: AttentionConfig, tensors: dict[str, Bytes]) -> None:
    """A backward-only variant's O and LSE from the host: each its shape's f32 bytes."""
    shapes = cfg.shapes()
    for name in ("o", "lse"):
        want = F32_BYTES * math.prod(shapes[name])
        got = tensors.get(name)
        if got is None:
            raise ConfigError(name, "is missing: a backward-only variant reads it from the host")
        if len(got) != want:
            raise ConfigError(name, f"has {len(got)} bytes; shape wants {want // 4} float32 values")


def create_buffers(
    dev: Device,
    cfg: AttentionConfig,
    tensors: dict[str, Bytes],
    split: Split,
    variant: Variant = SEED,
    plan: RunPlan | None = None,
) -> dict[str, Buffer]:
    """The buffers the variant's kernels bind, by role, sized by the run's plan
    (RunPlan.floats): the inputs uploaded in the kernels' layouts (packed ones built from
    their parts; an absent one, e.g. no mask, as a placeholder), the uniform structs packed,
    the outputs and zeroed scratch cleared, other scratch filled with NaN. Taken from the
    device's released buffers where they match (Device.acquire_buffers): give them back
    with release_buffers (done here on an error)."""
    plan = plan or RunPlan.of(variant, cfg, split)
    wanted: dict[str, tuple[int, tuple[str, ...]]] = {}
    data: dict[str, bytes] = {}
    given = ("o", "lse", *variant.lse_from) if variant.forward is None else ()
    for role in variant.storage_roles:
        if role == "seqlens":  # from the config, like params
            data[role] = pack_seqlens(cfg)
            wanted[role] = (data_buffer_bytes(data[role]), ("UNIFORM", "COPY_DST"))
            continue
        if role in given or role in PACKED_INPUTS or role in HOST_INPUTS:
            data[role] = plan.input_bytes(role, tensors)  # absent: no d_out, no mask
        elif role in variant.scratch and not variant.scratch[role].zeroed:
            data[role] = POISON * plan.data_bytes(role)
        else:  # written by the kernels: outputs and the scratch (COPY_DST: cleared for reuse)
            wanted[role] = (plan.buffer_bytes(role), ("STORAGE", "COPY_SRC", "COPY_DST"))
            continue
        if role == "alibi_slopes":  # whole even when absent: a fixed-size uniform array
            wanted[role] = (plan.buffer_bytes(role), ("UNIFORM", "STORAGE", "COPY_DST"))
        else:
            usage = ("STORAGE", "COPY_SRC", "COPY_DST")
            wanted[role] = (plan.buffer_bytes(role) if data[role] else buffer_bytes(0), usage)
    for key, raw in plan.uniforms.items():
        data[key] = raw
        wanted[key] = (data_buffer_bytes(raw), ("UNIFORM", "COPY_DST"))
    bufs = dev.acquire_buffers(wanted)
    try:  # whole floats and u32s (check_input_bytes, pack_params, pack_seqlens)
        dev.write_buffers([(bufs[role], raw) for role, raw in data.items() if raw])
    except BaseException:
        dev.release_buffers(list(bufs.values()))
        raise
    return bufs


@dataclass(frozen=True)
class OutputReads:
    """How to read named outputs: each role's buffer read for exactly its floats (buffers
    are allocated in whole vec4s), then brought to the host's layouts (RunPlan.output_bytes:
    a packed gradient split, an LSE converted, or derived from its scratch)."""

    plan: RunPlan
    names: tuple[str, ...]
    roles: tuple[str, ...]  # the buffers read, in order
    reads: list[tuple[Buffer, int]]  # Device.read_buffers's (buffer, nbytes)
    nbytes: tuple[int, ...]  # each role's own bytes (a read may end past them)

    @classmethod
    def of(cls, plan: RunPlan, bufs: dict[str, Buffer], names: tuple[str, ...]) -> OutputReads:
        v = plan.variant
        roles = []
        for name in names:
            if name == "lse" and v.lse_from:
                roles += [r for r in v.lse_from if r not in roles]
                continue
            role = next(r for r in bufs if name in PACKED.get(r, (r,)))
            if role not in roles:
                roles.append(role)
        # a role outside the plan (buffers made for another variant): its canonical size
        floats = {r: plan.floats.get(r) or buffer_sizes(plan.cfg, [r])[r] for r in roles}
        if "dk" in roles or "dv" in roles:  # the first copy where there are kv_parts
            canonical = cfg_floats(plan.cfg)
            floats |= {
                r: canonical[r] for r in ("dk", "dv") if r in roles and r not in plan.placements
            }
        # A read copies whole 4-byte words: an odd count of f16 values reads one more.
        nbytes = {r: dtypes.item_bytes(v.dtype(r)) * floats[r] for r in roles}
        reads = [(bufs[r], -(-nbytes[r] // 4) * 4) for r in roles]
        return cls(plan, names, tuple(roles), reads, tuple(nbytes[r] for r in roles))

    def unpack(self, data: list[Bytes]) -> dict[str, Bytes]:
        raw = {
            role: got if len(got) == n else memoryview(got)[:n]  # a page's bytes: no slicing
            for role, got, n in zip(self.roles, data, self.nbytes, strict=True)
        }
        v = self.plan.variant
        out: dict[str, Bytes] = {}
        for role, got in raw.items():
            if role not in v.lse_from:
                out.update(self.plan.output_bytes(role, got))
        if "lse" in self.names and v.lse_from:
            out["lse"] = self.plan.derived_lse(raw[v.lse_from[0]], raw[v.lse_from[1]])
        return {n: out[n] for n in self.names}  # Variant's checks: each is bound, whole or packed


def cfg_floats(cfg: AttentionConfig) -> dict[str, int]:
    """Each output tensor's floats (one copy of dK and dV)."""
    return {n: math.prod(shape) for n, shape in cfg.shapes().items()}


async def read_outputs(
    dev: Device,
    cfg: AttentionConfig,
    bufs: dict[str, Buffer],
    names: tuple[str, ...],
    variant: Variant = SEED,
) -> dict[str, Bytes]:
    """The named outputs' bytes, read in one batch (Device.read_buffers; OutputReads)."""
    reads = OutputReads.of(RunPlan.of(variant, cfg, Split()), bufs, names)
    return reads.unpack(await dev.read_buffers(reads.reads))


def _digest(grads: dict[str, Bytes]) -> str:
    h = hashlib.sha256()
    for name in GRADIENTS:
        h.update(grads[name])
    return h.hexdigest()
