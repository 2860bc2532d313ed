// symmkit/sync/barrier.cuh: the block-wise barrier across ranks, and symm_sync.
//
// Contract: SymmView (passed to kernels by value, 160 bytes, layout shared with the host: SYMM_VIEW_LAYOUT in
// src/distributed/device-layouts.ts, filled by SymmetricMemory.deviceView() in
// src/distributed/symmetric-memory.ts) holds every rank's buffer and signal pad as mapped on this GPU. Block b
// of rank r and block b of every other rank meet at barrier_block(b): thread p < world (p != r) puts a
// signal into slot [b * world + r] of rank p's pad and waits for the one rank p put into slot
// [b * world + p] of ours. Slots are self-resetting (sync/signal.cuh): the pads are all zero again
// once every block has passed, so a kernel may be replayed from a CUDA graph any number of times, and a
// straggler cannot be overrun because a put waits until the previous signal in that slot was consumed.
// Only blocks with the same index meet; a kernel needs blockDim.x >= world and at most
// pad_slots / world blocks (the host checks both).
//
// symm_sync<has_previous_access, has_subsequent_access>(v, block, phase) covers the three uses:
//   <false, true>  before reading peers' buffers that earlier kernels wrote: signals relaxed, the wait
//                  acquires, then __syncthreads. Earlier kernels' writes are complete before this kernel
//                  starts on each rank (stream order), and the barrier tells us every rank got this far.
//   <true, false>  after writing peers' buffers, so that they may read what we wrote: __syncthreads,
//                  then the put releases the block's writes; the wait is relaxed.
//   <true, true>   both at once, between two phases of one kernel.
//   <true, false> is also the pattern "before peers may overwrite what we read": our reads are ordered
//   before the release, and a peer writes only after its wait saw it.
#pragma once
#include "symmkit/sync/signal.cuh"

namespace symmkit {

constexpr u32 kMaxWorld = 8;

struct SymmView {
  void* buffers[kMaxWorld];  // rank i's buffer, mapped here
  u32* pads[kMaxWorld];      // rank i's signal pad, mapped here
  u32 rank;
  u32 world;
  u64 timeout_ns;
  const u32* abort_flag;
  TimeoutRecord* record;

  __device__ __forceinline__ WaitEnv wait_env() const { return WaitEnv{timeout_ns, abort_flag, record, rank}; }
};
static_assert(sizeof(SymmView) == 160,
              "SymmView layout is shared with the host (src/distributed/device-layouts.ts, test/device-layouts.test.ts)");

template <Order PutOrder, Order WaitOrder>
__device__ __forceinline__ void barrier_block(const SymmView& v, u32 block, u32 phase) {
  const u32 peer = threadIdx.x;
  if (peer < v.world && peer != v.rank) {
    const WaitEnv env = v.wait_env();
    put_signal<PutOrder>(v.pads[peer] + block * v.world + v.rank, env, peer, phase);
    wait_signal<WaitOrder>(v.pads[v.rank] + block * v.world + peer, env, peer, phase);
  }
}

template <bool HasPreviousAccess, bool HasSubsequentAccess>
__device__ __forceinline__ void symm_sync(const SymmView& v, u32 block, u32 phase) {
  if constexpr (HasPreviousAccess) __syncthreads();
  barrier_block<HasPreviousAccess ? Order::Release : Order::Relaxed, HasSubsequentAccess ? Order::Acquire : Order::Relaxed>(
      v, block, phase);
  if constexpr (HasSubsequentAccess) __syncthreads();
}

/** Block index as symmkit numbers blocks (x fastest). */
__device__ __forceinline__ u32 flat_block() { return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z); }

}  // namespace symmkit
