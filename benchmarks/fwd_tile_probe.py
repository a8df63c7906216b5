"""An attention forward in larger register blocks, timed against the fast kernels' 4 x 4.

benchmarks/gemm_tile_probe.py measures plain GEMMs by register block; this asks what survives
of a larger block's gain with the softmax around it. One generated forward (head_dim 64,
no mask, no causal, 64 query rows per workgroup, key tiles of 64, both GEMMs in TM x TN
register blocks) per block shape, the 4 x 4 of the fast kernels among them, so the shapes
are compared in one code structure; `bench --variant fast` in the same session relates
them to the fast forward. Each is checked against NumPy at a small size first.

    python3 benchmarks/fwd_tile_probe.py [--implementation wgpu|dawn] [--seq 4096] [--heads 16]

Layout as the harness's: Q, K, V, O as [S, heads, 64], the LSE as [heads, S].
"""

from __future__ import annotations

import argparse
import asyncio

import numpy as np

from py_harness.gpu.device import Device
from py_harness.host.arg_types import positive_int
from py_harness.host.gpu.native import request_device
from py_harness.host.paths import SHADER_DIR
from py_harness.host.wgsl_decls import function_source
from py_harness.timing import run_kernel

# The fast kernels' register micro-kernels, taken from their file: the same fma chains.
MICRO_KERNELS = function_source(
    (SHADER_DIR / "fa2_fast_common.wgsl").read_text(), "ff_dot", "ff_dot4", "ff_axpy"
)
D = 64  # head_dim
ROWS = 64  # query rows per workgroup, keys per tile
BLOCKS = ((4, 4), (8, 4), (4, 8), (8, 8))  # (TM, TN): rows x score columns per invocation
# Workgroup memory (vec4s): Q and K chunks [0, 1152), then the P tile [0, 1088) over them;
# V in halves of 32 keys from 1152.
V0 = 1152
SMEM = V0 + 32 * 17


def workgroup_bytes(tn: int) -> int:
    """sm and the row reductions' red (ROWS x ROWS / TN floats)."""
    return 16 * SMEM + 4 * ROWS * (ROWS // tn)


def forward_wgsl(tm: int, tn: int) -> str:
    """The forward for (TM, TN): invocation (tx, ty) owns query rows ty + NY i (i < TM),
    score columns tx + NX j (j < TN) and vec4 columns tx + NX g (g < TN / 4) of O."""
    nx, ny = ROWS // tn, ROWS // tm
    inv, groups = nx * ny, tn // 4
    rows = [f"ty + {ny * i}u" for i in range(tm)]
    pairs = [(i, g) for i in range(tm) for g in range(groups)]

    def each(fmt: str, items) -> str:
        return "\n    ".join(fmt.format(*x) for x in items)

    stage_qk = each(
        "{{ let e = lid + {0}u; let r = e / 8u; let c = e % 8u;"
        " sm[r * 9u + c] = q[(q0 + r) * rs + h * 16u + 8u * chunk + c] * scale;"
        " sm[576u + r * 9u + c] = k[(k0 + r) * rs + h * 16u + 8u * chunk + c]; }}",
        [(s,) for s in range(0, 512, inv)],
    )
    stage_v = each(
        "{{ let e = lid + {0}u; let r = e / 16u; let c = e % 16u;"
        f" sm[{V0}u + r * 17u + c] = v[(k0 + half + r) * rs + h * 16u + c]; }}}}",
        [(s,) for s in range(0, 512, inv)],
    )
    b_cols = [f"b{4 * g + j}" for g in range(groups) for j in range(4)]
    score_loop = each("let a{0} = sm[({1}) * 9u + c];", [(i, rows[i]) for i in range(tm)])
    score_loop += "\n    " + each(
        "let b{0} = sm[576u + (tx + {1}u) * 9u + c];", [(j, nx * j) for j in range(tn)]
    )
    score_loop += "\n    " + each(
        "s{0}_{1} = ff_dot4(s{0}_{1}, a{0}, mat4x4<f32>({2}));",
        [(i, g, ", ".join(b_cols[4 * g : 4 * g + 4])) for i, g in pairs],
    )
    maxima = [[f"max4(s{i}_{g})" for g in range(groups)] for i in range(tm)]
    row_max = each(
        "red[({0}) * {1}u + tx] = {2};",
        [
            (rows[i], nx, m[0] if groups == 1 else f"max({', '.join(m)})")
            for i, m in enumerate(maxima)
        ],
    )
    softmax = each(
        "let mx{0} = max(m{0}, red_max(({1}) * {2}u));"
        " let corr{0} = exp(m{0} - mx{0}); m{0} = mx{0};",
        [(i, rows[i], nx) for i in range(tm)],
    )
    softmax += "\n    " + each("s{0}_{1} = exp(s{0}_{1} - vec4<f32>(m{0}));", pairs)
    softmax += "\n    " + each(
        "l{0} = l{0} * corr{0} + {1};",
        [(i, " + ".join(f"sum4(s{i}_{g})" for g in range(groups))) for i in range(tm)],
    )
    softmax += "\n    " + each("o{0}_{1} *= corr{0};", pairs)
    # P[row][tx + NX j], j = 4 g + kk: vec4 (tx + NX j) / 4, component tx % 4 (NX % 4 == 0)
    put_p = each(
        "sm[({0}) * 17u + (tx + {1}u) / 4u][tx % 4u] = s{2}_{3}[{4}];",
        [
            (rows[i], nx * (4 * g + kk), i, g, kk)
            for i in range(tm)
            for g in range(groups)
            for kk in range(4)
        ],
    )
    pv_loop = each(
        "let a{0} = sm[({1}) * 17u + half / 4u + kk];", [(i, rows[i]) for i in range(tm)]
    )
    pv_loop += "\n    " + each(
        f"let v{{0}}_{{1}} = sm[{V0}u + (4u * kk + {{0}}u) * 17u + tx + {{2}}u];",
        [(r, g, nx * g) for r in range(4) for g in range(groups)],
    )
    pv_loop += "\n    " + each(
        "o{0}_{1} = ff_axpy(o{0}_{1}, a{0}, mat4x4<f32>(v0_{1}, v1_{1}, v2_{1}, v3_{1}));", pairs
    )
    lsum = each("red[({1}) * {2}u + tx] = l{0};", [(i, rows[i], nx) for i in range(tm)])
    store = each(
        "{{ let lt = red_sum(({1}) * {2}u); let row = q0 + {1};"
        " let base = (row * heads + h) * 64u;"
        + "".join(
            f" o[base + 4u * (tx + {nx * g}u) + {kk}u] = o{{0}}_{g}[{kk}] / lt;"
            for g in range(groups)
            for kk in range(4)
        )
        + " if (tx == 0u) {{ lse[h * seq + row] = m{0} + log(lt); }} }}",
        [(i, rows[i], nx) for i in range(tm)],
    )
    decl = each("var o{0}_{1} = vec4<f32>(0.0);", pairs)
    decl += "\n    " + each("var m{0} = -3.0e38; var l{0} = 0.0;", [(i,) for i in range(tm)])
    zero_s = each("var s{0}_{1} = vec4<f32>(0.0);", pairs)
    return f"""
// Attention forward, head_dim 64, {tm} x {tn} register blocks, {inv} invocations.
// Dispatch (seq / 64, heads). Workgroup memory: Q and K chunks [0, {V0}), then the P tile
// [0, 1088) over them; the V tile in halves of 32 keys [{V0}, {SMEM}) (under 32 KiB in all,
// so that the CPU drivers run it too).
@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@group(0) @binding(4) var<storage, read_write> lse: array<f32>;
@group(0) @binding(5) var<storage, read> dims: array<u32>;
var<workgroup> sm: array<vec4<f32>, {SMEM}>;
var<workgroup> red: array<f32, {ROWS * nx}>;
{MICRO_KERNELS}
fn max4(x: vec4<f32>) -> f32 {{ return max(max(x.x, x.y), max(x.z, x.w)); }}
fn sum4(x: vec4<f32>) -> f32 {{ return (x.x + x.y) + (x.z + x.w); }}
fn red_max(i: u32) -> f32 {{
    var x = red[i];
    for (var t = 1u; t < {nx}u; t++) {{ x = max(x, red[i + t]); }}
    return x;
}}
fn red_sum(i: u32) -> f32 {{
    var x = red[i];
    for (var t = 1u; t < {nx}u; t++) {{ x += red[i + t]; }}
    return x;
}}
@compute @workgroup_size({inv})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {{
    let seq = dims[0];
    let heads = dims[1];
    let scale = bitcast<f32>(dims[2]);
    let rs = heads * 16u; // vec4s per row of Q, K, V
    let tx = lid % {nx}u;
    let ty = lid / {nx}u;
    let q0 = wg.x * 64u;
    let h = wg.y;
    {decl}
    for (var k0 = 0u; k0 < seq; k0 += 64u) {{
    {zero_s}
    for (var chunk = 0u; chunk < 2u; chunk++) {{
    {stage_qk}
    workgroupBarrier();
    for (var c = 0u; c < 8u; c++) {{
    {score_loop}
    }}
    workgroupBarrier();
    }}
    {row_max}
    workgroupBarrier();
    {softmax}
    {put_p}
    for (var half = 0u; half < 64u; half += 32u) {{
    {stage_v}
    workgroupBarrier();
    for (var kk = 0u; kk < 8u; kk++) {{
    {pv_loop}
    }}
    workgroupBarrier();
    }}
    }}
    {lsum}
    workgroupBarrier();
    {store}
}}
"""


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float):
    """O [S, H, D] and LSE [H, S] in float64 from Q, K, V [S, H, D]."""
    s = np.einsum("qhd,khd->hqk", q.astype(np.float64), k.astype(np.float64)) * scale
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    l_sum = p.sum(-1, keepdims=True)
    o = np.einsum("hqk,khd->qhd", p / l_sum, v.astype(np.float64))
    return o, (m + np.log(l_sum))[..., 0]


async def run(
    dev: Device,
    tm: int,
    tn: int,
    seq: int,
    heads: int,
    runs: int,
    rng: np.random.Generator,
    code: str | None = None,
) -> tuple[float, float]:
    """(max relative error of O and the LSE against float64, NaN above S = 1024; median GPU
    ms) of one block shape; `code` replaces the generated kernel (tests plant slips in it)."""
    x = [rng.standard_normal((seq, heads, D), dtype=np.float32) for _ in range(3)]
    scale = np.float32(D**-0.5)
    dims = np.array([seq, heads, scale.view(np.uint32)], np.uint32)
    (o, lse), ms = await run_kernel(
        dev,
        code or forward_wgsl(tm, tn),
        [a.tobytes() for a in x] + [dims.tobytes()],
        [4 * x[0].size, 4 * seq * heads],
        (seq // ROWS, heads, 1),
        runs,
    )
    err = float("nan")
    if seq <= 1024:
        want_o, want_lse = reference(*x, float(scale))
        got_o = np.frombuffer(o, np.float32).reshape(want_o.shape)
        got_lse = np.frombuffer(lse, np.float32).reshape(want_lse.shape)
        err = max(
            float(np.max(np.abs(got_o - want_o)) / np.max(np.abs(want_o))),
            float(np.max(np.abs(got_lse - want_lse)) / np.max(np.abs(want_lse))),
        )
    return err, ms


# Relative to the largest element, for O and the LSE at S = 256 (a slip in the softmax or
# in either GEMM is off by far more).
CHECK_BOUND = 2e-5


def seq_len(text: str) -> int:
    value = positive_int(text)
    if value % ROWS:
        raise argparse.ArgumentTypeError(f"must be a multiple of {ROWS}, got {value}")
    return value


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--implementation", default="wgpu", choices=("wgpu", "dawn"))
    ap.add_argument("--seq", type=seq_len, default=4096)
    ap.add_argument("--heads", type=positive_int, default=16)
    ap.add_argument("--runs", type=positive_int, default=10)
    args = ap.parse_args()
    dev = await request_device(implementation=args.implementation)
    print(dev.adapter_info)
    rng = np.random.default_rng(0)
    flops = 4 * args.seq * args.seq * D * args.heads
    print(f"{'block':>12} {'inv':>4} {'check':>10} {'ms':>9} {'GFLOP/s':>9}")
    limit = dev.limits["maxComputeWorkgroupStorageSize"]
    for tm, tn in BLOCKS:
        need = workgroup_bytes(tn)
        if need > limit:
            print(f"{f'{tm}x{tn}':>12} skipped: needs {need} bytes of workgroup memory")
            continue
        err, _ = await run(dev, tm, tn, 256, 2, 1, rng)
        verdict = "ok" if err < CHECK_BOUND else f"BAD {err:.1e}"
        _, ms = await run(dev, tm, tn, args.seq, args.heads, args.runs, rng)
        rate = flops / (ms * 1e-3) / 1e9 if ms else 0.0
        inv = (ROWS // tm) * (ROWS // tn)
        print(f"{f'{tm}x{tn}':>12} {inv:4d} {verdict:>10} {ms:9.3f} {rate:9.1f}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
