// symmkit/gemm/tma.cuh: shared-memory mbarriers and TMA tensor loads (sm_90).
//
// Contract: an mbarrier lives in shared memory and completes a phase when its pending arrivals reach
// zero and the bytes it expects (expect_tx) have landed; waiters name the phase by its parity. A TMA load
// (async proxy) writes shared memory and then signals the mbarrier with the bytes it wrote (the full box,
// also where the box hangs past the tensor and is filled with zeros); a thread that saw the phase
// complete may read the data with ordinary loads or wgmma. Memory written by the generic proxy in global
// memory (by another GPU or by a copy engine) reaches a later TMA load only through an acquire followed
// by fence_proxy_async(). A TMA store reads shared memory asynchronously after it is issued: its source
// may be rewritten only after bulk_wait_read, and its global writes are complete only after bulk_wait;
// shared memory written by ordinary stores reaches it only through fence_proxy_async_shared(). Every wait is bounded: a pipeline wait that outlives its timeout is a deadlock
// (a bug, not a slow peer): it records which wait (kStalled, sync/wait.cuh) and traps rather than hangs. A pipeline wait that can sit behind a bounded
// wait on a peer (sync/wait.cuh) allows kPipelineTimeoutNs beyond that wait's timeout, so the peer's
// wait gives up first and its record names the peer, rather than a bare trap. Nothing here keeps state across
// launches: barriers are initialised by each launch, so graph replays start clean.
#pragma once
#include "symmkit/core/memory.cuh"
#include "symmkit/sync/wait.cuh"

namespace symmkit {
namespace gemm {

/** A TMA descriptor (CUtensorMap, 128 bytes), passed by value as a __grid_constant__ parameter. */
struct alignas(64) TensorMap {
  u64 opaque[16];
};

constexpr u64 kPipelineTimeoutNs = 10ull * 1000 * 1000 * 1000;

__device__ __forceinline__ u32 smem_addr(const void* p) { return static_cast<u32>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(u64* bar, u32 arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
}

/** Makes initialised barriers visible to the async proxy (TMA) and the other threads. */
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

__device__ __forceinline__ void mbar_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

/** Arrives and tells the barrier to expect `bytes` more from TMA in the current phase. */
__device__ __forceinline__ void mbar_arrive_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

/** With kSuspend, a try_wait may suspend the thread until the phase completes or this many ns pass (it
 * wakes at the completion): waiting warps then issue nothing, where a spinning poll takes issue slots from
 * the warps that do work. 1 ms keeps mbar_wait's stall check (every 256 polls) well inside its bound. The
 * decode GEMM waits so (its wide tiles 2-6% faster); the Hopper GEMM spins (at 8192^3 the suspended
 * waits measured no better, bench/results/h100/mbar-suspend-vs-spin.txt). */
constexpr u32 kMbarSuspendNs = 1000 * 1000;

template <bool kSuspend = false>
__device__ __forceinline__ bool mbar_try_wait(u64* bar, u32 parity) {
  u32 done;
  if constexpr (kSuspend)
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity), "n"(kMbarSuspendNs)
        : "memory");
  else
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  return done != 0;
}

/** A position in a ring of kStages stages: the stage, and the parity of the phase a wait there is for.
 * Advanced by a compare rather than derived from a count (it % kStages, it / kStages), which costs a
 * multiply-high sequence per k-block when kStages is not a power of two. */
template <u32 kStages>
struct RingCursor {
  u32 stage = 0, parity = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) stage = 0, parity ^= 1;
  }
};

/** Which of a kernel's waits on itself stalled: TimeoutRecord.phase = kind << 24 | stage (kStalled records;
 * the host's PIPELINE_WAITS in src/distributed/device-layouts.ts). */
constexpr u32 kStallStageEmpty = 1;  // the producer, for the consumers to release a stage
constexpr u32 kStallStageFull = 2;   // a consumer, for a stage's loads to land
constexpr u32 kStallHandoff = 3;     // ScatterReduce: a consumer, for the signaller to take its last tile
__device__ __forceinline__ u32 stall_phase(u32 kind, u32 stage) { return kind << 24 | stage; }

/** A kernel's wait on itself that lasted `waited` ns: past `timeout_ns` it is a deadlock, so the first
 * thread to notice records which wait (`phase`, the parity or count it waited for) and traps. */
__device__ __forceinline__ void check_stall(const WaitEnv& env, u64 waited, u64 timeout_ns, u32 phase, u32 expected) {
  // Signed: a step back of the timer must not read as an age.
  if (i64(waited) > i64(timeout_ns)) give_up(env, kNoPeer, phase, waited, kStalled, expected);
}

/** Waits for the phase of parity `parity` to complete (try_wait already suspends for a while); past
 * `timeout_ns` records the stall (`phase`, see stall_phase) in env's record and traps. */
template <bool kSuspend = false>
__device__ __forceinline__ void mbar_wait(u64* bar, u32 parity, u64 timeout_ns, const WaitEnv& env, u32 phase) {
  if (mbar_try_wait<kSuspend>(bar, parity)) return;
  const u64 start = global_timer_ns();
  for (u32 polls = 1;; ++polls) {
    if (mbar_try_wait<kSuspend>(bar, parity)) return;
    if ((polls & 255u) == 0) check_stall(env, global_timer_ns() - start, timeout_ns, phase, parity);
  }
}

/** 2D tiled TMA load of the box at element coordinates (x = contiguous dimension, y = rows). */
__device__ __forceinline__ void tma_load_2d(void* dst, const TensorMap* map, u64* bar, i32 x, i32 y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      ::"r"(smem_addr(dst)), "l"(reinterpret_cast<u64>(map)), "r"(x), "r"(y), "r"(smem_addr(bar))
      : "memory");
}

/** The same load, multicast: the box lands at `dst`'s offset in the shared memory of every CTA of the
 * cluster in `cta_mask`, and each of them gets the bytes on the mbarrier at `bar`'s offset. */
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const TensorMap* map, u64* bar, i32 x, i32 y, u16 cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;"
      ::"r"(smem_addr(dst)), "l"(reinterpret_cast<u64>(map)), "r"(x), "r"(y), "r"(smem_addr(bar)), "h"(cta_mask)
      : "memory");
}

/** This CTA's rank in its cluster. */
__device__ __forceinline__ u32 cluster_cta_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

/** Arrives on the mbarrier at `bar`'s offset in the shared memory of cluster CTA `cta`. */
__device__ __forceinline__ void mbar_arrive_cluster(u64* bar, u32 cta) {
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\nmbarrier.arrive.shared::cluster.b64 _, [remote];\n}"
               ::"r"(smem_addr(bar)), "r"(cta)
               : "memory");
}

/** Barrier over every thread of the cluster (threads that exited count as arrived); what a thread did
 * before it is visible to every thread of the cluster after it. */
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

/** 2D tiled TMA store of the box at (x, y) from shared memory; clipped at the tensor's bounds. */
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, const void* src, i32 x, i32 y) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
               ::"l"(reinterpret_cast<u64>(map)), "r"(x), "r"(y), "r"(smem_addr(src))
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
/** Waits until at most N of this thread's committed bulk stores still read shared memory. */
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
/** Waits until at most N of this thread's committed bulk stores are incomplete (written to global). */
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}
/** Orders this thread's generic accesses to shared memory before later async-proxy ones: a TMA store that
 * reads what it wrote, or TMA loads that overwrite it. */
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/** Orders this thread's earlier generic-proxy accesses (e.g. an acquire) before its later TMA accesses. */
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async;" ::: "memory"); }

/** Moves this warpgroup's register budget (all its warps must execute it). */
template <u32 Regs>
__device__ __forceinline__ void set_max_registers_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Regs));
}
template <u32 Regs>
__device__ __forceinline__ void set_max_registers_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Regs));
}

/** Barrier over `threads` threads (a multiple of 32) using hardware barrier `id` (1..15; 0 is __syncthreads). */
__device__ __forceinline__ void named_barrier(u32 id, u32 threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace gemm
}  // namespace symmkit
