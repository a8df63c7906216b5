"""What rate of plain FMAs WGSL reaches on a GPU, by register block per invocation.

The fast kernels compute every GEMM in 4 x 4 register blocks (fa2_fast_common.wgsl): each
step of 4 along the inner dimension loads 4 + 4 vec4s from workgroup memory for 64 FMAs,
2 FMAs per float loaded. On NVIDIA GPUs an SM's workgroup memory delivers 32 floats per
clock against 128 FMAs, so such a loop is bound by its loads at about half the FMA peak
before anything else costs it. A TM x TN block does TM TN / (TM + TN) FMAs per float: 8 x 4
2.67, 8 x 8 4. This probe times C = A B^T (A: M x K, B: N x K, both row-major: the score
GEMM's form) with generated kernels of each block shape, so the gain a larger block could
bring to the attention kernels is measured before they are rewritten for it.

    python3 benchmarks/gemm_tile_probe.py [--implementation wgpu|dawn] [--size 4096] [--runs 5]

Prints, per configuration (register block, workgroup tile, staged inner chunk, invocations),
the median GPU time and GFLOP/s, after checking that configuration's result against NumPy
at a small size. Needs timestamp queries for the times. The H200 figures are in
docs/records/gpu.md.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass

import numpy as np

from py_harness.gpu.device import Device
from py_harness.host.arg_types import positive_int
from py_harness.host.gpu.native import request_device
from py_harness.host.paths import SHADER_DIR
from py_harness.host.wgsl_decls import function_source
from py_harness.timing import run_kernel


@dataclass(frozen=True)
class Tiles:
    """TM x TN outputs per invocation, BM x BN per workgroup, BK floats of K per stage."""

    tm: int
    tn: int
    bm: int
    bn: int
    bk: int = 32
    form: str = "nt"  # "nt": C = A B^T, dot products; "nn": C = A B, rows of B scaled and added
    unroll: bool = False  # the loop over a staged chunk written out, step by step

    @property
    def invocations(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    @property
    def staged(self) -> tuple[int, int]:
        """vec4s of the staged A and B chunks (rows padded by one vec4): A is BM rows of BK
        floats, B BN rows of BK ("nt") or BK rows of BN ("nn")."""
        b = self.bn * (self.bk // 4 + 1) if self.form == "nt" else self.bk * (self.bn // 4 + 1)
        return self.bm * (self.bk // 4 + 1), b

    @property
    def workgroup_bytes(self) -> int:
        return 16 * sum(self.staged)

    def __str__(self) -> str:
        return (
            f"{self.form} {self.tm}x{self.tn} in {self.bm}x{self.bn}, bk {self.bk}, "
            f"{self.invocations} inv{', unrolled' if self.unroll else ''}"
        )


# The fast kernels' register micro-kernels, taken from their file: the same fma chains.
MICRO_KERNELS = function_source(
    (SHADER_DIR / "fa2_fast_common.wgsl").read_text(), "ff_dot", "ff_dot4", "ff_axpy"
)
# The fast kernels' shape first; then larger blocks over 256, 128 and 64 invocations.
CONFIGS = (
    Tiles(4, 4, 64, 64),
    Tiles(4, 4, 64, 64, 16),
    Tiles(8, 4, 128, 64),
    Tiles(4, 8, 64, 128),
    Tiles(8, 4, 64, 64),
    Tiles(8, 8, 128, 128),
    Tiles(8, 8, 128, 128, 16),
    Tiles(8, 8, 128, 64),
    Tiles(8, 8, 64, 64),
    # The second GEMM's form (P V in the forward): the fast kernels' block, then larger.
    Tiles(4, 4, 64, 64, form="nn"),
    Tiles(8, 4, 128, 64, form="nn"),
    Tiles(8, 8, 128, 128, 16, form="nn"),
    Tiles(8, 8, 64, 64, form="nn"),
    # The same loops written out: WGSL has no unroll hint, so this shows whether the
    # drivers unroll them (constant addresses, no loop counter).
    Tiles(4, 4, 64, 64, unroll=True),
    Tiles(8, 8, 128, 128, unroll=True),
    Tiles(8, 8, 128, 128, 16, unroll=True),
    Tiles(4, 4, 64, 64, form="nn", unroll=True),
    Tiles(8, 8, 128, 128, 16, form="nn", unroll=True),
)


def _stage(name: str, src: str, rows: int, width: int, t: Tiles, at: str) -> list[str]:
    """Lines staging `rows` rows of `width` vec4s of src (row r at flat vec4 index at(r),
    an expression in r and c) into workgroup array name, rows padded by one vec4."""
    n = rows * width
    lines = []
    for s in range(0, n, t.invocations):
        guard = f"if (lid + {s}u < {n}u) " if s + t.invocations > n else ""
        lines.append(
            f"{guard}{{ let e = lid + {s}u; let r = e / {width}u; let c = e % {width}u;"
            f" {name}[r * {width + 1}u + c] = {src}[{at}]; }}"
        )
    return lines


def gemm_wgsl(t: Tiles) -> str:
    """C = A B^T ("nt") or A B ("nn") for M, N multiples of the workgroup tile and K of the
    chunk; every register indexed by a constant (generated names, no private arrays).
    Invocation (tx, ty) owns rows ty + (BM / TM) i and, in vec4s of columns, tx + (BN / TN) g
    ("nn") or single columns tx + (BN / TN) j ("nt")."""
    nx, ny, kv = t.bn // t.tn, t.bm // t.tm, t.bk // 4
    groups = t.tn // 4
    nt = t.form == "nt"
    accs = [f"acc{i}_{g}" for i in range(t.tm) for g in range(groups)]
    decl = "\n    ".join(f"var {a} = vec4<f32>(0.0);" for a in accs)
    loads = [f"let a{i} = sa[(ty + {ny * i}u) * {kv + 1}u + c];" for i in range(t.tm)]
    if nt:
        loads += [f"let b{j} = sb[(tx + {nx * j}u) * {kv + 1}u + c];" for j in range(t.tn)]
        bs = [", ".join(f"b{4 * g + k}" for k in range(4)) for g in range(groups)]
        op = "ff_dot4"
        col = [[f"tx + {nx * (4 * g + k)}u" for k in range(4)] for g in range(groups)]
    else:
        w = t.bn // 4 + 1
        loads += [
            f"let b{k}_{g} = sb[(4u * c + {k}u) * {w}u + tx + {nx * g}u];"
            for k in range(4)
            for g in range(groups)
        ]
        bs = [", ".join(f"b{k}_{g}" for k in range(4)) for g in range(groups)]
        op = "ff_axpy"
        col = [[f"4u * (tx + {nx * g}u) + {k}u" for k in range(4)] for g in range(groups)]
    fmas = [
        f"acc{i}_{g} = {op}(acc{i}_{g}, a{i}, mat4x4<f32>({bs[g]}));"
        for i in range(t.tm)
        for g in range(groups)
    ]
    stores = "\n    ".join(
        f"c_out[(row0 + ty + {ny * i}u) * n + col0 + {col[g][k]}] = acc{i}_{g}[{k}];"
        for i in range(t.tm)
        for g in range(groups)
        for k in range(4)
    )
    stage_b = (
        _stage("sb", "b_in", t.bn, kv, t, "(col0 + r) * k4 + k0 / 4u + c")
        if nt
        else _stage("sb", "b_in", t.bk, t.bn // 4, t, "(k0 + r) * (n / 4u) + col0 / 4u + c")
    )
    stage = "\n        ".join(
        _stage("sa", "a_in", t.bm, kv, t, "(row0 + r) * k4 + k0 / 4u + c") + stage_b
    )
    inner = "\n        ".join(loads + fmas)
    if t.unroll:
        chunk = "\n        ".join(
            f"{{ let c = {c}u;\n        {inner}\n        }}" for c in range(kv)
        )
    else:
        chunk = f"for (var c = 0u; c < {kv}u; c++) {{\n        {inner}\n        }}"
    a_vec4s, b_vec4s = t.staged
    return f"""
// C = {"A B^T" if nt else "A B"}, {t}; dims = (M, N, K).
@group(0) @binding(0) var<storage, read> a_in: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b_in: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> c_out: array<f32>;
@group(0) @binding(3) var<storage, read> dims: array<u32>;
var<workgroup> sa: array<vec4<f32>, {a_vec4s}>;
var<workgroup> sb: array<vec4<f32>, {b_vec4s}>;
{MICRO_KERNELS}
@compute @workgroup_size({t.invocations})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {{
    let n = dims[1];
    let k4 = dims[2] / 4u;
    let tx = lid % {nx}u;
    let ty = lid / {nx}u;
    let row0 = wg.y * {t.bm}u;
    let col0 = wg.x * {t.bn}u;
    {decl}
    for (var k0 = 0u; k0 < dims[2]; k0 += {t.bk}u) {{
        {stage}
        workgroupBarrier();
        {chunk}
        workgroupBarrier();
    }}
    {stores}
}}
"""


async def run(
    dev: Device, t: Tiles, a: np.ndarray, b: np.ndarray, runs: int, code: str | None = None
) -> tuple[np.ndarray, float]:
    """(C, median GPU ms over runs) of one configuration on square A and B; `code` replaces
    the generated kernel (tests plant slips in it)."""
    m = n = k = len(a)
    (out,), ms = await run_kernel(
        dev,
        code or gemm_wgsl(t),
        [a.tobytes(), b.tobytes(), np.array([m, n, k], np.uint32).tobytes()],
        [4 * m * n],
        (n // t.bn, m // t.bm, 1),
        runs,
    )
    return np.frombuffer(out, np.float32).reshape(m, n), ms


# float32 sums of 128-4096 products of normal numbers stay well inside this, relative to
# the largest element (a slip that drops or repeats a chunk is off by about 1).
CHECK_BOUND = 1e-5


async def relative_error(
    dev: Device, t: Tiles, size: int, rng: np.random.Generator, code: str | None = None
) -> float:
    """max |C - C64| / max |C64| for random A, B of size x size, C64 in float64."""
    a, b = (rng.standard_normal((size, size), dtype=np.float32) for _ in range(2))
    c, _ = await run(dev, t, a, b, 1, code)
    b64 = b.astype(np.float64)
    want = a.astype(np.float64) @ (b64.T if t.form == "nt" else b64)
    return float(np.max(np.abs(c - want)) / np.max(np.abs(want)))


def tile_multiple(text: str) -> int:
    """A matrix size: a positive multiple of 128, every configuration's workgroup tile."""
    value = int(text)
    if value < 128 or value % 128:
        raise argparse.ArgumentTypeError(f"must be a positive multiple of 128, got {value}")
    return value


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--implementation", default="wgpu", choices=("wgpu", "dawn"))
    ap.add_argument("--size", type=tile_multiple, default=4096, help="M = N = K of the timed GEMM")
    ap.add_argument(
        "--check-size", type=tile_multiple, default=256, help="M = N = K of the NumPy check"
    )
    ap.add_argument("--runs", type=positive_int, default=5)
    args = ap.parse_args()
    dev = await request_device(implementation=args.implementation)
    print(dev.adapter_info)
    limit = dev.limits["maxComputeWorkgroupStorageSize"]
    invocations = dev.limits["maxComputeInvocationsPerWorkgroup"]
    rng = np.random.default_rng(0)
    print(f"{'configuration':>36} {'check':>10} {'ms':>9} {'GFLOP/s':>9}")
    for t in CONFIGS:
        if t.workgroup_bytes > limit or t.invocations > invocations:
            need = f"{t.workgroup_bytes} bytes of workgroup memory, {t.invocations} invocations"
            print(f"{t!s:>36} skipped: needs {need}")
            continue
        err = await relative_error(dev, t, args.check_size, rng)
        verdict = "ok" if err < CHECK_BOUND else f"BAD {err:.1e}"
        s = args.size
        a, b = (rng.standard_normal((s, s), dtype=np.float32) for _ in range(2))
        _, ms = await run(dev, t, a, b, args.runs)
        gflops = 2 * s**3 / (ms * 1e-3) / 1e9 if ms else 0.0
        print(f"{t!s:>36} {verdict:>10} {ms:9.3f} {gflops:9.1f}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
