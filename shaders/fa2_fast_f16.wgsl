// The fast_f16 variant's tensors in memory: Q, K, V, O, dO, dQ, dK and dV are f16
// (fa2_fast_common.wgsl's ff_io). Loads widen to f32 and stores round to f16; every
// product, sum, the LSE and the backward's scratch (Delta, partial dQ sums) stay float32,
// so the kernels compute what the fast variant computes, from and into half the bytes.
// First in its modules: `enable` must precede every declaration.
enable f16;

alias ff_io = f16;
// Score GEMMs in float32 (ff_score_tile's own loop; fa2_fast_f16x2.wgsl's packed f16
// form is never called here).
const FF_PACKED: bool = false;
fn ffh_score_tile(lid: u32, t: vec2<u32>, a: FfRows, b: FfRows) -> mat4x4<f32> {
    return mat4x4<f32>();
}
// Delta's sum as the packed variant computes it (fa2_fast_f16x2.wgsl); never called here.
fn ffh_sum4(s: FfhSum, g: vec4<f32>, o: vec4<f32>, n: u32, c: u32) -> FfhSum {
    return s;
}
