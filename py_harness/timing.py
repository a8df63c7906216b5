"""Timing a kernel variant where it runs: inside the runtime, next to its device.

`python -m py_harness bench` asks a session for these numbers through the service's
`time_case` entry, so the same loop times the kernels on wgpu-py, Dawn, Node and the
browsers; only the transport differs. GPU time comes from timestamp queries where the
device has them, else the wall clock.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from .config import AttentionConfig
from .gpu.device import Bytes, ComputePass, Device
from .run_plan import RunPlan, Split
from .runner import AttentionRunner, create_buffers
from .shaders import ShaderModuleSource
from .variant import Kernel


@dataclass(frozen=True)
class TimingPlan:
    """Warm-up until both `warmup` runs and `warmup_ms` of wall time are done (short
    sizes get many runs, long ones a few); then the median of `runs` timed runs."""

    runs: int = 10
    warmup: int = 2
    warmup_ms: float = 300.0

    def warming(self, started: float, done: int) -> bool:
        return done < self.warmup or (time.perf_counter() - started) * 1e3 < self.warmup_ms


async def time_passes(dev: Device, passes: list[ComputePass], plan: TimingPlan) -> dict:
    """Median GPU ms (timestamps; else wall), median per pass (timestamps only; by entry
    point) and median wall-minus-GPU overhead, over plan.runs runs after the warm-up;
    runs_ms: every run's GPU ms (the demo page shows their spread)."""
    gpu, wall, per_pass = [], [], []
    started, warm = time.perf_counter(), 0
    while plan.warming(started, warm):
        await dev.run_passes(passes)
        warm += 1
    for _ in range(plan.runs):
        t0 = time.perf_counter()
        ms = await dev.run_passes(passes)
        w = (time.perf_counter() - t0) * 1e3
        wall.append(w)
        gpu.append(w if ms is None else ms)
        if ms is not None:
            per_pass.append(dev.last_pass_ms)
    pass_ms = {}
    if len(per_pass) == plan.runs:  # every run timed by timestamps
        pass_ms = {
            p.label: statistics.median(run[j] for run in per_pass) for j, p in enumerate(passes)
        }
    return {
        "ms": statistics.median(gpu),
        "runs_ms": gpu,
        "pass_ms": pass_ms,
        "wall_ms": statistics.median(wall),
        "dispatch_overhead_ms": statistics.median(w - g for w, g in zip(wall, gpu, strict=True)),
    }


async def run_kernel(
    dev: Device,
    code: str,
    inputs: list[bytes],
    out_bytes: list[int],
    groups: tuple[int, int, int],
    runs: int,
    warmup: int = 0,
) -> tuple[list[bytes], float]:
    """One generated kernel (entry point `main`; the probes in benchmarks/) over storage buffers
    bound in order: the inputs but the last read-only, an output of each size in out_bytes,
    then the last input (its dimensions) read-only. Runs it once and reads the outputs back;
    then, where runs > 0, times `runs` runs more after `warmup` (the first run warmed it up).
    Returns the outputs' bytes and the median GPU ms (0 without runs); frees its buffers."""
    *data, dims = inputs
    n_in, n_out = len(data), len(out_bytes)
    layout = tuple(
        [(i, "read-only-storage") for i in range(n_in)]
        + [(n_in + i, "storage") for i in range(n_out)]
        + [(n_in + n_out, "read-only-storage")]
    )
    pipe = await dev.compute_pipeline(
        ShaderModuleSource("probe", (("probe", code),)), "main", layout
    )
    bufs = {i: dev.create_buffer_with_data(d, ("STORAGE",), f"in{i}") for i, d in enumerate(data)}
    for i, size in enumerate(out_bytes):
        bufs[n_in + i] = dev.create_buffer(size, ("STORAGE", "COPY_SRC"), f"out{i}")
    bufs[n_in + n_out] = dev.create_buffer_with_data(dims, ("STORAGE",), "dims")
    pass_ = ComputePass(pipe, dev.create_bind_group(pipe, bufs), groups)
    _, outs = await dev.run_and_read(
        [pass_], [(bufs[n_in + i], n) for i, n in enumerate(out_bytes)]
    )
    ms = 0.0
    if runs:
        plan = TimingPlan(runs, warmup=warmup, warmup_ms=0)
        ms = (await time_passes(dev, [pass_], plan))["ms"]
    for buf in bufs.values():
        dev.destroy_buffer(buf)
    return [bytes(out) for out in outs], ms


async def time_variant(
    runner: AttentionRunner, cfg: AttentionConfig, tensors: dict[str, Bytes], plan: TimingPlan
) -> dict[str, Any]:
    """Forward and backward passes timed on buffers uploaded once, then one full case as
    `check` runs it (validation, uploads, dispatch, readbacks) on the wall clock."""
    dev = runner.device
    chosen = runner.variant.for_head_dim(cfg.head_dim, dev.limits)
    split = Split.of(chosen, cfg, dev.limits)
    run = RunPlan.of(chosen, cfg, split, dev.limits)
    bufs = create_buffers(dev, cfg, tensors, split, chosen, run)

    async def timed(kernels: tuple[Kernel, ...]) -> dict | None:
        passes = await runner.passes(cfg, kernels, bufs, split, run)
        return await time_passes(dev, passes, plan) if kernels else None

    try:
        fwd = await timed(chosen.forward_passes)
        bwd = await timed(chosen.backward)
    finally:
        dev.release_buffers(list(bufs.values()))
    # One full case on new buffers (as a matrix of different shapes runs: so the buffers
    # just given back go), then one on the buffers that one gave back (as repeated runs of
    # one shape do: draws, iterations).
    dev.destroy_released()
    fresh = await _case_overhead(runner, cfg, tensors)
    reused = await _case_overhead(runner, cfg, tensors)
    return {
        "fwd": fwd,
        "bwd": bwd,
        "case_wall_ms": reused[0],
        "case_overhead_ms": reused[1],
        "case_fresh_overhead_ms": fresh[1],
        "timing": "timestamp-query" if dev.has_timestamps else "wall-clock",
    }


async def _case_overhead(
    runner: AttentionRunner, cfg: AttentionConfig, tensors: dict[str, Bytes]
) -> tuple[float, float]:
    """One full case (runner.run): its wall time and the part beyond GPU time, in ms."""
    t0 = time.perf_counter()
    result = await runner.run(cfg, tensors)
    wall = (time.perf_counter() - t0) * 1e3
    gpu = sum(result.timings_ms.get(k, 0.0) for k in ("forward_ms", "backward_ms"))
    return wall, wall - gpu
