// Tile constants of the "fast" variant for head_dim <= 64 (see fa2_fast_common.wgsl):
// each invocation owns one vec4 of output columns (4 tx .. 4 tx + 3), and the second
// GEMM streams 16 rows x 64 columns per stage.
const FF_NCOL: u32 = 1u;
const FF_VK: u32 = 16u;
