// symmkit/probes/sync_kernels.cuh: kernels that exercise and time the cross-GPU primitives: writing into
// every peer's buffer, barrier loops in each pattern, and a put/wait round trip.
//
// Contract: as sync/barrier.cuh. Every kernel leaves the signal pads as it found them (all zero), so
// each may be replayed from a CUDA graph. Buffers are u32 arrays; rank r writes only the region
// [r * n, (r + 1) * n) of each peer's buffer, so no two ranks write the same word.
#pragma once
#include "symmkit/sync/barrier.cuh"

namespace symmkit {

/** The word rank `src` writes at index i of its region in rank `dst`'s buffer. */
__device__ __forceinline__ u32 exchange_word(u32 src, u32 dst, u64 i, u32 salt) {
  return (src * 0x9E3779B1u) ^ (dst * 0x85EBCA77u) ^ static_cast<u32>(i * 0xC2B2AE3Du) ^ salt;
}

/** Writes this rank's region in every rank's buffer (its own included), then meets the other ranks so
 *  that every write is visible when the kernel ends on any rank. */
__global__ void exchange_pattern(const __grid_constant__ SymmView v, u64 n, u32 salt) {
  for (u32 dst = 0; dst < v.world; ++dst) {
    u32* region = static_cast<u32*>(v.buffers[dst]) + static_cast<u64>(v.rank) * n;
    for (u64 i = flat_block() * static_cast<u64>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<u64>(gridDim.x) * gridDim.y * gridDim.z * blockDim.x) {
      region[i] = exchange_word(v.rank, dst, i, salt);
    }
  }
  symm_sync<true, true>(v, flat_block(), 0);
}

template <bool Prev, bool Next>
__global__ void barrier_loop(const __grid_constant__ SymmView v, u32 iterations) {
  for (u32 it = 0; it < iterations; ++it) symm_sync<Prev, Next>(v, flat_block(), it);
}

/** Rank `skipper` does not take part: the others must time out, naming it. */
__global__ void barrier_unless(const __grid_constant__ SymmView v, u32 skipper) {
  if (v.rank != skipper) symm_sync<true, true>(v, flat_block(), 7);
}

/** Round trips between ranks 0 and 1 through slot 0 of each other's pad (block 0, thread 0 only);
 *  other ranks do nothing. Rank 0 puts into rank 1's slot and waits for the answer in its own. */
__global__ void ping_pong(const __grid_constant__ SymmView v, u32 iterations) {
  if (threadIdx.x != 0 || flat_block() != 0 || v.rank > 1) return;
  const WaitEnv env = v.wait_env();
  const u32 other = 1 - v.rank;
  for (u32 it = 0; it < iterations; ++it) {
    const u64 word = kSignalMark | it;
    if (v.rank == 0) {
      put_signal<Order::Release>(v.pads[other], env, other, word);
      wait_signal<Order::Acquire>(v.pads[v.rank], env, other, word);
    } else {
      wait_signal<Order::Acquire>(v.pads[v.rank], env, other, word);
      put_signal<Order::Release>(v.pads[other], env, other, word);
    }
  }
}

}  // namespace symmkit
