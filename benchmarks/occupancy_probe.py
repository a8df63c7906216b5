"""How many 256-invocation workgroups share one SM, by workgroup memory and live registers.

A latency-bound kernel (a pointer chase through workgroup memory) takes the same time
for 1..n workgroups per SM as long as they are resident together, so time(k x SMs) /
time(1 x SMs) stays near 1 up to the residency limit and steps up after it. Each probe
keeps a number of floats live through the loop (updated every 16th step, so the chase
stays the critical path) and declares an amount of workgroup memory.

    python3 benchmarks/occupancy_probe.py [--sms 132] [--iters 20000] [--kib 24,26 --live 16,96]

Prints, per (workgroup memory, live floats), the GPU time of sms x k workgroups for
k = 2, 3, 4, 8 relative to k = 1. Needs wgpu (native backend) and timestamp queries.
The H200 figures are in docs/records/gpu.md.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterable

from py_harness.gpu.device import ComputePass, Device
from py_harness.host.gpu.native import request_device
from py_harness.shaders import ShaderModuleSource
from py_harness.timing import TimingPlan, time_passes


def probe_wgsl(smem_vec4: int, live_vec4: int, iters: int) -> str:
    names = [f"a{k}" for k in range(live_vec4)]
    init = "\n".join(f"var {a} = src[(base + {k}u) & 1023u];" for k, a in enumerate(names))
    update = "\n".join(f"{a} = fma({a}, v, {a});" for a in names)
    total = " + ".join(names) if names else "vec4<f32>(0.0)"
    return f"""
var<workgroup> sm: array<vec4<f32>, {smem_vec4}>;
@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {{
for (var i = lid; i < {smem_vec4}u; i += 256u) {{
sm[i] = vec4<f32>(bitcast<f32>((i * 97u + 13u) % {smem_vec4}u), 1.0, 1.0, 1.0);
}}
workgroupBarrier();
let base = wg.x * 256u + lid;
{init}
var idx = lid % {smem_vec4}u;
var v = vec4<f32>(0.0);
for (var it = 0u; it < {iters}u; it++) {{
v = sm[idx];
idx = bitcast<u32>(v.x);
if ((it & 15u) == 15u) {{
{update}
}}
}}
dst[base] = v + {total};
}}
"""


# (workgroup memory KiB, live floats / 4): a memory sweep, a register sweep, and both.
CONFIGS = (
    *((kb, 4) for kb in (1, 8, 16, 20, 24, 28, 30.25, 32, 40, 48)),
    *((1, n) for n in (8, 16, 24, 28, 30, 32, 36, 40, 48, 56)),
    *((30.25, n) for n in (8, 16, 24, 32)),
)
SPREAD = (1, 2, 3, 4, 8)  # workgroups per SM dispatched


async def residency(
    dev: Device, configs: Iterable[tuple[float, int]], sms: int, iters: int, runs: int
) -> list[tuple[float, int, list[float]]]:
    """(KiB, live floats, GPU ms of sms x k workgroups for k in SPREAD) per config that
    fits the device's workgroup memory limit."""
    limit = dev.limits["maxComputeWorkgroupStorageSize"]
    src = dev.create_buffer_with_data(bytes(16 * 1024), ("STORAGE",), "src")
    dst = dev.create_buffer(16 * 256 * sms * max(SPREAD), ("STORAGE",), "dst")
    layout = ((0, "read-only-storage"), (1, "storage"))
    rows = []
    for kb, live in configs:
        smem = int(kb * 1024) // 16
        if smem * 16 > limit:
            continue
        code = probe_wgsl(smem, live, iters)
        pipe = await dev.compute_pipeline(
            ShaderModuleSource("probe", (("probe", code),)), "main", layout
        )
        group = dev.create_bind_group(pipe, {0: src, 1: dst})
        times = []
        for k in SPREAD:
            pass_ = ComputePass(pipe, group, (sms * k, 1, 1))
            plan = TimingPlan(runs, warmup=1, warmup_ms=0)
            times.append((await time_passes(dev, [pass_], plan))["ms"])
        rows.append((kb, 4 * live, times))
    return rows


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sms", type=int, default=132, help="SMs (compute units) of the GPU")
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--kib", help="workgroup memory sizes (KiB, comma-separated) instead of the sweep"
    )
    ap.add_argument("--live", default="16", help="live floats per invocation, with --kib")
    args = ap.parse_args()
    configs = CONFIGS
    if args.kib:
        lives = [int(n) // 4 for n in args.live.split(",")]
        configs = [(float(kb), n) for kb in args.kib.split(",") for n in lives]
    dev = await request_device()
    if not dev.has_timestamps:
        raise SystemExit("the adapter has no timestamp-query: GPU times are needed")
    print(dev.adapter_info)
    print(f"{'smem KiB':>9} {'live f32':>8} {'k=1 ms':>8}  t(k)/t(1) for k =", *SPREAD[1:])
    for kb, live, times in await residency(dev, configs, args.sms, args.iters, args.runs):
        ratios = " ".join(f"{t / times[0]:5.2f}" for t in times[1:])
        print(f"{kb:9.2f} {live:8d} {times[0]:8.3f}  {ratios}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
