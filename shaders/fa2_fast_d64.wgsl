// Tile constants of the "fast" variant for head_dim <= 64 (see fa2_fast_common.wgsl):
// each invocation owns one vec4 of output columns (4 tx .. 4 tx + 3), the second GEMM
// streams 16 rows x 64 columns per stage, and the score GEMMs head_dim in chunks of 32.
const FF_NCOL: u32 = 1u;
const FF_VK: u32 = 16u;
const FF_KC: u32 = 32u; // head_dim chunk of the score GEMMs (floats; ff_fetch_chunk fetches 2 vec4s)
const FF_AS: u32 = FF_KC / 4u + 1u; // row stride (vec4) of a staged score chunk: padded rows
const FF_SPLIT: u32 = 1u;
const FF_SMEM: u32 = 1424u; // vec4s of workgroup memory (22784 bytes)
