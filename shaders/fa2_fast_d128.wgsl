// Tile constants of the "fast" variant for 64 < head_dim <= 256 (see
// fa2_fast_common.wgsl): each invocation owns two vec4s of output columns (4 tx and
// 64 + 4 tx of its workgroup's block of 128), and the second GEMM streams 8 rows x 128
// columns per stage.
const FF_NCOL: u32 = 2u;
const FF_VK: u32 = 8u;
