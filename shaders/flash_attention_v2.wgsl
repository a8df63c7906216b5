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
// Composition: this file compiles on its own (forward pipeline). The
// backward module is this file followed by the backward file: the backward
// calls dropout_scale / hash3 from here. Both files declare their own
// resource variables at the same group/binding numbers; that is valid WGSL
// because no entry point statically uses both sets.
@group(0) @binding(0) var<storage, read> fa2_q: array<f32>;
@group(0) @binding(1) var<storage, read> fa2_k: array<f32>;
@group(0) @binding(2) var<storage, read> fa2_v: array<f32>;
@group(0) @binding(3) var<storage, read_write> fa2_out: array<f32>;
@group(0) @binding(4) var<storage, read_write> fa2_lse: array<f32>;
// Same layout as FlashBwdParams in the backward file: one packer serves both.
struct FlashParams {
    batch_size: u32,
    num_heads: u32,
    seq_q: u32,
    seq_k: u32,
    head_dim: u32,
    num_kv_heads: u32,
    scale: f32,
    dropout_prob: f32,
    seed: u32,
    causal: u32,
    has_mask: u32,
    causal_offset: u32,
    mask_stride_b: u32,
    mask_stride_h: u32,
    mask_stride_q: u32,
    mask_stride_k: u32,
    window: u32,
    query_shift: i32,
    key_left: i32,
    key_right: i32,
    softcap: f32, // > 0: scores pass through softcap * tanh(score / softcap)
    has_alibi: u32, // the fast variant's ALiBi (fa2_fast_common.wgsl: ff_alibi4)
    alibi_stride_b: u32,
    varlen: u32, // the fast variant's variable-length batches (fa2_fast_common.wgsl: ff_seq)
    total_q: u32,
    // The fast backward's dQ partial sums per key tile, this many rows each (0: per slot;
    // fa2_fast_backward.wgsl, "band layout").
    dq_band_rows: u32,
    _pad1: u32,
    _pad2: u32,
};
@group(0) @binding(8) var<uniform> fa2_params: FlashParams;
@group(0) @binding(9) var<storage, read> fa2_mask: array<f32>;
const FA2_MASKED: f32 = -1.0e30;
const FA2_EMPTY_LSE: f32 = 3.0e38;
const FA2_ROWS: u32 = 128u;
const FA2_TILE: u32 = 16u;
const FA2_D4: u32 = 32u; // max head_dim / 4
var<workgroup> fa2_tk: array<vec4<f32>, 512>; // FA2_TILE * FA2_D4
var<workgroup> fa2_tv: array<vec4<f32>, 512>;

// PCG hash (Jarzynski & Olano, "Hash Functions for GPU Rendering", 2020).
fn fa2_pcg(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}
fn hash3(x: u32, y: u32, z: u32) -> u32 {
    return fa2_pcg(x ^ fa2_pcg(y ^ fa2_pcg(z)));
}
// Dropout multiplier of weight (bh, qi, kj), bh = b * num_heads + h:
// 0 when dropped, 1 / (1 - p) when kept, exactly 1 when p == 0.
fn dropout_scale(p: f32, seed: u32, bh: u32, qi: u32, kj: u32) -> f32 {
    if (p <= 0.0) { return 1.0; }
    // 24 random bits -> a uniform in [0, 1) that f32 holds exactly.
    let u = f32(hash3(seed ^ fa2_pcg(bh), qi, kj) >> 8u) * (1.0 / 16777216.0);
    if (u < p) { return 0.0; }
    return 1.0 / (1.0 - p);
}

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
// Whether key kj is visible to query qi (causal and window rules). Coordinates, shift
// and bounds stay below 2^30 (config.MAX_COORD), so no i32 sum here wraps.
fn fa2_visible(qi: u32, kj: u32) -> bool {
    let p = fa2_params;
    if (kj >= p.seq_k || qi >= p.seq_q) { return false; }
    let d = i32(kj) - (i32(qi) + p.query_shift);
    return -p.key_left <= d && d <= p.key_right;
}
fn fa2_mask_at(b: u32, h: u32, qi: u32, kj: u32) -> f32 {
    let p = fa2_params;
    if (p.has_mask == 0u) { return 0.0; }
    return fa2_mask[
        b * p.mask_stride_b + h * p.mask_stride_h + qi * p.mask_stride_q + kj * p.mask_stride_k
    ];
}
// Key range [begin, end) visible to any query in [q0, q1] (uniform; empty: begin >= end).
fn fa2_key_range(q0: u32, q1: u32) -> vec2<u32> {
    let p = fa2_params;
    let lo = i32(q0) + p.query_shift - p.key_left;
    let hi = i32(q1) + p.query_shift + p.key_right + 1;
    return vec2<u32>(u32(max(lo, 0)), u32(clamp(hi, 0, i32(p.seq_k))));
}
// tanh to a few ulps of its value, whatever the implementation's builtin does. WGSL lets
// tanh inherit sinh / cosh's accuracy, about float32's ulp of 1 absolutely: lavapipe's and
// SwiftShader's err by up to 1.4e-7 (15 % of tanh(x) near 1e-7; llvmpipe through GL: 120
// ulps near 0.02), and softcap * tanh(s / softcap) then by up to softcap x 1.4e-7 in every
// score (a softcap of 30 failed the rule by 2.4x). Cephes' tanhf: an odd polynomial below
// |x| = 0.625, and 1 - 2 / (exp(2 |x|) + 1) above, where little cancels (2.25 ulps at most
// on both). |x| is clamped at 15, where tanh rounds to 1 in f32 (exp(30) stays finite;
// some builtins return NaN far out).
const FA2_TANH_SMALL: f32 = 0.625;
fn fa2_tanh4(x: vec4<f32>) -> vec4<f32> {
    let xc = clamp(x, vec4<f32>(-15.0), vec4<f32>(15.0));
    let a = abs(xc);
    let z = xc * xc;
    var poly = -5.70498872745e-3 * z + 2.06390887954e-2;
    poly = poly * z - 5.37397155531e-2;
    poly = poly * z + 1.33314422036e-1;
    poly = poly * z - 3.33332819422e-1;
    let small = poly * z * xc + xc;
    let large = sign(xc) * (1.0 - 2.0 / (exp(2.0 * a) + 1.0));
    return select(large, small, a < vec4<f32>(FA2_TANH_SMALL));
}
// softcap * tanh(s / softcap) when softcap > 0.
fn fa2_softcap(s: f32) -> f32 {
    let c = fa2_params.softcap;
    if (c <= 0.0) { return s; }
    return c * fa2_tanh4(vec4<f32>(s / c)).x;
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
