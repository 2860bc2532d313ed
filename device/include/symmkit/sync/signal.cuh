// symmkit/sync/signal.cuh: one-slot signals between GPUs.
//
// Contract: a slot is a u32 in some rank's signal pad, 0 when idle. put_signal turns it 0 -> value with a
// compare-and-swap at system scope; wait_signal turns it value -> 0 the same way. The value is the
// call's phase with bit 31 set (never 0): the host passes the call's fingerprint as the phase
// (src/distributed/fingerprint.ts), so a waiter that finds another non-zero value knows the peer is in
// another call, and gives up with a kMismatch record (sync/wait.cuh) instead of taking it. So a slot is
// back to 0 after every matched put/wait: pads need no reset between launches, which is what makes
// kernels using them safe to capture once and replay as CUDA graphs. If the waiter has not yet consumed
// the previous signal, put_signal spins until it has: a fast rank cannot overrun a straggler.
// Order: Release on the put publishes the putting thread's earlier writes (and, through a preceding
// __syncthreads, its block's); Acquire on the wait makes them visible to the waiting thread (and,
// through a following __syncthreads, to its block). Relaxed puts and waits only synchronise. Both spins
// are bounded (sync/wait.cuh).
#pragma once
#include "symmkit/sync/wait.cuh"

namespace symmkit {

constexpr u32 kSignalMark = 0x80000000u;

template <Order O>
__device__ __forceinline__ void put_signal(u32* slot, const WaitEnv& env, u32 peer, u32 phase) {
  static_assert(O == Order::Relaxed || O == Order::Release, "a put is relaxed or release");
  const u32 value = phase | kSignalMark;
  bounded_wait(env, peer, phase, [&] { return cas_sys<O>(slot, 0u, value) == 0u; });
}

template <Order O>
__device__ __forceinline__ void wait_signal(u32* slot, const WaitEnv& env, u32 peer, u32 phase) {
  static_assert(O == Order::Relaxed || O == Order::Acquire, "a wait is relaxed or acquire");
  const u32 value = phase | kSignalMark;
  bounded_wait(env, peer, phase, [&] {
    const u32 seen = cas_sys<O>(slot, value, 0u);
    if (seen != 0u && seen != value) give_up(env, peer, phase, 0, kMismatch, value, seen);
    return seen == value;
  });
}

}  // namespace symmkit
