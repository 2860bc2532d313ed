// symmkit/gemm/fusion.cuh: what the GEMM kernels' fused epilogues share (hopper_gemm.cuh's ScatterReduce and
// AllReduceTiles, decode_gemm.cuh's all-reduce), and the k-blocks of a split-K slice.
//
// Contract: call_epoch gives every CTA of a launch the call number its flags carry, counted in device
// memory (so graph replays count too); raise_and_await_shares is one share's all-reduce handshake (flags
// raised on every rank with release at system scope, then a bounded acquire wait for every rank's);
// add_rank_bf16x8, round_bf16x8 and sum_ranks_bf16x8 are the deterministic sum over ranks (f32 in rank
// order, rounded once to bf16), so every rank and every kernel that uses them writes the same bits;
// split_begin cuts k-blocks into slices. No state of its own.
#pragma once
#include "symmkit/sync/wait.cuh"

namespace symmkit {
namespace gemm {

/** This call's epoch (ScatterReduce, AllReduceTiles, the decode GEMM's all-reduce): `epoch` counts calls in device memory,
 * so graph replays count too. Thread 0 of every CTA reads it at the start; the last to read advances it. */
__device__ __forceinline__ u32 call_epoch(u32* epoch) {
  const u32 e = *reinterpret_cast<volatile u32*>(epoch) + 1;
  u32 readers;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(readers) : "l"(epoch + 1) : "memory");
  if (readers == gridDim.x - 1) {
    epoch[1] = 0;
    epoch[0] = e;
  }
  return e;
}

/** A share's all-reduce handshake (AllReduceTiles, the decode GEMM's all-reduce), by one thread after its
 * pushes are complete and fenced: raises the share's flag `flag(p, rank)` to `epoch` on every rank p (a
 * release at system scope), then waits (acquire, bounded, naming the rank) for every rank's flag of the
 * same share in this rank's array, `flag(rank, src)`. */
template <class FlagOf>
__device__ __forceinline__ void raise_and_await_shares(const WaitEnv& env, u32 world, u32 rank, u32 epoch, u32 tile,
                                                       FlagOf flag) {
  fence_acq_rel_sys();
  for (u32 p = 0; p < world; ++p) st_sys<Order::Relaxed>(flag(p, rank), epoch);
  for (u32 src = 0; src < world; ++src) {
    const u32* fl = flag(rank, src);
    bounded_wait(env, src, tile, [&] {
      if (ld_sys<Order::Acquire>(fl) == epoch) return true;
      __nanosleep(64);
      return false;
    });
  }
}

/** One step of the GEMM + all-reduce's deterministic sum: 8 bf16 of the next rank in rank order added to
 * the f32 sums (the first rank's set them). */
__device__ __forceinline__ void add_rank_bf16x8(float (&sum)[8], const uint4& v, bool first) {
  const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (u32 e = 0; e < 4; ++e) {
    const float2 x = __bfloat1622float2(x2[e]);
    sum[2 * e] = first ? x.x : sum[2 * e] + x.x;
    sum[2 * e + 1] = first ? x.y : sum[2 * e + 1] + x.y;
  }
}

/** The sums rounded once to bf16. */
__device__ __forceinline__ uint4 round_bf16x8(const float (&sum)[8]) {
  uint4 o;
  __nv_bfloat162* h2 = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
  for (u32 e = 0; e < 4; ++e) h2[e] = __floats2bfloat162_rn(sum[2 * e], sum[2 * e + 1]);
  return o;
}

/** The sum over `world` ranks, in rank order in f32 and rounded once, of 8 bf16 at `at` of each rank's
 * slot (`slot` elements apart) of a receive buffer: the deterministic sum of the GEMM + all-reduce. Two
 * ranks' loads in flight at a time: more would take registers for little. */
__device__ __forceinline__ uint4 sum_ranks_bf16x8(const __nv_bfloat16* recv, u64 slot, u64 at, u32 world) {
  float sum[8];
  for (u32 src = 0; src < world; src += 2) {
    uint4 v[2];
    v[0] = __ldcg(reinterpret_cast<const uint4*>(recv + src * slot + at));
    if (src + 1 < world) v[1] = __ldcg(reinterpret_cast<const uint4*>(recv + (src + 1) * slot + at));
#pragma unroll
    for (u32 h = 0; h < 2; ++h) {
      if (src + h >= world) break;
      add_rank_bf16x8(sum, v[h], src + h == 0);
    }
  }
  return round_bf16x8(sum);
}

/** The first k-block of slice `split` of `kblocks` cut into `splits` slices (every slice non-empty while
 * splits <= kblocks). Once per tile slice, so the 64-bit division costs nothing that matters. */
__device__ __forceinline__ u32 split_begin(u32 kblocks, u32 splits, u32 split) {
  return u32(u64(kblocks) * split / splits);
}

}  // namespace gemm
}  // namespace symmkit
