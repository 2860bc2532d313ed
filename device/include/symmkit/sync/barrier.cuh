// symmkit/sync/barrier.cuh: the block-wise barrier across ranks, and symm_sync.
//
// Contract: SymmView (passed to kernels by value, 160 bytes, layout shared with the host: SYMM_VIEW_LAYOUT in
// src/distributed/device-layouts.ts, filled by SymmetricMemory.deviceView() in
// src/distributed/symmetric-memory.ts) holds every rank's buffer and signal pad as mapped on this GPU. Block b
// of rank r and block b of every other rank meet at barrier_block(b): thread p < world (p != r) puts the
// call word (sync/call_tag.cuh) into slot word_slot(b, r) of rank p's pad and waits for the one rank p
// put into word_slot(b, p) of ours; at step 0 of a call with a shape word, thread 32 + p does the same
// with the shape word in the slot beside it, at once (another warp: neither waits for the other's round
// trip). Slots are self-resetting (sync/signal.cuh): the pads are all zero again once every block has
// passed, so a kernel may be replayed from a CUDA graph any number of times, and a straggler cannot be
// overrun because a put waits until the previous signal in that slot was consumed.
// Only blocks with the same index meet; a kernel needs blockDim.x >= kBarrierThreads and at most
// pad_bytes / (16 world) blocks (BARRIER_THREADS in src/distributed/device-layouts.ts; the host refuses a
// symmetric input whose pad is smaller: SymmetricTensor.checkBarrierRoom).
//
// symm_sync<has_previous_access, has_subsequent_access>(v, block, tag, step) covers the three uses:
//   <false, true>  before reading peers' buffers that earlier kernels wrote: signals relaxed, the wait
//                  acquires, then __syncthreads. Earlier kernels' writes are complete before this kernel
//                  starts on each rank (stream order), and the barrier tells us every rank got this far.
//   <true, false>  after writing peers' buffers, so that they may read what we wrote: __syncthreads,
//                  then the put releases the block's writes; the wait is relaxed.
//   <true, true>   both at once, between two phases of one kernel.
//   <true, false> is also the pattern "before peers may overwrite what we read": our reads are ordered
//   before the release, and a peer writes only after its wait saw it.
// `step` is the barrier's number within its call (0, then 1 for a kernel's second barrier). A kernel of
// your own that is no symmkit call passes a plain u32 phase instead of a tag.
#pragma once
#include "symmkit/sync/signal.cuh"

namespace symmkit {

constexpr u32 kMaxWorld = 8;
/** Where the shape words' threads start: the second warp. */
constexpr u32 kShapeThreads = 32;
/** Threads a block needs to meet its peers (BARRIER_THREADS in src/distributed/device-layouts.ts). */
constexpr u32 kBarrierThreads = 40;
static_assert(kBarrierThreads == kShapeThreads + kMaxWorld, "a call word thread and a shape word thread per peer");

struct SymmView {
  void* buffers[kMaxWorld];  // rank i's buffer, mapped here
  u64* pads[kMaxWorld];      // rank i's signal pad, mapped here
  u32 rank;
  u32 world;
  u64 timeout_ns;
  const u32* abort_flag;
  TimeoutRecord* record;

  __device__ __forceinline__ WaitEnv wait_env() const { return WaitEnv{timeout_ns, abort_flag, record, rank}; }
};
static_assert(sizeof(SymmView) == 160,
              "SymmView layout is shared with the host (src/distributed/device-layouts.ts, test/device-layouts.test.ts)");

/** Block b's slot for the call word from rank `from`; its shape word's is the next one. */
__device__ __forceinline__ u64 word_slot(u32 block, u32 world, u32 from) { return 2ull * (block * world + from); }

template <Order PutOrder, Order WaitOrder>
__device__ __forceinline__ void barrier_block(const SymmView& v, u32 block, const CallTag& tag, u32 step) {
  const u32 t = threadIdx.x;
  if (t < v.world && t != v.rank) {
    const WaitEnv env = v.wait_env();
    const u64 word = step_word(tag, step);
    put_signal<PutOrder>(v.pads[t] + word_slot(block, v.world, v.rank), env, t, word);
    wait_signal<WaitOrder>(v.pads[v.rank] + word_slot(block, v.world, t), env, t, word);
  } else if (step == 0 && tag.shape != 0 && t >= kShapeThreads && t - kShapeThreads < v.world &&
             t - kShapeThreads != v.rank) {
    // Beside the word, unordered: the word's signal carries the ordering, this one only what to compare.
    const u32 p = t - kShapeThreads;
    const WaitEnv env = v.wait_env();
    put_signal<Order::Relaxed>(v.pads[p] + word_slot(block, v.world, v.rank) + 1, env, p, tag.shape);
    wait_signal<Order::Relaxed>(v.pads[v.rank] + word_slot(block, v.world, p) + 1, env, p, tag.shape, tag.word,
                                kShapeMismatch);
  }
}

template <bool HasPreviousAccess, bool HasSubsequentAccess>
__device__ __forceinline__ void symm_sync(const SymmView& v, u32 block, const CallTag& tag, u32 step) {
  if constexpr (HasPreviousAccess) __syncthreads();
  barrier_block<HasPreviousAccess ? Order::Release : Order::Relaxed, HasSubsequentAccess ? Order::Acquire : Order::Relaxed>(
      v, block, tag, step);
  if constexpr (HasSubsequentAccess) __syncthreads();
}

/** The barrier for a kernel of your own, outside symmkit's calls: its signals carry `phase` (any value
 * the ranks agree on, e.g. 0), marked as every call word is. */
template <bool HasPreviousAccess, bool HasSubsequentAccess>
__device__ __forceinline__ void symm_sync(const SymmView& v, u32 block, u32 phase) {
  symm_sync<HasPreviousAccess, HasSubsequentAccess>(v, block, CallTag{kSignalMark | phase, 0}, 0);
}

/** Block index as symmkit numbers blocks (x fastest). */
__device__ __forceinline__ u32 flat_block() { return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z); }

}  // namespace symmkit
