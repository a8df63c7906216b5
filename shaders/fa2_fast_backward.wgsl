// ============================================================================
// FLASH ATTENTION V2, register-tiled ("fast" variant) - backward pass
// ============================================================================
// Module: fa2_fast_f32/f16.wgsl, fa2_common.wgsl, fa2_fast_d64/d128/d256.wgsl,
// fa2_fast_common.wgsl, this.
// Uses the forward's LSE instead of recomputing it. Three passes, no atomics, so every
// run gives the same bits:
// 1. fa2f_bwd_pre: scratch row stats [Delta, LSE], Delta = dO . O (O and LSE of the forward).
// 2. fa2f_bwd_dk_dv: per 64 keys, per query head of the group and query tile:
//    S^T = K (scale Q)^T (softcapped and ALiBi-biased as the forward's), dP^T = V dO^T,
//    dS = P (M dP - Delta) with P = exp(S - LSE) (times the softcap's derivative), then
//    dV += (P M)^T dO, dK += dS^T (scale Q), and dQ += scale dS K into a partial sum.
//    Workgroup (slot g, batch, kv head) of a (cols, G, batch * kv_heads) dispatch takes key
//    tiles g, g + G, g + 2G, ... and adds into partial sum g of dQ, which no other
//    workgroup touches: S and dP are computed once per tile pair (a separate dQ pass
//    would compute them again: 7 GEMMs per tile pair instead of 5). Where the key tiles
//    are too few to fill the GPU (a short K, as in cross-attention, or one key tile per
//    MQA head), each key tile's work (its query tiles of every head of the group) is split
//    into P parts along x, (cols * P, G, batch * kv_heads): part p writes its dK and dV
//    into copy p of the dK / dV buffers (Variant.kv_parts; P = 1: the tensors themselves)
//    and adds its dQ into the key tile's slot, whose rows the other parts do not touch;
//    pass 4 adds the copies. For 64 < head_dim <= 128
//    this is two passes from one body (FfbParts): fa2f_bwd_dv, and fa2f_bwd_dk_dq for dK
//    and dQ's sums, because one pass holding dK and dV (64 floats per invocation) with the
//    rest ran one workgroup per SM on the H200 where these run two (6 GEMMs per tile
//    pair, and faster: docs/records/gpu.md). Above 128 each workgroup's two halves
//    split head_dim (fa2_fast_common.wgsl) in one pass, 5 GEMMs per tile pair: its
//    workgroups of 512 run one per SM either way, and on the H200 the one pass took 11-12 %
//    less time than the two (docs/features.md); where the device lacks 512 invocations,
//    the 128 family's two passes, two workgroups splitting the output columns, each
//    computing the score GEMMs: 9 GEMMs per tile pair.
// 3. fa2f_bwd_dq_sum: dQ = the sum of the G partial sums (in slot order). Where every key
//    tile's query range runs to the sequence's end (no left window bound: plain, causal),
//    a slot's first round reaches every row it will add to, later rounds' ranges starting
//    no earlier, so the first round stores where it would add and the sums need no zeroing
//    (rows a slot never reaches keep the zeros buffers start with). Otherwise this pass
//    zeroes each sum for the next run (ffb_first_round_covers).
//    Band layout (params.dq_band_rows > 0; the host chooses it where both window bounds
//    are finite and it costs at most twice the slots' scratch: Variant.dq_band_rows): a
//    partial sum per key tile instead, holding the dq_band_rows rows from its query
//    range's start, and one key tile per workgroup (G = the key tiles). The key-tile pass
//    stores where it would add (nothing reads before it writes, nothing needs zeroing),
//    and the dQ sum adds, in key-tile order, the sums of the tiles that see the row. On
//    the H200 (S = 4096, causal, window (1024, 1024)) the slots' rounds left the band's
//    tapering end unbalanced, and the dQ sum's zeroing and the read-modify-writes cost
//    the window as much as causal alone: its backward took 1.13-1.16 times causal's time
//    per visible score, and takes 1.07-1.08 in this layout (docs/features.md).
// 4. fa2f_bwd_kv_sum: with P > 1, dK and dV = the sums of their P copies (in part order).
// Q is staged scaled (as the forward does) and the same products are summed in the same
// order, so S, hence P = exp(S - LSE), equals the forward's to the bit: with large logits
// any difference would be amplified by exp.
// Q, K, V: fa2_fast_common.wgsl's vec4 views.
@group(0) @binding(3) var<storage, read> ffb_o: array<vec4<ff_io>>;
@group(0) @binding(4) var<storage, read> ffb_do: array<vec4<ff_io>>;
@group(0) @binding(5) var<storage, read_write> ffb_dq: array<ff_io>;
@group(0) @binding(6) var<storage, read_write> ffb_dk: array<ff_io>;
@group(0) @binding(7) var<storage, read_write> ffb_dv: array<ff_io>;
// Scratch (kernels.scratch_elems): per (head, query) row [Delta, LSE], in the LSE's order
// (ff_stat_row; rows = heads * total_q pairs), then G partial sums of dQ, each rows x
// head_dim floats in the same row order. Each part starts on a vec4 (ffb_stats_len,
// ffb_slot_len), so the key-tile passes add, and the dQ sum pass reads, whole vec4s where
// head_dim % 4 == 0. Two views of one binding; no entry point uses both.
@group(0) @binding(10) var<storage, read_write> ffb_stats_out: array<vec2<f32>>;
@group(0) @binding(10) var<storage, read_write> ffb_scratch4: array<vec4<f32>>;
@group(0) @binding(11) var<storage, read> ffb_lse: array<f32>;

// The GEMMs' inner loops (ff_scores_chunk, ff_pv_step) kept as loops, but for the score
// loop in the 128 and 256 families: on an H100, both written out made the key-tile passes
// 4-18 % slower, the P V loop alone 12-25 %; the score loop alone took 2-3.6 % off the 128
// family's backward and 0.2-1.3 % off the 256 family's (head_dim 64's -0.4 to +1.3 %, not
// taken). judge/loop_budget.py's SCORES_WRITTEN_OUT says which, for lavapipe's loop budget.
const FF_UNROLL_SCORES: bool = FF_NCOL == 2u;
const FF_UNROLL_PV: bool = false;

fn ff_vec4_pair(buf: u32, i: u32, j: u32) -> FfPair {
    switch buf {
        case FF_Q: { return FfPair(vec4<f32>(ff_q[i]), vec4<f32>(ff_q[j])); }
        case FF_K: { return FfPair(vec4<f32>(ff_k[i]), vec4<f32>(ff_k[j])); }
        case FF_V: { return FfPair(vec4<f32>(ff_v[i]), vec4<f32>(ff_v[j])); }
        default: { return FfPair(vec4<f32>(ffb_do[i]), vec4<f32>(ffb_do[j])); }
    }
}
// Floats of the scratch's parts: the row stats, and one partial sum of dQ (vec4 multiples).
fn ffb_stats_len() -> u32 {
    let p = fa2_params;
    return (2u * p.num_heads * p.total_q + 3u) & ~3u;
}
fn ffb_slot_len() -> u32 {
    let p = fa2_params;
    return (p.num_heads * p.total_q * p.head_dim + 3u) & ~3u;
}

// Dispatch: (1, ceil(seq_q / 256), batch * num_heads); one query row per invocation, dO and
// O read as vec4s (cut from two where head_dim % 4 != 0). Sixteen invocations per row
// reading consecutive vec4s, their sums meeting in workgroup memory, took 0.020 ms against
// 0.032 on the H200 (S = 4096, 16 heads, head_dim 64) but 18 times as long on SwiftShader
// (0.74 s against 0.04 at 65,536 rows), which pays for every barrier: not kept.
@compute @workgroup_size(256)
fn fa2f_bwd_pre(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let p = fa2_params;
    let b = wg.z / p.num_heads;
    let h = wg.z % p.num_heads;
    let qi = wg.y * 256u + lid;
    if (qi >= ff_seq(b).len_q) { return; }
    let base = ((ff_seq(b).q_row0 + qi) * p.num_heads + h) * p.head_dim;
    var acc = vec4<f32>(0.0);
    var packed = FfhSum(0.0, 0.0); // FF_PACKED: Delta summed as dP is
    for (var c = 0u; c < p.head_dim; c += 4u) {
        let i = base + c;
        var g = vec4<f32>(ffb_do[i >> 2u]);
        var o = vec4<f32>(ffb_o[i >> 2u]);
        if (p.head_dim % 4u != 0u) {
            g = ff_shift(g, vec4<f32>(ffb_do[(i >> 2u) + 1u]), i & 3u);
            o = ff_shift(o, vec4<f32>(ffb_o[(i >> 2u) + 1u]), i & 3u);
        }
        if (FF_PACKED) {
            packed = ffh_sum4(packed, g, o, min(4u, p.head_dim - c), c);
        } else {
            acc = fma(ff_pick(g, p.head_dim - c), o, acc);
        }
    }
    let row = ff_stat_row(b, h, qi);
    if (!FF_PACKED) {
        ffb_stats_out[row] = vec2<f32>((acc.x + acc.y) + (acc.z + acc.w), ffb_lse[row]);
        return;
    }
    ffb_stats_out[row] = vec2<f32>(packed.total + packed.part, ffb_lse[row]);
}

// [Delta, LSE] of query qi of head h; a query past the end gets an empty row's (P = 0).
fn ffb_stat(b: u32, h: u32, qi: u32) -> vec2<f32> {
    if (qi >= ff_seq(b).len_q) { return vec2<f32>(0.0, FF_EMPTY_LSE); }
    let i = ff_stat_row(b, h, qi);
    let v = ffb_scratch4[i >> 1u];
    return select(v.xy, v.zw, (i & 1u) == 1u);
}
// [P M, P (M dP - Delta) cap_grad] of four (query, key) pairs, zero where masked (scores
// before ALiBi: it is added here, inside ff_masked4 where the tile needs checks); delta and
// lse are the pairs' queries'. chk: the tile is not known to be fully visible and
// unmasked. cap_grad: the softcap's derivative at the pairs' scores (1 without).
struct FfbGrad {
    pm: vec4<f32>,
    ds: vec4<f32>,
};
fn ffb_grad4(
    s: vec4<f32>,
    dp: vec4<f32>,
    delta: vec4<f32>,
    lse: vec4<f32>,
    b: u32,
    h: u32,
    bh: u32,
    qi: vec4<u32>,
    kj: vec4<u32>,
    chk: bool,
    cap_grad: vec4<f32>
) -> FfbGrad {
    var x: vec4<f32>;
    if (chk) { x = ff_masked4(s, b, h, qi, kj); } else { x = ff_alibi4(s, b, h, qi, kj); }
    let pij = select(vec4<f32>(0.0), exp(x - lse), x > vec4<f32>(FF_MASKED));
    let mij = ff_keep4(bh, qi, kj);
    return FfbGrad(pij * mij, pij * (mij * dp - delta) * cap_grad);
}

// ---- pass 2: dK, dV and partial dQ ----
// The work of key tile kt: the query tiles its pass walks (0 past the last key).
fn ffb_key_tile_work(b: u32, kt: u32) -> i32 {
    let k0 = kt * FF_BR;
    if (k0 >= ff_seq(b).len_k) { return 0; }
    let range = ff_query_range(b, k0, min(k0 + FF_BR, ff_seq(b).len_k) - 1u);
    return (max(i32(range.y) - i32(range.x), 0) + i32(FF_BC) - 1) / i32(FF_BC);
}
fn ffb_put_dk(base: u32, c: u32, v: vec4<f32>) {
    let d = fa2_params.head_dim;
    if (c < d) { ffb_dk[base + c] = ff_io(v.x); }
    if (c + 1u < d) { ffb_dk[base + c + 1u] = ff_io(v.y); }
    if (c + 2u < d) { ffb_dk[base + c + 2u] = ff_io(v.z); }
    if (c + 3u < d) { ffb_dk[base + c + 3u] = ff_io(v.w); }
}
fn ffb_put_dv(base: u32, c: u32, v: vec4<f32>) {
    let d = fa2_params.head_dim;
    if (c < d) { ffb_dv[base + c] = ff_io(v.x); }
    if (c + 1u < d) { ffb_dv[base + c + 1u] = ff_io(v.y); }
    if (c + 2u < d) { ffb_dv[base + c + 2u] = ff_io(v.z); }
    if (c + 3u < d) { ffb_dv[base + c + 3u] = ff_io(v.w); }
}
// Floats of one copy of dK (or dV): all sequences' keys, rounded up to whole vec4s. Copy p
// of a key-tile pass's P starts at p times this (P > 1; the runner sizes the buffers).
fn ffb_kv_len() -> u32 {
    let p = fa2_params;
    let last = ff_seq(p.batch_size - 1u);
    return ((last.k_row0 + last.len_k) * p.num_kv_heads * p.head_dim + 3u) & ~3u;
}
// Where partial sum `slot` of dQ row (h, qi) of this sequence starts in the scratch.
fn ffb_part(slot: u32, b: u32, h: u32, qi: u32) -> u32 {
    return ffb_stats_len() + slot * ffb_slot_len() + ff_stat_row(b, h, qi) * fa2_params.head_dim;
}
// The band layout's row r (from the start of the key tile's query range) of head h's
// partial sum of key tile kt of sequence b. Sequence b's tiles are blocks k_row0 / 64 + b
// onwards (sizing.dq_band_blocks): disjoint, as a sequence of n keys has at most
// n / 64 + 1 tiles.
fn ffb_band_row(b: u32, h: u32, kt: u32, r: u32) -> u32 {
    let p = fa2_params;
    let block = ff_seq(b).k_row0 / FF_BR + b + kt;
    return ffb_stats_len() + ((block * p.num_heads + h) * p.dq_band_rows + r) * p.head_dim;
}
// Where key tile kt's part of dQ row (h, qi) goes: partial sum `slot`, or in the band
// layout the tile's own sum (x: the tile's query range's start). Both computed and one
// selected: uniform, without a branch (see ff_seq). (Computing a base per head once, and
// rows from it, ran Tint's head_dim-64 backward 1.6 % slower on the H200, its causal and
// plain alike; this costs the slot layout 0.2-0.9 %: docs/features.md.)
fn ffb_dq_row(slot: u32, kt: u32, x: u32, b: u32, h: u32, qi: u32) -> u32 {
    let band = fa2_params.dq_band_rows > 0u;
    return select(ffb_part(slot, b, h, qi), ffb_band_row(b, h, kt, qi - x), band);
}
// Whether the first round of key tiles reaches every row a slot adds to in sequence b: the
// query range of key 0 already runs to the sequence's end, so every tile's does (the ranges'
// ends grow with the key, their starts too, and rounds go up the keys).
fn ffb_first_round_covers(b: u32) -> bool {
    return ff_query_range(b, 0u, 0u).y >= ff_seq(b).len_q;
}
// Scratch float e += x (= x where `store`), through the vec4 view.
fn ffb_add1(e: u32, x: f32, store: bool) {
    if (store) {
        ffb_scratch4[e >> 2u][e & 3u] = x;
    } else {
        ffb_scratch4[e >> 2u][e & 3u] += x;
    }
}
// Key tile kt's part of dQ rows qr, columns c0 + 4 tx .. + 3: m (column i: row qr[i]),
// added into partial sum `slot`, or stored where `store` (the band layout: the tile's own
// sum; range: its query range [x, end), end <= the sequence's length).
fn ffb_add_rows(
    t: vec2<u32>,
    slot: u32,
    kt: u32,
    range: vec2<u32>,
    b: u32,
    h: u32,
    qr: vec4<u32>,
    c0: u32,
    m: mat4x4<f32>,
    store: bool
) {
    let p = fa2_params;
    let c = c0 + t.x * 4u;
    if (c >= p.head_dim) { return; }
    let x = range.x;
    // Only the range's rows: an aligned tile (ffb_first_tile) reaches up to 63 rows before
    // it and after it, which see none of the tile's keys. In the band layout a row after
    // the range lies past the tile's dq_band_rows, in another head's or tile's sum: its
    // zeros, stored there, raced with that sum's own rows (on an H100; and on every
    // device where the next sequence's first tile follows in the scratch and runs first).
    let ok = (qr < vec4<u32>(range.y)) & (qr >= vec4<u32>(x));
    // A row outside the range is read as a row in it of this sum (which only this
    // workgroup writes) and not stored.
    let q = clamp(qr, vec4<u32>(x), vec4<u32>(max(range.y, x + 1u) - 1u));
    let e = vec4<u32>(
        ffb_dq_row(slot, kt, x, b, h, q.x),
        ffb_dq_row(slot, kt, x, b, h, q.y),
        ffb_dq_row(slot, kt, x, b, h, q.z),
        ffb_dq_row(slot, kt, x, b, h, q.w)
    ) + c;
    if (p.head_dim % 4u == 0u) {
        // e is a multiple of 4 (see the scratch's layout): whole vec4s (four floats at a time
        // measured 1 % slower), and all four rows loaded before any is stored. Row by row, a
        // store might alias the next row's load, so each load waited for the one before:
        // the head_dim 128 dK/dQ pass took 4 % longer on the H200, the head_dim 64 pass 2.5 %.
        let i = e >> vec4<u32>(2u);
        var sum = m;
        if (!store) {
            sum += mat4x4<f32>(
                ffb_scratch4[i.x],
                ffb_scratch4[i.y],
                ffb_scratch4[i.z],
                ffb_scratch4[i.w]
            );
        }
        if (ok.x) { ffb_scratch4[i.x] = sum[0]; }
        if (ok.y) { ffb_scratch4[i.y] = sum[1]; }
        if (ok.z) { ffb_scratch4[i.z] = sum[2]; }
        if (ok.w) { ffb_scratch4[i.w] = sum[3]; }
        return;
    }
    if (ok.x) { ffb_add_floats(e.x, c, m[0], store); }
    if (ok.y) { ffb_add_floats(e.y, c, m[1], store); }
    if (ok.z) { ffb_add_floats(e.z, c, m[2], store); }
    if (ok.w) { ffb_add_floats(e.w, c, m[3], store); }
}
// Scratch floats e .. e + 3 += v (= v where `store`), those of columns c .. c + 3 <
// head_dim (rows unaligned).
fn ffb_add_floats(e: u32, c: u32, v: vec4<f32>, store: bool) {
    let d = fa2_params.head_dim;
    ffb_add1(e, v.x, store);
    if (c + 1u < d) { ffb_add1(e + 1u, v.y, store); }
    if (c + 2u < d) { ffb_add1(e + 2u, v.z, store); }
    if (c + 3u < d) { ffb_add1(e + 3u, v.w, store); }
}
// dQ rows q0 + ty + 16 i += the P tile (scale dS, transposed to query rows) times the key
// rows ks. Both column halves in one GEMM: at head_dim 128 that holds 32 more floats than
// a half at a time, but reads the key rows once, not twice (6 % faster dK/dQ pass on the
// H200). Each half is then added on its own: both halves' loads at once made that pass
// 12 % slower (32 more live floats).
// (Key tile kt, whose query range is `range`, into partial sum `slot`: ffb_add_rows.)
fn ffb_dq_tile(
    lid: u32,
    t: vec2<u32>,
    slot: u32,
    kt: u32,
    range: vec2<u32>,
    b: u32,
    h: u32,
    q0: u32,
    ks: FfRows,
    store: bool
) {
    let qr = q0 + t.y + FF_COLS;
    let dq = ff_pv_tile(lid, t, FfAcc(), ks, 3u);
    ffb_add_rows(t, slot, kt, range, b, h, qr, ff_col0, dq.lo, store);
    if (FF_NCOL > 1u) { ffb_add_rows(t, slot, kt, range, b, h, qr, ff_col0 + 64u, dq.hi, store); }
}
fn ffb_store_kv(
    t: vec2<u32>,
    b: u32,
    kvh: u32,
    kj: u32,
    dk_lo: vec4<f32>,
    dk_hi: vec4<f32>,
    dv_lo: vec4<f32>,
    dv_hi: vec4<f32>,
    parts: FfbParts,
    part: u32
) {
    let p = fa2_params;
    if (kj >= ff_seq(b).len_k) { return; }
    let base = ((ff_seq(b).k_row0 + kj) * p.num_kv_heads + kvh) * p.head_dim + part * ffb_kv_len();
    let c = ff_col0 + t.x * 4u;
    if (parts.dk) { ffb_put_dk(base, c, dk_lo); }
    if (parts.dv) { ffb_put_dv(base, c, dv_lo); }
    if (FF_NCOL > 1u) {
        if (parts.dk) { ffb_put_dk(base, c + 64u, dk_hi); }
        if (parts.dv) { ffb_put_dv(base, c + 64u, dv_hi); }
    }
}
// The first query row of part `part` of P's tiles of head g of the group, in a key tile
// whose query range starts at x; its next tiles are P tiles apart. P = 1: every tile from
// x. P > 1: tiles aligned on the sequence's rows (rows before x are masked, and ffb_add_rows
// skips them), tile j of head g in part (g + j) % P, the same rows in every key tile
// whatever its range: a sum's parts reach its tiles in different rounds, and rows that
// moved with the range would have part 0 of one round and part 1 of another add into the
// same rows at once (3 heads over one K at S = 8192 on an H200, causal, 128 key tiles over
// 64 sums in 2 parts). Interleaved, each part gets a share of every key tile's work, with
// causal masking as without.
fn ffb_first_tile(x: u32, g: u32, part: u32, kv_parts: u32) -> u32 {
    let j = x / FF_BC;
    let skip = (part + kv_parts - (g + j) % kv_parts) % kv_parts;
    return select(x, (j + skip) * FF_BC, kv_parts > 1u);
}
// What a key-tile pass computes: dV, and dK with dQ's partial sums (both in one pass for
// head_dim <= 64, two passes for 128: see the top).
struct FfbParts {
    dv: bool,
    dk: bool,
};

// Key tiles of one slot of G for one (batch, kv head), for a workgroup of a
// (ceil(head_dim / FF_WG_COLS) P, G, batch * num_kv_heads) dispatch (see the top): its dK, dV
// and dQ columns are block workgroup_id.x % ceil(head_dim / FF_WG_COLS) (the scores and dP
// span all of head_dim), its part of each key tile's work workgroup_id.x / that. The
// dV pass, which adds no dQ sums, is dispatched with G = ceil(seq_k / 64): one key tile
// per workgroup. `parts` is a constant per entry point, so the compiler drops what a pass
// does not compute, and its registers.
fn ffb_key_tiles(lix: u32, wg: vec3<u32>, nwg: vec3<u32>, parts: FfbParts) {
    let lid = ff_set_cols(wg, lix);
    let p = fa2_params;
    let t = ff_tid(lid);
    // (slot, batch x kv head) slot-major across all heads, as ff_tile_order hands out query
    // tiles but in slot order: with causal masking the dV pass's first key tiles see the most
    // queries, so they go first (head by head, the last heads' light tiles would run alone
    // at the end).
    let job = ff_tile_order(wg, nwg);
    let b = job.y / p.num_kv_heads;
    let kvh = job.y % p.num_kv_heads;
    let group = p.num_heads / p.num_kv_heads;
    let slot = nwg.y - 1u - job.x;
    // This workgroup's part of each key tile's work (ffb_first_tile).
    let part = wg.x / ff_col_blocks();
    let kv_parts = nwg.x / ff_col_blocks();
    // Key tiles in rounds of G: round r hands tiles rG .. rG + G - 1 to the slots in slot
    // order or in reverse, whichever leaves the first and the last slot's work (query tiles
    // seen) closer; every workgroup makes the same choices. With causal masking tile j sees
    // a number of queries falling linearly in j, and this alternates; a window's band sees
    // fewer at both ends of the sequence, and this pairs a rising edge with a falling one
    // (strict alternation left the last slot 30 % more work than the first at S = 4096,
    // window (1024, 1024), G = 16: the backward ran 16-21 % slower per visible score).
    var ends = vec2<i32>(0); // work so far of slots 0 and G - 1
    for (var round = 0u; round * nwg.y * FF_BR < ff_seq(b).len_k; round++) {
        let first = round * nwg.y;
        let w = vec2<i32>(ffb_key_tile_work(b, first), ffb_key_tile_work(b, first + nwg.y - 1u));
        let reverse = abs(ends.y + w.x - ends.x - w.y) < abs(ends.y + w.y - ends.x - w.x);
        ends += select(w, w.yx, reverse);
        let kt = first + select(slot, nwg.y - 1u - slot, reverse);
        let k0 = kt * FF_BR;
        if (k0 >= ff_seq(b).len_k) { break; }
        let ks = ff_kv_rows(FF_K, b, kvh, k0, 1.0);
        let vs = ff_kv_rows(FF_V, b, kvh, k0, 1.0);
        // The rows of dK and dV (tile-row order), and the score blocks' rows (register-row
        // order: ff_row), of which this invocation computes the own ones.
        let keys = k0 + t.y + FF_COLS;
        let own = ff_own4u(keys);
        let range = ff_query_range(b, k0, min(k0 + FF_BR, ff_seq(b).len_k) - 1u);
        var dk = FfAcc();
        var dv = FfAcc();
        let q_end = select(0u, range.y, range.y > range.x);
        for (var g = 0u; g < group; g++) {
            let h = kvh * group + g;
            let bh = b * p.num_heads + h;
            let q_first = ffb_first_tile(range.x, g, part, kv_parts);
            for (var q0 = q_first; q0 < q_end; q0 += kv_parts * FF_BC) {
                let qs = ff_q_rows(FF_Q, b, h, q0, p.scale);
                let dos = ff_q_rows(FF_DO, b, h, q0, 1.0);
                // Scores as the forward's: softcapped before the mask, to the bit.
                let s = ff_softcap4x4(ff_score_tile(lid, t, ks, qs));
                var dp = mat4x4<f32>();
                if (parts.dk) { dp = ff_score_tile(lid, t, vs, dos); }
                let qc = q0 + t.x + FF_COLS;
                let st = array<vec2<f32>, 4>(
                    ffb_stat(b, h, qc.x),
                    ffb_stat(b, h, qc.y),
                    ffb_stat(b, h, qc.z),
                    ffb_stat(b, h, qc.w)
                );
                let delta = vec4<f32>(st[0].x, st[1].x, st[2].x, st[3].x);
                let lse = vec4<f32>(st[0].y, st[1].y, st[2].y, st[3].y);
                let chk = !ff_all_visible(b, q0, FF_BC, k0, FF_BR);
                // dS of the uncapped scores: times the softcap's derivative (1 without),
                // taken here so that S is dead before the GEMMs (kept live across the dV
                // GEMM, its 16 registers made Tint's dK/dV pass at head_dim 64 40 % slower
                // on the H200).
                let g = ff_softcap_grad4x4(s);
                let r0 = ffb_grad4(s[0], dp[0], delta, lse, b, h, bh, qc, vec4<u32>(own.x), chk, g[0]);
                let r1 = ffb_grad4(s[1], dp[1], delta, lse, b, h, bh, qc, vec4<u32>(own.y), chk, g[1]);
                var r2 = FfbGrad();
                var r3 = FfbGrad();
                if (ff_mine(2u)) {
                    r2 = ffb_grad4(s[2], dp[2], delta, lse, b, h, bh, qc, vec4<u32>(own.z), chk, g[2]);
                    r3 = ffb_grad4(s[3], dp[3], delta, lse, b, h, bh, qc, vec4<u32>(own.w), chk, g[3]);
                }
                if (parts.dv) {
                    ff_put_p(t, mat4x4<f32>(r0.pm, r1.pm, r2.pm, r3.pm));
                    workgroupBarrier();
                    dv = ff_pv_tile(lid, t, dv, dos, 3u);
                }
                if (parts.dk) {
                    let ds = mat4x4<f32>(r0.ds, r1.ds, r2.ds, r3.ds);
                    ff_put_p(t, ds);
                    workgroupBarrier();
                    dk = ff_pv_tile(lid, t, dk, qs, 3u);
                    // dQ rows += scale dS K: the same dS, transposed to query rows.
                    ff_put_pt(t, ds * p.scale);
                    workgroupBarrier();
                    // stored, not added: the band layout's own sums, or a first round
                    // that reaches every row (ffb_first_round_covers)
                    let store = p.dq_band_rows > 0u || (round == 0u && ffb_first_round_covers(b));
                    ffb_dq_tile(lid, t, slot, kt, range, b, h, q0, ks, store);
                }
            }
        }
        ffb_store_kv(t, b, kvh, keys.x, dk.lo[0], dk.hi[0], dv.lo[0], dv.hi[0], parts, part);
        ffb_store_kv(t, b, kvh, keys.y, dk.lo[1], dk.hi[1], dv.lo[1], dv.hi[1], parts, part);
        ffb_store_kv(t, b, kvh, keys.z, dk.lo[2], dk.hi[2], dv.lo[2], dv.hi[2], parts, part);
        ffb_store_kv(t, b, kvh, keys.w, dk.lo[3], dk.hi[3], dv.lo[3], dv.hi[3], parts, part);
    }
}
@compute @workgroup_size(FF_WG)
fn fa2f_bwd_dk_dv(
    @builtin(local_invocation_index) lix: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>
) {
    ffb_key_tiles(lix, wg, nwg, FfbParts(true, true));
}
@compute @workgroup_size(FF_WG)
fn fa2f_bwd_dv(
    @builtin(local_invocation_index) lix: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>
) {
    ffb_key_tiles(lix, wg, nwg, FfbParts(true, false));
}
@compute @workgroup_size(FF_WG)
fn fa2f_bwd_dk_dq(
    @builtin(local_invocation_index) lix: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>
) {
    ffb_key_tiles(lix, wg, nwg, FfbParts(false, true));
}

// ---- pass 3: dQ from the partial sums (rows: queries of num_heads) ----
// Dispatch: (ceil(head_dim / 64), ceil(seq_q / 16), batch * heads); invocation lid takes
// columns 64 wg.x + 4 (lid % 16) .. + 3 of row 16 wg.y + lid / 16, as one vec4 of each sum
// where head_dim % 4 == 0 (the sums' rows then start on vec4s: ffb_stats_len,
// ffb_slot_len), else float by float. Each column adds its sums in slot order from 0, so
// both ways give the same bits. In the band layout, the sums of the key tiles that see
// the row instead (ffb_band_sum), which are not zeroed: each run's key-tile pass stores
// them before this pass reads them.
// Scratch float e, which it then zeroes where `zero`.
fn ffb_take(e: u32, zero: bool) -> f32 {
    let x = ffb_scratch4[e >> 2u][e & 3u];
    if (zero) { ffb_scratch4[e >> 2u][e & 3u] = 0.0; }
    return x;
}
// Scratch floats e .. e + n - 1 (n <= 4; zeros after), float by float (rows unaligned).
fn ffb_take4(e: u32, n: u32, zero: bool) -> vec4<f32> {
    var v = vec4<f32>(ffb_take(e, zero), 0.0, 0.0, 0.0);
    if (n > 1u) { v.y = ffb_take(e + 1u, zero); }
    if (n > 2u) { v.z = ffb_take(e + 2u, zero); }
    if (n > 3u) { v.w = ffb_take(e + 3u, zero); }
    return v;
}
// Row qi of head h, columns c .. c + n - 1 (n <= 4), in the band layout: the partial sums
// of the key tiles that see the row (ff_key_range), in key-tile order. A row that sees no
// key reads none: dQ = 0.
fn ffb_band_sum(b: u32, h: u32, qi: u32, c: u32, n: u32) -> vec4<f32> {
    let p = fa2_params;
    let keys = ff_key_range(b, qi, qi);
    let end = select(0u, keys.y, keys.x < keys.y);
    var acc = vec4<f32>(0.0);
    for (var kt = keys.x / FF_BR; kt * FF_BR < end; kt++) {
        let k0 = kt * FF_BR;
        let x = ff_query_range(b, k0, min(k0 + FF_BR, ff_seq(b).len_k) - 1u).x;
        let e = ffb_band_row(b, h, kt, qi - x) + c;
        if (p.head_dim % 4u == 0u) {
            acc += ffb_scratch4[e >> 2u];
        } else {
            acc += ffb_take4(e, n, false);
        }
    }
    return acc;
}
@compute @workgroup_size(256)
fn fa2f_bwd_dq_sum(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wg: vec3<u32>
) {
    let p = fa2_params;
    let b = wg.z / p.num_heads;
    let h = wg.z % p.num_heads;
    let qi = wg.y * 16u + lid / 16u;
    let c = wg.x * 64u + (lid % 16u) * 4u;
    if (qi >= ff_seq(b).len_q || c >= p.head_dim) { return; }
    // The runner sizes the scratch exactly: G = what follows the row stats, in slots.
    let slots = (arrayLength(&ffb_scratch4) * 4u - ffb_stats_len()) / ffb_slot_len();
    let n = min(p.head_dim - c, 4u); // columns of this invocation
    // The slots' sums are zeroed for the next run unless its first round stores them.
    let zero = !ffb_first_round_covers(b);
    var acc = vec4<f32>(0.0);
    if (p.dq_band_rows > 0u) {
        acc = ffb_band_sum(b, h, qi, c, n);
    } else if (p.head_dim % 4u == 0u) {
        for (var g = 0u; g < slots; g++) {
            let i = (ffb_part(g, b, h, qi) + c) >> 2u;
            acc += ffb_scratch4[i];
            if (zero) { ffb_scratch4[i] = vec4<f32>(0.0); }
        }
    } else {
        for (var g = 0u; g < slots; g++) {
            acc += ffb_take4(ffb_part(g, b, h, qi) + c, n, zero);
        }
    }
    let o = ((ff_seq(b).q_row0 + qi) * p.num_heads + h) * p.head_dim + c;
    ffb_dq[o] = ff_io(acc.x);
    if (n > 1u) { ffb_dq[o + 1u] = ff_io(acc.y); }
    if (n > 2u) { ffb_dq[o + 2u] = ff_io(acc.z); }
    if (n > 3u) { ffb_dq[o + 3u] = ff_io(acc.w); }
}

// ---- pass 4: dK and dV from their copies (rows: keys of num_kv_heads) ----
// Dispatch: (ceil(head_dim / 128), ceil(seq_k / 2), batch * kv_heads); invocation lid takes
// column 128 wg.x + lid % 128 of key 2 wg.y + lid / 128 (consecutive invocations read
// consecutive floats). Dispatched only with P > 1 (Kernel.adds_kv_parts): with P = 1 the
// key-tile passes stored the tensors themselves.
@compute @workgroup_size(256)
fn fa2f_bwd_kv_sum(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wg: vec3<u32>
) {
    let p = fa2_params;
    let b = wg.z / p.num_kv_heads;
    let kvh = wg.z % p.num_kv_heads;
    let kj = wg.y * 2u + lid / 128u;
    let c = wg.x * 128u + lid % 128u;
    let s = ff_seq(b);
    if (kj >= s.len_k || c >= p.head_dim) { return; }
    let n = ffb_kv_len();
    // The runner sizes the buffers exactly: P copies.
    let kv_parts = arrayLength(&ffb_dk) / n;
    let i = ((s.k_row0 + kj) * p.num_kv_heads + kvh) * p.head_dim + c;
    var dk = f32(ffb_dk[i]);
    var dv = f32(ffb_dv[i]);
    for (var part = 1u; part < kv_parts; part++) {
        dk += f32(ffb_dk[part * n + i]);
        dv += f32(ffb_dv[part * n + i]);
    }
    ffb_dk[i] = ff_io(dk);
    ffb_dv[i] = ff_io(dv);
}
