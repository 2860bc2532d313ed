// symmkit/sync/wait.cuh: every spin-wait in symmkit is bounded.
//
// Contract: bounded_wait(env, peer, phase, done) returns once done() is true (peer is read when giving
// up, so done() may update it to name the rank it still waits for). It polls done() at full
// speed and, every 1024 polls, reads the global timer and the host's abort flag (host-mapped memory, so
// that read crosses PCIe and is kept off the fast path). Past env.timeout_ns, or when the host raised
// the abort flag, the first thread to notice writes a TimeoutRecord (kind kGaveUp: rank, block, peer,
// phase, time waited) into host-mapped memory, makes it visible to the host (system fence) and traps:
// the kernel stops instead of hanging, the host sees the launch fail and turns the record into
// SymmTimeoutError naming the peer (src/distributed/sync-watch.ts; the record's layout is
// TIMEOUT_RECORD_LAYOUT in src/distributed/device-layouts.ts). A wait that finds a peer's signal
// carrying another call's fingerprint gives up the same way with kind kMismatch (or kShapeMismatch) and
// both values (CollectiveMismatchError). A trap ends the CUDA context, as a dead peer ends the job.
// A wait on data that carries its own flag (an LL line) may pass `seen`, which fills the record's
// expected and got with the flag it waited for and the flags the data held when it gave up, so that the
// error tells a line never written from one written by another step.
// Nothing here writes device memory, so a wait is safe to replay under CUDA graphs.
#pragma once
#include "symmkit/core/memory.cuh"

namespace symmkit {

/** Written by the first thread that gives up; read by the host. Layout shared with the host (56 bytes,
 * TIMEOUT_RECORD_LAYOUT in src/distributed/device-layouts.ts). */
struct TimeoutRecord {
  u32 flag;  // 0 until written, then the kind: kGaveUp, kMismatch, kShapeMismatch, kStalled (or the NCCL watchdog's)
  u32 rank;
  u32 block;
  u32 peer;
  u32 thread;
  u32 spare;
  u64 phase;     // what the wait was for: a signal's call word (sync/call_tag.cuh), or a kernel's own step
  u64 waited_ns;
  u64 expected;  // kMismatch: the call word this rank waited for; kShapeMismatch: its shape word; kGaveUp: a
                 // flagged line's awaited flag (0: not a line)
  u64 got;       // the word the peer's signal carried; kGaveUp: the line's two flags (low word's, high word's)
};
static_assert(sizeof(TimeoutRecord) == 56,
              "TimeoutRecord layout is shared with the host (src/distributed/device-layouts.ts, test/device-layouts.test.ts)");

struct WaitEnv {
  u64 timeout_ns;
  const u32* abort_flag;   // host-mapped; non-zero asks every wait to give up
  TimeoutRecord* record;   // host-mapped
  u32 rank;
};
static_assert(sizeof(WaitEnv) == 32,
              "WaitEnv layout is shared with the host (WAIT_ENV_LAYOUT in src/distributed/device-layouts.ts)");

constexpr u32 kGaveUp = 1;
/** A peer's signal carried another call word: another call (`expected`, `got`: the two words). */
constexpr u32 kMismatch = 2;
// (3 is the host's NCCL watchdog's.) A kernel's wait on itself (a GEMM's pipeline) outlived its bound: a
// deadlock inside the kernel, no peer to blame; `peer` is kNoPeer, `phase` says which wait.
constexpr u32 kStalled = 4;
/** The same call word, another shape word (`phase`: the call word; `expected`, `got`: the shape words). */
constexpr u32 kShapeMismatch = 5;
constexpr u32 kNoPeer = 0xffffffffu;

/** Which thread of this module writes the record: claimed in device memory (an atomic on the host-mapped
 * record would cross PCIe, where atomics are not assured), so that fields of two threads never mix. Never
 * reset: the trap that follows ends the context. The other threads sleep before they trap, so that theirs
 * does not end the kernel before the record is written (a loop polling the record here made ptxas fail to
 * allocate the GEMMs' registers). */
__device__ u32 g_give_up_claim = 0;

__device__ __noinline__ void give_up(const WaitEnv& env, u32 peer, u64 phase, u64 waited_ns, u32 kind = kGaveUp,
                                     u64 expected = 0, u64 got = 0) {
  volatile TimeoutRecord* r = env.record;
  // No record where a plain GEMM was first launched inside a capture (src/ops/gemm/hopper-gemm.ts writeWaitEnv).
  if (r != nullptr) {
    if (atomicCAS(&g_give_up_claim, 0u, 1u) == 0u) {
      // The first of this module's threads to give up; another module's (or the NCCL watchdog's) may
      // have written the record already.
      if (r->flag == 0) {
        r->rank = env.rank;
        r->block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        r->peer = peer;
        r->phase = phase;
        r->thread = threadIdx.x;
        r->waited_ns = waited_ns;
        r->expected = expected;
        r->got = got;
        __threadfence_system();
        r->flag = kind;
        __threadfence_system();
      }
    } else {
      // Give the writer time to finish before this trap ends the kernel (it takes microseconds).
      __nanosleep(1000000);
      __nanosleep(1000000);
    }
  }
  __trap();
}

/** bounded_wait's `seen` where the wait has nothing to add to the record. */
struct NothingSeen {
  __device__ __forceinline__ void operator()(u64&, u64&) const {}
};

template <typename Done, typename Seen = NothingSeen>
__device__ __forceinline__ void bounded_wait(const WaitEnv& env, const u32& peer, u64 phase, Done done, Seen seen = {}) {
  if (done()) return;
  const u64 start = global_timer_ns();
  for (u32 polls = 1;; ++polls) {
    if (done()) return;
    if ((polls & 1023u) == 0) {
      // Signed: a step back of the timer must not read as an age.
      const u64 waited = global_timer_ns() - start;
      if (i64(waited) > i64(env.timeout_ns) || *reinterpret_cast<const volatile u32*>(env.abort_flag) != 0) {
        u64 expected = 0, got = 0;
        seen(expected, got);
        give_up(env, peer, phase, waited, kGaveUp, expected, got);
      }
    }
  }
}

}  // namespace symmkit
