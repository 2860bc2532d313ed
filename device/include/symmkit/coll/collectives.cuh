// symmkit/coll/collectives.cuh: all-reduce (one-shot, two-shot), all-gather, reduce-scatter and
// all-to-all on symmetric memory, pulling from the peers' buffers over NVLink.
//
// Contract. Every rank's input is in its own symmetric buffer (v.buffers[rank]) before anyone reads a
// peer's: either the user's own symmetric tensor (in == nullptr), or copied there by the kernel itself
// from the plain tensor `in` (the op's staging buffer). World size W is a template parameter, so the
// loads from all ranks are independent and in flight together.
// Elements go in groups of N = 16 / sizeof(T): group i is elements [i * N, min(n, i * N + N)), moved as
// one 16-byte vector when whole and aligned, element by element otherwise (the tail, a misaligned view).
// Which block handles group i depends only on i and the launch shape, never on alignment, so the block
// that copies group i in on one rank is the block with the same index that reads it on every rank.
// Reductions accumulate in float32 in rank order 0, 1, ..., W-1 and round once to T (plain adds and
// compares, never contracted into FMA): every rank computes bitwise the same result, vector or element
// path alike, and the host reference (src/ops/coll/reduce.ts) the same again.
// Synchronisation (sync/barrier.cuh), per block b with its own pad slots:
//   start  symm_sync<true, true> after a copy-in: block b's copied groups are released to, and acquired
//          by, block b of every peer, which is the only block that reads them (same mapping). Without a
//          copy-in, symm_sync<false, true>: the data was complete before the kernel began.
//   one-shot, all-gather, reduce-scatter, all-to-all end with symm_sync<true, false>: nobody restages its buffer
//          (the next call's copy-in) while a peer may still be reading it: a kernel completes only when
//          every block met its peers' at this barrier, so whatever the next call's mapping, its copy-in
//          starts after every peer finished reading.
//   two-shot: rank r reduces vector chunk r of the inputs and stores the result into chunk r of every
//          rank's scratch buffer (the staging buffer, or the input itself when the call is in place, so
//          that a caller's symmetric input is never overwritten otherwise); symm_sync<true, true>
//          publishes those stores; then each rank reads only its own scratch buffer. No end barrier: a
//          peer that runs ahead only rewrites its own buffers, and writes into ours only after the next
//          call's start barrier, which we reach after finishing this one. Barriers pair blocks of the
//          same index only, so work that crosses the middle barrier is split into tiles of blockDim.x
//          vectors, tile t always to block t % grid: its writer and its readers met at that barrier.
//          The copy-in uses the same tile rule. No end barrier is needed for the next call's copy-in
//          either: it rewrites our own buffer, which peers read only before the middle barrier, and no
//          peer kernel completes before all our blocks arrived there.
// All pads are idle again at the end, so every kernel here may be captured and replayed as a CUDA graph.
// copy_engine_reduce_scatter is the reduce stage of the copy-engine reduce-scatter and reads local memory
// only: the peers' copy engines pushed their chunks into this rank's staging slots, and the barrier
// kernel that publishes them ran before it in stream order (src/ops/coll/registry.ts).
#pragma once
#include "symmkit/sync/barrier.cuh"

namespace symmkit {

struct OpSum {
  __device__ __forceinline__ float operator()(float a, float b) const { return __fadd_rn(a, b); }
};
struct OpMax {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct OpMin {
  __device__ __forceinline__ float operator()(float a, float b) const { return fminf(a, b); }
};

template <typename T>
struct Vec16 {
  static constexpr u32 N = 16 / sizeof(T);
  __device__ __forceinline__ static void unpack(const u32x4& v, float (&f)[N]) {
    const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
    for (u32 k = 0; k < N; ++k) f[k] = to_float<T>(e[k]);
  }
  __device__ __forceinline__ static u32x4 pack(const float (&f)[N]) {
    u32x4 v;
    T* e = reinterpret_cast<T*>(&v);
#pragma unroll
    for (u32 k = 0; k < N; ++k) e[k] = from_float<T>(f[k]);
    return v;
  }
};

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<u64>(p) & 15) == 0; }

__device__ __forceinline__ u64 global_thread() { return flat_block() * static_cast<u64>(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ u64 grid_threads() { return static_cast<u64>(gridDim.x) * gridDim.y * gridDim.z * blockDim.x; }

/** f = op over ranks 0..W-1, in that order, of the 16-byte groups raw[r]. */
template <typename T, typename Op, u32 W>
__device__ __forceinline__ void reduce_ranks(const u32x4 (&raw)[W], float (&f)[Vec16<T>::N]) {
  Vec16<T>::unpack(raw[0], f);
#pragma unroll
  for (u32 r = 1; r < W; ++r) {
    float g[Vec16<T>::N];
    Vec16<T>::unpack(raw[r], g);
#pragma unroll
    for (u32 k = 0; k < Vec16<T>::N; ++k) f[k] = Op()(f[k], g[k]);
  }
}

/** Reduces vector i of every rank's buffer (from element offset `base`) into f. */
template <typename T, typename Op, u32 W>
__device__ __forceinline__ void reduce_vector(const SymmView& v, u64 base, u64 i, float (&f)[Vec16<T>::N]) {
  u32x4 raw[W];
#pragma unroll
  for (u32 r = 0; r < W; ++r) raw[r] = ld_128(static_cast<const T*>(v.buffers[r]) + base + i * Vec16<T>::N);
  reduce_ranks<T, Op, W>(raw, f);
}

template <typename T, typename Op, u32 W>
__device__ __forceinline__ T reduce_element(const SymmView& v, u64 j) {
  float acc = to_float<T>(static_cast<const T*>(v.buffers[0])[j]);
#pragma unroll
  for (u32 r = 1; r < W; ++r) acc = Op()(acc, to_float<T>(static_cast<const T*>(v.buffers[r])[j]));
  return from_float<T>(acc);
}

/** Elements [i * N, ...) of group i that exist: N, or fewer for the last group. */
template <typename T>
__device__ __forceinline__ u32 group_size(u64 i, u64 n) {
  return static_cast<u32>(min(static_cast<u64>(Vec16<T>::N), n - i * Vec16<T>::N));
}

/** dst[group i] = src[group i]. */
template <typename T>
__device__ __forceinline__ void copy_group(T* dst, const T* src, u64 i, u64 n) {
  const u64 e = i * Vec16<T>::N;
  const u32 c = group_size<T>(i, n);
  if (c == Vec16<T>::N && aligned16(dst + e) && aligned16(src + e)) {
    st_128(dst + e, ld_128(src + e));
  } else {
    for (u32 k = 0; k < c; ++k) dst[e + k] = src[e + k];
  }
}

/** f = op over ranks of group i of every rank's buffer from element `base`; returns the group's size. */
template <typename T, typename Op, u32 W>
__device__ __forceinline__ u32 reduce_group(const SymmView& v, u64 base, u64 i, u64 n, float (&f)[Vec16<T>::N]) {
  const u32 c = group_size<T>(i, n);
  if (c == Vec16<T>::N && ((base * sizeof(T)) & 15) == 0) {
    reduce_vector<T, Op, W>(v, base, i, f);
  } else {
    for (u32 k = 0; k < c; ++k) f[k] = to_float<T>(reduce_element<T, Op, W>(v, base + i * Vec16<T>::N + k));
  }
  return c;
}

/** dst[group i] = f, rounded to T (c elements). */
template <typename T>
__device__ __forceinline__ void store_group(T* dst, u64 i, const float (&f)[Vec16<T>::N], u32 c) {
  const u64 e = i * Vec16<T>::N;
  if (c == Vec16<T>::N && aligned16(dst + e)) {
    st_128(dst + e, Vec16<T>::pack(f));
  } else {
    for (u32 k = 0; k < c; ++k) dst[e + k] = from_float<T>(f[k]);
  }
}

__device__ __forceinline__ u64 ceil_div(u64 a, u64 b) { return (a + b - 1) / b; }

/** The start barrier: releases this block's copy-in when there was one (see the contract). */
__device__ __forceinline__ void start_barrier(const SymmView& v, bool copied_in, const CallTag& tag) {
  if (copied_in) symm_sync<true, true>(v, flat_block(), tag, 0);
  else symm_sync<false, true>(v, flat_block(), tag, 0);
}

template <typename T, typename Op, u32 W>
__global__ void one_shot_all_reduce(const __grid_constant__ SymmView v, const T* in, T* out, u64 n, const CallTag tag) {
  const u64 groups = ceil_div(n, Vec16<T>::N);
  if (in) {
    T* own = static_cast<T*>(v.buffers[v.rank]);
    for (u64 i = global_thread(); i < groups; i += grid_threads()) copy_group(own, in, i, n);
  }
  start_barrier(v, in != nullptr, tag);
  for (u64 i = global_thread(); i < groups; i += grid_threads()) {
    float f[Vec16<T>::N];
    const u32 c = reduce_group<T, Op, W>(v, 0, i, n, f);
    store_group(out, i, f, c);
  }
  symm_sync<true, false>(v, flat_block(), tag, 1);
}

/** The first tile at or after `from` that belongs to this block: tile t belongs to block t % grid. */
__device__ __forceinline__ u64 first_tile(u64 from) {
  const u64 blocks = static_cast<u64>(gridDim.x) * gridDim.y * gridDim.z;
  return from + (flat_block() + blocks - from % blocks) % blocks;
}

template <typename T, typename Op, u32 W>
__global__ void two_shot_all_reduce(const __grid_constant__ SymmView v, const __grid_constant__ SymmView scratch, const T* in,
                                    T* out, u64 n, const CallTag tag) {
  // Groups go in tiles of blockDim.x; tile t belongs to block t % grid on every rank, in the copy-in and
  // in both phases (barriers pair blocks of the same index only).
  const u64 tile = blockDim.x;
  const u64 blocks = static_cast<u64>(gridDim.x) * gridDim.y * gridDim.z;
  const u64 groups = ceil_div(n, Vec16<T>::N);
  if (in) {
    T* own = static_cast<T*>(v.buffers[v.rank]);
    for (u64 t = flat_block(); t * tile < groups; t += blocks) {
      const u64 i = t * tile + threadIdx.x;
      if (i < groups) copy_group(own, in, i, n);
    }
  }
  start_barrier(v, in != nullptr, tag);
  const u64 chunk = ceil_div(groups, W);
  const u64 begin = min(groups, chunk * v.rank);
  const u64 end = min(groups, begin + chunk);
  for (u64 t = first_tile(begin / tile); t * tile < end; t += blocks) {
    const u64 i = t * tile + threadIdx.x;
    if (i < begin || i >= end) continue;
    float f[Vec16<T>::N];
    const u32 c = reduce_group<T, Op, W>(v, 0, i, n, f);
#pragma unroll
    for (u32 r = 0; r < W; ++r) store_group(static_cast<T*>(scratch.buffers[r]), i, f, c);
  }
  symm_sync<true, true>(v, flat_block(), tag, 1);
  const T* mine = static_cast<const T*>(scratch.buffers[v.rank]);
  if (out == mine) return;
  for (u64 t = flat_block(); t * tile < groups; t += blocks) {
    const u64 i = t * tile + threadIdx.x;
    if (i < groups) copy_group(out, mine, i, n);
  }
}

/** out[r * n_bytes ...] = rank r's buffer[0, n_bytes): any dtype, as bytes. */
template <u32 W>
__global__ void all_gather_pull(const __grid_constant__ SymmView v, const u8* in, u8* out, u64 n_bytes, const CallTag tag) {
  const u64 groups = ceil_div(n_bytes, 16);
  if (in) {
    u8* own = static_cast<u8*>(v.buffers[v.rank]);
    for (u64 i = global_thread(); i < groups; i += grid_threads()) copy_group(own, in, i, n_bytes);
  }
  start_barrier(v, in != nullptr, tag);
#pragma unroll
  for (u32 r = 0; r < W; ++r) {
    const u8* src = static_cast<const u8*>(v.buffers[r]);
    for (u64 i = global_thread(); i < groups; i += grid_threads()) copy_group(out + r * n_bytes, src, i, n_bytes);
  }
  symm_sync<true, false>(v, flat_block(), tag, 1);
}

/**
 * All-to-all, as bytes: out[r * chunk, (r + 1) * chunk) = rank r's buffer[rank * chunk, (rank + 1) * chunk)
 * (the input is W chunks, chunk j for rank j). Work items are numbered by distance: item q = d * cg + i
 * (cg 16-byte groups per chunk) is, on rank r, group i of chunk (r + d) mod W for the copy-in, and on the
 * reading rank R group i of R's chunk in rank (R - d) mod W's buffer: the same item, on both sides the
 * job of global thread q mod the grid's threads (every rank launches the same grid). So the block that
 * copied an item in is the one whose peers' same-index blocks read it, as the start barrier requires,
 * and the reads of all W sources spread over the whole grid.
 */
template <u32 W>
__global__ void all_to_all_pull(const __grid_constant__ SymmView v, const u8* in, u8* out, u64 chunk, const CallTag tag) {
  const u64 cg = ceil_div(chunk, 16);
  const u64 threads = grid_threads();
  if (in) {
    u8* own = static_cast<u8*>(v.buffers[v.rank]);
    for (u64 q = global_thread(); q < W * cg; q += threads) {
      const u64 j = (q / cg + v.rank) % W;
      copy_group(own + j * chunk, in + j * chunk, q % cg, chunk);
    }
  }
  start_barrier(v, in != nullptr, tag);
  for (u64 q = global_thread(); q < W * cg; q += threads) {
    const u32 r = static_cast<u32>((v.rank + W - q / cg) % W);
    const u8* src = static_cast<const u8*>(v.buffers[r]) + v.rank * chunk;
    copy_group(out + r * chunk, src, q % cg, chunk);
  }
  symm_sync<true, false>(v, flat_block(), tag, 1);
}

/** out[0, n) = op over ranks of buffer[rank * n, (rank + 1) * n); the input is W * n elements. */
template <typename T, typename Op, u32 W>
__global__ void reduce_scatter_pull(const __grid_constant__ SymmView v, const T* in, T* out, u64 n, const CallTag tag) {
  const u64 groups = ceil_div(n, Vec16<T>::N);
  if (in) {
    T* own = static_cast<T*>(v.buffers[v.rank]);
#pragma unroll
    for (u32 s = 0; s < W; ++s) {
      for (u64 i = global_thread(); i < groups; i += grid_threads()) copy_group(own + s * n, in + s * n, i, n);
    }
  }
  start_barrier(v, in != nullptr, tag);
  const u64 base = static_cast<u64>(v.rank) * n;
  for (u64 i = global_thread(); i < groups; i += grid_threads()) {
    float f[Vec16<T>::N];
    const u32 c = reduce_group<T, Op, W>(v, base, i, n, f);
    store_group(out, i, f, c);
  }
  symm_sync<true, false>(v, flat_block(), tag, 1);
}

/**
 * out[0, n) = op over ranks, in rank order, of chunk r: slots[r * n, (r + 1) * n) as rank r's copy
 * engine pushed it, or `own` (this rank's chunk of its input, never copied) for r == rank.
 */
template <typename T, typename Op, u32 W>
__global__ void copy_engine_reduce_scatter(const T* slots, const T* own, T* out, u64 n, u32 rank) {
  const u64 groups = ceil_div(n, Vec16<T>::N);
  // Chunk r starts r * n elements in: every source is 16-byte aligned at every group, or none is.
  const bool vectors = aligned16(slots) && aligned16(own) && aligned16(out) && ((n * sizeof(T)) & 15) == 0;
  for (u64 i = global_thread(); i < groups; i += grid_threads()) {
    const u64 e = i * Vec16<T>::N;
    const u32 c = group_size<T>(i, n);
    float f[Vec16<T>::N];
    if (c == Vec16<T>::N && vectors) {
      u32x4 raw[W];
#pragma unroll
      for (u32 r = 0; r < W; ++r) raw[r] = ld_128((r == rank ? own : slots + r * n) + e);
      reduce_ranks<T, Op, W>(raw, f);
    } else {
      for (u32 k = 0; k < c; ++k) {
        float acc = to_float<T>((rank == 0 ? own : slots)[e + k]);
#pragma unroll
        for (u32 r = 1; r < W; ++r) acc = Op()(acc, to_float<T>((r == rank ? own : slots + r * n)[e + k]));
        f[k] = acc;
      }
    }
    store_group(out, i, f, c);
  }
}

}  // namespace symmkit
