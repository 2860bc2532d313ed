// symmkit/core/memory.cuh: memory operations with explicit width, order and scope.
//
// Contract: each function is one PTX memory instruction (or fence) and does exactly what its name says.
// "sys" scope is what makes an operation meaningful to another GPU (through NVLink) or to the host
// (mapped pinned memory); "gpu" scope only orders this GPU's own threads. Weak (plain) 16-byte loads and
// stores are for data; their visibility to other GPUs comes only from a release/acquire pair (see
// sync/signal.cuh), never from the data accesses themselves.
#pragma once
#include "symmkit/core/types.cuh"

namespace symmkit {

enum class Order { Relaxed, Acquire, Release, AcqRel };

struct alignas(16) u32x4 {
  u32 x, y, z, w;
};

__device__ __forceinline__ u32x4 ld_128(const void* p) {
  u32x4 v;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_128(void* p, const u32x4& v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

/** Relaxed 16-byte accesses at system scope (volatile): for data that is its own flag (coll/mailbox.cuh).
 * Each 32-bit (or 64-bit) element is single-copy atomic; the vector as a whole is not. */
__device__ __forceinline__ u32x4 ld_volatile_128(const void* p) {
  u32x4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_volatile_128(void* p, const u32x4& v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

/** Two 64-bit elements, each single-copy atomic. */
__device__ __forceinline__ void ld_volatile_2x64(const void* p, u64& a, u64& b) {
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}

__device__ __forceinline__ void st_volatile_2x64(void* p, u64 a, u64 b) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}

template <Order O>
__device__ __forceinline__ u32 ld_sys(const u32* p) {
  static_assert(O == Order::Relaxed || O == Order::Acquire, "loads are relaxed or acquire");
  u32 v;
  if constexpr (O == Order::Acquire) asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  else asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

template <Order O>
__device__ __forceinline__ void st_sys(u32* p, u32 v) {
  static_assert(O == Order::Relaxed || O == Order::Release, "stores are relaxed or release");
  if constexpr (O == Order::Release) asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  else asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/** *p = max(*p, v) at system scope, relaxed, with no value returned (no round trip). */
__device__ __forceinline__ void red_max_relaxed_sys(u64* p, u64 v) {
  asm volatile("red.relaxed.sys.global.max.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/** Compare-and-swap of a 64-bit word (a signal slot: sync/signal.cuh) at system scope; returns the value found. */
template <Order O>
__device__ __forceinline__ u64 cas_sys(u64* p, u64 expected, u64 desired) {
  u64 found;
  if constexpr (O == Order::Relaxed)
    asm volatile("atom.relaxed.sys.global.cas.b64 %0, [%1], %2, %3;" : "=l"(found) : "l"(p), "l"(expected), "l"(desired) : "memory");
  else if constexpr (O == Order::Acquire)
    asm volatile("atom.acquire.sys.global.cas.b64 %0, [%1], %2, %3;" : "=l"(found) : "l"(p), "l"(expected), "l"(desired) : "memory");
  else if constexpr (O == Order::Release)
    asm volatile("atom.release.sys.global.cas.b64 %0, [%1], %2, %3;" : "=l"(found) : "l"(p), "l"(expected), "l"(desired) : "memory");
  else
    asm volatile("atom.acq_rel.sys.global.cas.b64 %0, [%1], %2, %3;" : "=l"(found) : "l"(p), "l"(expected), "l"(desired) : "memory");
  return found;
}

__device__ __forceinline__ void fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

/** Nanoseconds from the GPU's global timer (coarse, but monotonic and shared by all SMs). */
__device__ __forceinline__ u64 global_timer_ns() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace symmkit
