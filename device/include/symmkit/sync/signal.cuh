// symmkit/sync/signal.cuh: one-slot signals between GPUs.
//
// Contract: a slot is a u64 in some rank's signal pad, 0 when idle. put_signal turns it 0 -> value with a
// compare-and-swap at system scope; wait_signal turns it value -> 0 the same way. The value is a word of
// the call's CallTag (sync/call_tag.cuh: bit 63 set, so never 0): its call word, or beside it on a call's
// first signal its shape word. A waiter that finds another non-zero value knows the peer is in another
// call (or the same call with other shapes), and gives up with a kMismatch (kShapeMismatch) record
// (sync/wait.cuh) instead of taking it. So a slot is back to 0 after every matched put/wait: pads need no
// reset between launches, which is what makes kernels using them safe to capture once and replay as
// CUDA graphs. If the waiter has not yet consumed the previous signal, put_signal spins until it has: a
// fast rank cannot overrun a straggler.
// Order: Release on the put publishes the putting thread's earlier writes (and, through a preceding
// __syncthreads, its block's); Acquire on the wait makes them visible to the waiting thread (and,
// through a following __syncthreads, to its block). Relaxed puts and waits only synchronise. Both spins
// are bounded (sync/wait.cuh).
#pragma once
#include "symmkit/sync/call_tag.cuh"
#include "symmkit/sync/wait.cuh"

namespace symmkit {

template <Order O>
__device__ __forceinline__ void put_signal(u64* slot, const WaitEnv& env, u32 peer, u64 value) {
  static_assert(O == Order::Relaxed || O == Order::Release, "a put is relaxed or release");
  bounded_wait(env, peer, value, [&] { return cas_sys<O>(slot, 0ull, value) == 0ull; });
}

/** Waits for `value`; another non-zero value gives up with `kind`, recording `phase` (what the host
 * describes the call by: its call word). */
template <Order O>
__device__ __forceinline__ void wait_signal(u64* slot, const WaitEnv& env, u32 peer, u64 value, u64 phase, u32 kind) {
  static_assert(O == Order::Relaxed || O == Order::Acquire, "a wait is relaxed or acquire");
  bounded_wait(env, peer, phase, [&] {
    const u64 seen = cas_sys<O>(slot, value, 0ull);
    if (seen != 0ull && seen != value) give_up(env, peer, phase, 0, kind, value, seen);
    return seen == value;
  });
}

/** Waits for the call word `word`. */
template <Order O>
__device__ __forceinline__ void wait_signal(u64* slot, const WaitEnv& env, u32 peer, u64 word) {
  wait_signal<O>(slot, env, peer, word, word, kMismatch);
}

}  // namespace symmkit
