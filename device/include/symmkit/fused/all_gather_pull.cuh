// symmkit/fused/all_gather_pull.cuh: the SM producer of all-gather + GEMM. A few blocks pull the peers'
// shards of A into the gathered buffer while the GEMM (gemm/hopper_gemm.cuh, RowFlagsReady) runs on the
// other SMs and waits, per shard, for the flag this kernel raises.
//
// Contract. Every rank's shard (shard_bytes, a multiple of 16) is in its symmetric buffer
// (v.buffers[rank]) when this kernel starts on that rank (stream order: the host copied a plain shard in
// before). Block b meets block b of every peer (symm_sync<false, true>: their shards are complete), then
// copies its slice of every peer's shard, walking the peers from rank + 1 on (so that the ranks read
// from different peers at each step), into `gathered` at shard offset r; after each shard its slice is
// released (__syncthreads, then a release add at GPU scope by thread 0 on flags[r]): flag r reaches
// gridDim.x once every block copied its slice, which the GEMM's acquire then waits for. Finally the
// block meets its peers again (symm_sync<true, false>): nobody rewrites its shard (the next call's copy-in)
// while a peer may still read it. This rank's own rows are not copied here (the host copies them), and
// flags are zeroed by the host before the kernel. Pads are idle again at the end, so the kernel may be
// replayed from a CUDA graph.
#pragma once
#include "symmkit/sync/barrier.cuh"

namespace symmkit {

__global__ void __launch_bounds__(512) all_gather_pull_flagged(const __grid_constant__ SymmView v, u8* gathered,
                                                                 u64 shard_bytes, u32* flags, const CallTag tag) {
  constexpr u32 kUnroll = 4;
  const u32 b = blockIdx.x;
  symm_sync<false, true>(v, b, tag, 0);
  const u64 vectors = shard_bytes / 16;
  const u64 per_block = (vectors + gridDim.x - 1) / gridDim.x;
  const u64 lo = min(vectors, u64(b) * per_block);
  const u64 hi = min(vectors, lo + per_block);
  for (u32 p = 1; p < v.world; ++p) {
    const u32 r = (v.rank + p) % v.world;
    const u32x4* src = static_cast<const u32x4*>(v.buffers[r]);
    u32x4* dst = reinterpret_cast<u32x4*>(gathered + r * shard_bytes);
    for (u64 i = lo + threadIdx.x; i < hi; i += u64(blockDim.x) * kUnroll) {
      u32x4 x[kUnroll];
#pragma unroll
      for (u32 u = 0; u < kUnroll; ++u) {
        const u64 j = i + u64(u) * blockDim.x;
        if (j < hi) x[u] = ld_128(src + j);
      }
#pragma unroll
      for (u32 u = 0; u < kUnroll; ++u) {
        const u64 j = i + u64(u) * blockDim.x;
        if (j < hi) st_128(dst + j, x[u]);
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(flags + r) : "memory");
  }
  symm_sync<true, false>(v, b, tag, 1);
}

}  // namespace symmkit
