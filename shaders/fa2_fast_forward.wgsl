// ============================================================================
// FLASH ATTENTION V2, register-tiled ("fast" variant) - forward pass
// ============================================================================
// Module: fa2_fast_f32/f16.wgsl, fa2_common.wgsl, fa2_fast_d64/d128/d256.wgsl,
// fa2_fast_common.wgsl, this.
// Writes O and LSE exactly as flash_fwd does (same layout, masking, empty rows); also
// variable-length batches, in FlashAttention-2's packed layout (fa2_fast_common.wgsl).
// Per key tile of 64: S = (scale Q) K^T in 4x4 register blocks; the row max over the
// tile through the reduction area; P = exp(S - m) into the P tile; O += P V. The running
// sum l stays a per-invocation partial (all invocations of a row share m, so partials add
// up) and is reduced once at the end.
@group(0) @binding(3) var<storage, read_write> ffw_out: array<ff_io>;
@group(0) @binding(4) var<storage, read_write> ffw_lse: array<f32>;

// The GEMMs' inner loops written out (ff_scores_chunk, ff_pv_step): 11-15 % off this pass
// on an H100.
const FF_UNROLL_SCORES: bool = true;
const FF_UNROLL_PV: bool = true;

// Q, K, V: fa2_fast_common.wgsl's bindings.
fn ff_vec4_pair(buf: u32, i: u32, j: u32) -> FfPair {
    switch buf {
        case FF_Q: { return FfPair(vec4<f32>(ff_q[i]), vec4<f32>(ff_q[j])); }
        case FF_K: { return FfPair(vec4<f32>(ff_k[i]), vec4<f32>(ff_k[j])); }
        default: { return FfPair(vec4<f32>(ff_v[i]), vec4<f32>(ff_v[j])); }
    }
}
fn ffw_sum4(v: vec4<f32>) -> f32 {
    return (v.x + v.y) + (v.z + v.w);
}
fn ffw_put4(base: u32, c: u32, v: vec4<f32>) {
    let d = fa2_params.head_dim;
    if (c < d) { ffw_out[base + c] = ff_io(v.x); }
    if (c + 1u < d) { ffw_out[base + c + 1u] = ff_io(v.y); }
    if (c + 2u < d) { ffw_out[base + c + 2u] = ff_io(v.z); }
    if (c + 3u < d) { ffw_out[base + c + 3u] = ff_io(v.w); }
}
fn ffw_store_row(t: vec2<u32>, b: u32, h: u32, qi: u32, lo: vec4<f32>, hi: vec4<f32>, lse: f32) {
    let p = fa2_params;
    if (qi >= ff_seq(b).len_q) { return; }
    let base = ((ff_seq(b).q_row0 + qi) * p.num_heads + h) * p.head_dim;
    ffw_put4(base, ff_col0 + t.x * 4u, lo);
    if (FF_NCOL > 1u) { ffw_put4(base, ff_col0 + 64u + t.x * 4u, hi); }
    // Every column block computes the same LSE, to the bit: the first one stores it.
    if (t.x == 0u && ff_col0 == 0u) { ffw_lse[ff_stat_row(b, h, qi)] = lse; }
}

// Dispatch: (ceil(head_dim / FF_WG_COLS), ceil(seq_q / 64), batch * num_heads); seq_q is the
// longest sequence of a variable-length batch, whose shorter ones leave tiles idle.
@compute @workgroup_size(FF_WG)
fn fa2f_fwd(
    @builtin(local_invocation_index) lix: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>
) {
    let lid = ff_set_cols(wg, lix);
    let p = fa2_params;
    let t = ff_tid(lid);
    let job = ff_tile_order(wg, nwg);
    let b = job.y / p.num_heads;
    let h = job.y % p.num_heads;
    let kvh = h / (p.num_heads / p.num_kv_heads);
    let bh = b * p.num_heads + h;
    let q0 = job.x * FF_BR;
    if (q0 >= ff_seq(b).len_q) { return; } // past this sequence's end (uniform)
    // Q is scaled before the dot product (as flash_fwd does); the backward passes stage it
    // the same way and sum in the same order, so their scores equal these to the bit.
    let qs = ff_q_rows(FF_Q, b, h, q0, p.scale);
    // The rows of O and of the running max (tile-row order), and the score block's rows
    // (register-row order: ff_row), of which this invocation computes the own ones.
    let rows = q0 + t.y + FF_COLS;
    let own = ff_own4u(rows);
    let range = ff_key_range(b, q0, min(q0 + FF_BR, ff_seq(b).len_q) - 1u);
    var m = vec4<f32>(FF_MASKED);
    var l = vec4<f32>(0.0);
    var o = FfAcc();
    for (var k0 = range.x; k0 < range.y; k0 += FF_BC) {
        // Softcapped (when on) before ALiBi and the mask, as FlashAttention-2 does.
        var s = ff_softcap4x4(ff_score_tile(lid, t, qs, ff_kv_rows(FF_K, b, kvh, k0, 1.0)));
        let kc = k0 + t.x + FF_COLS;
        if (!ff_all_visible(b, q0, FF_BR, k0, FF_BC)) {
            s[0] = ff_masked4(s[0], b, h, vec4<u32>(own.x), kc);
            s[1] = ff_masked4(s[1], b, h, vec4<u32>(own.y), kc);
            if (ff_mine(2u)) {
                s[2] = ff_masked4(s[2], b, h, vec4<u32>(own.z), kc);
                s[3] = ff_masked4(s[3], b, h, vec4<u32>(own.w), kc);
            }
        } else {
            s = ff_alibi4x4(s, b, h, own, kc);
        }
        let m_new = max(
            m,
            ff_row_max(t, vec4<f32>(ff_max4(s[0]), ff_max4(s[1]), ff_max4(s[2]), ff_max4(s[3])))
        );
        let corr = exp(m - m_new);
        let m_own = ff_own4(m_new);
        s[0] = exp(s[0] - m_own.x);
        s[1] = exp(s[1] - m_own.y);
        if (ff_mine(2u)) {
            s[2] = exp(s[2] - m_own.z);
            s[3] = exp(s[3] - m_own.w);
        }
        // The softmax denominator counts every weight; dropout only changes what reaches O.
        // l is per own row (register order; with halves, components z, w are unused).
        l = l * ff_own4(corr) + vec4<f32>(ffw_sum4(s[0]), ffw_sum4(s[1]), ffw_sum4(s[2]), ffw_sum4(s[3]));
        if (p.dropout_prob > 0.0) {
            s[0] *= ff_keep4(bh, vec4<u32>(own.x), kc);
            s[1] *= ff_keep4(bh, vec4<u32>(own.y), kc);
            if (ff_mine(2u)) {
                s[2] *= ff_keep4(bh, vec4<u32>(own.z), kc);
                s[3] *= ff_keep4(bh, vec4<u32>(own.w), kc);
            }
        }
        ff_put_p(t, s);
        o.lo = mat4x4<f32>(o.lo[0] * corr.x, o.lo[1] * corr.y, o.lo[2] * corr.z, o.lo[3] * corr.w);
        o.hi = mat4x4<f32>(o.hi[0] * corr.x, o.hi[1] * corr.y, o.hi[2] * corr.z, o.hi[3] * corr.w);
        m = m_new;
        workgroupBarrier();
        o = ff_pv_tile(lid, t, o, ff_kv_rows(FF_V, b, kvh, k0, 1.0), 3u);
    }
    let lt = ff_row_sum(t, l);
    // A row with no unmasked key: O = 0, LSE = FF_EMPTY_LSE.
    let some = lt > vec4<f32>(0.0);
    let inv = select(vec4<f32>(0.0), 1.0 / lt, some);
    let lse = select(vec4<f32>(FF_EMPTY_LSE), m + log(lt), some);
    ffw_store_row(t, b, h, rows.x, o.lo[0] * inv.x, o.hi[0] * inv.x, lse.x);
    ffw_store_row(t, b, h, rows.y, o.lo[1] * inv.y, o.hi[1] * inv.y, lse.y);
    ffw_store_row(t, b, h, rows.z, o.lo[2] * inv.z, o.hi[2] * inv.z, lse.z);
    ffw_store_row(t, b, h, rows.w, o.lo[3] * inv.w, o.hi[3] * inv.w, lse.w);
}
