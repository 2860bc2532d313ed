// symmkit/sync/barrier_kernels.cuh: the barriers the collectives enqueue on a stream, between copy-engine
// steps and before timed work, and the check of fingerprints gathered by NCCL between hosts.
//
// Contract: as sync/barrier.cuh. Launched as one block of kBarrierThreads threads; each leaves the pads
// as it found them, so it may be replayed from a CUDA graph. A barrier releases everything this rank
// wrote before it (stream order) and acquires what every peer wrote before theirs. `tag` is the
// fingerprint of the call it belongs to (sync/call_tag.cuh), the same on every rank; `step` its number
// among that call's barriers.
// check_fingerprints reads, in stream order after the NCCL all-gather that filled it, one CallTag per
// rank of the group; the first that differs from this rank's is recorded as a mismatch (kMismatch or
// kShapeMismatch, naming that rank) and the kernel traps, so that the call it guards never runs on data
// another call's peers would mix in.
#pragma once
#include "symmkit/sync/barrier.cuh"

namespace symmkit {

/** A kernel launched behind it programmatically (the fused GEMM + all-reduce) may start at once: it runs
 * its main loop under the barrier and waits for it (griddepcontrol.wait) only before it writes to a peer. */
__global__ void group_barrier(const __grid_constant__ SymmView v, const CallTag tag, u32 step) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  symm_sync<true, true>(v, flat_block(), tag, step);
}

/** A barrier, then `hold_ns` of waiting: work enqueued behind it starts on every rank within about one
 *  barrier latency of the others, once the host had hold_ns to enqueue it (benchmarks). */
__global__ void barrier_hold(const __grid_constant__ SymmView v, u64 hold_ns, const CallTag tag) {
  symm_sync<true, true>(v, flat_block(), tag, 0);
  const u64 start = global_timer_ns();
  while (global_timer_ns() - start < hold_ns) {
  }
}

/** One thread: `got` holds the `world` ranks' tags of the call about to run; all must be `expected`. */
__global__ void check_fingerprints(const CallTag* got, u32 world, const CallTag expected, WaitEnv env) {
  for (u32 r = 0; r < world; ++r) {
    if (got[r].word != expected.word) give_up(env, r, expected.word, 0, kMismatch, expected.word, got[r].word);
    if (got[r].shape != expected.shape)
      give_up(env, r, expected.word, 0, kShapeMismatch, expected.shape, got[r].shape);
  }
}

}  // namespace symmkit
