// ============================================================================
// FLASH ATTENTION V2 - forward pass
// ============================================================================
// O = softmax(scale * Q K^T + mask) (with dropout) V, plus the per-row
// log-sum-exp of the scores. Conventions shared with
// flash_attention_v2_backward.wgsl (the contract):
// - Q, O: [B, Sq, H, D]; K, V: [B, Sk, Hkv, D]; f32, contiguous.
// - LSE: [B, H, Sq], one f32 per query row.
// - Query head h reads KV head h / (H / Hkv) (GQA / MQA).
// - Key kj is visible to query qi when kj < Sk, and with causal=1 when
//   kj <= qi + causal_offset, and with window=w>0 when
//   |qi + causal_offset - kj| < w. This file and the fast variant read that
//   rule in its general form (FlashAttention-2's): d = kj - (qi + query_shift),
//   visible when -key_left <= d <= key_right (i32; the host folds causal,
//   window and window_left / window_right into the two bounds, and a
//   negative query_shift aligns queries bottom-right when Sq > Sk); the seed
//   backward reads causal, causal_offset and window.
// - The additive mask is read at b*stride_b + h*stride_h + qi*stride_q +
//   kj*stride_k (a stride of 0 broadcasts that dimension).
// - A score s <= FA2_MASKED (-1e30, -inf included) is masked. A row with no
//   unmasked key gets O = 0 and LSE = FA2_EMPTY_LSE (+3e38), so that
//   exp(s - LSE) = 0 for every key, as in the backward pass.
// - Dropout keeps weight (bh, qi, kj) when the 24-bit uniform from hash3
//   is >= p and then scales it by 1 / (1 - p) (see dropout_scale).
//
// Composition: fa2_common.wgsl (the params struct, the mask, the dropout hash,
// visibility, the softcap) comes first in this module and in the backward's
// (fa2_common.wgsl, then the seed backward file, which calls dropout_scale /
// hash3 from it).
@group(0) @binding(0) var<storage, read> fa2_q: array<f32>;
@group(0) @binding(1) var<storage, read> fa2_k: array<f32>;
@group(0) @binding(2) var<storage, read> fa2_v: array<f32>;
@group(0) @binding(3) var<storage, read_write> fa2_out: array<f32>;
@group(0) @binding(4) var<storage, read_write> fa2_lse: array<f32>;
const FA2_ROWS: u32 = 128u;
const FA2_TILE: u32 = 16u;
const FA2_D4: u32 = 32u; // max head_dim / 4
var<workgroup> fa2_tk: array<vec4<f32>, 512>; // FA2_TILE * FA2_D4
var<workgroup> fa2_tv: array<vec4<f32>, 512>;

fn fa2_ld4_q(base: u32, c4: u32) -> vec4<f32> {
    let c = c4 * 4u;
    let d = fa2_params.head_dim;
    var r = vec4<f32>(0.0);
    if (c < d) { r.x = fa2_q[base + c]; }
    if (c + 1u < d) { r.y = fa2_q[base + c + 1u]; }
    if (c + 2u < d) { r.z = fa2_q[base + c + 2u]; }
    if (c + 3u < d) { r.w = fa2_q[base + c + 3u]; }
    return r;
}
fn fa2_ld4_k(base: u32, c4: u32) -> vec4<f32> {
    let c = c4 * 4u;
    let d = fa2_params.head_dim;
    var r = vec4<f32>(0.0);
    if (c < d) { r.x = fa2_k[base + c]; }
    if (c + 1u < d) { r.y = fa2_k[base + c + 1u]; }
    if (c + 2u < d) { r.z = fa2_k[base + c + 2u]; }
    if (c + 3u < d) { r.w = fa2_k[base + c + 3u]; }
    return r;
}
fn fa2_ld4_v(base: u32, c4: u32) -> vec4<f32> {
    let c = c4 * 4u;
    let d = fa2_params.head_dim;
    var r = vec4<f32>(0.0);
    if (c < d) { r.x = fa2_v[base + c]; }
    if (c + 1u < d) { r.y = fa2_v[base + c + 1u]; }
    if (c + 2u < d) { r.z = fa2_v[base + c + 2u]; }
    if (c + 3u < d) { r.w = fa2_v[base + c + 3u]; }
    return r;
}
// Dispatch: (1, ceil(seq_q / FA2_ROWS), batch * num_heads). One query row per
// invocation; K/V stream through workgroup memory in tiles of FA2_TILE rows;
// online softmax per tile (running max m, running sum l) keeps memory O(Sq).
@compute @workgroup_size(128)
fn flash_fwd(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let p = fa2_params;
    let d4 = (p.head_dim + 3u) / 4u;
    let b = wg.z / p.num_heads;
    let h = wg.z % p.num_heads;
    let kvh = h / (p.num_heads / p.num_kv_heads);
    let bh = b * p.num_heads + h;
    let q0 = wg.y * FA2_ROWS;
    let qi = q0 + lid;
    let valid = qi < p.seq_q;
    let q_off = ((b * p.seq_q + qi) * p.num_heads + h) * p.head_dim;
    var q_reg: array<vec4<f32>, 32>;
    var acc: array<vec4<f32>, 32>;
    for (var c = 0u; c < d4; c++) {
        acc[c] = vec4<f32>(0.0);
        // Scale Q before the dot product, as the backward's dQ pass does, so its
        // log-sum-exp matches this pass's to the last bit.
        if (valid) { q_reg[c] = fa2_ld4_q(q_off, c) * p.scale; } else { q_reg[c] = vec4<f32>(0.0); }
    }
    let range = fa2_key_range(q0, min(q0 + FA2_ROWS, p.seq_q) - 1u);
    var m = FA2_MASKED;
    var l = 0.0;
    for (var k0 = range.x; k0 < range.y; k0 += FA2_TILE) {
        for (var i = lid; i < FA2_TILE * d4; i += 128u) {
            let r = i / d4;
            let c = i % d4;
            var kv = vec4<f32>(0.0);
            var vv = vec4<f32>(0.0);
            if (k0 + r < p.seq_k) {
                let base = ((b * p.seq_k + k0 + r) * p.num_kv_heads + kvh) * p.head_dim;
                kv = fa2_ld4_k(base, c);
                vv = fa2_ld4_v(base, c);
            }
            fa2_tk[r * FA2_D4 + c] = kv;
            fa2_tv[r * FA2_D4 + c] = vv;
        }
        workgroupBarrier();
        // The tile's scores first, so the running max and the rescale of acc happen
        // once per tile rather than once per key, and the tile's weights are summed
        // before they meet the running sum l (less rounding error in l, and so in
        // the LSE, than adding every key to l one by one: measured on an H200).
        var s_tile: array<f32, 16>; // FA2_TILE
        var m_tile = FA2_MASKED;
        for (var j = 0u; j < FA2_TILE; j++) {
            let kj = k0 + j;
            var s = FA2_MASKED; // invisible keys count as masked
            if (fa2_visible(qi, kj)) {
                var dot4 = vec4<f32>(0.0);
                for (var c = 0u; c < d4; c++) {
                    dot4 = fma(q_reg[c], fa2_tk[j * FA2_D4 + c], dot4);
                }
                s = fa2_softcap(dot4.x + dot4.y + dot4.z + dot4.w) + fa2_mask_at(b, h, qi, kj);
            }
            s_tile[j] = s;
            m_tile = max(m_tile, s);
        }
        if (m_tile > FA2_MASKED) {
            let m_new = max(m, m_tile);
            let corr = exp(m - m_new);
            for (var c = 0u; c < d4; c++) { acc[c] = acc[c] * corr; }
            var l_tile = 0.0;
            for (var j = 0u; j < FA2_TILE; j++) {
                let s = s_tile[j];
                if (s <= FA2_MASKED) { continue; }
                let pj = exp(s - m_new);
                // The softmax denominator counts every weight; dropout only changes
                // what reaches O.
                l_tile += pj;
                let w = pj * dropout_scale(p.dropout_prob, p.seed, bh, qi, k0 + j);
                for (var c = 0u; c < d4; c++) {
                    acc[c] = fma(vec4<f32>(w), fa2_tv[j * FA2_D4 + c], acc[c]);
                }
            }
            l = l * corr + l_tile;
            m = m_new;
        }
        workgroupBarrier();
    }
    if (valid) {
        var inv_l = 0.0;
        var lse = FA2_EMPTY_LSE;
        if (l > 0.0) {
            inv_l = 1.0 / l;
            lse = m + log(l);
        }
        fa2_lse[bh * p.seq_q + qi] = lse;
        for (var c = 0u; c < d4; c++) {
            let d = c * 4u;
            let o = acc[c] * inv_l;
            fa2_out[q_off + d] = o.x;
            if (d + 1u < p.head_dim) { fa2_out[q_off + d + 1u] = o.y; }
            if (d + 2u < p.head_dim) { fa2_out[q_off + d + 2u] = o.z; }
            if (d + 3u < p.head_dim) { fa2_out[q_off + d + 3u] = o.w; }
        }
    }
}
