// ============================================================================
// FLASH ATTENTION V2 - what every module of the harness's kernels starts with
// ============================================================================
// The contract's shared parts (flash_attention_v2.wgsl's header states the contract):
// the params struct and its uniform binding, the additive mask's binding, the -1e30
// rule's constants, the dropout hash, which keys a query sees, the mask's element, and
// the softcap. The forward file and every module of the fast variant come after it, so
// they read these from one place; the seed backward calls hash3 / dropout_scale from it.
// Files after it may declare their own resources at the same group/binding numbers: valid
// WGSL, since no entry point statically uses two declarations of one binding.
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
