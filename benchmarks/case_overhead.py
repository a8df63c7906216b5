"""Where a full case's host time goes: each step of AttentionRunner.run on a native runtime.

    python3 benchmarks/case_overhead.py [--runtime wgpu|dawn] [--head-dim 128] [--seq 4096]
        [--heads 16] [--causal] [--runs 4] [--fresh] [--copies]

Wraps the Device's methods and the runner's steps in a wall clock and prints, per run of
one case (fast variant, B = 1), its wall time, GPU time (timestamps) and the time in each
step: the finite-input check, taking buffers (new or the last run's) and uploads, each
dispatch submitted with its readback (submit), waited for and read (collect: the GPU time
not yet past, one map and the copies out of the mapping, copy_out), giving the buffers
back. The steps nest (create_buffers holds acquire_buffers and write_buffers; collect
holds copy_out) and the GPU works during the host's steps (the backward is submitted
before the forward's outputs are read), so they do not add up. Each run reuses the
previous run's buffers, as repeated runs of one shape do (draws, bench); --fresh destroys
them first, as a matrix of different shapes does. --copies times the parts of one readback
of 128 MB instead: making a MAP_READ staging buffer, the GPU copy and map, the copy out of
the mapping (as bytes, and as the native backends make it over threads), the finite-input
check (bytes operations, and threaded), and a plain host copy for comparison. The H200's
figures are in docs/records/gpu.md."""

from __future__ import annotations

import argparse
import asyncio
import collections
import inspect
import time
from typing import Any

import numpy as np

from py_harness import config, runner
from py_harness.config import AttentionConfig
from py_harness.host.gpu import host_memory, native
from py_harness.host.paths import shader_sources
from py_harness.kernels import variant

SPENT: collections.Counter[str] = collections.Counter()


def _timed(owner: Any, name: str) -> None:
    """Replace owner.name by a version that adds its wall time to SPENT[name]."""
    f = getattr(owner, name)
    if inspect.iscoroutinefunction(f):

        async def wrapped(*args: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return await f(*args, **kw)
            finally:
                SPENT[name] += time.perf_counter() - t
    else:

        def wrapped(*args: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return f(*args, **kw)
            finally:
                SPENT[name] += time.perf_counter() - t

    setattr(owner, name, wrapped)


async def steps(args: argparse.Namespace) -> None:
    dev = await native.request_device(implementation=args.runtime)
    s, d = args.seq, args.head_dim
    cfg = AttentionConfig(1, args.heads, s, s, d, causal=args.causal)
    rng = np.random.default_rng(0)
    x = {
        n: rng.standard_normal((1, s, args.heads, d), dtype=np.float32).tobytes()
        for n in ("q", "k", "v", "d_out")
    }
    run = runner.AttentionRunner(dev, shader_sources(), variant("fast"))
    await run.run(cfg, x)  # compiles, and warms every path
    steps = ("scan_nonfinite", "acquire_buffers", "write_buffers", "release_buffers")
    for name in (*steps, "submit", "collect"):
        _timed(dev, name)
    _timed(runner, "create_buffers")
    _timed(host_memory, "copy_out")
    for _ in range(args.runs):
        if args.fresh:
            dev.destroy_released()
        SPENT.clear()
        t = time.perf_counter()
        result = await run.run(cfg, x)
        wall = (time.perf_counter() - t) * 1e3
        gpu = result.timings_ms["forward_ms"] + result.timings_ms["backward_ms"]
        parts = " ".join(f"{k} {v * 1e3:.1f}" for k, v in SPENT.items())
        print(f"wall {wall:.1f} gpu {gpu:.1f} beyond {wall - gpu:.1f} ms | {parts}", flush=True)


async def copies(args: argparse.Namespace) -> None:
    dev = await native.request_device(implementation=args.runtime)
    gpu, wgpu_dev = dev._gpu, dev._device  # the backend's own objects: this times them
    n = 128 << 20
    usage = gpu.BufferUsage
    src = wgpu_dev.create_buffer(size=n, usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)
    wgpu_dev.queue.write_buffer(
        src, 0, np.random.default_rng(0).standard_normal(n // 4, dtype=np.float32).tobytes()
    )
    for _ in range(args.runs):
        row = {}
        t = time.perf_counter()
        staging = wgpu_dev.create_buffer(size=n, usage=usage.MAP_READ | usage.COPY_DST)
        row["make staging"] = time.perf_counter() - t
        t = time.perf_counter()
        encoder = wgpu_dev.create_command_encoder()
        encoder.copy_buffer_to_buffer(src, 0, staging, 0, n)
        wgpu_dev.queue.submit([encoder.finish()])
        staging.map_sync(gpu.MapMode.READ)
        row["GPU copy + map"] = time.perf_counter() - t
        t = time.perf_counter()
        mapped = staging.read_mapped(copy=False)
        out = bytes(mapped)
        row["copy out of the mapping"] = time.perf_counter() - t
        t = time.perf_counter()
        host_memory.copy_out([mapped])
        row["copy out over threads"] = time.perf_counter() - t
        del mapped
        staging.unmap()
        staging.destroy()
        t = time.perf_counter()
        config.any_nonfinite(out)
        row["finite check"] = time.perf_counter() - t
        t = time.perf_counter()
        host_memory.nonfinite([out])
        row["finite check over threads"] = time.perf_counter() - t
        held = bytearray(n)
        t = time.perf_counter()
        held[:] = out
        row["host copy"] = time.perf_counter() - t
        print(" ".join(f"{k} {v * 1e3:.1f} ms;" for k, v in row.items()), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtime", default="wgpu", choices=sorted(native.IMPLEMENTATIONS))
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--fresh", action="store_true", help="new buffers for every run")
    parser.add_argument("--copies", action="store_true", help="time one readback's parts")
    args = parser.parse_args()
    asyncio.run(copies(args) if args.copies else steps(args))


if __name__ == "__main__":
    main()
