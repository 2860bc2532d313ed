// symmkit/moe/moe.cuh: MoE dispatch and combine on symmetric memory (algorithm pull), the GPU form of the
// CPU backend's reference (src/cpu/collectives.ts dispatch/combine; layout: src/ops/moe/checks.ts).
//
// Contract. Experts are split evenly over ranks (L per rank); every (token, slot) pair whose expert id e
// is not -1 becomes row base[s][e] + pos of its expert owner's dispatched tensor, where s is the source
// rank, pos the pair's index among s's pairs of expert e in (token, slot) order, and base the table of
// src/ops/moe/route.ts routeBases over the count matrix every rank published (moe_route computes it).
//   moe_positions  one block per expert e over this rank's ids: a block-wide scan of "is e" in pair
//                  order (kScanRun pairs a thread, a warp scan, then the 16 warp totals) gives each
//                  pair of e its pos (written
//                  to this rank's staging), and the block's total is header count[e]. Deterministic.
//                  The grid (at least one block per SM) first copies this rank's ids, weights, token
//                  rows (and scales) into the staging, and when given the ids and weights into the result's
//                  handle (one launch where six copies were: a graph node or a driver call each).
//                  Block 0 also finds the first pair whose id is neither -1 nor an expert: the host
//                  refuses the call on every rank before anything reads an id.
//   moe_route      after a barrier, one block: reads every rank's header and writes the plan the
//                  gather follows: tokens per source, base rows, this rank's rows received, every rank's
//                  rows received and every rank's header's fixed part (the last two for the host), and
//                  the rows per local expert into counts. pull_device (no host wait, so dispatch can be
//                  captured) has it judge the call alike on every rank (the host's dispatchVerdict,
//                  plus the room combine will need; codes kStaging ..): a refused call plans no pair
//                  and no spare row, sets counts to -1, marks this rank's pairs unused in the handle (a
//                  combine after it reads nothing and writes zeros) and records the refusal
//                  (sync/refusal.cuh); every rank refuses alike, so the closing barrier still pairs.
//                  pull passes no refusal record: the host reads the plan's tail, judges the call with
//                  dispatchVerdict and sizes the outputs (one small copy and wait, no routing on the
//                  host), and every rank throws alike before the gather.
//   moe_gather     after a barrier (every rank's staging complete and visible): one warp per chunk of a
//                  token of every source, in source-major order; lane k reads slot k's id and pos from
//                  the source's staging (NVLink), writes this rank's own pairs' rows into the handle, and
//                  for the slots of this rank's experts writes the row's weight (and scale) and the
//                  handle's links (the token's rows here in slot order, its first row marked). The chunk
//                  crosses NVLink once per rank that owns any of the token's experts (once per group of
//                  32 slots holding any, past top-32) and is stored to each of its rows. Followed by a
//                  barrier, so nobody restages while a peer reads. Rows from this rank's received to
//                  max_rows (the dispatched tensors' spare rows) are zeroed and unlinked.
//   moe_combine    after a barrier (every rank's expert output staged): one block per token of this
//                  rank; for slots 0..topk-1 in order, skipping -1, acc = acc + w x value in f32 with
//                  every operation rounded (__fmul_rn, __fadd_rn: never contracted into FMA), the value
//                  read from the expert owner's staging (NVLink); rounded once to bf16. Bit for bit the
//                  host's combineToken. Followed by a barrier.
//   combine per_rank  moe_partials on each owner: for each token's first row here, the weighted sum of the
//                  token's rows here in slot order (f32, every operation rounded), rounded to bf16 into
//                  this rank's staging at that row; a barrier; moe_sum_partials: each token's partials,
//                  read from each owner at the row of its first slot there, summed in rank order in
//                  f32 and rounded once (route.ts combineTokenByRank); a barrier. A token's row crosses
//                  NVLink once per owner rank, not once per slot.
// Staging layout of a dispatch on each rank: header i32 [tokens, first bad pair, maxRows, bytes needed
// beyond the buffer, count[E]], padded to 16 bytes; then, from
// `header_bytes`, ids, pos, weights (i32/i32/f32 [tokens x topk]), token rows, scales (f32 [tokens]), each
// 16-byte aligned (staged_at; src/ops/moe/moe.ts moeStagedAt is its host twin). No wait here: the barriers
// are the group barrier kernels the host enqueues between these kernels.
#pragma once
#include "symmkit/core/copy.cuh"
#include "symmkit/sync/barrier.cuh"
#include "symmkit/sync/refusal.cuh"

namespace symmkit {
namespace moe {

constexpr u32 kThreads = 512;
constexpr u32 kWarps = kThreads / 32;

struct Staged {
  u64 ids, pos, weights, tokens, scales, end;
};

__device__ __forceinline__ u64 align16(u64 n) { return (n + 15) & ~static_cast<u64>(15); }

/** Offsets from the header's end of a rank's staged dispatch of `tokens` rows of `row_bytes`. */
__device__ __forceinline__ Staged staged_at(u64 tokens, u32 topk, u64 row_bytes) {
  Staged s;
  const u64 pairs = tokens * topk;
  s.ids = 0;
  s.pos = align16(s.ids + 4 * pairs);
  s.weights = align16(s.pos + 4 * pairs);
  s.tokens = align16(s.weights + 4 * pairs);
  s.scales = align16(s.tokens + tokens * row_bytes);
  s.end = s.scales + 4 * tokens;
  return s;
}

/** Header i32s before the counts: tokens, the first pair whose id is out of range (-1: none), maxRows
 * (-1: none), staging bytes needed beyond the buffer (0: fits): MOE_HEADER_FIXED in
 * src/ops/moe/checks.ts (dispatchHeader is the host's twin). moe_positions writes it all. */
constexpr u32 kHeaderFixed = 4;

/** Consecutive pairs one thread of moe_positions judges per round. */
constexpr u32 kScanRun = 8;

/** Block e: pos of every pair of expert e in `ids` into staging + header_bytes + pos, and count[e] into the
 * header; block 0 also the header's tokens, max_rows and needed, and the first pair whose id is out of
 * range. With `needed` (the staged dispatch does not fit; launched as one block) only the header's fixed
 * part: the counts are never read then. */
__global__ void __launch_bounds__(kThreads) moe_positions(const i32* ids, u64 tokens, u32 topk, u32 experts,
                                                           u8* staging, u64 header_bytes, i32 max_rows, i32 needed,
                                                           const u8* weights, const u8* rows, const u8* scales,
                                                           u64 row_bytes, u8* handle_expert, u8* handle_weights) {
  __shared__ u32 warp_counts[kWarps];
  __shared__ u32 first_bad;
  const u32 e = blockIdx.x;
  const u64 pairs = tokens * topk;
  i32* header = reinterpret_cast<i32*>(staging);
  if (e == 0 && threadIdx.x == 0) {
    header[0] = static_cast<i32>(tokens);
    header[2] = max_rows;
    header[3] = needed;
    if (needed != 0) header[1] = -1;
  }
  const u32 thread = blockIdx.x * kThreads + threadIdx.x, threads = gridDim.x * kThreads;
  const u64 pairs_bytes = 4 * tokens * topk;
  // The result's handle: its copies of the ids and weights (pull_device's moe_route overwrites them on a
  // refusal).
  if (handle_expert != nullptr) {
    copy_lanes(handle_expert, reinterpret_cast<const u8*>(ids), pairs_bytes, thread, threads);
    copy_lanes(handle_weights, weights, pairs_bytes, thread, threads);
  }
  if (needed != 0) return;
  const Staged at = staged_at(tokens, topk, row_bytes);
  {
    u8* own = staging + header_bytes;
    copy_lanes(own + at.ids, reinterpret_cast<const u8*>(ids), pairs_bytes, thread, threads);
    copy_lanes(own + at.weights, weights, pairs_bytes, thread, threads);
    copy_lanes(own + at.tokens, rows, tokens * row_bytes, thread, threads);
    if (scales != nullptr) copy_lanes(own + at.scales, scales, 4 * tokens, thread, threads);
  }
  if (e >= experts) return;  // a block launched for the copy only (fewer experts than SMs)
  i32* pos = reinterpret_cast<i32*>(staging + header_bytes + at.pos);
  const u32 lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  u32 base = 0;
  // Each thread takes kScanRun consecutive pairs per round: a warp scan of the threads' matches, then the
  // warps' totals, so a round of two block syncs covers kScanRun x kThreads pairs.
  for (u64 chunk = 0; chunk < pairs; chunk += kScanRun * kThreads) {
    const u64 i0 = chunk + static_cast<u64>(threadIdx.x) * kScanRun;
    u32 mine = 0;  // bit j: pair i0 + j is expert e's
#pragma unroll
    for (u32 j = 0; j < kScanRun; ++j)
      if (i0 + j < pairs && ids[i0 + j] == static_cast<i32>(e)) mine |= 1u << j;
    const u32 m = __popc(mine);
    u32 incl = m;
#pragma unroll
    for (u32 d = 1; d < 32; d *= 2) {
      const u32 y = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += y;
    }
    if (lane == 31) warp_counts[warp] = incl;
    __syncthreads();
    u32 before = base + incl - m;
    for (u32 w = 0; w < warp; ++w) before += warp_counts[w];
#pragma unroll
    for (u32 j = 0; j < kScanRun; ++j)
      if (mine >> j & 1u) pos[i0 + j] = static_cast<i32>(before++);
    for (u32 w = 0; w < kWarps; ++w) base += warp_counts[w];
    __syncthreads();
  }
  if (threadIdx.x == 0) header[kHeaderFixed + e] = static_cast<i32>(base);
  if (e != 0) return;
  if (threadIdx.x == 0) first_bad = 0xffffffffu;
  __syncthreads();
  for (u64 i = threadIdx.x; i < pairs; i += kThreads)
    if (ids[i] < -1 || ids[i] >= static_cast<i32>(experts)) atomicMin(&first_bad, static_cast<u32>(i));
  __syncthreads();
  if (threadIdx.x == 0) header[1] = first_bad == 0xffffffffu ? -1 : static_cast<i32>(first_bad);
}

/** The plan moe_gather follows (i32; src/ops/moe/moe.ts moePlanLayout is its host twin): tokens per source,
 * base rows by source and expert, this rank's rows received; then, for the host, every rank's rows
 * received and every rank's header's fixed part (kHeaderFixed each). */
struct Plan {
  u32 bases, received, by_rank, headers, end;
};
__device__ __forceinline__ Plan plan_layout(u32 world, u32 experts) {
  Plan p;
  p.bases = world;
  p.received = p.bases + world * experts;
  p.by_rank = p.received + 1;
  p.headers = p.by_rank + world;
  p.end = p.headers + world * kHeaderFixed;
  return p;
}

/** Refusal codes of moe_route (MoE dispatch's range; the host's MOE_REFUSALS words them). */
constexpr u32 kStaging = 0x201, kBadId = 0x202, kCombineRoom = 0x203, kMaxRows = 0x204;

/** Rank r's count of expert e, from its published header. */
__device__ __forceinline__ i32 count_of(const SymmView& v, u32 r, u32 e) {
  return static_cast<const i32*>(v.buffers[r])[kHeaderFixed + e];
}

/** Dynamic shared memory moe_route takes per expert (src/ops/moe/moe.ts MOE_ROUTE_SHARED_PER_EXPERT). */
constexpr u32 kRouteSharedPerExpert = 16;

/** One block; dynamic shared memory: kRouteSharedPerExpert x experts bytes (every expert's rows, then the
 * rows of its owner's earlier local experts, as i64: sums that overflow i32 are refused, not wrapped).
 * With a refusal record (pull_device) it judges the call: a refused call also marks this rank's pairs
 * unused in the handle (expert and row -1) and no row as a token's first (links), so a combine enqueued
 * after it reads no row and writes zeros. Without one (pull) the host judges from the plan's tail and
 * nothing is marked; a received count past i32 reads as i32's largest. */
template <u32 W>
__global__ void __launch_bounds__(kThreads) moe_route(const __grid_constant__ SymmView v, u32 experts, u32 local_experts,
                                                      u64 combine_row_bytes, u64 capacity, i32* plan, i32* counts_out,
                                                      i32* handle_expert, i32* handle_row, u64 own_pairs,
                                                      i32* handle_links, Refusal* refusal) {
  static_assert(W <= kWarps, "one warp scans each owner's experts");
  extern __shared__ i64 route_shared[];
  __shared__ i32 fixed[W][kHeaderFixed];
  __shared__ i64 received[W];
  __shared__ u32 verdict, who, detail;
  const u32 E = experts, L = local_experts, me = v.rank;
  const u32 lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const Plan at = plan_layout(W, E);
  i64* totals = route_shared;     // [E]: every rank's rows of expert e
  i64* owned = route_shared + E;  // [E]: the owner's rows of its local experts before e
  if (threadIdx.x < W * kHeaderFixed)
    fixed[threadIdx.x / kHeaderFixed][threadIdx.x % kHeaderFixed] =
        static_cast<const i32*>(v.buffers[threadIdx.x / kHeaderFixed])[threadIdx.x % kHeaderFixed];
  __syncthreads();
  // Counts are trusted only once no rank's staging overflowed (then its counts were never written).
  bool staged = true;
  for (u32 r = 0; r < W; ++r) staged = staged && fixed[r][3] == 0;
  if (staged) {
    for (u32 e = threadIdx.x; e < E; e += kThreads) {
      i64 all = 0;
#pragma unroll
      for (u32 r = 0; r < W; ++r) all += count_of(v, r, e);
      totals[e] = all;
    }
    __syncthreads();
    // Warp r scans owner r's local experts: the rows before each, and the owner's rows in all.
    if (warp < W) {
      i64 carry = 0;
      for (u32 j0 = 0; j0 < L; j0 += 32) {
        const u32 e = warp * L + j0 + lane;
        const i64 x = j0 + lane < L ? totals[e] : 0;
        i64 incl = x;
#pragma unroll
        for (u32 d = 1; d < 32; d *= 2) {
          const i64 y = __shfl_up_sync(0xffffffffu, incl, d);
          if (lane >= d) incl += y;
        }
        if (j0 + lane < L) owned[e] = carry + incl - x;
        carry += __shfl_sync(0xffffffffu, incl, 31);
      }
      if (lane == 0) received[warp] = carry;
    }
    __syncthreads();
    // Source r's first row of expert e at its owner: the owner's earlier local experts, then e's rows
    // from the ranks before r.
    // (Wrapped when the rows overflow i32: the call is then refused and the plan unused.)
    for (u32 e = threadIdx.x; e < E; e += kThreads) {
      i64 base = owned[e];
#pragma unroll
      for (u32 r = 0; r < W; ++r) {
        plan[at.bases + r * E + e] = static_cast<i32>(base);
        base += count_of(v, r, e);
      }
    }
  }
  __syncthreads();
  // The host's part of the plan: every rank's rows received (0 when a staging overflowed: the host judges
  // that first) and header.
  const auto rows_of = [&](u32 r) {
    return staged ? static_cast<i32>(min(received[r], static_cast<i64>(0x7fffffff))) : 0;
  };
  if (threadIdx.x < W) plan[at.by_rank + threadIdx.x] = rows_of(threadIdx.x);
  if (threadIdx.x < W * kHeaderFixed)
    plan[at.headers + threadIdx.x] = fixed[threadIdx.x / kHeaderFixed][threadIdx.x % kHeaderFixed];
  if (refusal == nullptr) {
    if (threadIdx.x < W) plan[threadIdx.x] = fixed[threadIdx.x][0];
    if (threadIdx.x == 0) plan[at.received] = rows_of(me);
    if (staged)
      for (u32 j = threadIdx.x; j < L; j += kThreads) counts_out[j] = static_cast<i32>(totals[me * L + j]);
    return;
  }
  if (threadIdx.x == 0) {
    verdict = 0;
    for (u32 r = 0; r < W && verdict == 0; ++r)
      if (fixed[r][3] != 0) verdict = kStaging, who = r, detail = static_cast<u32>(fixed[r][3]);
    for (u32 r = 0; r < W && verdict == 0; ++r)
      if (fixed[r][1] >= 0) verdict = kBadId, who = r, detail = static_cast<u32>(fixed[r][1]);
    for (u32 r = 0; r < W && verdict == 0; ++r)
      if (static_cast<u64>(fixed[r][2]) * combine_row_bytes > capacity)
        verdict = kCombineRoom, who = r, detail = static_cast<u32>(fixed[r][2]);
    for (u32 r = 0; r < W && verdict == 0; ++r)
      if (received[r] > fixed[r][2])
        verdict = kMaxRows, who = r, detail = static_cast<u32>(min(received[r], static_cast<i64>(0x7fffffff)));
  }
  __syncthreads();
  if (verdict != 0) {
    // No pair, and no spare row: the outputs keep what they held.
    if (threadIdx.x < W) plan[threadIdx.x] = 0;
    if (threadIdx.x == 0) plan[at.received] = fixed[me][2];
    for (u32 j = threadIdx.x; j < L; j += kThreads) counts_out[j] = -1;
    for (u64 i = threadIdx.x; i < own_pairs; i += kThreads) handle_expert[i] = handle_row[i] = -1;
    // No row opens a token: a combine per_rank after it sums nothing here.
    for (u64 r = threadIdx.x; r < static_cast<u64>(max(fixed[me][2], 0)); r += kThreads) handle_links[2 * r + 1] = 0;
    if (threadIdx.x == 0) record_refusal(refusal, verdict, who, detail);
    return;
  }
  if (threadIdx.x < W) plan[threadIdx.x] = fixed[threadIdx.x][0];
  if (threadIdx.x == 0) plan[at.received] = static_cast<i32>(received[me]);
  for (u32 j = threadIdx.x; j < L; j += kThreads) counts_out[j] = static_cast<i32>(totals[me * L + j]);
}

/** What moe_gather writes and how to read the sources (its parameters, src/ops/moe/moe.ts GATHER_PARAMS). */
struct GatherArgs {
  const i32* plan;     // plan_layout: tokens per source, base rows, rows received
  u8* out_tokens;      // [rows, row_bytes]
  float* out_weights;  // [rows]
  float* out_scales;   // [rows], or null (no scales)
  i32* handle_rows;    // [tokens x topk] of this rank: each own pair's row at its owner
  i32* links;          // [rows, 2]: the next row of the same token in slot order (-1: none), 1 on a token's first row
  float* row_weights;  // [rows]: each row's weight, the handle's copy (combine per_rank reads it)
  u64 row_bytes;
  u64 chunk_bytes;     // a warp copies this much of a token's row (a multiple of 16)
  u64 header_bytes;
  u64 max_rows;        // rows of the dispatched tensors: those past the rows received are zeroed
  u32 experts, local_experts, topk;
};

/** Zeroes rows [from, to) of the dispatched tensors (and unlinks them), spread over the grid. */
__device__ __forceinline__ void zero_spare(const GatherArgs& a, u64 from, u64 to) {
  const u64 threads = static_cast<u64>(gridDim.x) * kThreads, t = static_cast<u64>(blockIdx.x) * kThreads + threadIdx.x;
  for (u64 r = from + t; r < to; r += threads) {
    a.out_weights[r] = 0.0f;
    a.row_weights[r] = 0.0f;
    a.links[2 * r] = -1;
    a.links[2 * r + 1] = 0;
    if (a.out_scales) a.out_scales[r] = 0.0f;
  }
  u8* lo = a.out_tokens + from * a.row_bytes;
  const u64 bytes = (to - from) * a.row_bytes;
  if ((reinterpret_cast<u64>(lo) | bytes) % 16 == 0) {
    for (u64 i = t; i < bytes / 16; i += threads) st_128(lo + 16 * i, u32x4{0, 0, 0, 0});
  } else {
    for (u64 i = t; i < bytes; i += threads) lo[i] = 0;
  }
}

/** One warp copies bytes [from, to) of the row `src` to rows dest[0, n) of `out`: each 16-byte vector is
 * read once (over NVLink) and stored to every destination, kCopyUnroll loads in flight per lane; single
 * bytes when a row is not 16-byte aligned (`from` is a multiple of 16). */
__device__ __forceinline__ void copy_to_rows(u8* out, const i32* dest, u32 n, u64 row_bytes, const u8* src, u64 from,
                                             u64 to, u32 lane) {
  if (((reinterpret_cast<u64>(out) | reinterpret_cast<u64>(src) | row_bytes) & 15) == 0) {
    constexpr u64 step = 16 * 32;
    for (u64 o = from + 16 * static_cast<u64>(lane); o < to; o += kCopyUnroll * step) {
      u32x4 v[kCopyUnroll];
#pragma unroll
      for (u32 u = 0; u < kCopyUnroll; ++u)
        if (o + u * step < to) v[u] = ld_128(src + o + u * step);
      for (u32 j = 0; j < n; ++j) {
        u8* d = out + static_cast<u64>(dest[j]) * row_bytes;
#pragma unroll
        for (u32 u = 0; u < kCopyUnroll; ++u)
          if (o + u * step < to) st_128(d + o + u * step, v[u]);
      }
    }
  } else {
    for (u64 o = from + lane; o < to; o += 32) {
      const u8 b = src[o];
      for (u32 j = 0; j < n; ++j) out[static_cast<u64>(dest[j]) * row_bytes + o] = b;
    }
  }
}

/** One warp per chunk of chunk_bytes of a token of every source, source-major, a token's chunks side by side
 * (a warp per token kept too few loads in flight at small token counts). Lane k reads slot k's id and pos
 * from the source's staging (32 slots at a time); the chunk crosses NVLink once per group of 32 slots
 * holding any of this rank's experts (once, up to top-32) and is stored to each of their rows. The
 * token's first chunk also writes this rank's own pairs' rows into the handle, and for the slots of this
 * rank's experts the row's weight (and scale) and the links of the token's rows in slot order. */
template <u32 W>
__global__ void __launch_bounds__(kThreads, 2) moe_gather(const __grid_constant__ SymmView v, const i32* plan,
                                                       u8* out_tokens, float* out_weights, float* out_scales,
                                                       i32* handle_rows, i32* links, float* row_weights,
                                                       u64 row_bytes, u64 chunk_bytes, u64 header_bytes, u64 max_rows,
                                                       u32 experts, u32 local_experts, u32 topk) {
  __shared__ i32 dest[kWarps][32];
  const GatherArgs a{plan,      out_tokens,  out_weights,  out_scales, handle_rows, links,         row_weights,
                     row_bytes, chunk_bytes, header_bytes, max_rows,   experts,     local_experts, topk};
  const u64 received = static_cast<u64>(a.plan[plan_layout(W, experts).received]);
  if (received < a.max_rows) zero_spare(a, received, a.max_rows);
  const u32 lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const u64 warps = static_cast<u64>(gridDim.x) * kWarps;
  u64 total = 0;
#pragma unroll
  for (u32 s = 0; s < W; ++s) total += static_cast<u64>(a.plan[s]);
  const u64 chunks = a.row_bytes == 0 ? 1 : (a.row_bytes + a.chunk_bytes - 1) / a.chunk_bytes;
  const i32* bases = a.plan + W;
  for (u64 item = static_cast<u64>(blockIdx.x) * kWarps + warp; item < total * chunks; item += warps) {
    const u64 chunk = item % chunks;
    const bool first_chunk = chunk == 0;
    u32 s = 0;
    u64 token = item / chunks;
    while (token >= static_cast<u64>(a.plan[s])) token -= static_cast<u64>(a.plan[s++]);
    const Staged at = staged_at(static_cast<u64>(a.plan[s]), a.topk, a.row_bytes);
    const u8* src = static_cast<const u8*>(v.buffers[s]) + a.header_bytes;
    const u64 pair0 = token * a.topk;
    i32 prev = -1;  // the token's last row here among the slots before this group of 32
    for (u32 k0 = 0; k0 < a.topk; k0 += 32) {
      const u32 k = k0 + lane;
      const i32 e = k < a.topk ? reinterpret_cast<const i32*>(src + at.ids)[pair0 + k] : -1;
      const i32 row =
          e < 0 ? -1 : bases[static_cast<u64>(s) * a.experts + e] + reinterpret_cast<const i32*>(src + at.pos)[pair0 + k];
      if (first_chunk && s == v.rank && k < a.topk) a.handle_rows[pair0 + k] = row;
      const bool local = e >= 0 && static_cast<u32>(e) / a.local_experts == v.rank;
      const u32 mask = __ballot_sync(0xffffffffu, local);
      if (mask == 0) continue;
      const u32 above = mask & ~((2u << lane) - 1u);  // lane 31: 2u << 31 wraps to 0, so nothing above
      const i32 next = __shfl_sync(0xffffffffu, row, above ? __ffs(above) - 1 : lane);
      const u32 first = __ffs(mask) - 1;
      const i32 first_row = __shfl_sync(0xffffffffu, row, first);
      const i32 last_row = __shfl_sync(0xffffffffu, row, 31 - __clz(mask));
      if (local) dest[warp][__popc(mask & ((1u << lane) - 1u))] = row;
      if (first_chunk && local) {
        const float w = reinterpret_cast<const float*>(src + at.weights)[pair0 + k];
        a.out_weights[row] = w;
        a.row_weights[row] = w;
        if (a.out_scales) a.out_scales[row] = reinterpret_cast<const float*>(src + at.scales)[token];
        a.links[2 * static_cast<u64>(row)] = above ? next : -1;
        a.links[2 * static_cast<u64>(row) + 1] = prev < 0 && lane == first ? 1 : 0;
      }
      if (first_chunk && prev >= 0 && lane == 0) a.links[2 * static_cast<u64>(prev)] = first_row;
      prev = last_row;
      __syncwarp();
      const u64 from = chunk * a.chunk_bytes, to = min(a.row_bytes, from + a.chunk_bytes);
      copy_to_rows(a.out_tokens, dest[warp], __popc(mask), a.row_bytes, src + at.tokens + token * a.row_bytes, from, to,
                   lane);
      __syncwarp();  // every lane has read dest before the next group writes it
    }
  }
}

/** acc[j] += w x element j of the 8 bf16 in `raw`, each operation rounded. */
__device__ __forceinline__ void add_weighted(float (&acc)[8], float w, const u32x4& raw) {
  const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&raw);
#pragma unroll
  for (u32 j = 0; j < 8; ++j) acc[j] = __fadd_rn(acc[j], __fmul_rn(w, __bfloat162float(e[j])));
}

/** Stores acc[0..8) rounded to bf16 as one 16-byte vector at p (16-byte aligned). */
__device__ __forceinline__ void st_bf16x8(__nv_bfloat16* p, const float (&acc)[8]) {
  u32x4 packed;
  __nv_bfloat16* e = reinterpret_cast<__nv_bfloat16*>(&packed);
#pragma unroll
  for (u32 j = 0; j < 8; ++j) e[j] = __float2bfloat16_rn(acc[j]);
  st_128(p, packed);
}

/** Slots of a token whose loads one thread has in flight at once in moe_combine: a slot's row is a load
 * away (over NVLink for a peer's), so reading the slots one after the other left the links and HBM idle. */
constexpr u32 kCombineBatch = 8;

/** Token t of this rank: out[t] = bf16(sum over its slots of w x expert output), see the contract. With
 * `vectors` (the host's judgment: hidden a multiple of 8 and out 16-byte aligned, so every row is), groups
 * of 8 elements as 16-byte vectors, else single elements: the same operations in the same order. A thread
 * loads kCombineBatch slots' values before it adds them, still in slot order. */
__global__ void __launch_bounds__(kThreads) moe_combine(const __grid_constant__ SymmView v, const i32* expert,
                                                        const i32* row, const float* weights, __nv_bfloat16* out,
                                                        u64 tokens, u32 topk, u32 hidden, u32 local_experts,
                                                        u32 vectors) {
  const u32 groups = vectors ? hidden / 8 : hidden;
  for (u64 t = blockIdx.x; t < tokens; t += gridDim.x) {
    for (u32 g = threadIdx.x; g < groups; g += kThreads) {
      float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      for (u32 k0 = 0; k0 < topk; k0 += kCombineBatch) {
        const __nv_bfloat16* src[kCombineBatch];
        float w[kCombineBatch];
#pragma unroll
        for (u32 j = 0; j < kCombineBatch; ++j) {
          src[j] = nullptr;
          w[j] = 0.0f;
          if (k0 + j >= topk) continue;
          const u64 pair = t * topk + k0 + j;
          const i32 e = expert[pair];
          if (e < 0) continue;
          w[j] = weights[pair];
          src[j] = static_cast<const __nv_bfloat16*>(v.buffers[static_cast<u32>(e) / local_experts]) +
                   static_cast<u64>(row[pair]) * hidden;
        }
        if (vectors) {
          u32x4 val[kCombineBatch];
#pragma unroll
          for (u32 j = 0; j < kCombineBatch; ++j)
            if (src[j] != nullptr) val[j] = ld_128(src[j] + 8 * g);
#pragma unroll
          for (u32 j = 0; j < kCombineBatch; ++j)
            if (src[j] != nullptr) add_weighted(acc, w[j], val[j]);
        } else {
          float val[kCombineBatch];
#pragma unroll
          for (u32 j = 0; j < kCombineBatch; ++j)
            if (src[j] != nullptr) val[j] = __bfloat162float(src[j][g]);
#pragma unroll
          for (u32 j = 0; j < kCombineBatch; ++j)
            if (src[j] != nullptr) acc[0] = __fadd_rn(acc[0], __fmul_rn(w[j], val[j]));
        }
      }
      if (vectors) {
        st_bf16x8(out + t * hidden + 8 * g, acc);
      } else {
        out[t * hidden + g] = __float2bfloat16_rn(acc[0]);
      }
    }
  }
}

/** Rows of a token's chain one warp holds in shared memory while moe_partials sums them (longer chains,
 * more than 32 of a token's slots on one rank, walk the rest from the links). */
constexpr u32 kChain = 32;

/** combine per_rank on each expert owner: one warp per chunk_groups groups (of 8 elements, or single ones)
 * of each received row that opens its token's chain (links); partial = bf16(sum over the chain's rows, in
 * slot order, of w x expert output) in f32 with every operation rounded, into this rank's staging at that
 * row. `vectors`: hidden a multiple of 8 and
 * expert_out 16-byte aligned (the host's judgment), else single elements: the same operations. At most
 * `topk` rows are followed, whatever the links say. */
__global__ void __launch_bounds__(kThreads, 2) moe_partials(const __nv_bfloat16* expert_out, const i32* links,
                                                         const float* row_weights, u64 rows, u32 hidden, u32 topk,
                                                         u32 chunk_groups, __nv_bfloat16* partials, u32 vectors) {
  __shared__ i32 chain_rows[kWarps][kChain];
  __shared__ float chain_weights[kWarps][kChain];
  const u32 lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const u64 warps = static_cast<u64>(gridDim.x) * kWarps;
  const u32 groups = vectors ? hidden / 8 : hidden;
  const u32 chunks = (groups + chunk_groups - 1) / chunk_groups;
  for (u64 item = static_cast<u64>(blockIdx.x) * kWarps + warp; item < rows * chunks; item += warps) {
    const u64 head = item / chunks;
    const u32 g0 = static_cast<u32>(item % chunks) * chunk_groups, g1 = min(groups, g0 + chunk_groups);
    if (links[2 * head + 1] == 0) continue;
    // Lane 0 walks the first kChain rows of the chain; `rest` is where the walk stopped.
    u32 n = 0;
    i32 rest = static_cast<i32>(head);
    if (lane == 0) {
      while (rest >= 0 && n < kChain && n < topk) {
        chain_rows[warp][n] = rest;
        chain_weights[warp][n] = row_weights[rest];
        rest = links[2 * static_cast<u64>(rest)];
        ++n;
      }
    }
    n = __shfl_sync(0xffffffffu, n, 0);
    rest = __shfl_sync(0xffffffffu, rest, 0);
    __syncwarp();
    for (u32 g = g0 + lane; g < g1; g += 32) {
      float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      if (vectors) {
        for (u32 j0 = 0; j0 < n; j0 += kCombineBatch) {
          u32x4 val[kCombineBatch];
#pragma unroll
          for (u32 j = 0; j < kCombineBatch; ++j)
            if (j0 + j < n) val[j] = ld_128(expert_out + static_cast<u64>(chain_rows[warp][j0 + j]) * hidden + 8 * g);
#pragma unroll
          for (u32 j = 0; j < kCombineBatch; ++j)
            if (j0 + j < n) add_weighted(acc, chain_weights[warp][j0 + j], val[j]);
        }
        i32 r = rest;
        for (u32 m = n; r >= 0 && m < topk; ++m, r = links[2 * static_cast<u64>(r)])
          add_weighted(acc, row_weights[r], ld_128(expert_out + static_cast<u64>(r) * hidden + 8 * g));
        st_bf16x8(partials + head * hidden + 8 * g, acc);
      } else {
        for (u32 j = 0; j < n; ++j)
          acc[0] = __fadd_rn(acc[0], __fmul_rn(chain_weights[warp][j],
                                               __bfloat162float(expert_out[static_cast<u64>(chain_rows[warp][j]) * hidden + g])));
        i32 r = rest;
        for (u32 m = n; r >= 0 && m < topk; ++m, r = links[2 * static_cast<u64>(r)])
          acc[0] = __fadd_rn(acc[0], __fmul_rn(row_weights[r], __bfloat162float(expert_out[static_cast<u64>(r) * hidden + g])));
        partials[head * hidden + g] = __float2bfloat16_rn(acc[0]);
      }
    }
    __syncwarp();  // every lane has read the chain before lane 0 writes the next
  }
}

/** combine per_rank on each rank, after a barrier (every owner's partials staged): one warp per chunk of
 * chunk_groups groups of a token (lane k reads slot k's expert and row, 32 slots at a time; a ballot per
 * rank finds the token's first slot there, whose row holds that owner's partial); out = bf16(sum of the
 * partials in rank order, f32, every addition rounded), zero for a token with no slot. */
template <u32 W>
__global__ void __launch_bounds__(kThreads) moe_sum_partials(const __grid_constant__ SymmView v, const i32* expert,
                                                             const i32* row, __nv_bfloat16* out, u64 tokens, u32 topk,
                                                             u32 hidden, u32 local_experts, u32 chunk_groups,
                                                             u32 vectors) {
  const u32 lane = threadIdx.x % 32;
  const u64 warps = static_cast<u64>(gridDim.x) * kWarps;
  const u32 groups = vectors ? hidden / 8 : hidden;
  const u32 chunks = (groups + chunk_groups - 1) / chunk_groups;
  for (u64 item = static_cast<u64>(blockIdx.x) * kWarps + threadIdx.x / 32; item < tokens * chunks; item += warps) {
    const u64 t = item / chunks;
    const u32 g0 = static_cast<u32>(item % chunks) * chunk_groups, g1 = min(groups, g0 + chunk_groups);
    i32 head[W];
#pragma unroll
    for (u32 r = 0; r < W; ++r) head[r] = -1;
    for (u32 k0 = 0; k0 < topk; k0 += 32) {
      const u32 k = k0 + lane;
      const i32 e = k < topk ? expert[t * topk + k] : -1;
      const i32 at = e >= 0 ? row[t * topk + k] : -1;
#pragma unroll
      for (u32 r = 0; r < W; ++r) {
        const u32 mask = __ballot_sync(0xffffffffu, e >= 0 && static_cast<u32>(e) / local_experts == r);
        const i32 first = __shfl_sync(0xffffffffu, at, mask ? __ffs(mask) - 1 : 0);
        if (head[r] < 0 && mask) head[r] = first;
      }
    }
    for (u32 g = g0 + lane; g < g1; g += 32) {
      float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      if (vectors) {
        u32x4 val[W];
#pragma unroll
        for (u32 r = 0; r < W; ++r)
          if (head[r] >= 0)
            val[r] = ld_128(static_cast<const __nv_bfloat16*>(v.buffers[r]) + static_cast<u64>(head[r]) * hidden + 8 * g);
#pragma unroll
        for (u32 r = 0; r < W; ++r)
          if (head[r] >= 0) add_weighted(acc, 1.0f, val[r]);
        st_bf16x8(out + t * hidden + 8 * g, acc);
      } else {
#pragma unroll
        for (u32 r = 0; r < W; ++r)
          if (head[r] >= 0)
            acc[0] = __fadd_rn(acc[0], __bfloat162float(static_cast<const __nv_bfloat16*>(v.buffers[r])[static_cast<u64>(head[r]) * hidden + g]));
        out[t * hidden + g] = __float2bfloat16_rn(acc[0]);
      }
    }
  }
}

}  // namespace moe
}  // namespace symmkit
