// The fast variant's tensors in memory (fa2_fast_common.wgsl's ff_io): float32.
// The fast_f16 variant's modules start with fa2_fast_f16.wgsl instead.
alias ff_io = f32;
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
