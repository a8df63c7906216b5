// Tile constants of the "fast" variant for 64 < head_dim <= 128, and above where a device
// cannot run fa2_fast_d256.wgsl's 512 invocations (see fa2_fast_common.wgsl): each
// invocation owns two vec4s of output columns (4 tx and 64 + 4 tx of its workgroup's block
// of 128), the second GEMM streams 8 rows x 128 columns per stage, and the score GEMMs
// head_dim in chunks of 32.
const FF_NCOL: u32 = 2u;
const FF_VK: u32 = 8u;
const FF_KC: u32 = 32u; // head_dim chunk of the score GEMMs (floats; ff_fetch_chunk fetches 2 vec4s)
const FF_AS: u32 = FF_KC / 4u + 1u; // row stride (vec4) of a staged score chunk: padded rows
const FF_SPLIT: u32 = 1u;
const FF_SMEM: u32 = 1424u; // vec4s of workgroup memory (22784 bytes)
