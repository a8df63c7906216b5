// ============================================================================
// FUSED-QKV CAUSAL ATTENTION - forward only, in the shape of llm.c's
// reference attention_forward
// ============================================================================
// inp: (B, T, 3C): for each position, Q's C floats, then K's, then V's, with
//   C = NH * HS; head h's part of each is at offset h * HS.
// out: (B, T, C), head h's HS floats at h * HS.
// preatt, att: (B, NH, T, T) scratch. preatt[b, h, t, t2] = q . k / sqrt(HS)
//   for t2 <= t (t2 > t is left unwritten); att[b, h, t, t2] is the softmax of
//   that row over t2 <= t and exactly 0 for t2 > t.
// Causal only; no log-sum-exp is produced. HS = C / NH and the scale
// 1 / sqrt(HS) are computed here, not passed.
//
// Bindings (@group(0)): 0 inp (read), 1 preatt, 2 att, 3 out (read_write
// storage, array<f32>), 4 params (uniform Params).
//
// attention_softmax: preatt and att. Uses inp, preatt, att, params.
// attention_values: out = att V. Uses inp, att, out, params.
// Both: @workgroup_size(256), grid (ceil(B * T / 256), 1, 1); one invocation
// per (b, t) (flat index b * T + t), looping over the heads. No workgroup
// memory. attention_values reads what attention_softmax wrote, so it is
// dispatched after it.
// (llm.c does both in one loop; two passes here, so att carries the softmax
// from one to the other.)

struct Params {
    B: u32,
    T: u32,
    C: u32,
    NH: u32,
}

@group(0) @binding(0) var<storage, read> inp: array<f32>;
@group(0) @binding(1) var<storage, read_write> preatt: array<f32>;
@group(0) @binding(2) var<storage, read_write> att: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

// Starting row max: finite, below any score.
const NEG_BIG: f32 = -3.0e38;

@compute @workgroup_size(256)
fn attention_softmax(@builtin(global_invocation_id) gid: vec3<u32>) {
    let bt = gid.x;
    if (bt >= params.B * params.T) {
        return;
    }
    let T = params.T;
    let C = params.C;
    let C3 = 3u * C;
    let HS = C / params.NH;
    let scale = 1.0 / sqrt(f32(HS));
    let b = bt / T;
    let t = bt % T;

    for (var h = 0u; h < params.NH; h++) {
        let q = bt * C3 + h * HS;
        // Row (b, h, t) of the (B, NH, T, T) scratch buffers.
        let row = ((b * params.NH + h) * T + t) * T;

        // Scores and their max over the visible keys t2 <= t.
        var maxval = NEG_BIG;
        for (var t2 = 0u; t2 <= t; t2++) {
            let k = (b * T + t2) * C3 + C + h * HS;
            var val = 0.0;
            for (var i = 0u; i < HS; i++) {
                val += inp[q + i] * inp[k + i];
            }
            val *= scale;
            maxval = max(maxval, val);
            preatt[row + t2] = val;
        }

        // exp shifted by the max, so the largest term is 1 and nothing overflows.
        var expsum = 0.0;
        for (var t2 = 0u; t2 <= t; t2++) {
            let e = exp(preatt[row + t2] - maxval);
            expsum += e;
            att[row + t2] = e;
        }
        let expsum_inv = 1.0 / expsum;

        // Normalize; masked entries are written as exact zeros so the
        // values pass (and anyone reading att) can rely on them.
        for (var t2 = 0u; t2 < T; t2++) {
            if (t2 <= t) {
                att[row + t2] *= expsum_inv;
            } else {
                att[row + t2] = 0.0;
            }
        }
    }
}

@compute @workgroup_size(256)
fn attention_values(@builtin(global_invocation_id) gid: vec3<u32>) {
    let bt = gid.x;
    if (bt >= params.B * params.T) {
        return;
    }
    let T = params.T;
    let C = params.C;
    let C3 = 3u * C;
    let HS = C / params.NH;
    let b = bt / T;
    let t = bt % T;

    for (var h = 0u; h < params.NH; h++) {
        let row = ((b * params.NH + h) * T + t) * T;
        let o = bt * C + h * HS;
        // One output element at a time: HS is a runtime value, so there is no
        // fixed-size private accumulator row.
        for (var i = 0u; i < HS; i++) {
            var acc = 0.0;
            for (var t2 = 0u; t2 <= t; t2++) {
                let v = (b * T + t2) * C3 + 2u * C + h * HS;
                acc += att[row + t2] * inp[v + i];
            }
            out[o + i] = acc;
        }
    }
}
