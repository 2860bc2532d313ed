// symmkit/sync/call_tag.cuh: a call's fingerprint, as its kernels take it.
//
// Contract: CallTag (16 bytes, by value; CALL_TAG_LAYOUT in src/distributed/device-layouts.ts, written by
// CallTag.writeParam in src/distributed/fingerprint.ts) says what every rank's call must agree on, with
// every field exact (no hash, so no two different calls share a tag):
//   word   carried by every signal of the call (sync/signal.cuh) and its mailbox headers (coll/mailbox.cuh):
//          bit 63 set (a slot holding 0 is idle), bit 62 the barrier step (a kernel's second barrier
//          sets it: step_word), then the call number, the operation, the dtype, the reduction and the
//          element count (the host's FIELDS table).
//   shape  what else the ranks must pass alike for this operation, exactly (a fused matmul's n and k,
//          allReduceRmsNorm's hidden size, an MoE call's topk and experts, a broadcast's root), bit 63
//          set; 0 for operations whose count says it all. A call exchanges it beside the word on its
//          first signal to each peer only (barrier step 0, the mailbox headers), so a call without one
//          pays nothing for it.
// A peer whose word differs is in another call (kMismatch); the same word with another shape is the same
// call made with other shapes (kShapeMismatch). Either way the wait gives up (sync/wait.cuh) instead of
// mixing the calls' data.
#pragma once
#include "symmkit/core/types.cuh"

namespace symmkit {

struct CallTag {
  u64 word;
  u64 shape;
};
static_assert(sizeof(CallTag) == 16,
              "CallTag layout is shared with the host (CALL_TAG_LAYOUT in src/distributed/device-layouts.ts)");

constexpr u64 kSignalMark = 1ull << 63;
constexpr u64 kStepBit = 1ull << 62;

/** The word a call's barrier number `step` (0 or 1) carries. */
__device__ __forceinline__ u64 step_word(const CallTag& tag, u32 step) { return step == 0 ? tag.word : tag.word | kStepBit; }

}  // namespace symmkit
