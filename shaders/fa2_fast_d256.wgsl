// Tile constants of the "fast" variant for 128 < head_dim <= 256 (see
// fa2_fast_common.wgsl): workgroups of two halves of 256 invocations. Each half owns 128
// output columns (two vec4s per invocation, as fa2_fast_d128.wgsl) and computes the score
// GEMMs over its half of head_dim; the halves add their partial blocks, so every score is
// computed once (two workgroups of 256, one per column block, each computed all of them),
// and each half goes on with its own half of the block's rows (ff_row).
// Unpadded, swizzled staging rows keep both halves' staging, and the exchange, within
// 32 KiB: what lavapipe and SwiftShader offer (the H200: 48 KiB).
const FF_NCOL: u32 = 2u;
const FF_VK: u32 = 8u;
const FF_KC: u32 = 32u; // head_dim chunk of the score GEMMs (floats; ff_fetch_chunk fetches 2 vec4s)
const FF_AS: u32 = FF_KC / 4u; // row stride (vec4) of a staged score chunk: swizzled rows (ff_swizzle)
const FF_SPLIT: u32 = 2u;
const FF_SMEM: u32 = 2048u; // vec4s of workgroup memory (32768 bytes)
