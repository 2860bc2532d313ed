// symmkit/runtime/tensor_kernels.cuh: the kernels behind Tensor.rand/randn/full and the launch benchmark.
//
// Contract: each kernel writes out[0, n) and nothing else, with no inter-block communication; grid-stride
// loops make any grid size correct. Random values follow core/random.cuh's counter mapping, and uniform
// values use explicitly rounded float operations (no FMA contraction) so the host can reproduce them
// exactly: lo + (hi - lo) * u, each step rounded to float.
#pragma once
#include "symmkit/core/random.cuh"

namespace symmkit {

/** Grid-stride over groups of 4 elements (one Philox call each); calls f(element, word). */
template <typename F>
__device__ __forceinline__ void for_each_philox_group(u64 n, u64 seed, u64 offset, F f) {
  const u64 groups = (n + 3) / 4;
  for (u64 g = blockIdx.x * static_cast<u64>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<u64>(gridDim.x) * blockDim.x) {
    const Philox4 r = philox4x32_10(Philox4{static_cast<u32>(g), static_cast<u32>(g >> 32), static_cast<u32>(offset),
                                            static_cast<u32>(offset >> 32)},
                                    static_cast<u32>(seed), static_cast<u32>(seed >> 32));
    f(g, r);
  }
}

template <typename T>
__global__ void rand_uniform(T* out, u64 n, u64 seed, u64 offset, float lo, float hi) {
  const float range = __fsub_rn(hi, lo);
  for_each_philox_group(n, seed, offset, [&](u64 g, const Philox4& r) {
    const u32 words[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const u64 i = g * 4 + j;
      if (i < n) out[i] = from_float<T>(__fadd_rn(lo, __fmul_rn(range, uniform01(words[j]))));
    }
  });
}

/** Box-Muller on word pairs (x, y) and (z, w): two normals from each pair. */
template <typename T>
__global__ void rand_normal(T* out, u64 n, u64 seed, u64 offset, float mean, float stddev) {
  for_each_philox_group(n, seed, offset, [&](u64 g, const Philox4& r) {
    float v[4];
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const float u1 = uniform01_open0(p == 0 ? r.x : r.z);
      const float u2 = uniform01(p == 0 ? r.y : r.w);
      const float radius = sqrtf(-2.0f * logf(u1));
      float s, c;
      sincospif(2.0f * u2, &s, &c);
      v[2 * p] = radius * c;
      v[2 * p + 1] = radius * s;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const u64 i = g * 4 + j;
      if (i < n) out[i] = from_float<T>(mean + stddev * v[j]);
    }
  });
}

/** Integers lo + floor(word * range / 2^32), range <= 2^32. */
template <typename T>
__global__ void rand_int(T* out, u64 n, u64 seed, u64 offset, i64 lo, u64 range) {
  for_each_philox_group(n, seed, offset, [&](u64 g, const Philox4& r) {
    const u32 words[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const u64 i = g * 4 + j;
      if (i < n) out[i] = static_cast<T>(lo + static_cast<i64>((static_cast<u64>(words[j]) * range) >> 32));
    }
  });
}

/** Fills 8-byte elements with a bit pattern (1, 2 and 4-byte fills use cuMemsetD8/16/32). */
__global__ void fill_u64(u64* out, u64 n, u64 bits) {
  for (u64 i = blockIdx.x * static_cast<u64>(blockDim.x) + threadIdx.x; i < n; i += static_cast<u64>(gridDim.x) * blockDim.x) {
    out[i] = bits;
  }
}

/** Does nothing: measures launch overhead. */
__global__ void empty_kernel() {}

}  // namespace symmkit
