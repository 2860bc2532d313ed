// symmkit/core/random.cuh: Philox4x32-10, the counter-based generator of Salmon et al. (Random123).
//
// Contract: a pure function of (counter, key); no state, no memory access. Element i of a tensor filled
// with (seed, offset) uses counter (i / 4, offset) and key seed, word i % 4, so values depend only on
// the seed, the offset and the index: never on the launch shape. The host copy in
// src/runtime/random.ts computes the same words bit for bit.
#pragma once
#include "symmkit/core/types.cuh"

namespace symmkit {

struct Philox4 {
  u32 x, y, z, w;
};

__device__ __forceinline__ Philox4 philox4x32_10(Philox4 c, u32 k0, u32 k1) {
  constexpr u32 M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const u32 hi0 = __umulhi(M0, c.x), lo0 = M0 * c.x;
    const u32 hi1 = __umulhi(M1, c.z), lo1 = M1 * c.z;
    c = Philox4{hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0};
    k0 += W0;
    k1 += W1;
  }
  return c;
}

/** 24 random bits as a float in [0, 1). */
__device__ __forceinline__ float uniform01(u32 bits) { return static_cast<float>(bits >> 8) * 0x1p-24f; }

/** 24 random bits as a float in (0, 1]: safe for log. */
__device__ __forceinline__ float uniform01_open0(u32 bits) { return static_cast<float>((bits >> 8) + 1u) * 0x1p-24f; }

}  // namespace symmkit
