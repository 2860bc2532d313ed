// symmkit/coll/collectives.cuh: all-reduce (one-shot, two-shot), all-gather and reduce-scatter on
// symmetric memory, pulling from the peers' buffers over NVLink.
//
// Contract. Every rank's input sits in its own symmetric buffer (v.buffers[rank]) when the kernel
// starts: staged by an earlier copy in stream order, or the user's own symmetric tensor. World size W is
// a template parameter, so the loads from all ranks are independent and in flight together.
// Reductions accumulate in float32 in rank order 0, 1, ..., W-1 and round once to T (plain adds and
// compares, never contracted into FMA): every rank computes bitwise the same result, and the host
// reference (src/ops/reduce.ts) the same again. Data moves in 16-byte vectors; the n % (16 / sizeof(T))
// tail elements go element by element.
// Synchronisation (sync/barrier.cuh), per block b with its own pad slots:
//   start  symm_sync<false, true>: every rank has staged its input (the copies were complete before its
//          kernel began) before anyone reads a peer's buffer.
//   one-shot, all-gather, reduce-scatter end with symm_sync<true, false>: nobody restages its buffer
//          (the next call's copy) while a peer may still be reading it.
//   two-shot: rank r reduces vector chunk r of the inputs and stores the result into chunk r of every
//          rank's scratch buffer (the staging buffer, or the input itself when the call is in place, so
//          that a caller's symmetric input is never overwritten otherwise); symm_sync<true, true>
//          publishes those stores; then each rank reads only its own scratch buffer. No end barrier: a
//          peer that runs ahead only rewrites its own buffers, and writes into ours only after the next
//          call's start barrier, which we reach after finishing this one. Barriers pair blocks of the
//          same index only, so work that crosses the middle barrier is split into tiles of blockDim.x
//          vectors, tile t always to block t % grid: its writer and its readers met at that barrier.
//          (The start and end barriers need no such rule: whole kernels order the staging copies.)
// All pads are idle again at the end, so every kernel here may be captured and replayed as a CUDA graph.
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

/** Reduces vector i of every rank's buffer (from element offset `base`) into f. */
template <typename T, typename Op, u32 W>
__device__ __forceinline__ void reduce_vector(const SymmView& v, u64 base, u64 i, float (&f)[Vec16<T>::N]) {
  u32x4 raw[W];
#pragma unroll
  for (u32 r = 0; r < W; ++r) raw[r] = ld_128(static_cast<const T*>(v.buffers[r]) + base + i * Vec16<T>::N);
  Vec16<T>::unpack(raw[0], f);
#pragma unroll
  for (u32 r = 1; r < W; ++r) {
    float g[Vec16<T>::N];
    Vec16<T>::unpack(raw[r], g);
#pragma unroll
    for (u32 k = 0; k < Vec16<T>::N; ++k) f[k] = Op()(f[k], g[k]);
  }
}

template <typename T, typename Op, u32 W>
__device__ __forceinline__ T reduce_element(const SymmView& v, u64 j) {
  float acc = to_float<T>(static_cast<const T*>(v.buffers[0])[j]);
#pragma unroll
  for (u32 r = 1; r < W; ++r) acc = Op()(acc, to_float<T>(static_cast<const T*>(v.buffers[r])[j]));
  return from_float<T>(acc);
}

template <typename T, typename Op, u32 W>
__global__ void one_shot_all_reduce(const __grid_constant__ SymmView v, T* out, u64 n, u32 phase) {
  symm_sync<false, true>(v, flat_block(), phase);
  const u64 nvec = aligned16(out) ? n / Vec16<T>::N : 0;  // a misaligned output (a view) goes element by element
  for (u64 i = global_thread(); i < nvec; i += grid_threads()) {
    float f[Vec16<T>::N];
    reduce_vector<T, Op, W>(v, 0, i, f);
    st_128(out + i * Vec16<T>::N, Vec16<T>::pack(f));
  }
  for (u64 j = nvec * Vec16<T>::N + global_thread(); j < n; j += grid_threads()) out[j] = reduce_element<T, Op, W>(v, j);
  symm_sync<true, false>(v, flat_block(), phase + 1);
}

/** The first tile at or after `from` that belongs to this block: tile t belongs to block t % grid. */
__device__ __forceinline__ u64 first_tile(u64 from) {
  const u64 blocks = static_cast<u64>(gridDim.x) * gridDim.y * gridDim.z;
  return from + (flat_block() + blocks - from % blocks) % blocks;
}

template <typename T, typename Op, u32 W>
__global__ void two_shot_all_reduce(const __grid_constant__ SymmView v, const __grid_constant__ SymmView scratch, T* out, u64 n,
                                    u32 phase) {
  // Vectors go in tiles of blockDim.x; tile t belongs to block t % grid on every rank and in both phases,
  // so the block that reads a tile after the middle barrier is the one that met, at that barrier, the
  // block that wrote it (barriers pair blocks of the same index only).
  const u64 tile = blockDim.x;
  const u64 blocks = static_cast<u64>(gridDim.x) * gridDim.y * gridDim.z;
  symm_sync<false, true>(v, flat_block(), phase);
  const u64 nvec = n / Vec16<T>::N;
  const u64 chunk = (nvec + W - 1) / W;
  const u64 begin = min(nvec, chunk * v.rank);
  const u64 end = min(nvec, begin + chunk);
  for (u64 t = first_tile(begin / tile); t * tile < end; t += blocks) {
    const u64 i = t * tile + threadIdx.x;
    if (i < begin || i >= end) continue;
    float f[Vec16<T>::N];
    reduce_vector<T, Op, W>(v, 0, i, f);
    const u32x4 packed = Vec16<T>::pack(f);
#pragma unroll
    for (u32 r = 0; r < W; ++r) st_128(static_cast<T*>(scratch.buffers[r]) + i * Vec16<T>::N, packed);
  }
  // The n % N tail elements belong to the last rank and to block 0 (which reads them back below): one
  // rank reads and writes them, which keeps an in-place call (scratch = the input) free of races.
  if (v.rank == W - 1 && flat_block() == 0) {
    for (u64 j = nvec * Vec16<T>::N + threadIdx.x; j < n; j += blockDim.x) {
      const T x = reduce_element<T, Op, W>(v, j);
#pragma unroll
      for (u32 r = 0; r < W; ++r) static_cast<T*>(scratch.buffers[r])[j] = x;
    }
  }
  symm_sync<true, true>(v, flat_block(), phase + 1);
  const T* mine = static_cast<const T*>(scratch.buffers[v.rank]);
  if (out == mine) return;
  const bool vec = aligned16(out);
  for (u64 t = flat_block(); t * tile < nvec; t += blocks) {
    const u64 i = t * tile + threadIdx.x;
    if (i >= nvec) continue;
    if (vec) {
      st_128(out + i * Vec16<T>::N, ld_128(mine + i * Vec16<T>::N));
    } else {
#pragma unroll
      for (u32 k = 0; k < Vec16<T>::N; ++k) out[i * Vec16<T>::N + k] = mine[i * Vec16<T>::N + k];
    }
  }
  if (flat_block() == 0) {
    for (u64 j = nvec * Vec16<T>::N + threadIdx.x; j < n; j += blockDim.x) out[j] = mine[j];
  }
}

/** out[r * n_bytes ...] = rank r's buffer[0, n_bytes): any dtype, as bytes (n_bytes a multiple of 16 or not). */
template <u32 W>
__global__ void all_gather_pull(const __grid_constant__ SymmView v, u8* out, u64 n_bytes, u32 phase) {
  symm_sync<false, true>(v, flat_block(), phase);
  const u64 nvec = n_bytes / 16;
#pragma unroll
  for (u32 r = 0; r < W; ++r) {
    const u8* src = static_cast<const u8*>(v.buffers[r]);
    u8* dst = out + r * n_bytes;
    if (aligned16(dst)) {
      for (u64 i = global_thread(); i < nvec; i += grid_threads()) st_128(dst + 16 * i, ld_128(src + 16 * i));
      for (u64 j = nvec * 16 + global_thread(); j < n_bytes; j += grid_threads()) dst[j] = src[j];
    } else {
      for (u64 j = global_thread(); j < n_bytes; j += grid_threads()) dst[j] = src[j];
    }
  }
  symm_sync<true, false>(v, flat_block(), phase + 1);
}

/** out[0, n) = op over ranks of buffer[rank * n, (rank + 1) * n). */
template <typename T, typename Op, u32 W>
__global__ void reduce_scatter_pull(const __grid_constant__ SymmView v, T* out, u64 n, u32 phase) {
  symm_sync<false, true>(v, flat_block(), phase);
  const u64 base = static_cast<u64>(v.rank) * n;
  const u64 nvec = (base % Vec16<T>::N) == 0 && aligned16(out) ? n / Vec16<T>::N : 0;
  for (u64 i = global_thread(); i < nvec; i += grid_threads()) {
    float f[Vec16<T>::N];
    reduce_vector<T, Op, W>(v, base, i, f);
    st_128(out + i * Vec16<T>::N, Vec16<T>::pack(f));
  }
  for (u64 j = nvec * Vec16<T>::N + global_thread(); j < n; j += grid_threads()) out[j] = reduce_element<T, Op, W>(v, base + j);
  symm_sync<true, false>(v, flat_block(), phase + 1);
}

}  // namespace symmkit
