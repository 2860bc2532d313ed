// symmkit/sync/fail_context.cuh: how the host ends a CUDA context whose work can never finish.
//
// Contract: the NCCL watchdog's worker thread (src/distributed/nccl-watchdog-worker.ts) launches this on
// a stream of its own once a group's NCCL work made no progress for the deadline, after writing the
// TimeoutRecord that says why. The trap ends the context: every kernel still running in it (the NCCL
// kernel waiting for a dead peer) stops, and every host wait on its work fails with an error the group
// turns into NcclTimeoutError, instead of hanging (or returning garbage, as after ncclCommAbort).
#pragma once

namespace symmkit {

__global__ void fail_context() { __trap(); }

}  // namespace symmkit
