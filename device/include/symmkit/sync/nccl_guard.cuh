// symmkit/sync/nccl_guard.cuh: the kernel enqueued after every NCCL operation of a symmkit communicator,
// so that NCCL's waits are bounded like symmkit's own (src/distributed/nccl-watchdog.ts).
//
// Contract: one thread, after the NCCL operation on its stream. The host's watchdog (a worker thread)
// watches an event recorded behind it; past the deadline with no progress, it writes a TimeoutRecord,
// raises the abort flag and aborts the communicator, which makes NCCL's kernels return. The guard
// behind the aborted operation then finds the flag raised and traps, so whatever the host waits on
// fails at once instead of returning garbage, and the record says what happened. A trap ends the CUDA
// context, as a dead peer ends the job. Nothing is written while the flag is down, so the guard replays
// from CUDA graphs as captured.
#pragma once
#include "symmkit/sync/wait.cuh"

namespace symmkit {

__global__ void nccl_guard(const u32* abort_flag, TimeoutRecord* record, u32 rank, u32 world) {
  if (*reinterpret_cast<const volatile u32*>(abort_flag) != 0) {
    // The watchdog wrote its record first; a flag raised for another reason is recorded here, naming
    // no peer (world).
    give_up(WaitEnv{0, abort_flag, record, rank}, world, 0, 0);
  }
}

}  // namespace symmkit
