// ============================================================================
// FLASH ATTENTION V2, register-tiled ("fast" variant) - shared building blocks
// ============================================================================
// Conventions (layout, masking, window, GQA, dropout, empty rows) are those of
// flash_attention_v2.wgsl, which comes first in every module of this variant: its
// FlashParams struct and fa2_pcg are reused (ff_keep4 is dropout_scale for four pairs,
// checked bit for bit by the dropout cases). Then one of
// fa2_fast_d64.wgsl / fa2_fast_d128.wgsl (FF_NCOL, FF_VK), this file, and
// fa2_fast_forward.wgsl or fa2_fast_backward.wgsl, which each define
//   fn ff_load4(buf: u32, i: u32, n: u32) -> vec4<f32>
// (n floats of buffer `buf` from flat index i, zeros after) over their own bindings.
//
// Tiling. A workgroup of 256 invocations owns FF_BR = 64 rows (queries; keys in the
// dK/dV pass) and walks the other side in tiles of FF_BC = 64 columns. Invocation
// (tx, ty) owns rows ty + 16 i and columns tx + 16 j (i, j < 4): a 4x4 register block of
// the score tile in a mat4x4 whose column i holds row i's four scores. Registers are
// only ever indexed by constants (mat columns, vec components): a dynamically indexed
// private array would live in local memory on a GPU.
// - Score GEMMs (S = Q K^T, dP = dO V^T) stream head_dim in chunks of 16 floats through
//   ff_stage (A rows, then B rows), so workgroup memory does not grow with head_dim.
// - The second GEMM (P V, dS K, P^T dO, dS^T Q) reads the 64x64 tile from ff_p and
//   streams FF_VK rows x head_dim of the other operand through ff_stage. Invocation tx
//   owns output vec4 columns tx and tx + 16 (FF_NCOL of them) of its four rows.
// Row strides of 5 / 17 / 16 FF_NCOL + 1 vec4 keep the vec4 reads of 8 consecutive tx
// (or 4 consecutive ty) of a 32-wide subgroup on distinct banks.
// Workgroup memory: (640 + 1088 + 256) * 16 = 31744 bytes.
@group(0) @binding(8) var<uniform> ff_params: FlashParams;
@group(0) @binding(9) var<storage, read> ff_mask: array<f32>;

const FF_BR: u32 = 64u;
const FF_BC: u32 = 64u;
const FF_AS: u32 = 5u; // row stride (vec4) of a staged score-operand chunk
const FF_PS: u32 = 17u; // row stride (vec4) of ff_p
const FF_VS: u32 = 16u * FF_NCOL + 1u; // row stride (vec4) of a staged second operand
const FF_MASKED: f32 = -1.0e30; // a score <= this is masked (FA2_MASKED)
const FF_OUT: f32 = -3.0e38; // what a masked score becomes: exp(FF_OUT - m) == 0
const FF_EMPTY_LSE: f32 = 3.0e38;
// ff_load4 buffer ids.
const FF_Q: u32 = 0u;
const FF_K: u32 = 1u;
const FF_V: u32 = 2u;
const FF_DO: u32 = 3u;

var<workgroup> ff_stage: array<vec4<f32>, 640>; // 2 x 64 x FF_AS, or FF_VK x FF_VS
var<workgroup> ff_p: array<vec4<f32>, 1088>; // 64 x FF_PS: P or dS of the tile
var<workgroup> ff_red: array<vec4<f32>, 256>; // 64 rows x 16 partials (row max / sum)

// Rows [row0, row0 + n) of a [B, S, heads, D] tensor: row r starts at base + r * stride;
// rows >= rows read as zero; values are multiplied by mul.
struct FfRows {
buf: u32,
base: u32,
stride: u32,
row0: u32,
rows: u32,
mul: f32,
};
// Output accumulators: vec4 columns tx (lo) and tx + 16 (hi) of the 4 owned rows.
struct FfAcc {
lo: mat4x4<f32>,
hi: mat4x4<f32>,
};

// (tx, ty): a 32-wide subgroup covers 8 tx x 4 ty, so its score-operand reads touch 4 A
// rows and 8 B rows (few distinct addresses per wavefront).
fn ff_tid(lid: u32) -> vec2<u32> {
let lane = lid & 31u;
let w = lid >> 5u;
return vec2<u32>((lane & 7u) | ((w & 1u) << 3u), (lane >> 3u) | ((w >> 1u) << 2u));
}
fn ff_q_rows(buf: u32, b: u32, h: u32, row0: u32, mul: f32) -> FfRows {
let p = ff_params;
return FfRows(buf, (b * p.seq_q * p.num_heads + h) * p.head_dim, p.num_heads * p.head_dim, row0, p.seq_q, mul);
}
fn ff_kv_rows(buf: u32, b: u32, kvh: u32, row0: u32, mul: f32) -> FfRows {
let p = ff_params;
return FfRows(buf, (b * p.seq_k * p.num_kv_heads + kvh) * p.head_dim, p.num_kv_heads * p.head_dim, row0, p.seq_k, mul);
}

// ---- visibility, masks, dropout: four (query, key) pairs at once ----
// Vector forms of fa2_visible / fa2_mask_at / dropout_scale (same results, bit for bit):
// one call per score row instead of four keeps the code small for JIT-compiling CPU
// adapters; uniform branches only.
const FF_COLS: vec4<u32> = vec4<u32>(0u, 16u, 32u, 48u); // an invocation's column offsets
fn ff_visible4(qi: vec4<u32>, kj: vec4<u32>) -> vec4<bool> {
let p = ff_params;
let qa = qi + p.causal_offset;
var ok = (kj < vec4<u32>(p.seq_k)) & (qi < vec4<u32>(p.seq_q));
if (p.causal == 1u) { ok = ok & (kj <= qa); }
if (p.window > 0u) {
let dist = select(kj - qa, qa - kj, qa >= kj);
ok = ok & (dist < vec4<u32>(p.window));
}
return ok;
}
// Scores after visibility and the additive mask; FF_OUT where masked (a score <= FF_MASKED,
// -inf included, is masked).
fn ff_masked4(s: vec4<f32>, b: u32, h: u32, qi: vec4<u32>, kj: vec4<u32>) -> vec4<f32> {
let p = ff_params;
var x = s;
if (p.has_mask != 0u) {
let i = b * p.mask_stride_b + h * p.mask_stride_h + qi * p.mask_stride_q + kj * p.mask_stride_k;
x += vec4<f32>(ff_mask[i.x], ff_mask[i.y], ff_mask[i.z], ff_mask[i.w]);
}
return select(vec4<f32>(FF_OUT), x, ff_visible4(qi, kj) & (x > vec4<f32>(FF_MASKED)));
}
fn ff_pcg4(v: vec4<u32>) -> vec4<u32> {
let state = v * 747796405u + 2891336453u;
let word = ((state >> ((state >> vec4<u32>(28u)) + 4u)) ^ state) * 277803737u;
return (word >> vec4<u32>(22u)) ^ word;
}
// dropout_scale(p, seed, bh, qi, kj) for four pairs: hash3(seed ^ pcg(bh), qi, kj).
fn ff_keep4(bh: u32, qi: vec4<u32>, kj: vec4<u32>) -> vec4<f32> {
let p = ff_params.dropout_prob;
if (p <= 0.0) { return vec4<f32>(1.0); }
let x = vec4<u32>(ff_params.seed ^ fa2_pcg(bh));
let u = vec4<f32>(ff_pcg4(x ^ ff_pcg4(qi ^ ff_pcg4(kj))) >> vec4<u32>(8u)) * (1.0 / 16777216.0);
return select(vec4<f32>(1.0 / (1.0 - p)), vec4<f32>(0.0), u < vec4<f32>(p));
}
// Whether the whole tile queries [q0, q0 + nq) x keys [k0, k0 + nk) is in range and
// visible, so the per-element checks can be skipped (uniform).
fn ff_all_visible(q0: u32, nq: u32, k0: u32, nk: u32) -> bool {
let p = ff_params;
if (p.has_mask != 0u || q0 + nq > p.seq_q || k0 + nk > p.seq_k) { return false; }
let qa0 = q0 + p.causal_offset;
let qa1 = qa0 + nq - 1u;
let k1 = k0 + nk - 1u;
// The last key must be visible to the first query.
if (p.causal == 1u && k1 > qa0) { return false; }
if (p.window > 0u) {
// The farthest pairs: (last query, first key) and (first query, last key).
if (qa1 >= k0 && qa1 - k0 >= p.window) { return false; }
if (k1 >= qa0 && k1 - qa0 >= p.window) { return false; }
}
return true;
}
// Keys [begin, end) visible to any query in [q0, q1] (uniform).
fn ff_key_range(q0: u32, q1: u32) -> vec2<u32> {
let p = ff_params;
var end = p.seq_k;
if (p.causal == 1u) { end = min(end, q1 + p.causal_offset + 1u); }
var begin = 0u;
if (p.window > 0u) {
let qa0 = q0 + p.causal_offset;
if (qa0 + 1u > p.window) { begin = qa0 + 1u - p.window; }
if (p.causal == 0u) { end = min(end, q1 + p.causal_offset + p.window); }
}
return vec2<u32>(begin, end);
}
// Queries [begin, end) that see any key in [k0, k1] (uniform).
fn ff_query_range(k0: u32, k1: u32) -> vec2<u32> {
let p = ff_params;
var begin = 0u;
var end = p.seq_q;
if (p.causal == 1u && k0 > p.causal_offset) { begin = k0 - p.causal_offset; }
if (p.window > 0u) {
// |qa - kj| < window => qa < k1 + window and qa > k0 - window
if (k1 + p.window > p.causal_offset) {
end = min(end, k1 + p.window - p.causal_offset);
} else {
end = 0u;
}
if (p.causal == 0u && k0 + 1u > p.window + p.causal_offset) {
begin = max(begin, k0 + 1u - p.window - p.causal_offset);
}
}
return vec2<u32>(begin, end);
}

// ---- staging (no barriers here: callers place them) ----
// The first n components of v (n may exceed 4), zeros after: ff_load4 reads 4 floats and
// drops those past the row (an index past the buffer's end is clamped by WebGPU).
fn ff_pick(v: vec4<f32>, n: u32) -> vec4<f32> {
return select(vec4<f32>(0.0), v, vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(n));
}
// Chunk [c0, c0 + 16) of head_dim of 64 rows into ff_stage half `half` (0: A, 1: B).
fn ff_stage_chunk(lid: u32, src: FfRows, half: u32, c0: u32) {
let r = lid >> 2u;
let c = c0 + (lid & 3u) * 4u;
let d = ff_params.head_dim;
var v = vec4<f32>(0.0);
if (src.row0 + r < src.rows && c < d) {
v = ff_load4(src.buf, src.base + (src.row0 + r) * src.stride + c, d - c) * src.mul;
}
ff_stage[half * 64u * FF_AS + r * FF_AS + (lid & 3u)] = v;
}
// Rows [row0 + r0, + FF_VK) x all of head_dim into ff_stage (row stride FF_VS).
fn ff_stage_rows(lid: u32, src: FfRows, r0: u32) {
let w = 16u * FF_NCOL;
let d = ff_params.head_dim;
for (var e = lid; e < FF_VK * w; e += 256u) {
let r = src.row0 + r0 + e / w;
let c = (e % w) * 4u;
var v = vec4<f32>(0.0);
if (r < src.rows && c < d) {
v = ff_load4(src.buf, src.base + r * src.stride + c, d - c) * src.mul;
}
ff_stage[(e / w) * FF_VS + e % w] = v;
}
}

// ---- register micro-kernels: one fma chain per output, no separate rounding ----
fn ff_dot(acc: f32, a: vec4<f32>, b: vec4<f32>) -> f32 {
return fma(a.w, b.w, fma(a.z, b.z, fma(a.y, b.y, fma(a.x, b.x, acc))));
}
fn ff_dot4(acc: vec4<f32>, a: vec4<f32>, b: mat4x4<f32>) -> vec4<f32> {
return vec4<f32>(ff_dot(acc.x, a, b[0]), ff_dot(acc.y, a, b[1]), ff_dot(acc.z, a, b[2]), ff_dot(acc.w, a, b[3]));
}
// acc + w.x v[0] + w.y v[1] + w.z v[2] + w.w v[3]
fn ff_axpy(acc: vec4<f32>, w: vec4<f32>, v: mat4x4<f32>) -> vec4<f32> {
return fma(vec4<f32>(w.w), v[3], fma(vec4<f32>(w.z), v[2], fma(vec4<f32>(w.y), v[1], fma(vec4<f32>(w.x), v[0], acc))));
}
fn ff_axpy4(acc: mat4x4<f32>, w: mat4x4<f32>, v: mat4x4<f32>) -> mat4x4<f32> {
return mat4x4<f32>(ff_axpy(acc[0], w[0], v), ff_axpy(acc[1], w[1], v), ff_axpy(acc[2], w[2], v), ff_axpy(acc[3], w[3], v));
}
fn ff_stage_a(t: vec2<u32>, c: u32) -> mat4x4<f32> {
let i = t.y * FF_AS + c;
return mat4x4<f32>(ff_stage[i], ff_stage[i + 16u * FF_AS], ff_stage[i + 32u * FF_AS], ff_stage[i + 48u * FF_AS]);
}

// S block += A rows . B rows over the staged chunk.
fn ff_scores_chunk(acc: mat4x4<f32>, t: vec2<u32>) -> mat4x4<f32> {
var s = acc;
for (var c = 0u; c < 4u; c++) {
let a = ff_stage_a(t, c);
let j = 64u * FF_AS + t.x * FF_AS + c;
let b = mat4x4<f32>(ff_stage[j], ff_stage[j + 16u * FF_AS], ff_stage[j + 32u * FF_AS], ff_stage[j + 48u * FF_AS]);
s = mat4x4<f32>(ff_dot4(s[0], a[0], b), ff_dot4(s[1], a[1], b), ff_dot4(s[2], a[2], b), ff_dot4(s[3], a[3], b));
}
return s;
}
// This invocation's 4x4 block of A B^T over all of head_dim. (Prefetching the next
// chunk into registers while this one is multiplied would hide global-load latency
// within a workgroup, but SwiftShader's compiler then needs minutes for the dK/dV pass;
// on a GPU the other resident workgroups hide it instead.)
fn ff_score_tile(lid: u32, t: vec2<u32>, a: FfRows, b: FfRows) -> mat4x4<f32> {
var s = mat4x4<f32>();
for (var c0 = 0u; c0 < ff_params.head_dim; c0 += 16u) {
ff_stage_chunk(lid, a, 0u, c0);
ff_stage_chunk(lid, b, 1u, c0);
workgroupBarrier();
s = ff_scores_chunk(s, t);
workgroupBarrier();
}
return s;
}
// acc += ff_p (64 x 64, after a barrier) times rows [v.row0, v.row0 + 64) of v.
fn ff_pv_tile(lid: u32, t: vec2<u32>, acc: FfAcc, v: FfRows) -> FfAcc {
var o = acc;
for (var r0 = 0u; r0 < FF_BC; r0 += FF_VK) {
// Rows past the end are zero in both operands: skip them (uniform).
if (v.row0 + r0 >= v.rows) { break; }
ff_stage_rows(lid, v, r0);
workgroupBarrier();
for (var k = 0u; k < FF_VK; k += 4u) {
let pc = (r0 + k) / 4u;
let i = t.y * FF_PS + pc;
let w = mat4x4<f32>(ff_p[i], ff_p[i + 16u * FF_PS], ff_p[i + 32u * FF_PS], ff_p[i + 48u * FF_PS]);
let j = k * FF_VS + t.x;
o.lo = ff_axpy4(o.lo, w, mat4x4<f32>(ff_stage[j], ff_stage[j + FF_VS], ff_stage[j + 2u * FF_VS], ff_stage[j + 3u * FF_VS]));
if (FF_NCOL > 1u) {
let j2 = j + 16u;
o.hi = ff_axpy4(o.hi, w, mat4x4<f32>(ff_stage[j2], ff_stage[j2 + FF_VS], ff_stage[j2 + 2u * FF_VS], ff_stage[j2 + 3u * FF_VS]));
}
}
workgroupBarrier();
}
return o;
}

// ---- tile exchange ----
fn ff_put_row(row: u32, t: vec2<u32>, v: vec4<f32>) {
// Columns tx, tx + 16, tx + 32, tx + 48 are vec4 tx / 4 + 4 j, component tx % 4.
let i = row * FF_PS + (t.x >> 2u);
let c = t.x & 3u;
ff_p[i][c] = v.x;
ff_p[i + 4u][c] = v.y;
ff_p[i + 8u][c] = v.z;
ff_p[i + 12u][c] = v.w;
}
// Stores the block into ff_p; callers barrier before ff_pv_tile reads it.
fn ff_put_p(t: vec2<u32>, s: mat4x4<f32>) {
ff_put_row(t.y, t, s[0]);
ff_put_row(t.y + 16u, t, s[1]);
ff_put_row(t.y + 32u, t, s[2]);
ff_put_row(t.y + 48u, t, s[3]);
}
fn ff_max4(v: vec4<f32>) -> f32 {
return max(max(v.x, v.y), max(v.z, v.w));
}
fn ff_red_put(t: vec2<u32>, v: vec4<f32>) {
let c = t.x & 3u;
let q = t.x >> 2u;
ff_red[t.y * 4u + q][c] = v.x;
ff_red[(t.y + 16u) * 4u + q][c] = v.y;
ff_red[(t.y + 32u) * 4u + q][c] = v.z;
ff_red[(t.y + 48u) * 4u + q][c] = v.w;
}
fn ff_red_max(row: u32) -> f32 {
let i = row * 4u;
return ff_max4(max(max(ff_red[i], ff_red[i + 1u]), max(ff_red[i + 2u], ff_red[i + 3u])));
}
fn ff_red_sum(row: u32) -> f32 {
let i = row * 4u;
let v = (ff_red[i] + ff_red[i + 1u]) + (ff_red[i + 2u] + ff_red[i + 3u]);
return (v.x + v.y) + (v.z + v.w);
}
// Per owned row, the max over the 64 tile columns of the 16 invocations sharing it.
// ff_red must be free (a barrier since its last read); a barrier follows the writes.
fn ff_row_max(t: vec2<u32>, partial: vec4<f32>) -> vec4<f32> {
ff_red_put(t, partial);
workgroupBarrier();
return vec4<f32>(ff_red_max(t.y), ff_red_max(t.y + 16u), ff_red_max(t.y + 32u), ff_red_max(t.y + 48u));
}
// Same for the sum (in one fixed order: every invocation gets the same bits).
fn ff_row_sum(t: vec2<u32>, partial: vec4<f32>) -> vec4<f32> {
ff_red_put(t, partial);
workgroupBarrier();
return vec4<f32>(ff_red_sum(t.y), ff_red_sum(t.y + 16u), ff_red_sum(t.y + 32u), ff_red_sum(t.y + 48u));
}
