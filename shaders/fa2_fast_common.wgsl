// ============================================================================
// FLASH ATTENTION V2, register-tiled ("fast" variant) - shared building blocks
// ============================================================================
// Conventions (layout, masking, window, GQA, dropout, empty rows) are those of
// flash_attention_v2.wgsl. fa2_common.wgsl comes first in every module of this variant
// (after fa2_fast_f32.wgsl or fa2_fast_f16.wgsl): its params and mask bindings
// (fa2_params, fa2_mask) and fa2_pcg are reused
// (ff_keep4 is dropout_scale for four pairs, checked bit for bit by the dropout cases). Then one of
// fa2_fast_d64.wgsl / d128 / d256 (FF_NCOL, FF_VK, FF_KC, FF_AS, FF_SPLIT, FF_SMEM), this file, and
// fa2_fast_forward.wgsl or fa2_fast_backward.wgsl. The first file (fa2_fast_f32.wgsl,
// fa2_fast_f16.wgsl or fa2_fast_f16x2.wgsl) defines ff_io, FF_PACKED and ffh_score_tile
// (the score GEMMs in packed f16 where FF_PACKED; a stub elsewhere). The pass's file defines
//   fn ff_vec4_pair(buf: u32, i: u32, j: u32) -> FfPair
// (vec4s i and j of buffer `buf`: Q, K, V below or their own bindings) and
//   const FF_UNROLL_SCORES: bool, const FF_UNROLL_PV: bool
// (whether the GEMMs' inner loops are written out: ff_scores_chunk, ff_pv_step; FF_ROLLED
// keeps them loops on the CPU drivers).
//
// Tiling. A workgroup of 256 invocations owns FF_BR = 64 rows (queries; keys in the
// dK/dV pass) and walks the other side in tiles of FF_BC = 64 columns. Invocation
// (tx, ty) owns rows ty + 16 i and columns tx + 16 j (i, j < 4): a 4x4 register block of
// the score tile in a mat4x4 whose column i holds row i's four scores. Registers are
// only ever indexed by constants (mat columns, vec components): a dynamically indexed
// private array would live in local memory on a GPU.
// - Score GEMMs (S = Q K^T, dP = dO V^T) stream head_dim in chunks of 32 floats through
//   the staging area (A rows, then B rows), so workgroup memory does not grow with
//   head_dim.
// - The second GEMM (P V, dS K, P^T dO, dS^T Q) reads the 64x64 tile from the P area and
//   streams FF_VK rows x head_dim of the other operand (256 vec4s: one per invocation)
//   through the row-staging area; each fetch loads two such steps into registers.
//   Invocation tx owns output vec4 columns tx and tx + 16 (FF_NCOL of them) of its rows.
// Occupancy decides the speed here: an SM runs a second workgroup only when both fit in
// its registers and workgroup memory (about 128 registers per invocation and 24 KiB each
// on the H200, measured by benchmarks/occupancy_probe.py). So loads are not prefetched into
// registers across steps (that saved nothing, and its 24 registers kept the dQ and dK/dV
// passes at one workgroup per SM), and workgroup memory stays under 24 KiB.
// Row strides of 9 / 17 / 16 FF_NCOL + 1 vec4 keep the vec4 reads of 8 consecutive tx
// (or 4 consecutive ty) of a 32-wide subgroup on distinct banks.
// Output columns: a workgroup owns FF_WG_COLS = 64 FF_NCOL FF_SPLIT columns of head_dim,
// block workgroup_id.x % ceil(head_dim / FF_WG_COLS) (Kernel.cols_per_workgroup; the
// backward's key-tile passes repeat the blocks along x once per part of a key tile). Up to
// 128 that is all of them. Above, fa2_fast_d256.wgsl's workgroups have FF_SPLIT = 2 halves
// of 256 invocations: half h owns columns 128 h.. (ff_col0) and computes the score GEMMs
// over its half of head_dim, and the halves add their partial blocks (ff_exchange), each
// half summing, and then working on, its own half of the block's rows (ff_row). A
// device without 512 invocations per workgroup runs head_dim 256 with the 128 family: two
// workgroups per tile, each computing the whole score tile and the second GEMM for its
// columns (32 more accumulator floats per invocation would cost the second workgroup per SM).
// Workgroup memory is one array in phases separated by barriers: the score staging
// [0, 1152) is free once a score tile is done, so the P tile [0, 1088) overlays it; the
// row staging [1152, 1424) is free outside the second GEMM, so the row reductions
// [1152, 1408) overlay it. 1424 * 16 = 22784 bytes. With halves: both halves' staging
// [0, 2048) (unpadded, swizzled rows), the exchange [0, 1024) after it, the P tile
// [0, 1088), the halves' row staging and the reductions from 1088: 32768 bytes.

// A sum in the packed variant's arithmetic (fa2_fast_f16x2.wgsl's ffh_sum4): the float32
// total and the f16 sum in progress (held as f32, which holds any f16 exactly).
struct FfhSum {
    total: f32,
    part: f32,
};

const FF_BR: u32 = 64u;
const FF_BC: u32 = 64u;
const FF_PS: u32 = 17u; // row stride (vec4) of the P tile
const FF_VS: u32 = 16u * FF_NCOL + 1u; // row stride (vec4) of a staged second operand
const FF_MASKED: f32 = -1.0e30; // a score <= this is masked (FA2_MASKED)
const FF_OUT: f32 = -3.0e38; // what a masked score becomes: exp(FF_OUT - m) == 0
const FF_EMPTY_LSE: f32 = 3.0e38;
const FF_DCOLS: u32 = 64u * FF_NCOL; // output columns per half (head_dim floats)
const FF_WG: u32 = 256u * FF_SPLIT; // invocations per workgroup of the tile passes
const FF_WG_COLS: u32 = FF_DCOLS * FF_SPLIT; // output columns per workgroup
// This invocation's half of the workgroup (0 without FF_SPLIT) and the first output
// column it owns: FF_WG_COLS (workgroup_id.x % column blocks) + FF_DCOLS half. Set first
// thing by every tile pass (ff_set_cols); uniform within a half.
var<private> ff_half: u32;
var<private> ff_col0: u32;
fn ff_col_blocks() -> u32 {
    return (fa2_params.head_dim + FF_WG_COLS - 1u) / FF_WG_COLS;
}
// Returns the invocation's index within its half (< 256), which every helper takes as lid.
fn ff_set_cols(wg: vec3<u32>, lix: u32) -> u32 {
    ff_half = select(0u, lix >> 8u, FF_SPLIT > 1u);
    ff_col0 = (wg.x % ff_col_blocks()) * FF_WG_COLS + ff_half * FF_DCOLS;
    return lix & 255u;
}
// ---- the sequence a workgroup works on ----
// A variable-length batch (FlashAttention-2's cu_seqlens; role seqlens) packs Q, O, dO,
// dQ as [total_q, heads, D] and K, V, dK, dV as [total_k, kv heads, D], the LSE as
// [heads, total_q]; per sequence b, ff_seqlens[b] is (first query row, first key row,
// query length, key length), zero-padded to config.VARLEN_MAX_BATCH sequences so it can
// be a fixed-size uniform array (as the ALiBi slopes). Each sequence is aligned on its
// own: query qi sits at key position qi + query_shift + len_k - len_q. ff_seq(b) is batch
// element b's view; a dense batch gets the same from b, seq_q and seq_k, so one code path
// serves both. Tiles past a sequence's end do nothing. The view is recomputed from the
// uniforms where it is used, never kept in a private variable: values read from one are
// not uniform to WGSL's uniformity analysis (Tint refuses the barriers in the loops they
// bound), and the compiler folds the repeated uniform loads. It selects between the two
// forms without a branch: with an `if` here, naga's backward passes ran 9-12 % slower on
// the H200 (Tint's alike either way).
@group(0) @binding(13) var<uniform> ff_seqlens: array<vec4<u32>, 4096>;
struct FfSeq {
    q_row0: u32, // the sequence's first row of Q (O, dO, dQ)
    k_row0: u32, // ... of K (V, dK, dV)
    len_q: u32,
    len_k: u32,
    shift: i32, // query qi sits at key position qi + shift
    stat0: u32, // LSE / row-stat index of (head 0, query 0); heads stat_h apart
    stat_h: u32,
};
fn ff_seq(b: u32) -> FfSeq {
    let p = fa2_params;
    let s = ff_seqlens[min(b, 4095u)];
    let v = p.varlen != 0u;
    return FfSeq(
        select(b * p.seq_q, s.x, v),
        select(b * p.seq_k, s.y, v),
        select(p.seq_q, s.z, v),
        select(p.seq_k, s.w, v),
        p.query_shift + select(0, i32(s.w) - i32(s.z), v),
        select(b * p.num_heads * p.seq_q, s.x, v),
        select(p.seq_q, p.total_q, v)
    );
}
// The LSE / row-stat index of query qi of head h of sequence b.
fn ff_stat_row(b: u32, h: u32, qi: u32) -> u32 {
    let s = ff_seq(b);
    return s.stat0 + h * s.stat_h + qi;
}

// Q, K, V read as vec4s (flash_attention_v2.wgsl reads the same buffers as floats). The runner rounds every input buffer up to 16 bytes, so a view ends no earlier
// than the floats do.
// Their element type ff_io (f32, or f16 in the fast_f16 variant) is the module's first
// file's (fa2_fast_f32.wgsl, fa2_fast_f16.wgsl); each load widens to float32.
@group(0) @binding(0) var<storage, read> ff_q: array<vec4<ff_io>>;
@group(0) @binding(1) var<storage, read> ff_k: array<vec4<ff_io>>;
@group(0) @binding(2) var<storage, read> ff_v: array<vec4<ff_io>>;
// ff_vec4_pair buffer ids.
const FF_Q: u32 = 0u;
const FF_K: u32 = 1u;
const FF_V: u32 = 2u;
const FF_DO: u32 = 3u;

// Offsets (vec4) into ff_smem.
const FF_SB: u32 = 64u * FF_AS; // score staging: A rows at 0, B rows here (2 x 64 x FF_AS)
const FF_P0: u32 = 0u; // P or dS of the tile: 64 x FF_PS (1088), over the score staging
// Row staging, FF_VK x FF_VS per half (<= 272), after one half's score staging and the P
// tile (with halves, over the second half's staging: a score GEMM and a second GEMM are
// always barriers apart).
const FF_V0: u32 = max(2u * FF_SB, 64u * FF_PS);
const FF_R0: u32 = FF_V0; // 64 rows x 4 vec4 partials (row max / sum), over the row staging
const FF_X0: u32 = 0u; // FF_SPLIT halves' partial score rows, 512 vec4s each (ff_exchange)
var<workgroup> ff_smem: array<vec4<f32>, FF_SMEM>;
// The slot of vec4 c of a staged score-operand row: with unpadded rows (FF_AS = FF_KC / 4,
// 8 vec4s), c ^ (row % 8), so that the 4 rows (A) or 8 rows (B) a subgroup reads at once
// fall on distinct banks, as a padded stride of 9 makes them (rows 16 apart share it).
fn ff_swizzle(c: u32, row: u32) -> u32 {
    if (FF_AS == FF_KC / 4u) { return c ^ (row & 7u); }
    return c;
}
// Where this half's score staging and row staging start.
fn ff_sbase() -> u32 {
    return ff_half * 2u * FF_SB;
}
fn ff_vbase() -> u32 {
    return FF_V0 + ff_half * FF_VK * FF_VS;
}
// Row ownership with halves. The score GEMMs give an invocation rows ty + 16 i, i < 4;
// after the exchange its block holds rows ty + ff_row(i), the second half's rotated by two
// (32 + ty first), so that register rows 0 and 1 are always the half's own: only a row's
// owner holds its whole score and computes what follows from it (masks, exp, dS), written
// where both halves read it (P tile, row reductions). Without halves ff_row(i) is 16 i and
// every row is the invocation's own. (Both halves once held the whole block and each
// computed every exp of it.)
fn ff_row(i: u32) -> u32 {
    if (FF_SPLIT == 1u) { return 16u * i; }
    // With halves only the own rows (i < 2) are placed: ((i + 2 half) % 4) 16 for them, as
    // a base and a constant (the modulo's form made naga's dV pass 2.4 % slower).
    return 16u * i + 32u * ff_half;
}
// Whether register row i is this invocation's own (see ff_row).
fn ff_mine(i: u32) -> bool {
    return FF_SPLIT == 1u || i < 2u;
}
// A vec4 in tile-row order (component k: row ty + 16 k) in register-row order (component
// i: row ty + ff_row(i)).
fn ff_own4(v: vec4<f32>) -> vec4<f32> {
    if (FF_SPLIT == 1u) { return v; }
    return select(v, v.zwxy, ff_half == 1u);
}
fn ff_own4u(v: vec4<u32>) -> vec4<u32> {
    if (FF_SPLIT == 1u) { return v; }
    return select(v, v.zwxy, ff_half == 1u);
}

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
// Rows of head h of sequence b (ff_seq) in a Q-shaped or K-shaped tensor.
fn ff_q_rows(buf: u32, b: u32, h: u32, row0: u32, mul: f32) -> FfRows {
    let p = fa2_params;
    return FfRows(
        buf,
        (ff_seq(b).q_row0 * p.num_heads + h) * p.head_dim,
        p.num_heads * p.head_dim,
        row0,
        ff_seq(b).len_q,
        mul
    );
}
fn ff_kv_rows(buf: u32, b: u32, kvh: u32, row0: u32, mul: f32) -> FfRows {
    let p = fa2_params;
    return FfRows(
        buf,
        (ff_seq(b).k_row0 * p.num_kv_heads + kvh) * p.head_dim,
        p.num_kv_heads * p.head_dim,
        row0,
        ff_seq(b).len_k,
        mul
    );
}

// ---- visibility, masks, dropout: four (query, key) pairs at once ----
// Vector forms of fa2_visible / fa2_mask_at / dropout_scale (same results, bit for bit):
// one call per score row instead of four keeps the code small for JIT-compiling CPU
// adapters; uniform branches only.
const FF_COLS: vec4<u32> = vec4<u32>(0u, 16u, 32u, 48u); // an invocation's column offsets
fn ff_visible4(b: u32, qi: vec4<u32>, kj: vec4<u32>) -> vec4<bool> {
    let p = fa2_params;
    let d = vec4<i32>(kj) - (vec4<i32>(qi) + ff_seq(b).shift);
    let inside = (d >= vec4<i32>(-p.key_left)) & (d <= vec4<i32>(p.key_right));
    return inside & (kj < vec4<u32>(ff_seq(b).len_k)) & (qi < vec4<u32>(ff_seq(b).len_q));
}
// fa2_softcap on the own rows of a 4x4 score block (uniform branch: nothing to do without
// a softcap).
fn ff_softcap4x4(s: mat4x4<f32>) -> mat4x4<f32> {
    let c = fa2_params.softcap;
    if (c <= 0.0) { return s; }
    let r = 1.0 / c;
    var t = s;
    t[0] = c * fa2_tanh4(s[0] * r);
    t[1] = c * fa2_tanh4(s[1] * r);
    if (ff_mine(2u)) {
        t[2] = c * fa2_tanh4(s[2] * r);
        t[3] = c * fa2_tanh4(s[3] * r);
    }
    return t;
}
// The softcap's derivative at a capped score t = softcap * tanh(x / softcap):
// d t / d x = 1 - (t / softcap)^2, 1 without a softcap.
fn ff_softcap_grad4x4(t: mat4x4<f32>) -> mat4x4<f32> {
    let c = fa2_params.softcap;
    if (c <= 0.0) { return mat4x4<f32>(vec4<f32>(1.0), vec4<f32>(1.0), vec4<f32>(1.0), vec4<f32>(1.0)); }
    let r = 1.0 / c;
    let u = mat4x4<f32>(t[0] * r, t[1] * r, t[2] * r, t[3] * r);
    return mat4x4<f32>(1.0 - u[0] * u[0], 1.0 - u[1] * u[1], 1.0 - u[2] * u[2], 1.0 - u[3] * u[3]);
}
// ALiBi slopes (role alibi_slopes): the slope of (b, h) is float b * alibi_stride_b + h,
// zero-padded to config.ALIBI_SLOTS floats (64 KiB) so it can be a fixed-size uniform
// array: a ninth storage binding would exceed the default limit of 8 per stage.
@group(0) @binding(12) var<uniform> ff_alibi: array<vec4<f32>, 4096>;
// FlashAttention-2's ALiBi bias, added after the softcap and before the mask:
// -slope * |kj - (qi + shift)| (uniform branch: nothing to do without slopes).
fn ff_alibi4(s: vec4<f32>, b: u32, h: u32, qi: vec4<u32>, kj: vec4<u32>) -> vec4<f32> {
    let p = fa2_params;
    if (p.has_alibi == 0u) { return s; }
    let n = b * p.alibi_stride_b + h;
    let slope = ff_alibi[n >> 2u][n & 3u];
    let d = vec4<i32>(kj) - (vec4<i32>(qi) + ff_seq(b).shift);
    return s - slope * abs(vec4<f32>(d));
}
// ff_alibi4 on the own rows of a 4x4 score block: query rows.x .. rows.w (one per matrix
// column) against keys cols.
fn ff_alibi4x4(s: mat4x4<f32>, b: u32, h: u32, rows: vec4<u32>, cols: vec4<u32>) -> mat4x4<f32> {
    if (fa2_params.has_alibi == 0u) { return s; }
    var t = s;
    t[0] = ff_alibi4(s[0], b, h, vec4<u32>(rows.x), cols);
    t[1] = ff_alibi4(s[1], b, h, vec4<u32>(rows.y), cols);
    if (ff_mine(2u)) {
        t[2] = ff_alibi4(s[2], b, h, vec4<u32>(rows.z), cols);
        t[3] = ff_alibi4(s[3], b, h, vec4<u32>(rows.w), cols);
    }
    return t;
}
// Scores after the ALiBi bias, visibility and the additive mask; FF_OUT where masked (a
// score <= FF_MASKED, -inf included, is masked).
fn ff_masked4(s: vec4<f32>, b: u32, h: u32, qi: vec4<u32>, kj: vec4<u32>) -> vec4<f32> {
    let p = fa2_params;
    var x = ff_alibi4(s, b, h, qi, kj);
    if (p.has_mask != 0u) {
        let i = b * p.mask_stride_b + h * p.mask_stride_h + qi * p.mask_stride_q
            + kj * p.mask_stride_k;
        x += vec4<f32>(fa2_mask[i.x], fa2_mask[i.y], fa2_mask[i.z], fa2_mask[i.w]);
    }
    return select(vec4<f32>(FF_OUT), x, ff_visible4(b, qi, kj) & (x > vec4<f32>(FF_MASKED)));
}
fn ff_pcg4(v: vec4<u32>) -> vec4<u32> {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> vec4<u32>(28u)) + 4u)) ^ state) * 277803737u;
    return (word >> vec4<u32>(22u)) ^ word;
}
// dropout_scale(p, seed, bh, qi, kj) for four pairs: hash3(seed ^ pcg(bh), qi, kj).
fn ff_keep4(bh: u32, qi: vec4<u32>, kj: vec4<u32>) -> vec4<f32> {
    let p = fa2_params.dropout_prob;
    if (p <= 0.0) { return vec4<f32>(1.0); }
    let x = vec4<u32>(fa2_params.seed ^ fa2_pcg(bh));
    let u = vec4<f32>(ff_pcg4(x ^ ff_pcg4(qi ^ ff_pcg4(kj))) >> vec4<u32>(8u)) * (1.0 / 16777216.0);
    return select(vec4<f32>(1.0 / (1.0 - p)), vec4<f32>(0.0), u < vec4<f32>(p));
}
// Whether the whole tile queries [q0, q0 + nq) x keys [k0, k0 + nk) is in range and
// visible, so the per-element checks can be skipped (uniform).
fn ff_all_visible(b: u32, q0: u32, nq: u32, k0: u32, nk: u32) -> bool {
    let p = fa2_params;
    if (p.has_mask != 0u || q0 + nq > ff_seq(b).len_q || k0 + nk > ff_seq(b).len_k) { return false; }
    let qa0 = i32(q0) + ff_seq(b).shift;
    // The extreme distances: (last query, first key) and (first query, last key).
    let d_min = i32(k0) - (qa0 + i32(nq) - 1);
    let d_max = i32(k0 + nk - 1u) - qa0;
    return d_min >= -p.key_left && d_max <= p.key_right;
}
// [query tile, batch * heads index] of a workgroup of a (1, tiles, batch * heads) dispatch.
// Workgroups start roughly in index order, so tiles are handed out heaviest first across
// all heads (not head by head), and light tiles fill the SMs at the end: with causal
// masking the last query tiles see the most keys. On the H200 this made the causal
// forward at S = 4096 18 % faster and the non-causal one no slower (and the causal passes
// of the backward, when they were tiled this way, 7-22 %).
fn ff_tile_order(wg: vec3<u32>, nwg: vec3<u32>) -> vec2<u32> {
    let i = wg.y + wg.z * nwg.y;
    let tile = i / nwg.z;
    return vec2<u32>(nwg.y - 1u - tile, i % nwg.z);
}
// Queries [begin, end) of this sequence that see any key in [k0, k1] (uniform; empty:
// begin >= end).
// -left <= kj - qi - shift <= right  <=>  kj - shift - right <= qi <= kj - shift + left.
fn ff_query_range(b: u32, k0: u32, k1: u32) -> vec2<u32> {
    let p = fa2_params;
    let lo = i32(k0) - ff_seq(b).shift - p.key_right;
    let hi = i32(k1) - ff_seq(b).shift + p.key_left + 1;
    return vec2<u32>(u32(max(lo, 0)), u32(clamp(hi, 0, i32(ff_seq(b).len_q))));
}
// Keys [begin, end) of this sequence visible to any query in [q0, q1] (fa2_key_range on
// the sequence view; uniform; empty: begin >= end).
fn ff_key_range(b: u32, q0: u32, q1: u32) -> vec2<u32> {
    let p = fa2_params;
    let lo = i32(q0) + ff_seq(b).shift - p.key_left;
    let hi = i32(q1) + ff_seq(b).shift + p.key_right + 1;
    return vec2<u32>(u32(max(lo, 0)), u32(clamp(hi, 0, i32(ff_seq(b).len_k))));
}

// ---- staging (no barriers here: callers place them) ----
// The first n components of v (n may exceed 4), zeros after: ff_load8 reads 4 floats and
// drops those past the row (an index past the buffer's end is clamped by WebGPU).
fn ff_pick(v: vec4<f32>, n: u32) -> vec4<f32> {
    return select(vec4<f32>(0.0), v, vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(n));
}
struct FfPair {
    a: vec4<f32>,
    b: vec4<f32>,
};
// Fetching: an invocation loads two vec4s per staged step (vec4s lid and lid + 256 of the
// step's 512). Both come from one ff_load8 call, which switches on the buffer once and
// loads without branches; a vec4 past the rows or head_dim is loaded from a clamped index
// and zeroed after. (On the H200, one switch per vec4 measured up to 6 % slower; a copy of
// the fetch helpers per buffer, with no switch at all, measured the same as this.)
// Whole vec4 loads, not four floats each: 6 % off the forward's time on the H200 and 4 %
// off the backward's.
// Floats r .. r + 3 of the eight in a, then b (r < 4).
fn ff_shift(a: vec4<f32>, b: vec4<f32>, r: u32) -> vec4<f32> {
    let r1 = vec4<f32>(a.yzw, b.x);
    let r2 = vec4<f32>(a.zw, b.xy);
    let r3 = vec4<f32>(a.w, b.xyz);
    return select(select(select(a, r1, r == 1u), r2, r == 2u), r3, r == 3u);
}
// Floats [i, i + 4) and [j, j + 4) of buffer `buf`. With head_dim a multiple of 4 every
// row, hence i and j, starts on a vec4; otherwise each is cut from the two vec4s it spans
// (the second may lie past the end: its floats are past the row, and dropped by the caller).
fn ff_load8(buf: u32, i: u32, j: u32) -> FfPair {
    let lo = ff_vec4_pair(buf, i >> 2u, j >> 2u);
    if (fa2_params.head_dim % 4u == 0u) { return lo; }
    let hi = ff_vec4_pair(buf, (i >> 2u) + 1u, (j >> 2u) + 1u);
    return FfPair(ff_shift(lo.a, hi.a, i & 3u), ff_shift(lo.b, hi.b, j & 3u));
}
// Flat index of element c of row r of src (r relative to src.row0).
fn ff_at(src: FfRows, r: u32, c: u32) -> u32 {
    return src.base + (src.row0 + r) * src.stride + c;
}
// v (4 floats from column c of row r) with those past head_dim zeroed, times src.mul; zero
// when the row is past the end or c past head_dim.
fn ff_valid4(v: vec4<f32>, src: FfRows, r: u32, c: u32) -> vec4<f32> {
    let d = fa2_params.head_dim;
    return select(vec4<f32>(0.0), ff_pick(v, d - c) * src.mul, src.row0 + r < src.rows && c < d);
}
// Whole tiles (a pipeline-overridable constant, set by the host: Kernel.whole_tiles): every
// row and column a pass loads lies inside its tensor (a dense batch of whole 64-row tiles,
// head_dim whole column blocks, visible ranges that start on tile boundaries), so loads
// need neither bounds checks nor the unaligned-row path. On the H200 the checks cost 1.4-7.5 %
// of each pass (ALU work beside the FMAs); a uniform branch on the tile's bounds at run
// time made the forwards slower still, where a constant costs nothing. Same bits either way.
override FF_WHOLE: bool = false;
// The 4 floats at rows r.x and r.y, columns c.x and c.y of src, as ff_valid4 leaves them.
fn ff_fetch_pair(src: FfRows, r: vec2<u32>, c: vec2<u32>) -> FfPair {
    let i = ff_at(src, r.x, c.x);
    let j = ff_at(src, r.y, c.y);
    if (FF_WHOLE) {
        let w = ff_vec4_pair(src.buf, i >> 2u, j >> 2u);
        return FfPair(w.a * src.mul, w.b * src.mul);
    }
    let v = ff_load8(src.buf, i, j);
    return FfPair(ff_valid4(v.a, src, r.x, c.x), ff_valid4(v.b, src, r.y, c.y));
}
// This invocation's share of chunk [c0, c0 + FF_KC) of head_dim of 64 rows, loaded but not
// yet staged (zeros past the rows or head_dim).
fn ff_fetch_chunk(lid: u32, src: FfRows, c0: u32) -> FfPair {
    let w = FF_KC / 4u;
    let e = lid + 256u;
    return ff_fetch_pair(src, vec2<u32>(lid / w, e / w), c0 + vec2<u32>(lid % w, e % w) * 4u);
}
// A fetched chunk into the score staging at `base` (0: A, FF_SB: B).
fn ff_stage_chunk(lid: u32, base: u32, v: FfPair) {
    let w = FF_KC / 4u;
    let at = ff_sbase() + base;
    ff_smem[at + (lid / w) * FF_AS + ff_swizzle(lid % w, lid / w)] = v.a;
    let e = lid + 256u;
    ff_smem[at + (e / w) * FF_AS + ff_swizzle(e % w, e / w)] = v.b;
}
// This invocation's share of rows [row0 + r0, + 2 FF_VK) x this workgroup's output
// columns [ff_col0, + FF_DCOLS) (two steps of FF_VK x 16 FF_NCOL = 256 vec4s for both tile
// sizes), fetched but not staged: a holds vec4 lid of the first step, b of the second.
fn ff_fetch_rows(lid: u32, src: FfRows, r0: u32) -> FfPair {
    let w = 16u * FF_NCOL;
    let r = r0 + lid / w;
    return ff_fetch_pair(src, vec2<u32>(r, r + FF_VK), vec2<u32>(ff_col0 + (lid % w) * 4u));
}
fn ff_stage_rows(lid: u32, v: vec4<f32>) {
    let w = 16u * FF_NCOL;
    ff_smem[ff_vbase() + (lid / w) * FF_VS + lid % w] = v;
}

// ---- register micro-kernels: one fma chain per output, no separate rounding ----
fn ff_dot(acc: f32, a: vec4<f32>, b: vec4<f32>) -> f32 {
    return fma(a.w, b.w, fma(a.z, b.z, fma(a.y, b.y, fma(a.x, b.x, acc))));
}
fn ff_dot4(acc: vec4<f32>, a: vec4<f32>, b: mat4x4<f32>) -> vec4<f32> {
    return vec4<f32>(
        ff_dot(acc.x, a, b[0]),
        ff_dot(acc.y, a, b[1]),
        ff_dot(acc.z, a, b[2]),
        ff_dot(acc.w, a, b[3])
    );
}
// acc + w.x v[0] + w.y v[1] + w.z v[2] + w.w v[3]
fn ff_axpy(acc: vec4<f32>, w: vec4<f32>, v: mat4x4<f32>) -> vec4<f32> {
    return fma(
        vec4<f32>(w.w),
        v[3],
        fma(vec4<f32>(w.z), v[2], fma(vec4<f32>(w.y), v[1], fma(vec4<f32>(w.x), v[0], acc)))
    );
}
fn ff_axpy4(acc: mat4x4<f32>, w: mat4x4<f32>, v: mat4x4<f32>) -> mat4x4<f32> {
    return mat4x4<f32>(
        ff_axpy(acc[0], w[0], v),
        ff_axpy(acc[1], w[1], v),
        ff_axpy(acc[2], w[2], v),
        ff_axpy(acc[3], w[3], v)
    );
}
fn ff_stage_a(t: vec2<u32>, c: u32) -> mat4x4<f32> {
    let i = ff_sbase() + t.y * FF_AS + ff_swizzle(c, t.y);
    return mat4x4<f32>(
        ff_smem[i],
        ff_smem[i + 16u * FF_AS],
        ff_smem[i + 32u * FF_AS],
        ff_smem[i + 48u * FF_AS]
    );
}

// S block += A rows . B rows over step c (vec4 c of each row) of the staged chunk.
fn ff_scores_step(s: mat4x4<f32>, t: vec2<u32>, c: u32) -> mat4x4<f32> {
    let a = ff_stage_a(t, c);
    let j = ff_sbase() + FF_SB + t.x * FF_AS + ff_swizzle(c, t.x);
    let b = mat4x4<f32>(
        ff_smem[j],
        ff_smem[j + 16u * FF_AS],
        ff_smem[j + 32u * FF_AS],
        ff_smem[j + 48u * FF_AS]
    );
    return mat4x4<f32>(
        ff_dot4(s[0], a[0], b),
        ff_dot4(s[1], a[1], b),
        ff_dot4(s[2], a[2], b),
        ff_dot4(s[3], a[3], b)
    );
}
// The GEMMs' inner loops kept as loops even where the pass's file writes them out (a
// pipeline-overridable constant, set by the host on the CPU drivers: Kernel.rolled_loops).
// SwiftShader compiles and runs the loops in 6-17 % less time; lavapipe compiles them faster
// (13-23 % off wgpu's planted bugs on a new machine, and ff_trips below 28-31 % more);
// GPUs run the written-out steps faster.
override FF_ROLLED: bool = false;
// S block += A rows . B rows over the staged chunk (FF_KC / 4 = 8 steps). Written out step
// by step where the pass's file sets FF_UNROLL_SCORES (WGSL has no unroll hint): with
// ff_pv_step's loop written out too, the forward took 11-15 % less time on an H100 through
// naga and Tint (docs/records/gpu.md). Same bits either way.
const_assert FF_KC == 32u; // the 8 steps written out below
fn ff_scores_chunk(acc: mat4x4<f32>, t: vec2<u32>) -> mat4x4<f32> {
    var s = acc;
    if (!FF_ROLLED && FF_UNROLL_SCORES) {
        s = ff_scores_step(s, t, 0u);
        s = ff_scores_step(s, t, 1u);
        s = ff_scores_step(s, t, 2u);
        s = ff_scores_step(s, t, 3u);
        s = ff_scores_step(s, t, 4u);
        s = ff_scores_step(s, t, 5u);
        s = ff_scores_step(s, t, 6u);
        s = ff_scores_step(s, t, 7u);
        return s;
    }
    for (var c = 0u; c < FF_KC / 4u; c++) {
        s = ff_scores_step(s, t, c);
    }
    return s;
}
// This invocation's 4x4 block of A B^T over all of head_dim: its rows ty + ff_row(i). With
// FF_SPLIT halves, half h sums chunks [h n, h n + n) of the n per half, and the halves add
// their partial blocks (ff_exchange), after which only the own rows (0 and 1) hold scores:
// the forward and the backward split alike, so their scores agree to the bit.
// FF_PACKED (the module's first file): the packed f16 form instead (fa2_fast_f16x2.wgsl).
fn ff_score_tile(lid: u32, t: vec2<u32>, a: FfRows, b: FfRows) -> mat4x4<f32> {
    if (FF_PACKED) { return ffh_score_tile(lid, t, a, b); }
    var s = mat4x4<f32>();
    let n = (fa2_params.head_dim + FF_SPLIT * FF_KC - 1u) / (FF_SPLIT * FF_KC);
    for (var k = 0u; k < n; k++) {
        let c0 = (ff_half * n + k) * FF_KC;
        ff_stage_chunk(lid, 0u, ff_fetch_chunk(lid, a, c0));
        ff_stage_chunk(lid, FF_SB, ff_fetch_chunk(lid, b, c0));
        workgroupBarrier();
        s = ff_scores_chunk(s, t);
        workgroupBarrier();
    }
    if (FF_SPLIT > 1u) { s = ff_exchange(lid, s); }
    return s;
}
// The block's own rows (ff_row): the sum of the two halves' partials, in rows 0 and 1;
// rows 2 and 3 are left as partials, unused. The GEMM's rows are ty + 16 i in both halves
// (constant offsets there: rotated addressing in its loop made naga's forward 3 % slower
// on the H200), so the second half's own rows come from its rows 2 and 3. Each score is
// summed by its row's owner, own + other, the same bits as other + own. Between barriers:
// the area overlays the score staging.
fn ff_exchange(lid: u32, s: mat4x4<f32>) -> mat4x4<f32> {
    let second = ff_half == 1u;
    let mine = FF_X0 + ff_half * 512u + lid;
    let other = FF_X0 + (1u - ff_half) * 512u + lid;
    ff_smem[mine] = select(s[2], s[0], second); // the other half's rows
    ff_smem[mine + 256u] = select(s[3], s[1], second);
    workgroupBarrier();
    let o0 = ff_smem[other];
    let o1 = ff_smem[other + 256u];
    workgroupBarrier();
    return mat4x4<f32>(select(s[0], s[2], second) + o0, select(s[1], s[3], second) + o1, s[2], s[3]);
}
// Four consecutive staged rows of one output vec4 column, from vec4 j of the first: row
// i in column i.
fn ff_staged_rows4(j: u32) -> mat4x4<f32> {
    return mat4x4<f32>(ff_smem[j], ff_smem[j + FF_VS], ff_smem[j + 2u * FF_VS], ff_smem[j + 3u * FF_VS]);
}
// acc += columns [r0 + k, r0 + k + 4) of the P tile times staged rows k .. k + 3; halves:
// 1 for the low output columns, 2 for the high ones (FF_NCOL > 1, 16 vec4s on), 3 for both.
fn ff_pv_rows4(t: vec2<u32>, acc: FfAcc, r0: u32, halves: u32, k: u32) -> FfAcc {
    var o = acc;
    let pc = (r0 + k) / 4u;
    let i = FF_P0 + t.y * FF_PS + pc;
    let w = mat4x4<f32>(
        ff_smem[i],
        ff_smem[i + 16u * FF_PS],
        ff_smem[i + 32u * FF_PS],
        ff_smem[i + 48u * FF_PS]
    );
    let j = ff_vbase() + k * FF_VS + t.x;
    if ((halves & 1u) != 0u) {
        o.lo = ff_axpy4(o.lo, w, ff_staged_rows4(j));
    }
    if (FF_NCOL > 1u && (halves & 2u) != 0u) {
        o.hi = ff_axpy4(o.hi, w, ff_staged_rows4(j + 16u));
    }
    return o;
}
// acc += columns [r0, r0 + FF_VK) of the P tile times the staged rows (FF_VK / 4 steps of
// 4; written out where the pass's file sets FF_UNROLL_PV, as ff_scores_chunk).
const_assert FF_VK == 8u || FF_VK == 16u; // the steps written out below
fn ff_pv_step(t: vec2<u32>, acc: FfAcc, r0: u32, halves: u32) -> FfAcc {
    var o = acc;
    if (!FF_ROLLED && FF_UNROLL_PV) {
        o = ff_pv_rows4(t, o, r0, halves, 0u);
        o = ff_pv_rows4(t, o, r0, halves, 4u);
        if (FF_VK > 8u) {
            o = ff_pv_rows4(t, o, r0, halves, 8u);
            o = ff_pv_rows4(t, o, r0, halves, 12u);
        }
        return o;
    }
    for (var k = 0u; k < ff_trips(FF_VK); k += 4u) {
        o = ff_pv_rows4(t, o, r0, halves, k);
    }
    return o;
}
// The bound n of a loop that FF_ROLLED keeps, in a form no compiler can count: lavapipe
// (Mesa's NIR) unrolls a short loop of known count, and ff_pv_step's, so unrolled at every
// call, took its LLVM 2.9 s to compile the dK/dV pass at head_dim 64 against 1.3 s as a
// loop (the same bits; its loop limiter now counts these passes: judge/loop_budget.py).
// head_dim + n > n, so the bound is n; GPUs (FF_ROLLED false) get the constant.
fn ff_trips(n: u32) -> u32 {
    if (FF_ROLLED) { return min(n, fa2_params.head_dim + n); }
    return n;
}
// acc += the P tile (64 x 64, after a barrier) times rows [v.row0, v.row0 + 64) of v, in
// steps of FF_VK rows (one fetch for two steps); halves as for ff_pv_step.
fn ff_pv_tile(lid: u32, t: vec2<u32>, acc: FfAcc, v: FfRows, halves: u32) -> FfAcc {
    var o = acc;
    var cur = ff_fetch_rows(lid, v, 0u);
    for (var r0 = 0u; r0 < FF_BC; r0 += 2u * FF_VK) {
        // Rows past the end are zero in both operands: skip them (uniform).
        if (v.row0 + r0 >= v.rows) { break; }
        ff_stage_rows(lid, cur.a);
        workgroupBarrier();
        o = ff_pv_step(t, o, r0, halves);
        workgroupBarrier();
        if (v.row0 + r0 + FF_VK >= v.rows) { break; }
        ff_stage_rows(lid, cur.b);
        workgroupBarrier();
        if (r0 + 2u * FF_VK < FF_BC) { cur = ff_fetch_rows(lid, v, r0 + 2u * FF_VK); }
        o = ff_pv_step(t, o, r0 + FF_VK, halves);
        workgroupBarrier();
    }
    return o;
}

// ---- tile exchange ----
// Columns col, col + 16, col + 32, col + 48 (col < 16) of a P-tile row are vec4 col / 4 + 4 j,
// component col % 4.
fn ff_put_row(row: u32, col: u32, v: vec4<f32>) {
    let i = FF_P0 + row * FF_PS + (col >> 2u);
    let c = col & 3u;
    ff_smem[i][c] = v.x;
    ff_smem[i + 4u][c] = v.y;
    ff_smem[i + 8u][c] = v.z;
    ff_smem[i + 12u][c] = v.w;
}
// Stores the block's own rows into the P tile; callers barrier before ff_pv_tile reads it.
fn ff_put_p(t: vec2<u32>, s: mat4x4<f32>) {
    ff_put_row(t.y + ff_row(0u), t.x, s[0]);
    ff_put_row(t.y + ff_row(1u), t.x, s[1]);
    if (ff_mine(2u)) { ff_put_row(t.y + ff_row(2u), t.x, s[2]); }
    if (ff_mine(3u)) { ff_put_row(t.y + ff_row(3u), t.x, s[3]); }
}
// Stores the block's own rows transposed: row tx + 16 j, column ty + ff_row(i) gets m[i][j].
fn ff_put_pt(t: vec2<u32>, m: mat4x4<f32>) {
    if (FF_SPLIT > 1u) {
        ff_put_col(t.x, t.y + ff_row(0u), m[0]);
        ff_put_col(t.x, t.y + ff_row(1u), m[1]);
        return;
    }
    let m_t = transpose(m);
    ff_put_row(t.x, t.y, m_t[0]);
    ff_put_row(t.x + 16u, t.y, m_t[1]);
    ff_put_row(t.x + 32u, t.y, m_t[2]);
    ff_put_row(t.x + 48u, t.y, m_t[3]);
}
// Rows row, row + 16, row + 32, row + 48 (row < 16) of P-tile column col get v.x .. v.w.
fn ff_put_col(row: u32, col: u32, v: vec4<f32>) {
    let i = FF_P0 + row * FF_PS + (col >> 2u);
    let c = col & 3u;
    ff_smem[i][c] = v.x;
    ff_smem[i + 16u * FF_PS][c] = v.y;
    ff_smem[i + 32u * FF_PS][c] = v.z;
    ff_smem[i + 48u * FF_PS][c] = v.w;
}
fn ff_max4(v: vec4<f32>) -> f32 {
    return max(max(v.x, v.y), max(v.z, v.w));
}
// The own rows' partials (register-row order) into the reduction area.
fn ff_red_put(t: vec2<u32>, v: vec4<f32>) {
    let c = t.x & 3u;
    let q = t.x >> 2u;
    ff_smem[FF_R0 + (t.y + ff_row(0u)) * 4u + q][c] = v.x;
    ff_smem[FF_R0 + (t.y + ff_row(1u)) * 4u + q][c] = v.y;
    if (ff_mine(2u)) { ff_smem[FF_R0 + (t.y + ff_row(2u)) * 4u + q][c] = v.z; }
    if (ff_mine(3u)) { ff_smem[FF_R0 + (t.y + ff_row(3u)) * 4u + q][c] = v.w; }
}
fn ff_red_max(row: u32) -> f32 {
    let i = FF_R0 + row * 4u;
    return ff_max4(max(max(ff_smem[i], ff_smem[i + 1u]), max(ff_smem[i + 2u], ff_smem[i + 3u])));
}
fn ff_red_sum(row: u32) -> f32 {
    let i = FF_R0 + row * 4u;
    let v = (ff_smem[i] + ff_smem[i + 1u]) + (ff_smem[i + 2u] + ff_smem[i + 3u]);
    return (v.x + v.y) + (v.z + v.w);
}
// Given partials of the own rows (register-row order), the max over the 64 tile columns
// of each of the invocation's rows, in tile-row order (component k: row ty + 16 k; with
// halves the other half gives two of them). The reduction area must be free (a barrier
// since its last read); a barrier follows the writes.
fn ff_row_max(t: vec2<u32>, partial: vec4<f32>) -> vec4<f32> {
    ff_red_put(t, partial);
    workgroupBarrier();
    return vec4<f32>(
        ff_red_max(t.y),
        ff_red_max(t.y + 16u),
        ff_red_max(t.y + 32u),
        ff_red_max(t.y + 48u)
    );
}
// Same for the sum (in one fixed order: every invocation gets the same bits).
fn ff_row_sum(t: vec2<u32>, partial: vec4<f32>) -> vec4<f32> {
    ff_red_put(t, partial);
    workgroupBarrier();
    return vec4<f32>(
        ff_red_sum(t.y),
        ff_red_sum(t.y + 16u),
        ff_red_sum(t.y + 32u),
        ff_red_sum(t.y + 48u)
    );
}
