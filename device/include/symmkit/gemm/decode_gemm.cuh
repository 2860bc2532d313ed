// symmkit/gemm/decode_gemm.cuh: Hopper GEMM for few rows of A (decode batches), D[m, n] = A[m, k] * B[n, k]^T
// with both operands K-major, computed as D^T = B * A^T.
//
// Why a second kernel: at m <= 128 the GEMM is a stream of B (235 MB at 8192 x 14336 bf16), and
// hopper_gemm's 128 x 256 tiles of D give n / 256 tiles (32 at n = 8192), most of them zero rows, so it
// needs split-K and a fix-up to reach the SMs. Here wgmma's M side is B and its N side is A: a consumer
// warpgroup takes 64 rows of B (64 columns of D) by kCols rows of A (kCols = 8 to 192 on one consumer, to
// 256 on two, to 168 on three; up to 192 rows the host takes the narrowest one-consumer tile that covers
// m), so the MMA is as narrow as the batch and n / 64 tiles (128 at n = 8192) stream B on every SM without
// a split. Wide tiles, 128 rows of B by kCols of A, with one consumer per 64 rows of B (kConsumers = 2),
// read A half as often and split the MMAs over two warpgroups; tall tiles, 192 rows of B on three
// consumers, take two tile-rows of 104 rows of A where one tile-row of 200 would leave SMs idle (cuBLASLt's
// 192 x 104). Paired wide tiles (kPair = 2) run in clusters of two CTAs
// on neighbouring tile-rows of A (tm even and odd, the same tn), each CTA loading half of their common
// block of B multicast to both: B then crosses L2 once per block and A once per pair, where L2's bandwidth
// bounds the unpaired tiles (H200, m > 128). cuBLASLt's decode kernels are built the same way (nvjet
// "64x8" to "128x128" tiles, A and B swapped, 1 x 2 clusters).
//
// Contract. A persistent grid of CTAs all resident at once, one per SM (paired: at most the clusters of two
// that fit, cuOccupancyMaxActiveClusters, which may be fewer than the SMs' pairs), walks steps
// i = blockIdx.x / kPair, + gridDim.x / kPair, ...: step i is slice i % splits of tile-unit
// u = i / splits, and the CTA of cluster rank c takes tile tn * tiles_m + tm with tn = u / (tiles_m /
// kPair), tm = kPair (u % (tiles_m / kPair)) + c (tiles_m is a multiple of kPair; the tiles of A that share
// one block of B run side by side, for L2). Warpgroup 0's first thread is the producer: for each k-block of
// each of its steps it waits for a free stage (empty mbarrier, one arrival per consumer of each CTA of the
// cluster) and issues the TMA loads of kCols rows of A and of 64 kConsumers rows of B by 128 bytes of K,
// completing the stage's full mbarrier (a stage: B's rows, then A's, advanced by a RingCursor); paired,
// it loads the 64 rows of B of its cluster rank, multicast to both CTAs (the two CTAs walk the same steps,
// so a stage is the same k-block in both). Warpgroup 1 + c is consumer c, for rows 64 c .. 64 c + 63 of
// the tile's B: it waits for a full stage, issues wgmma m64n<kCols> over its four 32-byte k-steps and
// releases the previous stage (in both CTAs of a pair: the peer's producer writes it too) once
// wgmma_wait<1> proves its MMAs retired. A pair meets at a cluster barrier after its barriers are
// initialised, before any load reaches the peer, and at its end, so that neither CTA exits while the other
// may still arrive on its barriers. The accumulator register 4j + {0..3} of thread t holds D^T rows
// (columns of D) 16 (t / 32) + (t % 32) / 4 (+8) of the consumer's 64 and columns (rows of D) 8j + 2 (t % 4)
// (+1).
// Split-K (splits > 1, any count; the host launches one wave, one CTA per tile slice): each slice's
// consumers write their f32 accumulators to split_ws in register order ([tile][slice][consumer][register]
// [thread]: coalesced, and the same layout in every slice's CTA), then the CTA counts itself on the tile's
// counter (a barrier over the consumers, then one acq_rel add at gpu scope); the CTA that counts last resets
// the counter and sums the slices in slice order, so the bits do not depend on which CTA is last.
// Epilogue, per consumer: its (summed, scaled) share is rounded to bf16 and transposed through shared
// memory into rows of D, then stored 16 bytes at a time (in passes of kCols / kPasses rows of A where whole
// transposed tiles would leave the ring fewer than 4 stages: the wide tiles past 200 rows). The transposed
// tile lies in a buffer beside the ring, which meanwhile loads the next step; or, for one consumer of a
// plain GEMM whose ring would be short of stages (DecodeRing::kHole), in the step's hole: after each
// step's k-blocks the producer waits for the next stage to be free and completes its full barrier with
// nothing loaded, and the consumer, after that wait, transposes there and releases it (a fence orders its
// stores before the TMA loads that land there next; no cycle: the stage's previous use was released
// before). It stores into d
// (kAllReduce false), or, for GEMM + all-reduce, into slot `rank` of every rank's receive buffer (recv[p]:
// world slots of [m, n] bf16, the layout of hopper_gemm's AllReduceTiles). The consumer
// then sets its share's flag flags[p][rank][tile][consumer] to this call's epoch (call_epoch) on every
// rank p (a barrier, then one thread's system-scope fence and stores), waits (acquire, bounded, naming
// the rank) for every rank's flag of the share here, and sums the world partials from this rank's
// receive buffer in f32 in rank order, rounded once to bf16 into d: every rank writes the same bits, the
// bits of this GEMM's bf16 output all-reduced in rank order. No deadlock: a consumer pushes its share
// before it waits, and every rank walks the same steps in increasing order on CTAs that are all resident
// (the grid's bound above), so by induction over the steps every wait ends (whatever the grid's size on each
// rank). A receive buffer is rewritten by the next call only after a barrier over the ranks: the host
// launches one before the GEMM, and the GEMM behind it programmatically, so its main loop runs under the
// barrier and its first push waits for it.
// Or, where the host passes the group's Lamport mailbox (args.mailbox; one-pass tiles whose [m, n] partial
// fits a slot), the kernel is one call of coll/mailbox.cuh's Lamport protocol and needs neither that barrier
// nor flags. The producer warpgroup's idle warps 1 to 3 do its bookkeeping off the producer's path: one
// thread reads the call count (buffer count % 3) and hands it to the consumers (a named barrier at their
// start), then counts its CTA at once (the last CTA to count, every CTA having read the count, counts the
// call: later Lamport calls are stream-ordered after this kernel); others send this rank's header (CTA
// 0), check every peer's (CTA 0: another call's gives up, CollectiveMismatchError) and refill the previous
// call's slots with the sentinel (every CTA). Each consumer stores its share, cleaned of the sentinel,
// with relaxed system-scope stores into slot `rank` of every peer's buffer, then polls its own buffer's
// slot of each peer for the share's 16-byte chunks (bounded, naming the peer) and sums in rank order as
// above, this rank's partial read from the transposed tile. No system fence and no flag: the data is its
// own mark.
// Bounds: A's box never reaches far past m (decode_row_a, decode_box_rows), except a pair's second
// tile-row where m <= kCols, which lies wholly past m (correct, zero-filled, slow: the host never picks such
// a pair); TMA fills rows past n and m
// and the K tail with zeros; stores skip rows of D past m and those another tile-row owns; n is a
// multiple of 8 (host), so a 16-byte chunk of a row lies wholly inside or outside D. Every wait is
// bounded. Nothing outlives a launch but the split counters (left zero), the flags and the epoch (or the
// mailbox's slots and call count).
#pragma once
#include "symmkit/coll/mailbox.cuh"
#include "symmkit/gemm/fusion.cuh"
#include "symmkit/gemm/tma.cuh"
#include "symmkit/gemm/wgmma.cuh"
#include "symmkit/sync/barrier.cuh"

namespace symmkit {
namespace gemm {

/** Rows of B per consumer: one m64 wgmma. */
constexpr u32 kDecodeRowsB = 64;
/** Most stages worth having; the ring takes what shared memory the transposed tiles' buffers leave. */
constexpr u32 kDecodeMaxStages = 16;
/** Below this many stages a hole (DecodeRing::kHole) pays: from 12 on the ring hides the loads' latency
 * already, and a hole costs about 1 us a step (bench/decode-shapes.mjs: m = 1 to 64 on an H200). */
constexpr u32 kDecodeHoleBelowStages = 12;
constexpr u32 kDecodeSharedMax = 227 * 1024;
/** Named barrier over every consumer warpgroup (1 + consumer, 1 to 3, is one consumer's own). */
constexpr u32 kDecodeAllConsumers = 4;
/** Named barrier over the producer warpgroup's warps 1 to 3 and every consumer: the Lamport mailbox's call
 * count, read by warp 1, reaches the consumers. */
constexpr u32 kDecodeLamportBar = 5;
/** The producer warpgroup's first thread that refills the mailbox's previous slots, and how many do. */
constexpr u32 kDecodeFirstRefill = 35;
constexpr u32 kDecodeRefills = 128 - kDecodeFirstRefill;
/** Row stride, in bf16, of the transposed tile in shared memory: 64 + 8, so that the four columns a quad
 * of lanes writes fall in different banks, and rows stay 16-byte aligned. */
constexpr u32 kDecodeTRow = kDecodeRowsB + 8;

/** The shared memory of a launch: the stage ring (a stage: B's rows, then A's), the transposed tiles'
 * buffers, the barriers. */
template <u32 kCols, u32 kConsumers, bool kAllReduce>
struct DecodeRing {
  // Two consumers of 256 columns hold 128 accumulator registers each, as the Hopper GEMM's do.
  static_assert(kCols % 8 == 0 && kCols >= 8 && kCols <= 256, "wgmma's N side: 8 to 256 rows of A");
  static_assert(kConsumers >= 1 && kConsumers <= 3, "one to three consumer warpgroups");
  static_assert(kConsumers * kCols <= 512, "a tile slice's partials fit split-K's 128 x 256 floats (src/ops/gemm/split-scratch.ts)");
  static constexpr u32 kBytesB = kConsumers * kDecodeRowsB * kTileKBytes;
  static constexpr u32 kBytesA = kCols * kTileKBytes;
  static constexpr u32 kStageBytes = kBytesA + kBytesB;
  /** Stages the ring keeps beside transposed tiles of `rows` rows of A. */
  static constexpr __host__ __device__ u32 room_beside(u32 rows) {
    return (kDecodeSharedMax - kConsumers * rows * kDecodeTRow * 2 - 1024 - 2 * kDecodeMaxStages * 8) / kStageBytes;
  }
  /** The transposition in passes of kCols / kPasses rows of A, where whole transposed tiles would leave the
   * ring fewer than 4 stages (the wide tiles past 200 rows of A): the fewest passes of whole groups of 8 rows
   * that leave it 4 (2 at 208 and 224 rows, 3 at 216, 4 at 256). */
  static constexpr __host__ __device__ u32 fewest_passes() {
    for (u32 p = 1; p < kCols / 8; ++p)
      if (kCols % (8 * p) == 0 && room_beside(kCols / p) >= 4) return p;
    return kCols / 8;
  }
  static constexpr u32 kPasses = fewest_passes();
  static_assert(kCols % (8 * kPasses) == 0, "a pass is whole groups of 8 rows of A");
  static constexpr u32 kTransposedBytes = kConsumers * (kCols / kPasses) * kDecodeTRow * 2;
  static constexpr u32 kRoomBeside = room_beside(kCols / kPasses);
  /** Where the transposed tiles beside the ring would leave it few stages, one consumer of a plain GEMM
   * transposes its tile in a stage the producer leaves unloaded after each step (the step's hole): the
   * shared memory buys a stage more (80 to 192 rows of A; matmul()'s tiles of 128 and of 136 to 192 rows by
   * 8: 9 stages at 128 rows, 7 at 192, one more than beside). Else the transposed tiles lie beside the
   * ring, which loads the next tile meanwhile. */
  static constexpr bool kHole = kConsumers == 1 && !kAllReduce && kRoomBeside < kDecodeHoleBelowStages;
  static_assert(!kHole || kTransposedBytes <= kStageBytes, "a stage holds the transposed tile");
  static constexpr u32 kEpilogueBytes = kHole ? 0 : kTransposedBytes;
  static constexpr u32 kRoom = (kDecodeSharedMax - kEpilogueBytes - 1024 - 2 * kDecodeMaxStages * 8) / kStageBytes;
  static constexpr u32 kStages = kRoom < kDecodeMaxStages ? kRoom : kDecodeMaxStages;
  static constexpr u32 kSharedBytes = kStages * kStageBytes + kEpilogueBytes + 2 * kStages * 8 + 1024;
  static_assert(kStages >= 4 && kSharedBytes <= kDecodeSharedMax, "the ring fits Hopper's shared memory");
};

/** The decode GEMM's by-value argument. Layout shared with src/ops/gemm/decode-gemm.ts (DECODE_ARGS_LAYOUT,
 * test/gemm-layout.test.ts). */
struct DecodeArgs {
  void* d;                // output, row-major [m, n] bf16, row stride ldd elements
  u64 ldd;
  u32 m, n, k;
  u32 tiles_n;            // blocks of 64 kConsumers rows of B
  u32 tiles_m;            // kCols-row blocks of A, rounded up to a multiple of kPair
  u32 splits;             // slices of K per tile, 1 to the k-blocks
  float* split_ws;        // split-K: [tiles][slices][consumers][kCols / 2][128] f32
  u32* split_counters;    // split-K: one per tile, zero before the launch and after it
  const float* scale_a;   // fp8 per-tensor scales, null for 1
  const float* scale_b;
  WaitEnv env;            // kAllReduce: bounds the flag waits (or the mailbox polls); env.rank names this rank
  void* recv[kMaxWorld];  // kAllReduce: rank p's receive buffer, world slots of [m, n] bf16 (or its mailbox)
  u32* flags[kMaxWorld];  // kAllReduce: rank p's flags, [world][tiles][consumers]
  u32* epoch;             // kAllReduce: [calls so far, CTAs that read it] (this rank's, zero at first)
  u32 world, rank;
  MailboxState* mailbox;  // kAllReduce through the Lamport mailbox (recv[p]: rank p's mailbox), else null
  u64 cap;                // the mailbox: bytes a slot spans, its header included
  u64 tag_word;           // the mailbox: this call's CallTag
  u64 tag_shape;
};
static_assert(sizeof(DecodeArgs) == 280, "DecodeArgs layout is shared with the host (test/gemm-layout.test.ts)");

/** The first row of A (and of D) tile-row tm reads: tm * kCols, but the last tile-row moved back to end at
 * row m, so that its box lies inside A (a box mostly past the tensor loads far slower: TMA's zero fill,
 * bench/decode-shapes.mjs); it then repeats rows the tile-row before it owns, and stores only its own,
 * from tm * kCols on. */
template <u32 kCols>
__device__ __forceinline__ u32 decode_row_a(u32 m, u32 tm) {
  return m > kCols && tm * kCols + kCols > m ? m - kCols : tm * kCols;
}

/** Rows of A's box (host: decodeBoxRows): kCols, or m rounded up to 8 when A has fewer rows than a tile.
 * The stage's rows past the box keep stale data, which feeds only rows of D past m, never stored. */
template <u32 kCols>
__device__ __forceinline__ u32 decode_box_rows(u32 m) {
  return m < kCols ? (m + 7) & ~7u : kCols;
}

/** A consumer's epilogue: its 64 x kCols share rounded to bf16, transposed into rows of D in shared memory
 * `t` (kCols / kPasses rows of kDecodeTRow), then handed row chunk by row chunk to `chunk(row of D, column of
 * D, 16-byte chunk)` for the rows < m and columns < n (kCols / kPasses x 8 chunks a pass, spread over the
 * consumer's 128 threads); the share's columns of D start at col0. In kPasses passes of kCols / kPasses rows
 * of A each, where shared memory holds no whole transposed tile beside the ring (DecodeRing::kPasses). */
template <u32 kCols, u32 kPasses, typename Chunk>
__device__ __forceinline__ void decode_transpose(const DecodeArgs& a, __nv_bfloat16* t, const float (&acc)[kCols / 2],
                                                 float scale, u32 row_a, u32 row_lo, u32 col0, u32 consumer, u32 wg_thread,
                                                 Chunk chunk) {
  constexpr u32 kPassRows = kCols / kPasses;
  const u32 r = 16 * (wg_thread / 32) + (wg_thread % 32) / 4;
#pragma unroll
  for (u32 pass = 0; pass < kPasses; ++pass) {
    named_barrier(1 + consumer, 128);  // the previous pass's or tile's chunks were all read
#pragma unroll
    for (u32 j = pass * kPassRows / 8; j < (pass + 1) * kPassRows / 8; ++j) {
      const u32 c = 8 * j + 2 * (wg_thread % 4) - pass * kPassRows;
      t[c * kDecodeTRow + r] = __float2bfloat16_rn(acc[4 * j] * scale);
      t[(c + 1) * kDecodeTRow + r] = __float2bfloat16_rn(acc[4 * j + 1] * scale);
      t[c * kDecodeTRow + r + 8] = __float2bfloat16_rn(acc[4 * j + 2] * scale);
      t[(c + 1) * kDecodeTRow + r + 8] = __float2bfloat16_rn(acc[4 * j + 3] * scale);
    }
    named_barrier(1 + consumer, 128);
    for (u32 u = wg_thread; u < kPassRows * 8; u += 128) {
      const u32 row = row_a + pass * kPassRows + u / 8;
      const u32 col = col0 + (u % 8) * 8;
      if (row >= row_lo && row < a.m && col < a.n)
        chunk(row, col, *reinterpret_cast<const uint4*>(t + (u / 8) * kDecodeTRow + (u % 8) * 8));
    }
  }
}

/** Chunks of a consumer's share one thread sums at a time, their loads in flight together (one at a time,
 * each waited for, was most of the all-reduce epilogue). */
constexpr u32 kSumBatch = 4;

/** A thread's batch of chunks of its consumer's share: chunk u[j] of the share is row[j], col[j] of D, and
 * valid[j] says it lies in D and in this tile-row's own rows. */
struct SumBatch {
  bool valid[kSumBatch];
  u32 u[kSumBatch], row[kSumBatch], col[kSumBatch];
};

/** A consumer's share summed over the ranks in rank order in f32 (sum_ranks_bf16x8's arithmetic) and rounded
 * once to bf16 into d, a batch of chunks per thread at a time: `load(src, batch, v)` sets v[j] to the
 * batch's chunk j of rank src's partial wherever it is valid. */
template <u32 kCols, typename Load>
__device__ __forceinline__ void decode_sum_share(const DecodeArgs& a, u32 row_a, u32 row_lo, u32 col0, u32 wg_thread,
                                                 Load load) {
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(a.d);
  for (u32 u0 = wg_thread; u0 < kCols * 8; u0 += 128 * kSumBatch) {
    SumBatch b;
#pragma unroll
    for (u32 j = 0; j < kSumBatch; ++j) {
      b.u[j] = u0 + 128 * j;
      b.row[j] = row_a + b.u[j] / 8, b.col[j] = col0 + (b.u[j] % 8) * 8;
      b.valid[j] = b.u[j] < kCols * 8 && b.row[j] >= row_lo && b.row[j] < a.m && b.col[j] < a.n;
    }
    float sum[kSumBatch][8];
    for (u32 src = 0; src < a.world; ++src) {
      uint4 v[kSumBatch];
      load(src, b, v);
#pragma unroll
      for (u32 j = 0; j < kSumBatch; ++j)
        if (b.valid[j]) add_rank_bf16x8(sum[j], v[j], src == 0);
    }
#pragma unroll
    for (u32 j = 0; j < kSumBatch; ++j)
      if (b.valid[j]) *reinterpret_cast<uint4*>(out + u64(b.row[j]) * a.ldd + b.col[j]) = round_bf16x8(sum[j]);
  }
}

/** GEMM + all-reduce's exchange of a consumer's share of one tile (see the contract): the rounded share from
 * `t` into slot `rank` of every rank's receive buffer, its flags, the wait, and the rank-order sum into d. */
template <u32 kCols, u32 kConsumers, u32 kPasses>
__device__ __forceinline__ void decode_all_reduce(const DecodeArgs& a, __nv_bfloat16* t, const float (&acc)[kCols / 2],
                                                  float scale, u32 tile, u32 row_a, u32 row_lo, u32 col0, u32 epoch,
                                                  u32 consumer, u32 wg_thread) {
  const u64 slot = u64(a.m) * a.n;
  // Launched programmatically behind the barrier that says every rank finished reading its receive
  // buffer: the main loop ran under it, the pushes wait for it (at once if nothing is before this grid).
  asm volatile("griddepcontrol.wait;" ::: "memory");
  decode_transpose<kCols, kPasses>(a, t, acc, scale, row_a, row_lo, col0, consumer, wg_thread, [&](u32 row, u32 col, uint4 v) {
    const u64 at = u64(a.rank) * slot + u64(row) * a.n + col;
    for (u32 p = 0; p < a.world; ++p) *reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(a.recv[p]) + at) = v;
  });
  named_barrier(1 + consumer, 128);
  // Flag (source rank, tile, consumer) of an owner's [world][tiles][kConsumers] flags.
  const auto flag = [&](u32 owner, u32 src) { return a.flags[owner] + (u64(src) * a.tiles_m * a.tiles_n + tile) * kConsumers + consumer; };
  if (wg_thread == 0) raise_and_await_shares(a.env, a.world, a.rank, epoch, tile, flag);
  named_barrier(1 + consumer, 128);
  // This rank's own partial is read from the transposed tile, which still holds it (in one pass; after
  // several, it holds the last pass only, and the own partial is read back from this rank's slot like the
  // others').
  const __nv_bfloat16* recv = static_cast<const __nv_bfloat16*>(a.recv[a.rank]);
  decode_sum_share<kCols>(a, row_a, row_lo, col0, wg_thread, [&](u32 src, const SumBatch& b, uint4 (&v)[kSumBatch]) {
#pragma unroll
    for (u32 j = 0; j < kSumBatch; ++j) {
      if (!b.valid[j]) continue;
      v[j] = kPasses == 1 && src == a.rank ? *reinterpret_cast<const uint4*>(t + (b.u[j] / 8) * kDecodeTRow + (b.u[j] % 8) * 8)
                           : __ldcg(reinterpret_cast<const uint4*>(recv + src * slot + u64(b.row[j]) * a.n + b.col[j]));
    }
  });
}

/** GEMM + all-reduce's exchange of a consumer's share of one tile through the Lamport mailbox (see the
 * contract; one pass: the transposed tile holds the whole share): the rounded share, cleaned of the sentinel,
 * into slot `rank` of buffer `buf` of every peer's mailbox, then (decode_sum_share) the
 * rank-order sum as each peer's chunks arrive in this rank's mailbox (this rank's own from the transposed
 * tile), rounded once to bf16 into d. */
template <u32 kCols>
__device__ __forceinline__ void decode_lamport_all_reduce(const DecodeArgs& a, __nv_bfloat16* t,
                                                          const float (&acc)[kCols / 2], float scale, u32 row_a,
                                                          u32 row_lo, u32 col0, u32 buf, u32 consumer, u32 wg_thread) {
  using Clean = Sentinel<__nv_bfloat16>;
  const auto at = [&](u32 row, u32 col) { return 2 * (u64(row) * a.n + col); };
  decode_transpose<kCols, 1>(a, t, acc, scale, row_a, row_lo, col0, consumer, wg_thread, [&](u32 row, u32 col, uint4 v) {
    const u32x4 x = Clean::clean(u32x4{v.x, v.y, v.z, v.w});
    for (u32 k = 1; k < a.world; ++k) {
      const u32 p = (a.rank + k) % a.world;
      st_volatile_128(lamport_slot_at(a.recv[p], a.world, buf, a.rank, a.cap) + at(row, col), x);
    }
  });
  named_barrier(1 + consumer, 128);  // the transposed tile is whole: this rank's own partial is read from it
  decode_sum_share<kCols>(a, row_a, row_lo, col0, wg_thread, [&](u32 src, const SumBatch& b, uint4 (&v)[kSumBatch]) {
    u32x4 x[kSumBatch];
    if (src == a.rank) {
#pragma unroll
      for (u32 j = 0; j < kSumBatch; ++j)
        if (b.valid[j]) x[j] = Clean::clean(*reinterpret_cast<const u32x4*>(t + (b.u[j] / 8) * kDecodeTRow + (b.u[j] % 8) * 8));
    } else {
      const u8* from = lamport_slot_at(a.recv[a.rank], a.world, buf, src, a.cap);
      bool pending[kSumBatch];
#pragma unroll
      for (u32 j = 0; j < kSumBatch; ++j) pending[j] = b.valid[j];
      bounded_wait(a.env, src, a.tag_word, [&] {
        bool all = true;
#pragma unroll
        for (u32 j = 0; j < kSumBatch; ++j) {
          if (!pending[j]) continue;
          x[j] = ld_volatile_128(from + at(b.row[j], b.col[j]));
          pending[j] = Clean::any(x[j]);
          all = all && !pending[j];
        }
        return all;
      });
    }
#pragma unroll
    for (u32 j = 0; j < kSumBatch; ++j) v[j] = uint4{x[j].x, x[j].y, x[j].z, x[j].w};
  });
}

/** Split-K's fix-up for a consumer's share of its tile slice (see the contract; every consumer takes
 * part): true if this CTA counted last, acc then holding the sum of the slices in slice order. */
template <u32 kRegs, u32 kConsumers>
__device__ __forceinline__ bool decode_split_fixup(const DecodeArgs& a, float (&acc)[kRegs], u32 tile, u32 split,
                                                   u32 consumer, u32 wg_thread, u32& last) {
  constexpr u32 kSlice = kConsumers * kRegs * 128;  // floats of one tile slice
  const u32 slices = a.splits;
  float* base = a.split_ws + u64(tile * slices) * kSlice + consumer * (kRegs * 128) + wg_thread;
  float* mine = base + split * kSlice;
#pragma unroll
  for (u32 r = 0; r < kRegs; ++r) __stcg(mine + r * 128, acc[r]);
  named_barrier(kDecodeAllConsumers, kConsumers * 128);
  if (consumer == 0 && wg_thread == 0) {
    u32 before;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(before) : "l"(a.split_counters + tile) : "memory");
    const bool is_last = before == slices - 1;
    if (is_last) a.split_counters[tile] = 0;  // the next launch is stream-ordered after this one
    *reinterpret_cast<volatile u32*>(&last) = is_last;
  }
  named_barrier(kDecodeAllConsumers, kConsumers * 128);
  if (!*reinterpret_cast<volatile u32*>(&last)) return false;
  // In place (this CTA's own slice read back too) and 16 registers at a time: a second array of kRegs,
  // or every load in flight at once, would spill the wide kernel.
#pragma unroll
  for (u32 r0 = 0; r0 < kRegs; r0 += 16) {
#pragma unroll 1
    for (u32 q = 0; q < slices; ++q) {
#pragma unroll
      for (u32 r = r0; r < (r0 + 16 < kRegs ? r0 + 16 : kRegs); ++r) {
        const float v = __ldcg(base + q * kSlice + r * 128);
        acc[r] = q == 0 ? v : acc[r] + v;
      }
    }
  }
  return true;
}

/** Step i's tile (see the contract): slice, tile index, tile-row of A, tile-column of B. */
struct DecodeStep {
  u32 split, tile, tm, tn;
};
template <u32 kPair>
__device__ __forceinline__ DecodeStep decode_step(const DecodeArgs& a, u32 i, u32 cta_rank) {
  const u32 unit = i / a.splits, unit_rows = a.tiles_m / kPair;
  const u32 tm = kPair * (unit % unit_rows) + cta_rank, tn = unit / unit_rows;
  return {i - unit * a.splits, tn * a.tiles_m + tm, tm, tn};
}

template <typename Elem, u32 kCols, u32 kConsumers, u32 kPair, bool kAllReduce>
__global__ void __launch_bounds__(128 * (1 + kConsumers), 1)
    decode_gemm(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                const __grid_constant__ DecodeArgs args) {
  static_assert(kPair == 1 || (kPair == 2 && kConsumers == 2), "pairs of wide tiles: each CTA loads one consumer's rows of B");
  using R = DecodeRing<kCols, kConsumers, kAllReduce>;
  constexpr u32 kRowsB = kConsumers * kDecodeRowsB;
  constexpr u32 kTileK = kTileKBytes / sizeof(Elem);
  constexpr u32 kRegs = kCols / 2;
  constexpr u32 kStages = R::kStages;

  extern __shared__ u8 shared_raw[];
  u8* ring = reinterpret_cast<u8*>((reinterpret_cast<u64>(shared_raw) + 1023) & ~u64(1023));
  const auto stage_b = [&](u32 s) { return ring + s * R::kStageBytes; };
  const auto stage_a = [&](u32 s) { return ring + s * R::kStageBytes + R::kBytesB; };
  __nv_bfloat16* transposed = reinterpret_cast<__nv_bfloat16*>(ring + kStages * R::kStageBytes);
  u64* full = reinterpret_cast<u64*>(ring + kStages * R::kStageBytes + R::kEpilogueBytes);
  u64* empty = full + kStages;
  __shared__ u32 split_last;
  __shared__ u32 epoch;
  __shared__ u32 lamport_buf, lamport_prev;  // the mailbox's buffer of this call and of the one before

  const u32 splits = args.splits;
  const u32 count = args.tiles_m * args.tiles_n * splits >> (kPair - 1);
  const u32 first = blockIdx.x / kPair, stride = gridDim.x / kPair;
  const u32 cta_rank = kPair > 1 ? cluster_cta_rank() : 0;
  const u64 pipeline_ns = kPipelineTimeoutNs + args.env.timeout_ns;
  // GEMM + all-reduce through the Lamport mailbox (one-pass tiles only; the host never passes a mailbox
  // otherwise), else through the staging buffer's slots and flags.
  const bool lamport = kAllReduce && R::kPasses == 1 && args.mailbox != nullptr;
  if (threadIdx.x == 0) {
    for (u32 s = 0; s < kStages; ++s) {
      mbar_init(full + s, 1);
      mbar_init(empty + s, kConsumers * kPair);  // one arrival per consumer warpgroup of the cluster
    }
    mbar_init_fence();
    if (kAllReduce && !lamport) epoch = call_epoch(args.epoch);
  }
  __syncthreads();
  if constexpr (kPair > 1) cluster_sync();  // the peer's barriers exist before a load or arrival reaches them
  const u32 kblocks = (args.k + kTileK - 1) / kTileK;

  // With two consumers, 384 threads leave 168 registers each, fewer than a consumer's accumulators and
  // fix-up need, and with three 512 leave 128: the producer's warpgroup gives its registers to them.
  constexpr bool kShiftRegisters = kConsumers > 1;
  if (threadIdx.x < 128) {
    if constexpr (kShiftRegisters) set_max_registers_dec<40>();
    if (threadIdx.x != 0) {
      // The Lamport mailbox's bookkeeping, by the producer warpgroup's idle warps 1 to 3, off the producer's
      // and the consumers' path: the call count read (the buffers of this call and the one before, shared
      // with the consumers through a named barrier) and this CTA counted at once (the last CTA to count,
      // once every CTA has read it, counts the call and the bytes each slot receives: the next-but-one call
      // refills them); this rank's header to every peer and the check of theirs (CTA 0); the previous
      // call's slots refilled (every CTA).
      if (lamport && threadIdx.x >= 32) {
        u64 call = 0;
        if (threadIdx.x == 32) {
          call = read_calls(args.mailbox, kLamport);
          lamport_buf = static_cast<u32>(call % 3);
          lamport_prev = static_cast<u32>((call + 2) % 3);
        }
        named_barrier(kDecodeLamportBar, 96 + kConsumers * 128);
        const CallTag tag{args.tag_word, args.tag_shape};
        if (threadIdx.x == 32)
          count_block(args.mailbox, kLamport, lamport_buf, 2 * u64(args.m) * args.n, gridDim.x, call);
        else if (blockIdx.x == 0 && threadIdx.x == 33)
          send_headers_from(args.recv, args.world, args.rank, lamport_buf, args.cap, tag);
        else if (blockIdx.x == 0 && threadIdx.x == 34)
          check_headers_from(args.recv[args.rank], args.world, args.rank, args.env, lamport_buf, args.cap, tag);
        else if (threadIdx.x >= kDecodeFirstRefill)
          refill_from(args.recv[args.rank], args.world, args.mailbox, args.rank, lamport_prev, args.cap,
                      u64(blockIdx.x) * kDecodeRefills + threadIdx.x - kDecodeFirstRefill, u64(gridDim.x) * kDecodeRefills);
      }
      return;
    }
    RingCursor<kStages> at;
    const auto wait_free = [&] {
      mbar_wait<true>(empty + at.stage, at.parity ^ 1, pipeline_ns, args.env, stall_phase(kStallStageEmpty, at.stage));
    };
    for (u32 i = first; i < count; i += stride) {
      const DecodeStep st = decode_step<kPair>(args, i, cta_rank);
      const u32 kb_end = split_begin(kblocks, splits, st.split + 1);
      for (u32 kb = split_begin(kblocks, splits, st.split); kb < kb_end; ++kb, at.advance()) {
        const u32 s = at.stage;
        wait_free();
        mbar_arrive_expect_tx(full + s, R::kBytesB + decode_box_rows<kCols>(args.m) * kTileKBytes);
        if constexpr (kPair > 1) {
          const u32 half = cta_rank * kDecodeRowsB;
          tma_load_2d_multicast(stage_b(s) + half * kTileKBytes, &map_b, full + s, kb * kTileK, st.tn * kRowsB + half,
                                0b11);
        } else {
          tma_load_2d(stage_b(s), &map_b, full + s, kb * kTileK, st.tn * kRowsB);
        }
        tma_load_2d(stage_a(s), &map_a, full + s, kb * kTileK, decode_row_a<kCols>(args.m, st.tm));
      }
      if constexpr (R::kHole) {  // the step's hole: handed to the consumer once free, nothing loaded
        wait_free();
        mbar_arrive(full + at.stage);
        at.advance();
      }
    }
    if constexpr (kPair > 1) cluster_sync();
    return;
  }

  if constexpr (kShiftRegisters) set_max_registers_inc<kConsumers == 2 ? 232 : 152>();
  const u32 consumer = threadIdx.x / 128 - 1;
  const u32 wg_thread = threadIdx.x % 128;
  if (lamport) named_barrier(kDecodeLamportBar, 96 + kConsumers * 128);  // lamport_buf is written
  __nv_bfloat16* my_transposed = transposed + consumer * (kCols / R::kPasses) * kDecodeTRow;
  float scale = 1.0f;
  if (args.scale_a) scale *= *args.scale_a;
  if (args.scale_b) scale *= *args.scale_b;
  // A stage is free once this CTA's consumers and, paired, the peer's have released it.
  const auto release = [&](u32 s) {
    if (wg_thread == 0) mbar_arrive(empty + s);
    if (kPair > 1 && wg_thread == 1) mbar_arrive_cluster(empty + s, cta_rank ^ 1);
  };
  RingCursor<kStages> at;
  const auto wait_full = [&] {
    mbar_wait<true>(full + at.stage, at.parity, pipeline_ns, args.env, stall_phase(kStallStageFull, at.stage));
  };
  for (u32 i = first; i < count; i += stride) {
    const DecodeStep st = decode_step<kPair>(args, i, cta_rank);
    const u32 split = st.split, tile = st.tile, tm = st.tm, tn = st.tn;
    const u32 nkb = split_begin(kblocks, splits, split + 1) - split_begin(kblocks, splits, split);
    float acc[kRegs];
    // Zeroing here rather than with wgmma's scale-d keeps ptxas from serialising the MMAs (C7515).
#pragma unroll
    for (u32 r = 0; r < kRegs; ++r) acc[r] = 0.0f;
    u32 previous = 0;
    for (u32 kb = 0; kb < nkb; ++kb, at.advance()) {
      wait_full();
      const u32 b0 = smem_addr(stage_b(at.stage) + consumer * kDecodeRowsB * kTileKBytes);
      const u32 a0 = smem_addr(stage_a(at.stage));
      wgmma_fence();
#pragma unroll
      for (u32 step = 0; step < kTileKBytes / 32; ++step)
        mma_m64n(acc, kmajor_sw128_desc(b0 + 32 * step), kmajor_sw128_desc(a0 + 32 * step), 1u, Elem{});
      wgmma_commit();
      wgmma_wait<1>();
      if (kb > 0) release(previous);
      previous = at.stage;
    }
    wgmma_wait<0>();
    fence_accumulators(acc);
    release(previous);
    __nv_bfloat16* t = my_transposed;
    if constexpr (R::kHole) {
      wait_full();
      t = reinterpret_cast<__nv_bfloat16*>(stage_b(at.stage));
    }
    if (splits == 1 ||
        decode_split_fixup<kRegs, kConsumers>(args, acc, tile, split, consumer, wg_thread, split_last)) {
      const u32 col0 = tn * kRowsB + consumer * kDecodeRowsB;
      const u32 row_a = decode_row_a<kCols>(args.m, tm), row_lo = tm * kCols;
      if constexpr (kAllReduce) {
        // `lamport` is false at compile time for tiles of several passes, which never go through the mailbox.
        if (lamport)
          decode_lamport_all_reduce<kCols>(args, t, acc, scale, row_a, row_lo, col0, lamport_buf, consumer, wg_thread);
        else
          decode_all_reduce<kCols, kConsumers, R::kPasses>(args, t, acc, scale, tile, row_a, row_lo, col0, epoch,
                                                           consumer, wg_thread);
      } else {
        __nv_bfloat16* out = static_cast<__nv_bfloat16*>(args.d);
        decode_transpose<kCols, R::kPasses>(args, t, acc, scale, row_a, row_lo, col0, consumer, wg_thread,
                                [&](u32 row, u32 col, uint4 v) {
          *reinterpret_cast<uint4*>(out + row * args.ldd + col) = v;
        });
      }
    }
    if constexpr (R::kHole) {
      // Every thread is done with the hole, and its ordinary stores there come before the TMA loads that
      // will land there next (another proxy).
      fence_proxy_async_shared();
      named_barrier(1 + consumer, 128);
      release(at.stage);
      at.advance();
    }
  }
  if constexpr (kPair > 1) cluster_sync();
}

}  // namespace gemm
}  // namespace symmkit
