"""Probes of the driver under the kernels: what an adapter does that it does not report.

probe_workgroup_zero checks that workgroup memory starts zeroed, as WGSL requires (the
kernels' zeroing is Tint's own on SwiftShader, not the driver's: gpu/device.py). Each
workgroup counts the words of a workgroup array that are not zero before it writes any,
then fills the array with a pattern. Where nothing zeroes it, a workgroup that runs where
an earlier one ran finds that one's pattern.

probe_loops measures a loop budget. Mesa's lavapipe (gallivm) gives each SIMD vector of
shader invocations one loop limiter of 65535 passes, shared by every loop the invocations
run and decremented at the end of every pass (the exiting pass included); once it is
spent, every loop ends after its current pass, silently. Two tiny kernels show it: one loop
of SINGLE passes, and OUTER passes of a loop of INNER passes followed by a loop of SECOND
passes; each counts the loop bodies it ran. Without a budget they run every pass. With
lavapipe's, the single loop stops at 65535, and the nest stops where its passes add up to
65535: each outer pass costs INNER + 1 passes of the inner loop and one of its own, so 642
outer passes spend 65484, the 643rd gets 51 inner bodies before the limiter reaches 0, and
the second loop then runs one pass (host/reproducers.py checks these numbers).

Pure Python over the Device interface: runs in Pyodide and natively.
"""

from __future__ import annotations

import struct

from .gpu.device import ComputePass, Device
from .shaders import ShaderModuleSource

SINGLE, OUTER, INNER, SECOND = 70000, 650, 100, 10

LOOP_PROBE_WGSL = """\
// Loop-budget probe (py_harness/probes.py). Trip counts come from a uniform, so no
// compiler can unroll the loops; each entry point counts the loop bodies it ran.
struct LoopProbe {
    single: u32,
    outer: u32,
    inner: u32,
    second: u32,
};
@group(0) @binding(0) var<uniform> probe: LoopProbe;
@group(0) @binding(1) var<storage, read_write> counts: array<u32, 4>;

// Dispatch (1, 1, 1): counts[0] = bodies run of one loop of probe.single passes.
@compute @workgroup_size(1)
fn probe_single() {
    var bodies = 0u;
    for (var i = 0u; i < probe.single; i++) {
        bodies++;
    }
    counts[0] = bodies;
}

// Dispatch (1, 1, 1): counts[1..3] = bodies run of probe.outer passes of a loop of
// probe.inner passes, and then of a loop of probe.second passes.
@compute @workgroup_size(1)
fn probe_nested() {
    var outer = 0u;
    var inner = 0u;
    for (var i = 0u; i < probe.outer; i++) {
        outer++;
        for (var j = 0u; j < probe.inner; j++) {
            inner++;
        }
    }
    var second = 0u;
    for (var i = 0u; i < probe.second; i++) {
        second++;
    }
    counts[1] = outer;
    counts[2] = inner;
    counts[3] = second;
}
"""

# 22784 bytes: the fast kernels' workgroup array (fa2_fast_common.wgsl), within the
# 32768 that every adapter here allows. Many more workgroups than a CPU driver has threads,
# so that each thread runs several of them, one after the other, in each dispatch.
WORKGROUP_ZERO_WORDS = 5696
WORKGROUP_ZERO_GROUPS = 64
WORKGROUP_ZERO_DISPATCHES = 2

ZERO_PROBE_WGSL = f"""\
// Workgroup-zeroing probe (py_harness/probes.py). Dispatch ({WORKGROUP_ZERO_GROUPS}, 1, 1), twice.
const WORDS: u32 = {WORKGROUP_ZERO_WORDS}u;
@group(0) @binding(0) var<storage, read_write> nonzero: array<atomic<u32>, 1>;
var<workgroup> scratch: array<u32, WORDS>;

// nonzero[0] += the words of the workgroup array that are not zero at the start; then the
// array is filled with words that are never zero, for the workgroups after this one.
@compute @workgroup_size(64)
fn probe_zero(@builtin(local_invocation_index) lid: u32) {{
    var count = 0u;
    for (var i = lid; i < WORDS; i += 64u) {{
        count += select(0u, 1u, scratch[i] != 0u);
    }}
    atomicAdd(&nonzero[0], count);
    workgroupBarrier();
    for (var i = lid; i < WORDS; i += 64u) {{
        scratch[i] = 0x9e3779b9u ^ i;
    }}
}}
"""
ZERO_PROBE = ShaderModuleSource("workgroup zero probe", (("probe_zero.wgsl", ZERO_PROBE_WGSL),))

LOOP_PROBE = ShaderModuleSource("loop probe", (("probe_loops.wgsl", LOOP_PROBE_WGSL),))
_LAYOUT = ((0, "uniform"), (1, "storage"))


async def probe_loops(device: Device) -> dict[str, object]:
    """Run both probe kernels: {"asked": [single, outer, inner, second], "single": bodies,
    "nested": [outer, inner, second bodies]}."""
    asked = (SINGLE, OUTER, INNER, SECOND)
    single = await device.compute_pipeline(LOOP_PROBE, "probe_single", _LAYOUT)
    nested = await device.compute_pipeline(LOOP_PROBE, "probe_nested", _LAYOUT)
    params = device.create_buffer_with_data(struct.pack("<4I", *asked), ("UNIFORM",), "probe")
    counts = device.create_buffer(16, ("STORAGE", "COPY_SRC"), "probe counts")
    try:
        passes = [
            ComputePass(p, device.create_bind_group(p, {0: params, 1: counts}), (1, 1, 1), name)
            for p, name in ((single, "probe_single"), (nested, "probe_nested"))
        ]
        await device.run_passes(passes)
        got = struct.unpack("<4I", await device.read_buffer(counts))
    finally:
        device.destroy_buffer(params)
        device.destroy_buffer(counts)
    return {"asked": list(asked), "single": got[0], "nested": list(got[1:])}


async def probe_workgroup_zero(device: Device) -> dict[str, int]:
    """Count the workgroup words that are not zero when a workgroup starts, over
    WORKGROUP_ZERO_DISPATCHES dispatches of a kernel that then fills them: {"words": words
    read, "nonzero": count} (0 where zeroing works)."""
    probe = await device.compute_pipeline(ZERO_PROBE, "probe_zero", ((0, "storage"),))
    counter = device.create_buffer_with_data(bytes(4), ("STORAGE", "COPY_SRC"), "zero probe")
    try:
        group = device.create_bind_group(probe, {0: counter})
        groups = (WORKGROUP_ZERO_GROUPS, 1, 1)
        runs = range(WORKGROUP_ZERO_DISPATCHES)
        await device.run_passes([ComputePass(probe, group, groups, "probe_zero") for _ in runs])
        (nonzero,) = struct.unpack_from("<I", await device.read_buffer(counter))
    finally:
        device.destroy_buffer(counter)
    words = WORKGROUP_ZERO_WORDS * WORKGROUP_ZERO_GROUPS * WORKGROUP_ZERO_DISPATCHES
    return {"words": words, "nonzero": nonzero}
