// symmkit/gemm/hopper_gemm.cuh: persistent, warp-specialised Hopper GEMM, D[m, n] = A[m, k] * B[n, k]^T
// (both operands K-major), f32 accumulation, with compile-time fusion hooks.
//
// B may also be stored [k, n] (kBKMajor = false, bf16 only): TMA then loads it N-major and wgmma
// transposes it on the fly.
//
// Contract. One CTA per SM walks tiles of 128 x 256 in the order the Order policy gives. Warpgroup 0 is
// the producer: one thread waits for a free stage (empty mbarrier), asks the Ready policy whether the
// tile's rows of A may be read, and issues two TMA loads that complete the stage's full mbarrier.
// Warpgroups 1 and 2 are consumers: each waits for a full stage, issues four wgmma over its 64 rows, and
// releases the stage once wgmma_wait<1> proves the previous stage's MMAs retired, so one k-block of MMAs
// is always in flight. Stage ring: kStages deep; the producer waits for phase parity ph ^ 1 on empty
// (the first pass finds it complete), consumers wait for parity ph on full. After the last k-block a
// consumer drains its MMAs, releases the stage, and either stores its 64 x 256 share through shared
// memory with TMA stores (StoreBf16: sub-tile buffers double-buffered per consumer, named barriers 2 and
// 3, each buffer waited for with bulk_wait_read before it is rewritten, and all of them before the CTA
// exits) or hands each accumulator pair to Epilogue::store, then Epilogue::tile_done once both consumers
// stored the tile (named barrier 1 over 256 threads).
// Bounds: TMA fills rows and columns past the tensor with zeros (so partial tiles and a K tail add
// nothing) and the epilogue skips rows >= m and columns >= n. Every wait is bounded (gemm/tma.cuh for
// the pipeline, sync/wait.cuh for ready flags). Barriers are initialised by each launch and no state
// outlives it beyond what the Epilogue writes, so graph replays are independent.
#pragma once
#include "symmkit/gemm/tma.cuh"
#include "symmkit/gemm/wgmma.cuh"
#include "symmkit/sync/wait.cuh"

namespace symmkit {
namespace gemm {

constexpr u32 kTileM = 128;
constexpr u32 kTileN = 256;
constexpr u32 kTileKBytes = 128;  // one 128-byte swizzle row of K per tile row
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

/** Launch arguments besides the tensor maps. A policy ignores the fields it does not use. The layout is
 * shared with src/ops/gemm-programs.ts (GEMM_ARGS_LAYOUT). */
struct GemmArgs {
  void* d;                 // output, row-major [m, n], row stride ldd elements (bf16, or f32 to accumulate)
  u64 ldd;
  u32 m, n, k;
  u32 tiles_m, tiles_n;
  u32 group_m;             // GroupedOrder: tile-rows walked together, for L2 reuse of B
  const u32* tile_list;    // ListOrder: linear tile ids (tm * tiles_n + tn) in compute order
  u32 tile_count;          // ListOrder: entries in tile_list
  u32 flag_rows;           // RowFlagsReady: rows of A covered by one flag
  const u32* ready_flags;  // RowFlagsReady: one flag per flag_rows rows of A
  u32 ready_value;         // RowFlagsReady: a flag is ready once it is >= ready_value
  u32* tile_signals;       // SignalingStore: one counter per tile, +1 (release, system scope) once stored
  const float* scale_a;    // per-tensor scales (fp8), null for 1
  const float* scale_b;
  WaitEnv env;             // bounds the waits on ready flags
};
static_assert(sizeof(GemmArgs) == 128, "GemmArgs layout is shared with the host");

// ---- Order: which tile the i-th step of the persistent loop computes --------------------------------

/** Groups of group_m tile-rows, column by column inside a group: a wave of CTAs shares B tiles in L2. */
struct GroupedOrder {
  static __device__ __forceinline__ u32 count(const GemmArgs& a) { return a.tiles_m * a.tiles_n; }
  static __device__ __forceinline__ void tile(const GemmArgs& a, u32 i, u32& tm, u32& tn) {
    const u32 per_group = a.group_m * a.tiles_n;
    const u32 first = (i / per_group) * a.group_m;
    const u32 rows = min(a.tiles_m - first, a.group_m);
    const u32 r = i % per_group;
    tm = first + r % rows;
    tn = r / rows;
  }
};

/** The caller's list of tile ids (e.g. this rank's own rows first, then in arrival order). */
struct ListOrder {
  static __device__ __forceinline__ u32 count(const GemmArgs& a) { return a.tile_count; }
  static __device__ __forceinline__ void tile(const GemmArgs& a, u32 i, u32& tm, u32& tn) {
    const u32 id = a.tile_list[i];
    if (id >= a.tiles_m * a.tiles_n) __trap();  // a bad list must not silently skip work
    tm = id / a.tiles_n;
    tn = id % a.tiles_n;
  }
};

// ---- Ready: may the producer read tile-row tm of A yet? ----------------------------------------------

struct NoWait {
  static __device__ __forceinline__ void wait(const GemmArgs&, u32) {}
};

/** Waits (acquire, system scope) until every flag covering the tile's rows of A reaches ready_value;
 * flags are raised by a copy engine (cuStreamWriteValue32 after the copy) or by a peer's release store.
 * The proxy fence then orders those acquires before the TMA loads that read the rows. A timeout record
 * names the flag index in its `peer` field and ready_value in `phase`. */
struct RowFlagsReady {
  static __device__ __forceinline__ void wait(const GemmArgs& a, u32 tm) {
    const u32 first_row = tm * kTileM;
    const u32 last_row = min(first_row + kTileM, a.m) - 1;
    for (u32 f = first_row / a.flag_rows; f <= last_row / a.flag_rows; ++f) {
      const u32* flag = a.ready_flags + f;
      bounded_wait(a.env, f, a.ready_value, [&] { return ld_sys<Order::Acquire>(flag) >= a.ready_value; });
    }
    fence_proxy_async();
  }
};

// ---- Epilogue: where an accumulator pair goes ---------------------------------------------------------

__device__ __forceinline__ void store_bf16x2(const GemmArgs& a, u32 row, u32 col, float v0, float v1) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(v0, v1);
  *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(a.d) + row * a.ldd + col) = pair;
}

/** bf16 into d through shared memory and TMA stores (map_d), which drain while the next tile's main
 * loop runs. */
struct StoreBf16 {
  static constexpr bool kTmaStore = true;
};

/** bf16 into d, then tile_signals[tile] += 1 with release semantics at system scope, so a peer that
 * acquires the counter sees the whole tile. */
struct SignalingStore {
  static constexpr bool kTmaStore = false;
  static __device__ __forceinline__ void store(const GemmArgs& a, u32 row, u32 col, float v0, float v1) {
    store_bf16x2(a, row, col, v0, v1);
  }
  static __device__ __forceinline__ void tile_done(const GemmArgs& a, u32 tile, u32 consumer_thread) {
    named_barrier(1, 256);
    if (consumer_thread == 0) {
      fence_acq_rel_sys();
      asm volatile("red.relaxed.sys.global.add.u32 [%0], 1;" ::"l"(a.tile_signals + tile) : "memory");
    }
  }
};

/** f32 atomic accumulation into d (float, row stride ldd): several GEMMs, or several ranks through their
 * peers' mappings, may add into one buffer. */
struct AccumulateF32 {
  static constexpr bool kTmaStore = false;
  static __device__ __forceinline__ void store(const GemmArgs& a, u32 row, u32 col, float v0, float v1) {
    float* p = static_cast<float*>(a.d) + row * a.ldd + col;
    atomicAdd(p, v0);
    atomicAdd(p + 1, v1);
  }
  static __device__ __forceinline__ void tile_done(const GemmArgs&, u32, u32) {}
};

// ---- The kernel -------------------------------------------------------------------------------------

/** Offset of byte `b` (0..127) of row `r` in a 128B-swizzled tile: 16-byte units XOR the row mod 8. */
__device__ __forceinline__ u32 swizzle128(u32 r, u32 b) { return r * 128 + ((((b >> 4) ^ r) & 7) << 4) + (b & 15); }

/** A consumer's 64 x 256 share through its two sub-tile buffers. Thread wg_thread holds rows
 * 16 * warp + lane / 4 (+8) and, in sub-tile c, columns 8 * j + 2 * (lane % 4) (+1) for j in 0..7. */
__device__ __forceinline__ void tma_store_epilogue(const TensorMap* map_d, u8* buffers, const float (&acc)[128],
                                                   float scale, u32 consumer, u32 wg_thread, i32 x, i32 y) {
  const u32 warp = wg_thread / 32, lane = wg_thread % 32;
  const u32 r = warp * 16 + lane / 4;
#pragma unroll
  for (u32 c = 0; c < kTileN / kSubTileCols; ++c) {
    u8* buf = buffers + (c % 2) * kSubTileBytes;
    if (wg_thread == 0) bulk_wait_read<1>();  // the store issued from this buffer two sub-tiles ago
    named_barrier(2 + consumer, 128);
#pragma unroll
    for (u32 j = 0; j < 8; ++j) {
      const float* v = &acc[4 * (8 * c + j)];
      const u32 b = 16 * j + 4 * (lane % 4);
      *reinterpret_cast<__nv_bfloat162*>(buf + swizzle128(r, b)) = __floats2bfloat162_rn(v[0] * scale, v[1] * scale);
      *reinterpret_cast<__nv_bfloat162*>(buf + swizzle128(r + 8, b)) = __floats2bfloat162_rn(v[2] * scale, v[3] * scale);
    }
    fence_proxy_async_shared();
    named_barrier(2 + consumer, 128);
    if (wg_thread == 0) {
      tma_store_2d(map_d, buf, x + c * kSubTileCols, y);
      bulk_commit();
    }
  }
}

template <typename Elem, typename Order, typename Ready, typename Epilogue, bool kBKMajor = true>
__global__ void __launch_bounds__(kThreads, 1)
    hopper_gemm(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                const __grid_constant__ TensorMap map_d, const GemmArgs args) {
  constexpr u32 kTileK = kTileKBytes / sizeof(Elem);
  constexpr u32 kBytesA = kTileM * kTileKBytes;
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
  u64* full = reinterpret_cast<u64*>(epilogue + kEpilogueBytes);
  u64* empty = full + kStages;

  const u32 warpgroup = threadIdx.x / 128;
  const u32 wg_thread = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (u32 s = 0; s < kStages; ++s) {
      mbar_init(full + s, 1);
      mbar_init(empty + s, 2);  // one arrival per consumer warpgroup
    }
    mbar_init_fence();
  }
  __syncthreads();

  const u32 kblocks = (args.k + kTileK - 1) / kTileK;
  const u32 count = Order::count(args);

  if (warpgroup == 0) {
    set_max_registers_dec<40>();
    if (wg_thread != 0) return;
    u32 it = 0;
    for (u32 i = blockIdx.x; i < count; i += gridDim.x) {
      u32 tm, tn;
      Order::tile(args, i, tm, tn);
      Ready::wait(args, tm);
      for (u32 kb = 0; kb < kblocks; ++kb, ++it) {
        const u32 s = it % kStages;
        mbar_wait(empty + s, ((it / kStages) & 1) ^ 1);
        mbar_arrive_expect_tx(full + s, kStageBytes);
        tma_load_2d(tiles_a + s * kBytesA, &map_a, full + s, kb * kTileK, tm * kTileM);
        if constexpr (kBKMajor) {
          tma_load_2d(tiles_b + s * kBytesB, &map_b, full + s, kb * kTileK, tn * kTileN);
        } else {
#pragma unroll
          for (u32 j = 0; j < kTileN / 64; ++j)
            tma_load_2d(tiles_b + s * kBytesB + j * kBoxBytesB, &map_b, full + s, tn * kTileN + j * 64, kb * kTileK);
        }
      }
    }
    return;
  }

  set_max_registers_inc<232>();
  const u32 consumer = warpgroup - 1;
  float scale = 1.0f;
  if (args.scale_a) scale *= *args.scale_a;
  if (args.scale_b) scale *= *args.scale_b;
  const u32 warp = wg_thread / 32, lane = wg_thread % 32;

  float acc[128];
  u32 it = 0;
  for (u32 i = blockIdx.x; i < count; i += gridDim.x) {
    u32 tm, tn;
    Order::tile(args, i, tm, tn);
    // Zeroing here rather than with wgmma's scale-d keeps ptxas from serialising the MMAs (C7515).
#pragma unroll
    for (u32 z = 0; z < 128; ++z) acc[z] = 0.0f;
    for (u32 kb = 0; kb < kblocks; ++kb, ++it) {
      const u32 s = it % kStages;
      mbar_wait(full + s, (it / kStages) & 1);
      const u32 a0 = smem_addr(tiles_a + s * kBytesA + consumer * 64 * kTileKBytes);
      const u32 b0 = smem_addr(tiles_b + s * kBytesB);
      wgmma_fence();
#pragma unroll
      for (u32 step = 0; step < kSteps; ++step) {
        if constexpr (kBKMajor)
          mma_m64n256(acc, kmajor_sw128_desc(a0 + 32 * step), kmajor_sw128_desc(b0 + 32 * step), 1u, Elem{});
        else
          mma_m64n256_bt(acc, kmajor_sw128_desc(a0 + 32 * step), mnmajor_sw128_desc(b0 + 2048 * step, kBoxBytesB), 1u);
      }
      wgmma_commit();
      wgmma_wait<1>();
      if (kb > 0 && wg_thread == 0) mbar_arrive(empty + (it + kStages - 1) % kStages);
    }
    wgmma_wait<0>();
    fence_accumulators(acc);
    if (wg_thread == 0) mbar_arrive(empty + (it + kStages - 1) % kStages);

    if constexpr (Epilogue::kTmaStore) {
      tma_store_epilogue(&map_d, epilogue + consumer * 2 * kSubTileBytes, acc, scale, consumer, wg_thread,
                         tn * kTileN, tm * kTileM + consumer * 64);
    } else {
      const u32 row = tm * kTileM + consumer * 64 + warp * 16 + lane / 4;
      const u32 col0 = tn * kTileN + (lane % 4) * 2;
#pragma unroll
      for (u32 j = 0; j < 32; ++j) {
        const u32 col = col0 + j * 8;
        if (col < args.n) {
          if (row < args.m) Epilogue::store(args, row, col, acc[4 * j] * scale, acc[4 * j + 1] * scale);
          if (row + 8 < args.m) Epilogue::store(args, row + 8, col, acc[4 * j + 2] * scale, acc[4 * j + 3] * scale);
        }
      }
      Epilogue::tile_done(args, tm * args.tiles_n + tn, threadIdx.x - 128);
    }
  }
  // A TMA store reads shared memory after it is issued: the CTA must not exit before that is done.
  if constexpr (Epilogue::kTmaStore) {
    if (wg_thread == 0) bulk_wait_read<0>();
  }
}

}  // namespace gemm
}  // namespace symmkit
