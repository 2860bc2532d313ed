// symmkit/core/types.cuh: fixed-width integers, element types and float conversions for device code.
//
// Contract: pure value conversions, no memory access, no synchronisation. Narrow floats round to
// nearest even; fp8 saturates to the largest finite value (as CUDA's __nv_fp8_* constructors do) and
// keeps NaN. fp8 uses symmkit's own storage types and PTX cvt (sm_89 and later) instead of cuda_fp8.h,
// whose CUDA 13 form only compiles with a matching NVRTC; host code encodes with the same rules
// (src/runtime/dtype.ts).
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace symmkit {

typedef signed char i8;
typedef unsigned char u8;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

struct fp8e4m3 {
  u8 bits;
};
struct fp8e5m2 {
  u8 bits;
};

template <typename T>
__device__ __forceinline__ float to_float(T v);
template <typename T>
__device__ __forceinline__ T from_float(float v);

template <> __device__ __forceinline__ float to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_float<i32>(i32 v) { return static_cast<float>(v); }
template <> __device__ __forceinline__ float to_float<u32>(u32 v) { return static_cast<float>(v); }
template <> __device__ __forceinline__ float to_float<u8>(u8 v) { return static_cast<float>(v); }
template <> __device__ __forceinline__ float to_float<i64>(i64 v) { return static_cast<float>(v); }

template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
// cvt packs two fp8 values per 16 bits; the value of interest travels in the low byte.
template <> __device__ __forceinline__ float to_float<fp8e4m3>(fp8e4m3 v) {
  u32 h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(static_cast<u16>(v.bits)));
  return __half2float(__ushort_as_half(static_cast<u16>(h2 & 0xffffu)));
}
template <> __device__ __forceinline__ float to_float<fp8e5m2>(fp8e5m2 v) {
  u32 h2;
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h2) : "h"(static_cast<u16>(v.bits)));
  return __half2float(__ushort_as_half(static_cast<u16>(h2 & 0xffffu)));
}
template <> __device__ __forceinline__ fp8e4m3 from_float<fp8e4m3>(float v) {
  u16 b;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(b) : "f"(0.0f), "f"(v));
  return fp8e4m3{static_cast<u8>(b & 0xffu)};
}
template <> __device__ __forceinline__ fp8e5m2 from_float<fp8e5m2>(float v) {
  u16 b;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(b) : "f"(0.0f), "f"(v));
  return fp8e5m2{static_cast<u8>(b & 0xffu)};
}
#endif

}  // namespace symmkit
