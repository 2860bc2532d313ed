// symmkit/probes/link_probe.cuh: NVLink bandwidth probes (symmkit bench link): every rank moves the same
// bytes to (push: stores) or from (pull: loads) every peer at once, as a collective's traffic does.
//
// Contract. The symmetric buffer holds W slots of `bytes` (a multiple of 512). Push: rank r stores its
// own slot r into slot r of every peer. Pull: rank r loads slot p of peer p into its own slot p. So no
// two ranks write the same slot and a slot is never read and written by the same call. No
// synchronisation inside: the benchmark meets (barrier kernel) before each timed replay and checks the
// slots after a run it synchronised. Work goes by warp: warp w serves peer (rank + 1 + w % (W - 1)) % W,
// its 32 threads on 32 consecutive vectors, so each warp's access is one contiguous 512-byte run and
// all peers are served at once. U vectors per thread are loaded before any is stored (loads in flight).
#pragma once
#include "symmkit/sync/barrier.cuh"

namespace symmkit {

template <u32 W, bool Push, u32 U>
__global__ void link_copy(const __grid_constant__ SymmView v, u64 bytes) {
  const u64 vectors = bytes / 16;
  const u64 items = vectors * (W - 1);
  const u64 stride = static_cast<u64>(gridDim.x) * blockDim.x;
  for (u64 base = static_cast<u64>(blockIdx.x) * blockDim.x + threadIdx.x; base < items; base += stride * U) {
    u32x4 x[U];
    const u8* src[U];
    u8* dst[U];
#pragma unroll
    for (u32 u = 0; u < U; ++u) {
      const u64 j = base + u * stride;
      const u64 warp = j / 32;
      const u32 peer = (v.rank + 1 + static_cast<u32>(warp % (W - 1))) % W;
      const u64 at = ((warp / (W - 1)) * 32 + j % 32) * 16;
      const u32 slot = Push ? v.rank : peer;
      src[u] = static_cast<const u8*>(v.buffers[Push ? v.rank : peer]) + slot * bytes + at;
      dst[u] = static_cast<u8*>(v.buffers[Push ? peer : v.rank]) + slot * bytes + at;
      if (j < items) x[u] = ld_128(src[u]);
    }
#pragma unroll
    for (u32 u = 0; u < U; ++u)
      if (base + u * stride < items) st_128(dst[u], x[u]);
  }
}

}  // namespace symmkit
