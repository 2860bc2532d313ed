// symmkit/sync/refusal.cuh: how a kernel refuses a call that the whole group judged alike.
//
// Contract. Ops whose arguments live on the device (allToAllV's counts, MoE's expert ids) are judged by a
// kernel that reads every rank's published side, so every rank reaches the same verdict without a host
// round trip (and the call stays capturable). A refused call writes no output row; the kernel records
// the refusal once in the process's record (host-mapped, REFUSAL_LAYOUT in
// src/distributed/device-layouts.ts: code, rank, detail), which the host's SyncWatch turns into
// InvalidArgumentError at the next group.synchronize(). Codes are ranged by op: allToAllV 0x101..,
// MoE dispatch 0x201... A record already there is kept: the first refusal is the one reported.
#pragma once
#include "symmkit/core/types.cuh"

namespace symmkit {

struct Refusal {
  u32 code;  // 0: none
  u32 rank;
  u32 detail;
};
static_assert(sizeof(Refusal) == 12, "Refusal layout is shared with the host (src/distributed/device-layouts.ts)");

/** One thread: records refusal `code` of `rank` with `detail`, unless a refusal is recorded already. */
__device__ __forceinline__ void record_refusal(Refusal* refusal, u32 code, u32 rank, u32 detail) {
  volatile Refusal* rec = refusal;
  if (rec->code != 0) return;
  rec->rank = rank;
  rec->detail = detail;
  __threadfence_system();
  rec->code = code;
  __threadfence_system();
}

}  // namespace symmkit
