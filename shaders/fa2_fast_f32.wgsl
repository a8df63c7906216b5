// The fast variant's tensors in memory (fa2_fast_common.wgsl's ff_io): float32.
// The fast_f16 variant's modules start with fa2_fast_f16.wgsl instead.
alias ff_io = f32;
