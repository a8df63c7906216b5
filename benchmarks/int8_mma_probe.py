"""What the tensor cores give WGSL through Dawn's int8 subgroup matrices, and what a float32
GEMM emulated on them (the Ozaki scheme) costs and keeps.

WGSL's only way to the tensor cores is Dawn's experimental extension
`chromium_experimental_subgroup_matrix` (behind the `allow_unsafe_apis` toggle); on the
H100 and H200 it offers 8-bit configurations only (i8/u8 inputs, i32/u32 results: M 16, N
16 or 8, K 32), no f16 or f32: Dawn holds f16 back on NVIDIA drivers before 615.71
(benchmarks/tensor_core_features.py, docs/runtimes.md). An integer product is exact, so a
float32 GEMM can be rebuilt from several int8 ones (Ozaki et al.): each row of A (and of B,
for C = A B^T) is scaled by a power of two to below 1 and cut into S slices of 7 bits, q_0
2^-6 + q_1 2^-13 + ... with integers |q| <= 64; then C = 2^(ea + eb) * sum over slice pairs
(i, j) of 2^(-12 - 7 (i + j)) (Q_i Q'_j^T), each Q_i Q'_j^T exact in int32. Pairs with i +
j >= S fall below the slices' own rounding and are left out, and the pairs of one i + j
share one int32 accumulator (same scale, exact sum): S (S + 1) / 2 int8 products per
float32 product, S accumulators. S = 4 keeps 28 bits of each row's largest element, more
than float32's 24.

    python3 benchmarks/int8_mma_probe.py [--size 4096] [--runs 10] [--check-size 256]
                                      [--pipe-only | --gemm-only] [--toggle TOGGLE]

Prints the adapter's subgroup-matrix configurations; the MMA pipe's rate alone (fragments
loaded once, multiplied 4096 times); per int8 GEMM configuration (workgroups of one subgroup
loading fragments from the storage buffers row by row, from a layout packed fragment by
fragment (with the next K step's loaded first, or not), or staged through workgroup memory;
workgroups of several subgroups sharing packed fragments through workgroup memory), its
result against NumPy's exact product at the check size and its rate at the timed size; then
the emulated float32 GEMM for S = 3 and 4: its error against float64 beside float32's own
(NumPy's sgemm), and the time of its passes (slicing A and B, the int8 products, combining).
--toggle enables a Dawn device toggle (disable_robustness: the ceiling without bounds
checks). Dawn only, on a GPU with the feature (no CPU driver has it). What it found on an
H100: docs/records/gpu.md.

What this Dawn (wgpudawn 0.32.0.4) needs, found by this probe: a fragment's offset and
stride count the array's i32 elements (four int8 each), not int8 elements; and they must be
uniform: `local_invocation_index / 32` is refused, `@builtin(subgroup_id)` accepted.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass

import numpy as np

from py_harness.gpu.device import Device
from py_harness.host.arg_types import positive_int
from py_harness.host.gpu import native
from py_harness.timing import run_kernel

FEATURE = "chromium-experimental-subgroup-matrix"
FRAG_M, FRAG_N, FRAG_K = 16, 16, 32  # the i8 configuration the H200 offers
HEADER = "enable chromium_experimental_subgroup_matrix;\nenable subgroups;\n"
WORKGROUP = 32  # Mma's workgroups: one subgroup


@dataclass(frozen=True)
class Mma:
    """A workgroup (one subgroup) computes TM x TN fragments of 16 x 16, in K steps of 32 (KS
    of them per staged chunk where `staged`)."""

    tm: int
    tn: int
    staged: bool = False
    ks: int = 2
    packed: bool = False  # A and B stored fragment by fragment (512 contiguous bytes each)
    prefetch: bool = False  # packed: the next K step's fragments loaded before this one's MMAs

    @property
    def bm(self) -> int:
        return self.tm * FRAG_M

    @property
    def bn(self) -> int:
        return self.tn * FRAG_N

    def workgroup_bytes(self, slices: int = 1) -> int:
        return slices * (self.bm + self.bn) * (self.ks * FRAG_K + 16) if self.staged else 0

    def __str__(self) -> str:
        where = f"staged {self.ks * FRAG_K}" if self.staged else "from storage"
        where += ", packed" if self.packed else ""
        where += ", prefetched" if self.prefetch else ""
        return f"{self.tm}x{self.tn} frags, {self.bm}x{self.bn} tile, {where}"


BINDINGS = """@group(0) @binding(0) var<storage, read> a: array<i32>;
@group(0) @binding(1) var<storage, read> b: array<i32>;
@group(0) @binding(2) var<storage, read_write> c: array<i32>;
@group(0) @binding(3) var<storage, read> dims: vec4<u32>;  // M, N, K (mma_only: unused)"""
FRAG_BYTES = FRAG_M * FRAG_K  # one packed fragment


def _left(src: str, off: str, stride: str) -> str:
    """A's fragment at int8 offset `off`, rows `stride` int8 apart (both multiples of 4: the
    load counts i32 elements)."""
    return (
        f"subgroupMatrixLoad<subgroup_matrix_left<i8, {FRAG_K}, {FRAG_M}>, row_major>"
        f"(&{src}, ({off}) / 4u, ({stride}) / 4u)"
    )


def _right(src: str, off: str, stride: str) -> str:
    # B is N x K row-major: B^T (K x N) column-major.
    return (
        f"subgroupMatrixLoad<subgroup_matrix_right<i8, {FRAG_N}, {FRAG_K}>, col_major>"
        f"(&{src}, ({off}) / 4u, ({stride}) / 4u)"
    )


def _accumulators(tm: int, tn: int, slices: int) -> tuple[list[list[list[str]]], list[str]]:
    """acc[t][i][j]: the names of slices x TM x TN zeroed int32 accumulators, and their
    declarations."""
    acc = [[[f"acc{q}_{i}_{j}" for j in range(tn)] for i in range(tm)] for q in range(slices)]
    result = f"subgroup_matrix_result<i32, {FRAG_N}, {FRAG_M}>"
    return acc, [f"    var {n} = {result}();" for plane in acc for row in plane for n in row]


def _fragments(
    tm: int,
    tn: int,
    slices: int,
    left,
    right,
    indent: str,
    new: str = "let ",
    prefix: str = "",  # noqa: ANN001
) -> list[str]:
    """{new}{prefix}l{slice}_{i} = left(slice, i), and r... = right(slice, j): the fragments of
    one K step."""
    lines = [
        f"{indent}{new}{prefix}l{sl}_{i} = {left(sl, i)};"
        for i in range(tm)
        for sl in range(slices)
    ]
    return lines + [
        f"{indent}{new}{prefix}r{sl}_{j} = {right(sl, j)};"
        for j in range(tn)
        for sl in range(slices)
    ]


def _products(acc: list[list[list[str]]], indent: str) -> list[str]:
    """Into acc[t], every pair of slices (i, t - i): one K step of the emulation."""
    return [
        f"{indent}{acc[q][i][j]} = subgroupMatrixMultiplyAccumulate("
        f"l{si}_{i}, r{q - si}_{j}, {acc[q][i][j]});"
        for q in range(len(acc))
        for si in range(q + 1)
        for i in range(len(acc[q]))
        for j in range(len(acc[q][i]))
    ]


def _stores(acc: list[list[list[str]]], row, col) -> list[str]:  # noqa: ANN001
    """acc[t] into C_t at the fragment's first row row(i) and column col(j)."""
    return [
        f"    subgroupMatrixStore<row_major>(&c, {q}u * m * n + ({row(i)}) * n + {col(j)}, "
        f"{acc[q][i][j]}, n);"
        for q in range(len(acc))
        for i in range(len(acc[q]))
        for j in range(len(acc[q][i]))
    ]


def mma_wgsl(t: Mma, slices: int = 1) -> str:
    """C_t (i32, M x N, one per t < slices) = sum over i + j = t of A_i B_j^T: A_i are the
    slices' M x K int8 matrices (slice i at i * M * K bytes), B_j N x K. slices = 1: the
    plain int8 GEMM. Dispatch (N / BN, M / BM)."""
    s = slices
    acc, declarations = _accumulators(t.tm, t.tn, s)
    lines = [HEADER, BINDINGS]
    swaps: list[str] = []  # prefetch: the next step's fragments become this one's
    if t.staged:
        chunk = t.ks * FRAG_K
        pitch = chunk + 16  # bytes per staged row: 16 more against bank conflicts
        lines += [
            f"const CHUNK = {chunk}u;",
            f"const PITCH = {pitch}u;",
            f"var<workgroup> sa: array<i32, {s * t.bm * pitch // 4}>;",
            f"var<workgroup> sb: array<i32, {s * t.bn * pitch // 4}>;",
        ]
    lines += [
        f"@compute @workgroup_size({WORKGROUP})",
        "fn main(@builtin(workgroup_id) wg: vec3<u32>,",
        "        @builtin(local_invocation_index) lid: u32) {",
        "    let m = dims.x; let n = dims.y; let k = dims.z;",
        f"    let row0 = wg.y * {t.bm}u;",
        f"    let col0 = wg.x * {t.bn}u;",
        *declarations,
    ]
    if t.staged:
        lines += [
            "    for (var k0 = 0u; k0 < k; k0 += CHUNK) {",
            "        workgroupBarrier();",
        ]
        per_row = t.ks * FRAG_K // 4  # i32 words of a staged row
        for name, rows, base in (("a", t.bm, f"wg.y * {t.bm}u"), ("b", t.bn, f"wg.x * {t.bn}u")):
            words = rows * per_row  # per slice
            lines += [
                f"        for (var w = lid; w < {s * words}u; w += {WORKGROUP}u) {{",
                f"            let sl = w / {words}u; let r = (w % {words}u) / {per_row}u;",
                f"            let q = w % {per_row}u;",
                f"            let src = sl * ({'m' if name == 'a' else 'n'} * k / 4u)"
                f" + ({base} + r) * (k / 4u) + k0 / 4u + q;",
                f"            s{name}[(sl * {rows}u + r) * (PITCH / 4u) + q] = {name}[src];",
                "        }",
            ]
        lines.append("        workgroupBarrier();")
        lines.append(f"        for (var kk = 0u; kk < CHUNK; kk += {FRAG_K}u) {{")
        indent = "            "
        lines += _fragments(
            t.tm,
            t.tn,
            s,
            lambda sl, i: _left("sa", f"({sl * t.bm + i * FRAG_M}u) * PITCH + kk", "PITCH"),
            lambda sl, j: _right("sb", f"({sl * t.bn + j * FRAG_N}u) * PITCH + kk", "PITCH"),
            indent,
        )
    else:
        lines.append(f"    for (var k0 = 0u; k0 < k; k0 += {FRAG_K}u) {{")
        indent = "        "
        if t.packed:  # fragment (row tile, K step) of slice sl at its index * FRAG_BYTES

            def at(sl: int, first: str, rows: str, k0: str) -> str:
                tile = f"({sl}u * {rows} + {first}) / 16u"
                return f"({tile} * (k / 32u) + {k0} / 32u) * {FRAG_BYTES}u"

            def fragments(k0: str, indent: str, new: str = "let ", prefix: str = "") -> list[str]:
                return _fragments(
                    t.tm,
                    t.tn,
                    s,
                    lambda sl, i: _left(
                        "a", at(sl, f"row0 + {i * FRAG_M}u", "m", k0), f"{FRAG_K}u"
                    ),
                    lambda sl, j: _right(
                        "b", at(sl, f"col0 + {j * FRAG_N}u", "n", k0), f"{FRAG_K}u"
                    ),
                    indent,
                    new,
                    prefix,
                )

            if t.prefetch:  # this step's fragments in vars, the next step's loaded first
                lines[-1:-1] = fragments("0u", "    ", "var ")
                lines.append(f"{indent}let kn = min(k0 + {FRAG_K}u, k - {FRAG_K}u);")
                lines += fragments("kn", indent, prefix="n")
                swaps = [
                    f"{indent}{v}{sl}_{x} = n{v}{sl}_{x};"
                    for v, count in (("l", t.tm), ("r", t.tn))
                    for sl in range(s)
                    for x in range(count)
                ]
            else:
                lines += fragments("k0", indent)
        else:
            lines += _fragments(
                t.tm,
                t.tn,
                s,
                lambda sl, i: _left("a", f"{sl}u * m * k + (row0 + {i * FRAG_M}u) * k + k0", "k"),
                lambda sl, j: _right("b", f"{sl}u * n * k + (col0 + {j * FRAG_N}u) * k + k0", "k"),
                indent,
            )
    lines += _products(acc, indent) + swaps
    if t.staged:
        lines.append("        }")
    lines.append("    }")
    lines += _stores(acc, lambda i: f"row0 + {i * FRAG_M}u", lambda j: f"col0 + {j * FRAG_N}u")
    lines.append("}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Shared:
    """WM x WN subgroups per workgroup, each TM x TN fragments, sharing A's and B's
    fragments through workgroup memory (KS K steps per staged chunk), both packed fragment
    by fragment. Each subgroup's offsets come from @builtin(subgroup_id), which the
    uniformity rule accepts (local_invocation_index / 32 it refuses)."""

    tm: int
    tn: int
    wm: int
    wn: int
    ks: int = 2
    packed: bool = True

    @property
    def bm(self) -> int:
        return self.wm * self.tm * FRAG_M

    @property
    def bn(self) -> int:
        return self.wn * self.tn * FRAG_N

    def workgroup_bytes(self, slices: int = 1) -> int:
        return slices * (self.bm + self.bn) * self.ks * FRAG_K

    def __str__(self) -> str:
        shape = f"{self.wm}x{self.wn} subgroups of {self.tm}x{self.tn}"
        return f"{shape}, staged {self.ks * FRAG_K}"


def shared_wgsl(t: Shared, slices: int = 1) -> str:
    """mma_wgsl's products (same bindings, packed A and B, dispatch (N / BN, M / BM)) by
    workgroups of WM x WN subgroups that stage each chunk of A's and B's fragments once."""
    s, words = slices, FRAG_BYTES // 4  # i32 words per fragment
    acc, declarations = _accumulators(t.tm, t.tn, s)
    lines = [
        HEADER,
        BINDINGS,
        f"var<workgroup> sa: array<i32, {s * t.wm * t.tm * t.ks * words}>;",
        f"var<workgroup> sb: array<i32, {s * t.wn * t.tn * t.ks * words}>;",
        f"@compute @workgroup_size({32 * t.wm * t.wn})",
        "fn main(@builtin(workgroup_id) wg: vec3<u32>,",
        "        @builtin(local_invocation_index) lid: u32,",
        "        @builtin(subgroup_id) sg: u32) {",
        "    let m = dims.x; let n = dims.y; let k = dims.z;",
        f"    let fr = sg / {t.wn}u * {t.tm}u;  // the subgroup's first row of fragments",
        f"    let fc = sg % {t.wn}u * {t.tn}u;",
        *declarations,
        f"    for (var k0 = 0u; k0 < k; k0 += {t.ks * FRAG_K}u) {{",
        "        workgroupBarrier();",
    ]
    run = t.ks * words  # a row of fragments' chunk: contiguous in the packed layout
    for name, tiles, rows, wg in (("a", t.wm * t.tm, "m", "wg.y"), ("b", t.wn * t.tn, "n", "wg.x")):
        lines += [
            f"        for (var w = lid; w < {s * tiles * run}u; w += {32 * t.wm * t.wn}u) {{",
            f"            let row = w / {run}u;  // slice * {tiles} + fragment row",
            f"            let sl = row / {tiles}u;",
            f"            let g = (sl * ({rows} / 16u) + {wg} * {tiles}u + row % {tiles}u)"
            f" * (k / 32u) + k0 / 32u;",
            f"            s{name}[w] = {name}[g * {words}u + w % {run}u];",
            "        }",
        ]
    lines.append("        workgroupBarrier();")
    lines.append(f"        for (var ks = 0u; ks < {t.ks}u; ks++) {{")
    a_rows, b_rows = t.wm * t.tm, t.wn * t.tn  # fragment rows per slice in sa, sb

    def at(first: str) -> str:
        return f"(({first}) * {t.ks}u + ks) * {FRAG_BYTES}u"

    lines += _fragments(
        t.tm,
        t.tn,
        s,
        lambda sl, i: _left("sa", at(f"{sl * a_rows}u + fr + {i}u"), f"{FRAG_K}u"),
        lambda sl, j: _right("sb", at(f"{sl * b_rows}u + fc + {j}u"), f"{FRAG_K}u"),
        "            ",
    )
    lines += _products(acc, "            ")
    lines += ["        }", "    }"]
    lines += _stores(
        acc,
        lambda i: f"wg.y * {t.bm}u + (fr + {i}u) * 16u",
        lambda j: f"wg.x * {t.bn}u + (fc + {j}u) * 16u",
    )
    lines.append("}")
    return "\n".join(lines) + "\n"


def kernel_wgsl(t: Mma | Shared, slices: int = 1) -> str:
    return shared_wgsl(t, slices) if isinstance(t, Shared) else mma_wgsl(t, slices)


def mma_only_wgsl(frags: int, steps: int) -> str:
    """The MMA pipe alone: each subgroup loads `frags` left and right fragments once, then
    multiplies and accumulates them `steps` times into frags x frags accumulators, and
    stores the accumulators (which depend on every step). Dispatch (groups, 1, 1), on a
    buffer of frags x 16 x 32 int8 each for A and B (the same for every workgroup)."""
    lines = [
        HEADER,
        BINDINGS,
        f"@compute @workgroup_size({WORKGROUP})",
        "fn main(@builtin(workgroup_id) wg: vec3<u32>) {",
    ]
    for i in range(frags):
        lines.append(f"    let l{i} = {_left('a', f'{i * FRAG_M * FRAG_K}u', f'{FRAG_K}u')};")
        lines.append(f"    let r{i} = {_right('b', f'{i * FRAG_N * FRAG_K}u', f'{FRAG_K}u')};")
        for j in range(frags):
            lines.append(f"    var acc{i}_{j} = subgroup_matrix_result<i32, {FRAG_N}, {FRAG_M}>();")
    lines.append(f"    for (var s = 0u; s < {steps}u; s++) {{")
    for i in range(frags):
        for j in range(frags):
            lines.append(
                f"        acc{i}_{j} = subgroupMatrixMultiplyAccumulate(l{i}, r{j}, acc{i}_{j});"
            )
    lines.append("    }")
    for i in range(frags):
        for j in range(frags):
            off = f"(wg.x * {frags * frags}u + {i * frags + j}u) * {FRAG_M * FRAG_N}u"
            lines.append(f"    subgroupMatrixStore<row_major>(&c, {off}, acc{i}_{j}, {FRAG_N}u);")
    lines.append("}")
    return "\n".join(lines) + "\n"


async def mma_only(dev: Device, frags: int, steps: int, groups: int, runs: int) -> float:
    """TOPS of the MMA pipe alone (mma_only_wgsl)."""
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, frags * FRAG_M * FRAG_K, dtype=np.int8)
    b = rng.integers(-128, 128, frags * FRAG_N * FRAG_K, dtype=np.int8)
    out = 4 * groups * frags * frags * FRAG_M * FRAG_N
    _, ms = await run_kernel(
        dev,
        mma_only_wgsl(frags, steps),
        [a.tobytes(), b.tobytes(), dims(0)],
        [out],
        (groups, 1, 1),
        runs,
        warmup=1,
    )
    ops = 2 * FRAG_M * FRAG_N * FRAG_K * frags * frags * steps * groups
    return ops / (ms * 1e-3) / 1e12


# Slicing: one invocation per row of a rows x K float32 matrix; row e = its largest
# element's exponent (frexp: |x| < 2^e); slices q_0 = round(x 2^(6 - e)), then 7 bits more
# each from what is left, |q| <= 64. Output: slices x rows x K int8 (packed 4 per i32), and e.
SLICE_WGSL = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> q: array<i32>;
@group(0) @binding(2) var<storage, read_write> e: array<i32>;
@group(0) @binding(3) var<storage, read> dims: vec4<u32>;  // rows, K, slices
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let rows = dims.x; let k = dims.y; let slices = dims.z;
    let r = gid.x;
    if (r >= rows) { return; }
    var big = 0.0;
    for (var i = 0u; i < k; i++) { big = max(big, abs(x[r * k + i])); }
    let ex = frexp(big).exp;
    e[r] = ex;
    for (var w = 0u; w < k / 4u; w++) {
        var rest = ldexp(vec4<f32>(x[r * k + 4u * w], x[r * k + 4u * w + 1u],
                                   x[r * k + 4u * w + 2u], x[r * k + 4u * w + 3u]),
                         vec4<i32>(6 - ex));
        for (var s = 0u; s < slices; s++) {
            let v = round(rest);
            rest = (rest - v) * 128.0;
            let b = vec4<u32>(vec4<i32>(v)) & vec4<u32>(255u);
            q[s * rows * k / 4u + r * k / 4u + w] = bitcast<i32>(
                b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u));
        }
    }
}
"""

# c = 2^(ea + eb) * sum_t acc_t 2^(-12 - 7 t), acc_t as float32 (exact below 2^24).
COMBINE_WGSL = """
@group(0) @binding(0) var<storage, read> acc: array<i32>;
@group(0) @binding(1) var<storage, read> ea: array<i32>;
@group(0) @binding(2) var<storage, read> eb: array<i32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
@group(0) @binding(4) var<storage, read> dims: vec4<u32>;  // M, N, slices
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let m = dims.x; let n = dims.y; let slices = dims.z;
    let i = gid.y * 65535u * 256u + gid.x;
    if (i >= m * n) { return; }
    var sum = 0.0;
    for (var t = slices; t > 0u; t--) {
        sum += ldexp(f32(acc[(t - 1u) * m * n + i]), -12 - 7 * i32(t - 1u));
    }
    c[i] = ldexp(sum, ea[i / n] + eb[i % n]);
}
"""


def ozaki_numpy(a: np.ndarray, b: np.ndarray, slices: int) -> np.ndarray:
    """The scheme in NumPy (a: M x K, b: N x K float32 -> M x N float64), the same slices
    and pairs as the kernels: what their check compares with before float64."""

    def cut(x: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        _, ex = np.frexp(np.max(np.abs(x), axis=1))
        rest = np.ldexp(x.astype(np.float32), (6 - ex)[:, None])
        out = []
        for _ in range(slices):
            v = np.round(rest)
            rest = (rest - v) * np.float32(128)
            out.append(v.astype(np.int64))
        return out, ex

    qa, ea = cut(a)
    qb, eb = cut(b)
    total = np.zeros((len(a), len(b)))
    for t in range(slices):
        acc = sum(qa[i] @ qb[t - i].T for i in range(t + 1))
        total += np.ldexp(acc.astype(np.float64), -12 - 7 * t)
    return np.ldexp(total, ea[:, None] + eb[None, :])


CONFIGS: list[Mma | Shared] = [
    Mma(4, 4, packed=True, prefetch=True),
    Mma(4, 2, packed=True, prefetch=True),
    Shared(4, 4, 2, 2),
    Shared(4, 4, 2, 2, ks=1),
    Shared(2, 4, 4, 2),
    Shared(4, 2, 2, 4),
    Shared(2, 2, 2, 2),
    Mma(2, 2, packed=True),
    Mma(4, 2, packed=True),
    Mma(2, 4, packed=True),
    Mma(4, 4, packed=True),
    Mma(2, 2),
    Mma(4, 2),
    Mma(2, 4),
    Mma(4, 4),
    Mma(2, 2, staged=True),
    Mma(4, 2, staged=True),
    Mma(4, 4, staged=True),
    Mma(4, 4, staged=True, ks=1),
]


async def open_device(toggles: list[str]) -> Device:
    """Dawn with allow_unsafe_apis (the feature is experimental) and the feature; `toggles`:
    Dawn device toggles to enable (vulkan_use_cooperative_matrix_robust_access: no bounds
    clamping of fragment loads where the driver's own robust access covers them;
    disable_robustness: no bounds checks at all, for the ceiling)."""
    from wgpudawn.backends.dawn import extras  # type: ignore[import-not-found]

    # before native.load, whose own toggles (the same timestamp one) then find the instance
    extras.set_instance_extras(
        enable_toggles=["allow_unsafe_apis"], disable_toggles=["timestamp_quantization"]
    )
    gpu = native.load("dawn")
    adapter = gpu.gpu.request_adapter_sync(power_preference="high-performance")
    if FEATURE not in adapter.features:
        raise SystemExit(f"{adapter.info['device']}: no {FEATURE} (a GPU with Dawn needs it)")
    print("configs:", extras.get_adapter_properties(adapter).get("subgroup_matrix_configs"))
    required = native.required_limits(adapter)
    device = extras.request_device_sync(
        adapter,
        required_features=[FEATURE, "subgroups", "timestamp-query"],
        required_limits=required,
        enable_toggles=toggles,
    )
    return native.NativeDevice(gpu, "dawn", adapter, device)


def dims(*values: int) -> bytes:
    return np.array([*values, 0, 0, 0][:4], np.uint32).tobytes()


def pack(x: np.ndarray) -> np.ndarray:
    """rows x K int8 -> fragment by fragment: [row / 16][k / 32][16][32]."""
    rows, k = x.shape
    return np.ascontiguousarray(x.reshape(rows // 16, 16, k // 32, 32).transpose(0, 2, 1, 3))


async def int8_gemm(dev: Device, t: Mma | Shared, size: int, rng: np.random.Generator, runs: int):
    a = rng.integers(-128, 128, (size, size), dtype=np.int8)
    b = rng.integers(-128, 128, (size, size), dtype=np.int8)
    pa, pb = (pack(x) if t.packed else x for x in (a, b))
    (c,), ms = await run_kernel(
        dev,
        kernel_wgsl(t),
        [pa.tobytes(), pb.tobytes(), dims(size, size, size)],
        [4 * size * size],
        (size // t.bn, size // t.bm, 1),
        runs,
        warmup=1,
    )
    return np.frombuffer(c, np.int32).reshape(size, size), a, b, ms


async def emulated_gemm(
    dev: Device, t: Mma | Shared, a: np.ndarray, b: np.ndarray, slices: int, runs: int
) -> tuple[np.ndarray, dict[str, float]]:
    m, k = a.shape
    n = len(b)
    ms = {}
    packed = {}
    for name, x in (("a", a), ("b", b)):
        rows = len(x)
        (q, e), ms[f"slice {name}"] = await run_kernel(
            dev,
            SLICE_WGSL,
            [x.tobytes(), dims(rows, k, slices)],
            [slices * rows * k, 4 * rows],
            ((rows + 63) // 64, 1, 1),
            runs,
            warmup=1,
        )
        if t.packed:  # the products' layout, fragment by fragment (done here, untimed)
            sliced = np.frombuffer(q, np.int8).reshape(slices, rows, k)
            q = np.concatenate([pack(x) for x in sliced]).tobytes()
        packed[name] = (q, e)
    (acc,), ms["int8 products"] = await run_kernel(
        dev,
        kernel_wgsl(t, slices),
        [packed["a"][0], packed["b"][0], dims(m, n, k)],
        [4 * slices * m * n],
        (n // t.bn, m // t.bm, 1),
        runs,
        warmup=1,
    )
    groups = (m * n + 255) // 256
    (c,), ms["combine"] = await run_kernel(
        dev,
        COMBINE_WGSL,
        [acc, packed["a"][1], packed["b"][1], dims(m, n, slices)],
        [4 * m * n],
        (min(groups, 65535), (groups + 65534) // 65535, 1),
        runs,
        warmup=1,
    )
    return np.frombuffer(c, np.float32).reshape(m, n), ms


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=positive_int, default=4096, help="M = N = K, timed")
    ap.add_argument("--check-size", type=positive_int, default=256)
    ap.add_argument("--runs", type=positive_int, default=10)
    ap.add_argument("--gemm-only", action="store_true", help="no emulated float32 GEMM")
    ap.add_argument("--toggle", action="append", default=[], help="a Dawn device toggle to enable")
    ap.add_argument("--pipe-only", action="store_true", help="the MMA pipe alone, then stop")
    args = ap.parse_args()
    dev = await open_device(args.toggle)
    print("toggles:", args.toggle)
    print(dev.adapter_info)
    for frags in (1, 2, 4):
        try:
            tops = await mma_only(dev, frags, 4096, 132 * 16, args.runs)
            print(f"MMA pipe alone, {frags}x{frags} accumulators per subgroup: {tops:.1f} TOPS")
        except Exception as exc:
            print(f"MMA pipe alone, {frags}x{frags}: FAILED: {str(exc)[:2000]}", flush=True)
    if args.pipe_only:
        return
    rng = np.random.default_rng(0)
    best: tuple[float, Mma | Shared] | None = None
    for t in CONFIGS:
        try:
            c, a, b, _ = await int8_gemm(dev, t, args.check_size, rng, 0)
            want = a.astype(np.int64) @ b.astype(np.int64).T
            ok = "exact" if np.array_equal(c, want) else f"WRONG at {np.argwhere(c != want)[0]}"
            _, _, _, ms = await int8_gemm(dev, t, args.size, rng, args.runs)
            tops = 2 * args.size**3 / (ms * 1e-3) / 1e12 if ms else 0.0
            print(f"int8 {t!s:>40}  {ok:>12} {ms:9.3f} ms {tops:8.1f} TOPS", flush=True)
            if ok == "exact" and ms and (best is None or ms < best[0]):
                best = (ms, t)
        except Exception as exc:  # a configuration the compiler refuses: say why, go on
            print(f"int8 {t!s:>40}  FAILED: {str(exc)[:2000]}", flush=True)
    if best is None or args.gemm_only:
        return
    limit = dev.limits["maxComputeWorkgroupStorageSize"]
    s = args.check_size
    a = rng.standard_normal((s, s), dtype=np.float32)
    b = rng.standard_normal((s, s), dtype=np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    scale = np.max(np.abs(want))
    f32 = float(np.max(np.abs((a @ b.T) - want)) / scale)
    print(f"float32 sgemm (NumPy) error / max|C|: {f32:.2e}")
    tries = dict.fromkeys([best[1], Shared(2, 2, 2, 2), Mma(2, 2)])
    for slices, t in ((sl, t) for sl in (3, 4) for t in tries):
        if t.workgroup_bytes(slices) > limit:
            continue
        try:
            c, _ = await emulated_gemm(dev, t, a, b, slices, 0)
            err = float(np.max(np.abs(c - want)) / scale)
            ref = float(np.max(np.abs(ozaki_numpy(a, b, slices) - want)) / scale)
            big = rng.standard_normal((args.size, args.size), dtype=np.float32)
            _, ms = await emulated_gemm(dev, t, big, big, slices, args.runs)
            total = sum(ms.values())
            rate = 2 * args.size**3 / (total * 1e-3) / 1e12
            parts = ", ".join(f"{k} {v:.3f}" for k, v in ms.items())
            print(
                f"emulated float32, S={slices}, {t}: error {err:.2e} (NumPy model {ref:.2e}); "
                f"{total:.3f} ms = {rate:.1f} TFLOP/s ({parts}; products alone "
                f"{2 * args.size**3 / (ms['int8 products'] * 1e-3) / 1e12:.1f})",
                flush=True,
            )
        except Exception as exc:
            print(f"emulated S={slices} {t} FAILED: {str(exc)[:2000]}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
