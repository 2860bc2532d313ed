// symmkit/core/copy.cuh: byte copies shared by several threads, for data that needs no ordering of its
// own (a signal published after the copy orders it; see sync/signal.cuh).
//
// Contract: copy_lanes copies dst[0, n) = src[0, n) with `lanes` threads, this one being `lane`; each
// byte is written once. When both ends and n are 16-byte aligned it moves 16-byte vectors and keeps
// kCopyUnroll loads in flight per thread before storing them (one load at a time would pay one NVLink or
// HBM latency per 16 bytes); otherwise single bytes. load_line / store_line move one 8-byte line (an LL
// line's payload), byte by byte at a misaligned address or the tail. No synchronisation: the caller
// orders the copy.
#pragma once
#include "symmkit/core/memory.cuh"

namespace symmkit {

constexpr u32 kCopyUnroll = 4;

__device__ __forceinline__ void copy_lanes(u8* dst, const u8* src, u64 n, u32 lane, u32 lanes) {
  if (((reinterpret_cast<u64>(dst) | reinterpret_cast<u64>(src) | n) & 15) == 0) {
    const u64 step = 16 * static_cast<u64>(lanes);
    for (u64 o = 16 * static_cast<u64>(lane); o < n; o += kCopyUnroll * step) {
      u32x4 v[kCopyUnroll];
#pragma unroll
      for (u32 u = 0; u < kCopyUnroll; ++u)
        if (o + u * step < n) v[u] = ld_128(src + o + u * step);
#pragma unroll
      for (u32 u = 0; u < kCopyUnroll; ++u)
        if (o + u * step < n) st_128(dst + o + u * step, v[u]);
    }
  } else {
    for (u64 o = lane; o < n; o += lanes) dst[o] = src[o];
  }
}

/** Line i of src: bytes [8 i, 8 i + 8) of its n, zero past n (an LL line's payload: coll/mailbox.cuh, coll/p2p.cuh). */
__device__ __forceinline__ u64 load_line(const u8* src, u64 i, u64 n) {
  const u64 e = 8 * i;
  if (e + 8 <= n && (reinterpret_cast<u64>(src + e) & 7) == 0) return *reinterpret_cast<const u64*>(src + e);
  u64 d = 0;
  for (u64 k = e; k < min(n, e + 8); ++k) d |= static_cast<u64>(src[k]) << (8 * (k - e));
  return d;
}

__device__ __forceinline__ void store_line(u8* dst, u64 i, u64 n, u64 d) {
  const u64 e = 8 * i;
  if (e + 8 <= n && (reinterpret_cast<u64>(dst + e) & 7) == 0) {
    *reinterpret_cast<u64*>(dst + e) = d;
    return;
  }
  for (u64 k = e; k < min(n, e + 8); ++k) dst[k] = static_cast<u8>(d >> (8 * (k - e)));
}

}  // namespace symmkit
