// symmkit/coll/all_to_all_v.cuh: allToAllV with the counts on the device (algorithm pull): no host wait,
// so the call can be captured in a CUDA graph.
//
// Contract. Before this kernel, on every rank: its staging buffer holds a side, i32
// [x rows, out rows, staging bytes x needs with the side (0: x is staged), row bytes, sendCounts[W]]
// (each at most 2^31 - 1), then
// from `header_bytes` (16-byte aligned) x's rows when they fit; a group barrier kernel published it
// (src/ops/exchange/all-to-all.ts). This kernel (every block) reads every rank's side and judges the call the same
// way on every rank:
//   kStaging   a rank's x does not fit in the staging buffer (detail: its rank, the bytes needed)
//   kRowBytes  a rank's rows are of another size than rank 0's (its rank, its row bytes)
//   kNegative  a rank sends a negative count (its rank, the receiver)
//   kRows      a rank's counts add up to more rows than its x has (its rank, the sum); fewer is fine:
//              a buffer of fixed capacity, as in a replayed graph, sends its first rows
//   kOut       a rank receives more rows than its out holds (its rank, the rows)
// The first of these is the verdict: staging and row size for every rank, then negative and rows
// rank by rank, then out. A refused call writes no row, sets
// recv_counts to -1 and, once, the refusal record (sync/refusal.cuh): the host turns it into
// InvalidArgumentError (SyncWatch). Every
// rank refuses alike, so the closing barrier still pairs and the group stays in step.
// Otherwise rank r copies, for every source s, the counts[s][r] rows that follow s's rows for ranks
// below r in s's staged x into out after the rows of sources below s, and writes recv_counts[s]. The
// segments are cut into 16-byte-aligned pieces spread over the grid. A group barrier kernel follows: no
// rank restages while a peer may still read its buffer. Nothing here waits.
#pragma once
#include "symmkit/core/copy.cuh"
#include "symmkit/sync/barrier.cuh"
#include "symmkit/sync/refusal.cuh"

namespace symmkit {
namespace a2av {

constexpr u32 kThreads = 512;
/** i32s of a side before the counts: x rows, out rows, bytes needed, row bytes. */
constexpr u32 kSideFixed = 4;
/** Refusal codes: allToAllV's own range (the record is the process's, shared by every op that refuses). */
constexpr u32 kStaging = 0x101, kRowBytes = 0x102, kNegative = 0x103, kRows = 0x104, kOut = 0x105;

template <u32 W>
struct Sides {
  i32 fixed[W][kSideFixed];
  i32 counts[W][W];  // counts[s][j]: rows s sends to j
};

/** Reads every rank's side and returns the verdict (0: the call runs), with its rank and detail. */
template <u32 W>
__device__ __forceinline__ u32 judge(const Sides<W>& s, u32* rank, u32* detail) {
  for (u32 r = 0; r < W; ++r)
    if (s.fixed[r][2] != 0) {
      *rank = r;
      *detail = static_cast<u32>(s.fixed[r][2]);
      return kStaging;
    }
  for (u32 r = 1; r < W; ++r)
    if (s.fixed[r][3] != s.fixed[0][3]) {
      *rank = r;
      *detail = static_cast<u32>(s.fixed[r][3]);
      return kRowBytes;
    }
  for (u32 r = 0; r < W; ++r) {
    i64 sum = 0;
    for (u32 j = 0; j < W; ++j) {
      if (s.counts[r][j] < 0) {
        *rank = r;
        *detail = j;
        return kNegative;
      }
      sum += s.counts[r][j];
    }
    if (sum > s.fixed[r][0]) {
      *rank = r;
      *detail = static_cast<u32>(min(sum, static_cast<i64>(0x7fffffff)));
      return kRows;
    }
  }
  for (u32 j = 0; j < W; ++j) {
    i64 rows = 0;
    for (u32 r = 0; r < W; ++r) rows += s.counts[r][j];
    if (rows > s.fixed[j][1]) {
      *rank = j;
      *detail = static_cast<u32>(min(rows, static_cast<i64>(0x7fffffff)));
      return kOut;
    }
  }
  return 0;
}

template <u32 W>
__global__ void __launch_bounds__(kThreads) all_to_all_v_pull(const __grid_constant__ SymmView v, u8* out, u64 row_bytes,
                                                               u64 header_bytes, i32* recv_counts, Refusal* refusal) {
  __shared__ Sides<W> s;
  __shared__ u32 verdict, who, detail;
  for (u32 i = threadIdx.x; i < W * (kSideFixed + W); i += kThreads) {
    const u32 r = i / (kSideFixed + W), k = i % (kSideFixed + W);
    const i32 value = static_cast<const i32*>(v.buffers[r])[k];
    if (k < kSideFixed) s.fixed[r][k] = value;
    else s.counts[r][k - kSideFixed] = value;
  }
  __syncthreads();
  if (threadIdx.x == 0) verdict = judge<W>(s, &who, &detail);
  __syncthreads();
  const u32 me = v.rank;
  if (verdict != 0) {
    if (blockIdx.x == 0 && threadIdx.x < W) recv_counts[threadIdx.x] = -1;
    if (blockIdx.x == 0 && threadIdx.x == 0) record_refusal(refusal, verdict, who, detail);
    return;
  }
  if (blockIdx.x == 0 && threadIdx.x < W) recv_counts[threadIdx.x] = s.counts[threadIdx.x][me];
  u64 at = 0;  // rows of out before source src's
  for (u32 src = 0; src < W; ++src) {
    u64 skip = 0;  // rows src sends to ranks below me
    for (u32 j = 0; j < me; ++j) skip += static_cast<u64>(s.counts[src][j]);
    const u64 bytes = static_cast<u64>(s.counts[src][me]) * row_bytes;
    const u8* from = static_cast<const u8*>(v.buffers[src]) + header_bytes + skip * row_bytes;
    u8* to = out + at * row_bytes;
    // Block b copies piece b of the segment: pieces of a multiple of 16 bytes, so that aligned ends keep
    // the vector path.
    const u64 piece = ((bytes + gridDim.x - 1) / gridDim.x + 15) & ~static_cast<u64>(15);
    const u64 lo = min(bytes, static_cast<u64>(blockIdx.x) * piece);
    const u64 hi = min(bytes, lo + piece);
    if (hi > lo) copy_lanes(to + lo, from + lo, hi - lo, threadIdx.x, kThreads);
    at += static_cast<u64>(s.counts[src][me]);
  }
}

}  // namespace a2av
}  // namespace symmkit
