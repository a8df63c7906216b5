// The fast_f16 variant's tensors in memory: Q, K, V, O, dO, dQ, dK and dV are f16
// (fa2_fast_common.wgsl's ff_io). Loads widen to f32 and stores round to f16; every
// product, sum, the LSE and the backward's scratch (Delta, partial dQ sums) stay float32,
// so the kernels compute what the fast variant computes, from and into half the bytes.
// First in its modules: `enable` must precede every declaration.
enable f16;

alias ff_io = f16;
