// symmkit/gemm/hopper_gemm.cuh: persistent, warp-specialised Hopper GEMM, D[m, n] = A[m, k] * B[n, k]^T
// (both operands K-major), f32 accumulation, with compile-time fusion hooks.
//
// B may also be stored [k, n] (kBKMajor = false, bf16 only): TMA then loads it N-major and wgmma
// transposes it on the fly.
//
// Contract. One CTA per SM walks tiles of 128 x 256 in the order the Order policy gives; a Tile names
// the rows of A it reads (row0, rows), its column block and, for the sharded order, the rank its
// output belongs to. Warpgroup 0 is the producer: one thread waits for a free stage (empty mbarrier),
// asks the Ready policy whether the tile's rows of A may be read, and issues two TMA loads that
// complete the stage's full mbarrier. Rows that lie wholly in FusionParams' second A (a2: this rank's
// own shard, read where the caller keeps it) are loaded from there, without asking Ready. Warpgroups 1
// and 2 are consumers: each waits for a full stage, issues four wgmma over its 64 rows, and releases
// the stage once wgmma_wait<1> proves the previous stage's MMAs retired, so one k-block of MMAs is
// always in flight. Stage ring: kStages deep; the producer waits for phase parity ph ^ 1 on empty (the
// first pass finds it complete), consumers wait for parity ph on full. After the last k-block a
// consumer drains its MMAs, releases the stage and hands its 64 x 256 share to Epilogue::finish:
//   StoreBf16      bf16 through shared memory and TMA stores (sub-tile buffers double-buffered per
//                  consumer, named barriers 2 and 3, each buffer waited for with bulk_wait_read before
//                  it is rewritten, and all of them before the CTA exits);
//   SignalingStore bf16 pairs from registers, then +1 on the tile's counter (named barrier 1);
//   AccumulateF32  f32 atomic adds from registers;
//   ScatterReduce  (with ShardedOrder) GEMM + reduce-scatter: see its comment;
//   AllReduceTiles GEMM + all-reduce: see its comment.
// Split-K (kSplitK; S = 2^args.split_log2 >= 1, a power of two so that steps map to slices by shifts and
// masks, not divisions; the fix-up costs the consumers registers, so kernels without kSplitK leave it
// out): each tile of the order is S consecutive steps, one per slice of its k-blocks, so the slices run
// side by side on S CTAs. A consumer that finishes a slice writes its f32 share to split_ws[slice]; the
// CTA then counts the slice on the tile's counter (a named barrier, then one acq_rel add at gpu scope).
// The CTA that counts last sums the S shares in slice order (read back from split_ws, its own too), which
// gives the same bits whichever CTA is last, resets the counter for the next launch and hands the sum to
// the Epilogue; the others move on. Nothing waits. The host launches a split GEMM as one wave, one CTA per
// tile slice (GEMM + all-reduce relies on it), with a scratch of its stream's that no other launch uses at
// the same time.
// Bounds: TMA fills rows and columns past the tensor with zeros (so partial tiles and a K tail add
// nothing) and every epilogue skips rows past the tile's rows and columns >= n. Every wait is bounded
// (gemm/tma.cuh for the pipeline, sync/wait.cuh for flags). Barriers are initialised by each launch and
// no state outlives it beyond what the Epilogue writes (ScatterReduce's and AllReduceTiles' flags keep their
// call's epoch, which no later call waits for), so graph replays are independent.
#pragma once
#include "symmkit/gemm/fusion.cuh"
#include "symmkit/gemm/tma.cuh"
#include "symmkit/gemm/wgmma.cuh"
#include "symmkit/sync/barrier.cuh"

namespace symmkit {
namespace gemm {

constexpr u32 kTileM = 128;
constexpr u32 kTileN = 256;
constexpr u32 kStages = 4;
constexpr u32 kThreads = 384;
constexpr u32 kStageBytes = (kTileM + kTileN) * kTileKBytes;
/** TMA-store epilogue: each consumer stores 64 x 64 bf16 sub-tiles through two 8 KiB buffers. */
constexpr u32 kSubTileCols = 64;
constexpr u32 kSubTileBytes = 64 * kSubTileCols * 2;
constexpr u32 kEpilogueBytes = 2 * 2 * kSubTileBytes;
/** Dynamic shared memory a launch needs: the ring, the epilogue buffers, the barriers, and slack to
 * align the ring to 1 KiB (the 128-byte swizzle repeats every 1 KiB). */
constexpr u32 kSharedBytes = kStages * kStageBytes + kEpilogueBytes + 2 * kStages * 8 + 1024;

/** The stage ring and epilogue buffers of a launch. kNarrow (split kernels for m <= 64, where only the
 * first consumer has rows): A's boxes 64 rows high and one consumer's epilogue buffers, which leaves room
 * for a fifth stage, so 160 KB of B rather than 128 are in flight per SM for a GEMM that streams B. */
template <bool kNarrow>
struct Ring {
  static constexpr u32 kRowsA = kNarrow ? 64 : kTileM;
  static constexpr u32 kStages = kNarrow ? 5 : 4;
  static constexpr u32 kStageBytes = (kRowsA + kTileN) * kTileKBytes;
  static constexpr u32 kEpilogueBytes = (kNarrow ? 1 : 2) * 2 * kSubTileBytes;
  static constexpr u32 kSharedBytes = kStages * kStageBytes + kEpilogueBytes + 2 * kStages * 8 + 1024;
};
static_assert(Ring<false>::kSharedBytes == kSharedBytes, "the wide ring is the default one");
static_assert(Ring<true>::kSharedBytes <= 227 * 1024, "a narrow ring fits Hopper's shared memory");

/** Launch arguments besides the tensor maps. A policy ignores the fields it does not use. The layout is
 * shared with src/ops/gemm/programs.ts (GEMM_ARGS_LAYOUT). */
struct GemmArgs {
  void* d;                 // output, row-major [m, n], row stride ldd elements (bf16, or f32 to accumulate)
  u64 ldd;
  u32 m, n, k;
  u32 tiles_m, tiles_n;
  u32 group_m;             // GroupedOrder, ShardedOrder: tile-rows walked together, for L2 reuse of B
  const u32* tile_list;    // ListOrder: linear tile ids (tm * tiles_n + tn) in compute order
  u32 tile_count;          // ListOrder: entries in tile_list
  u32 flag_rows;           // RowFlagsReady: rows of A covered by one flag
  const u32* ready_flags;  // RowFlagsReady: one flag per flag_rows rows of A
  u32 ready_value;         // RowFlagsReady: a flag is ready once it is >= ready_value
  u32 tm_rotate;           // GroupedOrder: tile-row tm is walked as if it were (tm - tm_rotate) mod tiles_m
  u32* tile_signals;       // SignalingStore: one counter per tile, +1 (release, system scope) once stored
  const float* scale_a;    // per-tensor scales (fp8), null for 1
  const float* scale_b;
  WaitEnv env;             // bounds the waits on flags; env.rank names this rank in a timeout record
  float* split_ws;         // split-K: f32 partials, [splits][m][n] (row stride n)
  u32* split_counters;     // split-K: one per tile, zero before the launch and left zero after it
  u32 split_log2;          // split-K: 2^split_log2 slices of K per tile, at most the k-blocks (0: none)
};
static_assert(sizeof(GemmArgs) == 152, "GemmArgs layout is shared with the host (test/gemm-layout.test.ts)");

/** What the fused operations add to a launch (one by-value parameter; zero where unused). Layout shared
 * with src/ops/gemm/programs.ts (FUSION_PARAMS_LAYOUT). */
struct alignas(64) FusionParams {
  TensorMap a2;                   // rows [a2_row0, a2_row0 + a2_rows) of A, stored elsewhere (a2_rows > 0)
  TensorMap to_peer[kMaxWorld];   // ScatterReduce: slot `rank` of rank p's receive buffer, [shard_rows, n] bf16
  void* recv[kMaxWorld];          // ScatterReduce: rank p's receive buffer (world slots of [shard_rows, n] bf16)
  u32* flags[kMaxWorld];          // ScatterReduce: rank p's tile flags [world][tiles_per_shard][2]
  u32 a2_row0, a2_rows;
  u32 shard_rows, world;          // ShardedOrder: rows of A (and of the output) each rank owns
  u32 rank, tiles_per_shard;      // ShardedOrder: this rank; output tiles of one shard
  u32* epoch;                     // ScatterReduce: [calls so far, CTAs that read it] (local, zero at first)
};
static_assert(sizeof(FusionParams) == 1344, "FusionParams layout is shared with the host (test/gemm-layout.test.ts)");

/** One output tile: rows [row0, row0 + rows) of A and of D's row space, columns [tn * kTileN, ...), its id
 * (for signals and flags), and the rank whose output it is (ShardedOrder; 0 otherwise). */
struct Tile {
  u32 row0, rows, tn, id, dest;
};

// ---- Order: which tile the i-th step of the persistent loop computes --------------------------------

__device__ __forceinline__ Tile plain_tile(const GemmArgs& a, u32 tm, u32 tn) {
  return Tile{tm * kTileM, min(kTileM, a.m - tm * kTileM), tn, tm * a.tiles_n + tn, 0};
}

/** Groups of `group` tile-rows out of `tiles_m`, column by column inside a group: a wave of CTAs shares
 * B tiles in L2. Step i -> (tile-row, column block). */
__device__ __forceinline__ void grouped_step(u32 i, u32 tiles_m, u32 tiles_n, u32 group, u32& tm, u32& tn) {
  const u32 per_group = group * tiles_n;
  const u32 first = (i / per_group) * group;
  const u32 rows = min(tiles_m - first, group);
  const u32 r = i % per_group;
  tm = first + r % rows;
  tn = r / rows;
}

/** Grouped, starting at tile-row tm_rotate and wrapping: all-gather + GEMM starts at this rank's own rows
 * and then meets the peers' rows in the order their copies land. */
struct GroupedOrder {
  static __device__ __forceinline__ u32 count(const GemmArgs& a, const FusionParams&) { return a.tiles_m * a.tiles_n; }
  static __device__ __forceinline__ Tile tile(const GemmArgs& a, const FusionParams&, u32 i) {
    u32 tm, tn;
    grouped_step(i, a.tiles_m, a.tiles_n, a.group_m, tm, tn);
    tm += a.tm_rotate;
    if (tm >= a.tiles_m) tm -= a.tiles_m;
    return plain_tile(a, tm, tn);
  }
};

/** The caller's list of tile ids (e.g. this rank's own rows first, then in arrival order). */
struct ListOrder {
  static __device__ __forceinline__ u32 count(const GemmArgs& a, const FusionParams&) { return a.tile_count; }
  static __device__ __forceinline__ Tile tile(const GemmArgs& a, const FusionParams&, u32 i) {
    const u32 id = a.tile_list[i];
    if (id >= a.tiles_m * a.tiles_n) __trap();  // a bad list must not silently skip work
    return plain_tile(a, id / a.tiles_n, id % a.tiles_n);
  }
};

/** GEMM + reduce-scatter: A's rows form `world` shards of shard_rows; shard p is rank p's output. Tiles
 * never straddle shards (a shard's last tile-row may be partial). Each shard is cut into bands of
 * group_m tile-rows; band q of every shard is computed before band q + 1 of any, so band q of every shard
 * is complete on every rank at about the same time, early enough for its owner to reduce it while later
 * bands are computed. Inside a band the owners alternate step by step, starting from an offset that
 * depends on the rank and the wave: the ranks send to different owners at each moment (no incast). */
struct ShardedOrder {
  static __device__ __forceinline__ u32 count(const GemmArgs&, const FusionParams& f) { return f.world * f.tiles_per_shard; }
  static __device__ __forceinline__ Tile tile(const GemmArgs& a, const FusionParams& f, u32 i) {
    const u32 band_tiles = a.group_m * a.tiles_n;  // tiles of one full band of one shard
    const u32 band = i / (f.world * band_tiles);
    const u32 first = band * band_tiles;            // the band's first tile within a shard
    const u32 in_band = min(band_tiles, f.tiles_per_shard - first);
    const u32 r = i - band * f.world * band_tiles;  // position within the band, over all shards
    // Each group of `world` consecutive steps takes one tile for every owner, rotated by the wave of the
    // group's first step: in every wave the CTAs alternate between owners, and each CTA between owners
    // from wave to wave, so a CTA's stores to a peer drain while it computes a tile of another owner.
    const u32 dest = (f.rank + r + (i - r % f.world) / gridDim.x) % f.world;
    u32 tml, tn;
    grouped_step(first + r / f.world, f.tiles_per_shard / a.tiles_n, a.tiles_n, a.group_m, tml, tn);
    return Tile{dest * f.shard_rows + tml * kTileM, min(kTileM, f.shard_rows - tml * kTileM), tn, tml * a.tiles_n + tn, dest};
  }
};

// ---- Ready: may the producer read the tile's rows of A yet? ------------------------------------------

struct NoWait {
  static __device__ __forceinline__ void wait(const GemmArgs&, const Tile&) {}
};

/** Waits (acquire, system scope) until every flag covering the tile's rows of A reaches ready_value;
 * flags are raised by a copy engine (cuStreamWriteValue32 after the copy), by a peer's release store, or
 * by a kernel's release add. The proxy fence then orders those acquires before the TMA loads that read
 * the rows. A timeout record names the flag index in its `peer` field (the rank, when one flag covers
 * one rank's shard) and ready_value in `phase`. */
struct RowFlagsReady {
  static __device__ __forceinline__ void wait(const GemmArgs& a, const Tile& t) {
    const u32 last_row = t.row0 + t.rows - 1;
    for (u32 f = t.row0 / a.flag_rows; f <= last_row / a.flag_rows; ++f) {
      const u32* flag = a.ready_flags + f;
      bounded_wait(a.env, f, a.ready_value, [&] { return ld_sys<Order::Acquire>(flag) >= a.ready_value; });
    }
    fence_proxy_async();
  }
};

// ---- Epilogue: where a consumer's share of the tile goes ---------------------------------------------

/** What every epilogue is handed besides the tile and its accumulators. */
struct EpilogueCtx {
  const GemmArgs& args;
  const FusionParams& fusion;
  const TensorMap* map_d;
  u8* buffers;  // this consumer's two sub-tile buffers
  float scale;
  u32 consumer;   // 0 or 1: rows 64 * consumer .. + 63 of the tile
  u32 wg_thread;  // 0..127 within the consumer warpgroup
};

/** Offset of byte `b` (0..127) of row `r` in a 128B-swizzled tile: 16-byte units XOR the row mod 8. */
__device__ __forceinline__ u32 swizzle128(u32 r, u32 b) { return r * 128 + ((((b >> 4) ^ r) & 7) << 4) + (b & 15); }

/** The default value of an output pair: the scaled accumulators rounded to bf16. */
struct Rounded {
  __device__ __forceinline__ __nv_bfloat162 operator()(u32, u32, float v0, float v1) const {
    return __floats2bfloat162_rn(v0, v1);
  }
};

/**
 * A consumer's 64 x 256 share at (column x, row y) of each of the `maps` (count of them), through its two
 * sub-tile buffers and TMA stores, which drain while the next tile's main loop runs. Thread wg_thread holds rows
 * 16 * warp + lane / 4 (+8) and, in sub-tile c, columns 8 * j + 2 * (lane % 4) (+1) for j in 0..7;
 * pair(row, column, v0, v1) gives the bf16 pair stored there (row 0..63 and column 0..255 within the
 * share).
 */
template <typename Pair>
__device__ __forceinline__ void store_share(const EpilogueCtx& c, const TensorMap* maps, u32 count,
                                            const float (&acc)[128], i32 x, i32 y, const Pair& pair) {
  const u32 warp = c.wg_thread / 32, lane = c.wg_thread % 32;
  const u32 r = warp * 16 + lane / 4;
#pragma unroll
  for (u32 s = 0; s < kTileN / kSubTileCols; ++s) {
    u8* buf = c.buffers + (s % 2) * kSubTileBytes;
    if (c.wg_thread == 0) bulk_wait_read<1>();  // the store issued from this buffer two sub-tiles ago
    named_barrier(2 + c.consumer, 128);
#pragma unroll
    for (u32 j = 0; j < 8; ++j) {
      const float* v = &acc[4 * (8 * s + j)];
      const u32 b = 16 * j + 4 * (lane % 4);
      const u32 col = s * kSubTileCols + 8 * j + 2 * (lane % 4);
      *reinterpret_cast<__nv_bfloat162*>(buf + swizzle128(r, b)) = pair(r, col, v[0] * c.scale, v[1] * c.scale);
      *reinterpret_cast<__nv_bfloat162*>(buf + swizzle128(r + 8, b)) = pair(r + 8, col, v[2] * c.scale, v[3] * c.scale);
    }
    fence_proxy_async_shared();
    named_barrier(2 + c.consumer, 128);
    if (c.wg_thread == 0) {
      for (u32 m = 0; m < count; ++m) tma_store_2d(maps + m, buf, x + s * kSubTileCols, y);
      bulk_commit();
    }
  }
}

__device__ __forceinline__ void store_bf16x2(const GemmArgs& a, u32 row, u32 col, float v0, float v1) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(v0, v1);
  *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(a.d) + row * a.ldd + col) = pair;
}

/** Calls f(row, col, v0, v1) for each accumulator pair of the consumer's share inside the tile and the
 * output (scaled values; row and col absolute). */
template <typename F>
__device__ __forceinline__ void for_each_pair(const EpilogueCtx& c, const Tile& t, const float (&acc)[128], F f) {
  const u32 warp = c.wg_thread / 32, lane = c.wg_thread % 32;
  const u32 row = t.row0 + c.consumer * 64 + warp * 16 + lane / 4;
  const u32 row_end = t.row0 + t.rows;
  const u32 col0 = t.tn * kTileN + (lane % 4) * 2;
#pragma unroll
  for (u32 j = 0; j < 32; ++j) {
    const u32 col = col0 + j * 8;
    if (col < c.args.n) {
      if (row < row_end) f(row, col, acc[4 * j] * c.scale, acc[4 * j + 1] * c.scale);
      if (row + 8 < row_end) f(row + 8, col, acc[4 * j + 2] * c.scale, acc[4 * j + 3] * c.scale);
    }
  }
}

/** What an epilogue with no reducing warps and no CTA-wide state starts from. */
struct PlainEpilogue {
  static constexpr bool kReduces = false;
  struct Shared {};
  static __device__ __forceinline__ void init(const FusionParams&, Shared&) {}
  __device__ __forceinline__ void drain(const EpilogueCtx&, Shared&) {}
};

/** bf16 into d through shared memory and TMA stores (map_d), which drain while the next tile's main
 * loop runs. */
struct StoreBf16 : PlainEpilogue {
  __device__ __forceinline__ void finish(const EpilogueCtx& c, const Tile& t, const float (&acc)[128], Shared&) {
    store_share(c, c.map_d, 1, acc, t.tn * kTileN, t.row0 + c.consumer * 64, Rounded{});
  }
  // A TMA store reads shared memory after it is issued: the CTA must not exit before that is done.
  __device__ __forceinline__ void drain(const EpilogueCtx& c, Shared&) {
    if (c.wg_thread == 0) bulk_wait_read<0>();
  }
};

/** bf16 into d, then tile_signals[tile] += 1 with release semantics at system scope, so a peer that
 * acquires the counter sees the whole tile. */
struct SignalingStore : PlainEpilogue {
  __device__ __forceinline__ void finish(const EpilogueCtx& c, const Tile& t, const float (&acc)[128], Shared&) {
    for_each_pair(c, t, acc, [&](u32 row, u32 col, float v0, float v1) { store_bf16x2(c.args, row, col, v0, v1); });
    named_barrier(1, 256);
    if (c.consumer == 0 && c.wg_thread == 0) {
      fence_acq_rel_sys();
      asm volatile("red.relaxed.sys.global.add.u32 [%0], 1;" ::"l"(c.args.tile_signals + t.id) : "memory");
    }
  }
};

/** f32 atomic accumulation into d (float, row stride ldd): several GEMMs, or several ranks through their
 * peers' mappings, may add into one buffer. */
struct AccumulateF32 : PlainEpilogue {
  __device__ __forceinline__ void finish(const EpilogueCtx& c, const Tile& t, const float (&acc)[128], Shared&) {
    for_each_pair(c, t, acc, [&](u32 row, u32 col, float v0, float v1) {
      float* p = static_cast<float*>(c.args.d) + row * c.args.ldd + col;
      atomicAdd(p, v0);
      atomicAdd(p + 1, v1);
    });
  }
};

/** Flag of (source rank, tile, consumer half) in `owner`'s flag array. */
__device__ __forceinline__ u32* exchange_flag(const FusionParams& f, u32 owner, u32 src, u32 id, u32 half) {
  return f.flags[owner] + (u64(src) * f.tiles_per_shard + id) * 2 + half;
}

/**
 * GEMM + reduce-scatter, deterministic (with ShardedOrder). Every tile, this rank's own shard included, is
 * rounded to bf16 (the partial a plain GEMM would store) and stored by TMA into slot `rank` of its owner's
 * receive buffer (FusionParams::to_peer[owner]; the owner's own tiles stay local). Then its flag
 * flags[owner][rank][tile][consumer] is set to this call's epoch in the owner's memory, as a release at
 * system scope. The consumers stay off that fence: at the start of its next finish (or in drain), by when
 * its TMA stores have long completed, a consumer's thread 0 waits for them (bulk_wait, proxy fence) and
 * posts the tile to the signaller, one warp of the producer warpgroup, through shared memory
 * (release/acquire at CTA scope); the signaller fences at system scope and stores the flag.
 *
 * The epoch is the call's number on this rank (call_epoch). Ranks make the same calls, so their epochs
 * agree; a flag from an earlier call holds a smaller epoch, so flags
 * never need resetting.
 *
 * The owner reduces while it computes. A unit is 16 rows of one consumer's half of a tile of this rank's
 * shard; units go in band order to CTA unit % gridDim and, inside the CTA, to whichever warp asks next:
 * two idle warps of the producer warpgroup during the GEMM (all but the last band, which is ready only at
 * the end), then the consumers and the signaller once their tiles are done. For a unit, lane 0 waits
 * (acquire, bounded, naming the rank) for every rank's flag of that half-tile, then the warp sums the
 * ranks' partials (local memory, two ranks' at a time) in f32 in rank order, rounds once to bf16 and
 * writes the output rows. Nobody waits while holding back a flag (posts are flushed before a consumer
 * helps, and the signaller never waits on a peer), so no rank can deadlock another. A receive buffer is
 * rewritten by the next call only after a barrier over the ranks (the host launches one before the GEMM).
 */
struct ScatterReduce {
  static constexpr bool kReduces = true;
  static constexpr u32 kUnitRows = 16;
  /** Units of one consumer's half (64 rows); a tile has two halves, each behind its own flags. */
  static constexpr u32 kUnitsPerHalf = 64 / kUnitRows;
  static constexpr u32 kUnitsPerTile = 2 * kUnitsPerHalf;
  /** What the CTA's warps share: the reduce units handed out, the epoch, and one mailbox per consumer. */
  struct Shared {
    u32 next_unit;
    u32 epoch;
    u32 posted[2], taken[2], finished[2];  // sequence numbers of posts; the signaller's acknowledgements
    u32 dest[2], id[2];
  };
  u32 posts = 0;  // consumer thread 0: posts so far
  bool pending = false;  // consumer thread 0: a tile stored but not yet posted
  u32 pending_dest = 0, pending_id = 0;

  static __device__ __forceinline__ u32 ld_acquire_cta(const u32* p) {
    u32 v;
    asm volatile("ld.acquire.cta.shared.u32 %0, [%1];" : "=r"(v) : "r"(smem_addr(p)) : "memory");
    return v;
  }
  static __device__ __forceinline__ void st_release_cta(u32* p, u32 v) {
    asm volatile("st.release.cta.shared.u32 [%0], %1;" ::"r"(smem_addr(p)), "r"(v) : "memory");
  }

  /** Consumer thread 0: the pending tile's stores are complete; hand it to the signaller. */
  __device__ __forceinline__ void flush(const EpilogueCtx& c, Shared& sh) {
    if (c.wg_thread != 0 || !pending) return;
    bulk_wait<0>();
    fence_proxy_async();
    // The signaller took the previous post long ago (a fence takes microseconds, a tile tens).
    const u64 start = global_timer_ns();
    while (ld_acquire_cta(&sh.taken[c.consumer]) != posts)
      check_stall(c.args.env, global_timer_ns() - start, kPipelineTimeoutNs + c.args.env.timeout_ns,
                  stall_phase(kStallHandoff, c.consumer), posts);
    sh.dest[c.consumer] = pending_dest;
    sh.id[c.consumer] = pending_id;
    st_release_cta(&sh.posted[c.consumer], ++posts);
    pending = false;
  }

  __device__ __forceinline__ void finish(const EpilogueCtx& c, const Tile& t, const float (&acc)[128], Shared& sh) {
    const FusionParams& f = c.fusion;
    flush(c, sh);
    const i32 y = t.row0 - t.dest * f.shard_rows + c.consumer * 64;  // row within the shard
    store_share(c, &f.to_peer[t.dest], 1, acc, t.tn * kTileN, y, Rounded{});
    if (c.wg_thread == 0) {
      pending = true;
      pending_dest = t.dest;
      pending_id = t.id;
    }
  }

  __device__ __forceinline__ void drain(const EpilogueCtx& c, Shared& sh) {
    flush(c, sh);
    if (c.wg_thread == 0) {
      bulk_wait_read<0>();
      st_release_cta(&sh.finished[c.consumer], 1);
    }
  }

  /** The signaller (lane 0 of one producer-side warp): raises each posted tile's flag until both
   * consumers finished and every post was taken. */
  static __device__ __forceinline__ void signal(const FusionParams& f, Shared& sh) {
    u32 taken[2] = {0, 0};
    for (;;) {
      bool idle = true;
      bool done = true;
#pragma unroll
      for (u32 c = 0; c < 2; ++c) {
        const bool finished = ld_acquire_cta(&sh.finished[c]) != 0;
        const u32 posted = ld_acquire_cta(&sh.posted[c]);
        if (posted != taken[c]) {
          fence_acq_rel_sys();
          st_sys<Order::Relaxed>(exchange_flag(f, sh.dest[c], f.rank, sh.id[c], c), sh.epoch);
          st_release_cta(&sh.taken[c], ++taken[c]);
          idle = false;
        }
        done = done && finished && ld_acquire_cta(&sh.posted[c]) == taken[c];
      }
      if (done) return;
      if (idle) __nanosleep(64);
    }
  }

  static __device__ __forceinline__ void init(const FusionParams& f, Shared& sh) {
    sh = {0, call_epoch(f.epoch), {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}};
  }

  /**
   * One warp reduces units of this CTA until none is left (or, with kStopAtLastBand, until the next is in
   * the last band): kRows rows at a time, the partials of two ranks loaded together. `next` counts the
   * units this CTA handed out.
   */
  template <u32 kRows, bool kStopAtLastBand>
  static __device__ __forceinline__ void reduce(const GemmArgs& a, const FusionParams& f, u32* next, u32 lane,
                                                u32 epoch) {
    const u32 units = f.tiles_per_shard * kUnitsPerTile;
    const u32 band_tiles = a.group_m * a.tiles_n;
    const u32 last_band = (f.tiles_per_shard - 1) / band_tiles;
    const u64 slot = u64(f.shard_rows) * a.n;
    const __nv_bfloat16* recv = static_cast<const __nv_bfloat16*>(f.recv[f.rank]);
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(a.d);
    for (;;) {
      u32 j = 0;
      if (lane == 0) {
        if constexpr (kStopAtLastBand) {
          // Take the next unit only if it is not in the last band: compare-and-swap, not add.
          j = *reinterpret_cast<volatile u32*>(next);
          for (;;) {
            const u32 g = blockIdx.x + gridDim.x * j;
            if (g >= units || (g / kUnitsPerTile) / band_tiles == last_band) {
              j = ~0u;
              break;
            }
            const u32 seen = atomicCAS(next, j, j + 1);
            if (seen == j) break;
            j = seen;
          }
        } else {
          j = atomicAdd(next, 1u);
        }
      }
      j = __shfl_sync(0xffffffffu, j, 0);
      if (j == ~0u) return;
      const u32 g = blockIdx.x + gridDim.x * j;
      if (g >= units) return;
      const u32 t = g / kUnitsPerTile, half = (g / kUnitsPerHalf) % 2;
      u32 tml, tn;
      grouped_step(t, f.tiles_per_shard / a.tiles_n, a.tiles_n, a.group_m, tml, tn);
      const u32 id = tml * a.tiles_n + tn;
      if (lane == 0) {
        for (u32 src = 0; src < f.world; ++src) {
          const u32* fl = exchange_flag(f, f.rank, src, id, half);
          bounded_wait(a.env, src, id, [&] {
            if (ld_sys<Order::Acquire>(fl) == epoch) return true;
            __nanosleep(100);
            return false;
          });
        }
      }
      __syncwarp();
      // Within the half whose flags were awaited: a unit never reads rows another flag covers.
      const u32 row0 = tml * kTileM + half * 64 + (g % kUnitsPerHalf) * kUnitRows;
      const u32 col = tn * kTileN + lane * 8;
      const u32 rows = row0 < f.shard_rows ? min(kUnitRows, f.shard_rows - row0) : 0;
      if (col >= a.n) continue;
      for (u32 r = 0; r < rows; r += kRows) {
        float sum[kRows][8];
        for (u32 src = 0; src < f.world; src += 2) {
          const bool pair = src + 1 < f.world;
          u32x4 v[2][kRows];
#pragma unroll
          for (u32 q = 0; q < kRows; ++q) {
            if (r + q < rows) {
              const u64 at = u64(row0 + r + q) * a.n + col;
              v[0][q] = *reinterpret_cast<const u32x4*>(recv + src * slot + at);
              if (pair) v[1][q] = *reinterpret_cast<const u32x4*>(recv + (src + 1) * slot + at);
            }
          }
#pragma unroll
          for (u32 h = 0; h < 2; ++h) {
            if (h == 1 && !pair) break;
#pragma unroll
            for (u32 q = 0; q < kRows; ++q) {
              const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(&v[h][q]);
#pragma unroll
              for (u32 e = 0; e < 4; ++e) {
                const float2 x = __bfloat1622float2(x2[e]);
                if (src + h == 0) {
                  sum[q][2 * e] = x.x;
                  sum[q][2 * e + 1] = x.y;
                } else {
                  sum[q][2 * e] += x.x;
                  sum[q][2 * e + 1] += x.y;
                }
              }
            }
          }
        }
#pragma unroll
        for (u32 q = 0; q < kRows; ++q) {
          if (r + q >= rows) break;
          u32x4 o;
          __nv_bfloat162* h2 = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
          for (u32 e = 0; e < 4; ++e) h2[e] = __floats2bfloat162_rn(sum[q][2 * e], sum[q][2 * e + 1]);
          *reinterpret_cast<u32x4*>(out + u64(row0 + r + q) * a.n + col) = o;
        }
      }
    }
  }
};

/**
 * GEMM + all-reduce, one-shot and deterministic (with GroupedOrder, split-K or not). Every rank computes
 * every tile of its own partial product (its slice of K). A consumer rounds its share to bf16 (the partial
 * a plain GEMM would store) and stores it by TMA into slot `rank` of every rank's receive buffer
 * (FusionParams::to_peer[p]; world slots of [m, n] bf16), waits until the stores are complete, and sets
 * its flag flags[p][rank][tile][consumer] to this call's epoch (call_epoch) on every rank p: proxy fence,
 * then a release at system scope. Then its thread 0 waits (acquire, bounded, naming the rank) for every
 * rank's flag of the same share in this rank's array, and the warpgroup sums the world partials from this
 * rank's receive buffer in f32 in rank order, rounds once to bf16 and writes its rows of d (row stride
 * ldd): every rank writes the same bits, the bits of this GEMM's bf16 output all-reduced in rank order.
 *
 * No deadlock: a consumer pushes its share before it waits, and waits only for the peers' shares of the
 * same tile, which their CTAs compute at the same step of the same order; what those CTAs do first are
 * steps of earlier tiles (a split launch is one wave, a CTA per tile slice), so by induction over the
 * tiles every wait ends. A receive buffer is rewritten by the
 * next call only after a barrier over the ranks (the host launches one before the GEMM).
 */
struct AllReduceTiles {
  static constexpr bool kReduces = false;
  struct Shared {
    u32 epoch;
  };
  static __device__ __forceinline__ void init(const FusionParams& f, Shared& sh) { sh.epoch = call_epoch(f.epoch); }

  __device__ __forceinline__ void finish(const EpilogueCtx& c, const Tile& t, const float (&acc)[128], Shared& sh) {
    const FusionParams& f = c.fusion;
    if (t.rows <= c.consumer * 64) return;  // the share lies wholly past the last row
    const u32 row0 = t.row0 + c.consumer * 64;
    store_share(c, f.to_peer, f.world, acc, t.tn * kTileN, row0, Rounded{});
    if (c.wg_thread == 0) {
      bulk_wait<0>();
      fence_proxy_async();
      raise_and_await_shares(c.args.env, f.world, f.rank, sh.epoch, t.id,
                             [&f, id = t.id, half = c.consumer](u32 owner, u32 src) { return exchange_flag(f, owner, src, id, half); });
    }
    named_barrier(2 + c.consumer, 128);
    const u32 rows = min(64u, t.rows - c.consumer * 64);
    const u32 col = t.tn * kTileN + (c.wg_thread % 32) * 8;
    if (col >= c.args.n) return;
    const u64 slot = u64(c.args.m) * c.args.n;
    const __nv_bfloat16* recv = static_cast<const __nv_bfloat16*>(f.recv[f.rank]);
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(c.args.d);
    for (u32 r = c.wg_thread / 32; r < rows; r += 4)
      *reinterpret_cast<uint4*>(out + u64(row0 + r) * c.args.ldd + col) =
          sum_ranks_bf16x8(recv, slot, u64(row0 + r) * c.args.n + col, f.world);
  }
  // The TMA stores completed in finish (bulk_wait<0>) before the flags were raised.
  __device__ __forceinline__ void drain(const EpilogueCtx&, Shared&) {}
};

// ---- Split-K ----------------------------------------------------------------------------------------

/**
 * The last CTA's sum of a tile of few rows: the 256 consumer threads take the tile's valid rows by float4
 * columns, whatever the accumulators' layout, so a unit's slices are loaded together (kChunk at a time:
 * the accumulators keep their registers through the fix-up, wgmma pins them); the sum, in slice order,
 * replaces slice 0. Needs n % 4 == 0.
 */
template <u32 kChunk>
__device__ __forceinline__ void sum_slices(const GemmArgs& a, const Tile& t, u32 tid, u32 slices) {
  const u32 per_row = min(kTileN, a.n - t.tn * kTileN) / 4;
  const u32 units = t.rows * per_row;
  const u64 stride = u64(a.m) * a.n;
  for (u32 u = tid; u < units; u += 256) {
    float* p = a.split_ws + u64(t.row0 + u / per_row) * a.n + t.tn * kTileN + (u % per_row) * 4;
    float4 sum;
    for (u32 q0 = 0; q0 < slices; q0 += kChunk) {
      float4 v[kChunk];
#pragma unroll
      for (u32 q = 0; q < kChunk; ++q)
        if (q0 + q < slices) v[q] = __ldcg(reinterpret_cast<const float4*>(p + (q0 + q) * stride));
#pragma unroll
      for (u32 q = 0; q < kChunk; ++q) {
        if (q0 + q >= slices) break;
        if (q0 + q == 0) {
          sum = v[0];
        } else {
          sum.x += v[q].x;
          sum.y += v[q].y;
          sum.z += v[q].z;
          sum.w += v[q].w;
        }
      }
    }
    __stcg(reinterpret_cast<float4*>(p), sum);
  }
}

/**
 * Split-K's fix-up for a consumer's share of tile t, slice `split` (see the contract): writes the share to
 * split_ws[split], counts the CTA's slice on the tile's counter and returns whether it was the last. The
 * last CTA's acc then holds the sum of the slices in slice order. Both consumers take
 * part (named barrier 1); `last` is a word of shared memory. One thread releases the CTA's writes (after
 * the barrier that orders them before it) and acquires the others', as CUTLASS's semaphores do.
 */
__device__ __forceinline__ bool split_fixup(const GemmArgs& a, const Tile& t, u32 split, float (&acc)[128],
                                            u32 consumer, u32 wg_thread, u32& last) {
  const u32 warp = wg_thread / 32, lane = wg_thread % 32;
  const u32 row = t.row0 + consumer * 64 + warp * 16 + lane / 4;
  const u32 col0 = t.tn * kTileN + (lane % 4) * 2;
  const bool rows[2] = {row < t.row0 + t.rows, row + 8 < t.row0 + t.rows};
  // Slice q's pair (row + 8h, col0 + 8j) is at slice(q)[8h * n + 8j]: one base pointer per slice, so the
  // unrolled loops address by immediate offsets.
  const auto slice = [&](u32 q) { return a.split_ws + (u64(q) * a.m + row) * a.n + col0; };
  float* mine = slice(split);
#pragma unroll
  for (u32 j = 0; j < 32; ++j)
#pragma unroll
    for (u32 h = 0; h < 2; ++h)
      if (col0 + 8 * j < a.n && rows[h])
        __stcg(reinterpret_cast<float2*>(mine + 8 * h * a.n + 8 * j), make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]));
  named_barrier(1, 256);
  if (consumer == 0 && wg_thread == 0) {
    u32 before;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(before) : "l"(a.split_counters + t.id) : "memory");
    const u32 slices = 1u << a.split_log2;
    const bool is_last = before == slices - 1;
    if (is_last) a.split_counters[t.id] = 0;  // the next launch is stream-ordered after this one
    *reinterpret_cast<volatile u32*>(&last) = is_last;
  }
  named_barrier(1, 256);
  if (!*reinterpret_cast<volatile u32*>(&last)) return false;
  const u32 slices = 1u << a.split_log2;
  if (t.rows <= 32) {
    // Few rows: summed by columns, every slice of a unit in flight at once, then read back.
    sum_slices<4>(a, t, consumer * 128 + wg_thread, slices);
    named_barrier(1, 256);
    const float* p = slice(0);
#pragma unroll
    for (u32 j = 0; j < 32; ++j)
#pragma unroll
      for (u32 h = 0; h < 2; ++h)
        if (col0 + 8 * j < a.n && rows[h]) {
          const float2 v = __ldcg(reinterpret_cast<const float2*>(p + 8 * h * a.n + 8 * j));
          acc[4 * j + 2 * h] = v.x;
          acc[4 * j + 2 * h + 1] = v.y;
        }
    return true;
  }
  // Many rows: each thread adds its own pairs slice by slice (a bulk staging of the slices through the
  // idle stage ring measured slower: one thread's copies and a barrier per slice).
  const auto add_slice = [&](u32 q, bool first) {
    const float* p = slice(q);
#pragma unroll
    for (u32 j = 0; j < 32; ++j)
#pragma unroll
      for (u32 h = 0; h < 2; ++h) {
        if (col0 + 8 * j >= a.n || !rows[h]) continue;
        const float2 v = __ldcg(reinterpret_cast<const float2*>(p + 8 * h * a.n + 8 * j));
        acc[4 * j + 2 * h] = first ? v.x : acc[4 * j + 2 * h] + v.x;
        acc[4 * j + 2 * h + 1] = first ? v.y : acc[4 * j + 2 * h + 1] + v.y;
      }
  };
  add_slice(0, true);
#pragma unroll 1
  for (u32 q = 1; q < slices; ++q) add_slice(q, false);
  return true;
}

// ---- The kernel -------------------------------------------------------------------------------------

template <typename Elem, typename Order, typename Ready, typename Epilogue, bool kBKMajor = true, bool kSplitK = false,
          bool kNarrow = false>
__global__ void __launch_bounds__(kThreads, 1)
    hopper_gemm(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                const __grid_constant__ TensorMap map_d, const __grid_constant__ GemmArgs args,
                const __grid_constant__ FusionParams fusion) {
  constexpr u32 kTileK = kTileKBytes / sizeof(Elem);
  using R = Ring<kNarrow>;
  static_assert(!kNarrow || kSplitK, "a narrow ring leaves the second consumer idle, which split kernels handle");
  constexpr u32 kStages = R::kStages;
  constexpr u32 kBytesA = R::kRowsA * kTileKBytes;
  constexpr u32 kBytesB = kTileN * kTileKBytes;
  constexpr u32 kSteps = kTileKBytes / 32;  // wgmma k-steps per k-block: 32 bytes of K each
  // B stored [k, n] arrives as kTileN / 64 boxes of 64 n (128 bytes) by kTileK rows of k.
  constexpr u32 kBoxBytesB = kTileK * 128;
  static_assert(kBKMajor || sizeof(Elem) == 2, "wgmma reads fp8 operands K-major only");

  extern __shared__ u8 shared_raw[];
  u8* ring = reinterpret_cast<u8*>((reinterpret_cast<u64>(shared_raw) + 1023) & ~u64(1023));
  u8* tiles_a = ring;
  u8* tiles_b = ring + kStages * kBytesA;
  u8* epilogue = tiles_b + kStages * kBytesB;
  u64* full = reinterpret_cast<u64*>(epilogue + R::kEpilogueBytes);
  u64* empty = full + kStages;

  // ScatterReduce's reducing warps in the producer warpgroup need more than the bare producer's 40.
  constexpr u32 kProducerRegs = Epilogue::kReduces ? 72 : 40;
  constexpr u32 kConsumerRegs = Epilogue::kReduces ? 216 : 232;
  __shared__ typename Epilogue::Shared ep_shared;
  __shared__ u32 split_last;  // split-K: whether this CTA counted a tile's last slice

  const u32 warpgroup = threadIdx.x / 128;
  const u32 wg_thread = threadIdx.x % 128;
  // The ring's waits can sit behind a wait on a peer (ready flags, mailboxes): that one names the peer first.
  const u64 pipeline_ns = kPipelineTimeoutNs + args.env.timeout_ns;
  if (threadIdx.x == 0) {
    Epilogue::init(fusion, ep_shared);
    for (u32 s = 0; s < kStages; ++s) {
      mbar_init(full + s, 1);
      mbar_init(empty + s, 2);  // one arrival per consumer warpgroup
    }
    mbar_init_fence();
  }
  __syncthreads();

  const u32 kblocks = (args.k + kTileK - 1) / kTileK;
  const u32 split_log2 = kSplitK ? args.split_log2 : 0;
  const u32 count = Order::count(args, fusion) << split_log2;
  const u32 slices = 1u << split_log2;
  const u32 split_mask = slices - 1;

  if (warpgroup == 0) {
    set_max_registers_dec<kProducerRegs>();
    if constexpr (Epilogue::kReduces) {
      // Warp 1 signals, then reduces; warps 2 and 3 reduce; warp 0's lane 0 is the producer.
      if (wg_thread >= 32 && wg_thread < 64) {
        if (wg_thread == 32) Epilogue::signal(fusion, ep_shared);
        __syncwarp();
        Epilogue::template reduce<2, false>(args, fusion, &ep_shared.next_unit, wg_thread % 32, ep_shared.epoch);
      } else if (wg_thread >= 64) {
        Epilogue::template reduce<2, true>(args, fusion, &ep_shared.next_unit, wg_thread % 32, ep_shared.epoch);
      }
    }
    if (wg_thread != 0) return;
    u32 it = 0;
    for (u32 i = blockIdx.x; i < count; i += gridDim.x) {
      const u32 split = i & split_mask;
      const Tile t = Order::tile(args, fusion, i >> split_log2);
      if (kNarrow && t.rows > 64) __trap();  // the host launches a narrow ring for m <= 64 only
      const bool second = fusion.a2_rows != 0 && t.row0 >= fusion.a2_row0 &&
                          t.row0 + t.rows <= fusion.a2_row0 + fusion.a2_rows;
      if (!second) Ready::wait(args, t);
      const TensorMap* map = second ? &fusion.a2 : &map_a;
      const i32 ya = second ? t.row0 - fusion.a2_row0 : t.row0;
      const u32 kb_end = split_begin(kblocks, slices, split + 1);
      for (u32 kb = split_begin(kblocks, slices, split); kb < kb_end; ++kb, ++it) {
        const u32 s = it % kStages;
        mbar_wait(empty + s, ((it / kStages) & 1) ^ 1, pipeline_ns, args.env, stall_phase(kStallStageEmpty, s));
        mbar_arrive_expect_tx(full + s, R::kStageBytes);
        tma_load_2d(tiles_a + s * kBytesA, map, full + s, kb * kTileK, ya);
        if constexpr (kBKMajor) {
          tma_load_2d(tiles_b + s * kBytesB, &map_b, full + s, kb * kTileK, t.tn * kTileN);
        } else {
#pragma unroll
          for (u32 j = 0; j < kTileN / 64; ++j)
            tma_load_2d(tiles_b + s * kBytesB + j * kBoxBytesB, &map_b, full + s, t.tn * kTileN + j * 64, kb * kTileK);
        }
      }
    }
    return;
  }

  set_max_registers_inc<kConsumerRegs>();
  const u32 consumer = warpgroup - 1;
  float scale = 1.0f;
  if (args.scale_a) scale *= *args.scale_a;
  if (args.scale_b) scale *= *args.scale_b;
  // A narrow ring has the first consumer's buffers only (past them lie the mbarriers).
  u8* buffers = kNarrow && consumer != 0 ? nullptr : epilogue + consumer * 2 * kSubTileBytes;
  const EpilogueCtx ctx{args, fusion, &map_d, buffers, scale, consumer, wg_thread};
  Epilogue ep;

  float acc[128];
  u32 it = 0;
  for (u32 i = blockIdx.x; i < count; i += gridDim.x) {
    const Tile t = Order::tile(args, fusion, i >> split_log2);
    // The consumers only count k-blocks (the stage ring says where each is); the slice's index is
    // recomputed for the fix-up, to keep registers for the accumulators.
    const u32 split = i & split_mask;
    const u32 nkb = split_begin(kblocks, slices, split + 1) - split_begin(kblocks, slices, split);
    // Zeroing here rather than with wgmma's scale-d keeps ptxas from serialising the MMAs (C7515).
#pragma unroll
    for (u32 z = 0; z < 128; ++z) acc[z] = 0.0f;
    // A consumer whose 64 rows all lie past the last row (m <= 64, split kernels' usual case) skips its
    // MMAs: its stages are released as they arrive and its accumulators stay zero.
    const bool idle = kSplitK && t.rows <= consumer * 64;
    if (idle) {
      // Only the releasing thread waits: the others read nothing from the stages, and a warp that waited
      // here, held to nothing (no wgmma ties the idle warpgroup's warps together), could fall a whole ring
      // behind, see a stage fill twice (the parity back where it was), wait forever and time the kernel out
      // (seen now and then with the narrow ring in split-K).
      if (wg_thread == 0)
        for (u32 kb = 0; kb < nkb; ++kb) {
          mbar_wait(full + (it + kb) % kStages, ((it + kb) / kStages) & 1, pipeline_ns, args.env,
                    stall_phase(kStallStageFull, (it + kb) % kStages));
          mbar_arrive(empty + (it + kb) % kStages);
        }
      it += nkb;
    }
    for (u32 kb = 0; kb < (idle ? 0 : nkb); ++kb, ++it) {
      const u32 s = it % kStages;
      mbar_wait(full + s, (it / kStages) & 1, pipeline_ns, args.env, stall_phase(kStallStageFull, s));
      const u32 a0 = smem_addr(tiles_a + s * kBytesA + consumer * 64 * kTileKBytes);
      const u32 b0 = smem_addr(tiles_b + s * kBytesB);
      wgmma_fence();
#pragma unroll
      for (u32 step = 0; step < kSteps; ++step) {
        if constexpr (kBKMajor)
          mma_m64n(acc, kmajor_sw128_desc(a0 + 32 * step), kmajor_sw128_desc(b0 + 32 * step), 1u, Elem{});
        else
          mma_m64n256_bt(acc, kmajor_sw128_desc(a0 + 32 * step), mnmajor_sw128_desc(b0 + 2048 * step, kBoxBytesB), 1u);
      }
      wgmma_commit();
      wgmma_wait<1>();
      if (kb > 0 && wg_thread == 0) mbar_arrive(empty + (it + kStages - 1) % kStages);
    }
    wgmma_wait<0>();
    fence_accumulators(acc);
    if (!idle && wg_thread == 0) mbar_arrive(empty + (it + kStages - 1) % kStages);
    if constexpr (kSplitK)
      if (split_mask != 0 && !split_fixup(args, t, split, acc, consumer, wg_thread, split_last)) continue;
    if (kNarrow && idle) continue;  // no epilogue buffers of its own, and no rows to store
    ep.finish(ctx, t, acc, ep_shared);
  }
  ep.drain(ctx, ep_shared);
  if constexpr (Epilogue::kReduces)
    Epilogue::template reduce<8, false>(args, fusion, &ep_shared.next_unit, wg_thread % 32, ep_shared.epoch);
}

}  // namespace gemm
}  // namespace symmkit
