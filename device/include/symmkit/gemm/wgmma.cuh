// symmkit/gemm/wgmma.cuh: Hopper warpgroup MMA (sm_90a) and its shared-memory descriptors.
//
// Contract: every function here is executed by all 128 threads of a warpgroup (the .sync.aligned
// forms require it). wgmma reads its A and B operands from shared memory asynchronously: a stage may be
// overwritten only after wgmma_wait<N>() has retired the groups that read it, and the accumulators may
// be read or written by ordinary code only after wgmma_wait<0>(). wgmma_fence() must precede the first
// wgmma of a batch whenever the accumulator registers were touched by ordinary code in between.
// Descriptors describe tiles written by TMA with the 128-byte swizzle: rows of 128 bytes, in groups of
// 8 rows (1024 bytes, the swizzle atom), each tile 1024-byte aligned; K-major (rows are K) for A and B,
// or MN-major (rows are N) for a B stored as [k, n].
#pragma once
#include "symmkit/core/types.cuh"

namespace symmkit {
namespace gemm {

/** K bytes of a tile row: one 128-byte swizzle row. */
constexpr u32 kTileKBytes = 128;

/** Descriptor of a K-major, 128B-swizzled tile starting at shared address `smem` (1024-byte aligned
 * for the first k-step; later k-steps add 32 bytes within the atom, as the hardware expects). */
__device__ __forceinline__ u64 kmajor_sw128_desc(u32 smem) {
  return static_cast<u64>((smem & 0x3ffffu) >> 4)  // start address, 16-byte units
         | (static_cast<u64>(1) << 16)              // leading byte offset: unused for swizzled K-major
         | (static_cast<u64>(1024 >> 4) << 32)      // stride byte offset: one 8-row atom
         | (static_cast<u64>(1) << 62);             // 128-byte swizzle
}

/** Descriptor of an MN-major, 128B-swizzled tile: rows of 128 bytes hold 64 consecutive N (or M)
 * elements of one k; 8 such rows (k) form a 1 KiB atom (SBO apart), and blocks of 64 N are `mn_block`
 * bytes apart (LBO). A 16-deep k-step covers two atoms. */
__device__ __forceinline__ u64 mnmajor_sw128_desc(u32 smem, u32 mn_block) {
  return static_cast<u64>((smem & 0x3ffffu) >> 4) | (static_cast<u64>(mn_block >> 4) << 16) |
         (static_cast<u64>(1024 >> 4) << 32) | (static_cast<u64>(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
/** Keeps the compiler from moving accumulator accesses across a wait (the registers are in flight). */
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// One m64n256 MMA: d (+)= A[64 x k] * B[256 x k]^T, both K-major in shared memory. `accumulate` == 0
// overwrites d (the first k-step of a tile). The accumulator fragment: register 4*j + {0,1,2,3} of
// thread t (warp w = t / 32, lane l) holds rows 16*w + l/4 (+8 for 2, 3) and columns 8*j + 2*(l%4) (+1
// for 1, 3).
#define SYMMKIT_WGMMA_M64N256(INSTR, IMMS) \
  asm volatile( \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n" INSTR " {" \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
  "}, %128, %129, p, " IMMS ";\n}\n" \
  : \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
  : "l"(desc_a), "l"(desc_b), "r"(accumulate))

/** bf16 x bf16 -> f32, k = 16 (32 bytes of K per k-step); mma_m64n's overload for N = 256. */
__device__ __forceinline__ void mma_m64n(float (&d)[128], u64 desc_a, u64 desc_b, u32 accumulate, __nv_bfloat16) {
  SYMMKIT_WGMMA_M64N256("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", "1, 1, 0, 0");
}

/** bf16 with B N-major in shared memory (mnmajor_sw128_desc), k = 16. */
__device__ __forceinline__ void mma_m64n256_bt(float (&d)[128], u64 desc_a, u64 desc_b, u32 accumulate) {
  SYMMKIT_WGMMA_M64N256("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", "1, 1, 0, 1");
}

/** e4m3 x e4m3 -> f32, k = 32 (32 bytes of K per k-step). */
__device__ __forceinline__ void mma_m64n(float (&d)[128], u64 desc_a, u64 desc_b, u32 accumulate, fp8e4m3) {
  SYMMKIT_WGMMA_M64N256("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3", "1, 1");
}

#undef SYMMKIT_WGMMA_M64N256

// m64nN MMAs for N = 8, 16, 32, 64, 80, 96, 112, 128, 160, 192, 200, 208, 216, 224 (the decode GEMM, gemm/decode_gemm.cuh; N = 256 is above): d (+)= A[64 x k] * B[N x k]^T, both
// K-major; d holds N / 2 floats per thread, register 4*j + {0,1,2,3} of thread t (warp w = t / 32, lane
// l) rows 16*w + l/4 (+8 for 2, 3) and columns 8*j + 2*(l%4) (+1 for 1, 3), as for m64n256. Overloaded on
// the accumulator's length; `accumulate` == 0 overwrites d.

#define SYMMKIT_WGMMA_M64N8(INSTR, IMMS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n" INSTR " {" \
               "%0, %1, %2, %3" \
               "}, %4, %5, p, " IMMS ";\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define SYMMKIT_WGMMA_M64N16(INSTR, IMMS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n" INSTR " {" \
               "%0, %1, %2, %3, %4, %5, %6, %7" \
               "}, %8, %9, p, " IMMS ";\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]) \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define SYMMKIT_WGMMA_M64N32(INSTR, IMMS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n" INSTR " {" \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15" \
               "}, %16, %17, p, " IMMS ";\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]) \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define SYMMKIT_WGMMA_M64N64(INSTR, IMMS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" INSTR " {" \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" \
               "}, %32, %33, p, " IMMS ";\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define SYMMKIT_WGMMA_M64N80(INSTR, IMMS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n" INSTR " {" \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39" \
               "}, %40, %41, p, " IMMS ";\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]) \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define SYMMKIT_WGMMA_M64N96(INSTR, IMMS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n" INSTR " {" \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" \
               "}, %48, %49, p, " IMMS ";\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]) \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define SYMMKIT_WGMMA_M64N112(INSTR, IMMS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %58, 0;\n" INSTR " {" \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55" \
               "}, %56, %57, p, " IMMS ";\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]) \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define SYMMKIT_WGMMA_M64N128(INSTR, IMMS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" INSTR " {" \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
               "}, %64, %65, p, " IMMS ";\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define SYMMKIT_WGMMA_M64N160(INSTR, IMMS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n" INSTR " {" \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79" \
               "}, %80, %81, p, " IMMS ";\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]) \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define SYMMKIT_WGMMA_M64N192(INSTR, IMMS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n" INSTR " {" \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95" \
               "}, %96, %97, p, " IMMS ";\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]) \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define SYMMKIT_WGMMA_M64N200(INSTR, IMMS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %102, 0;\n" INSTR " {" \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99" \
               "}, %100, %101, p, " IMMS ";\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]) \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define SYMMKIT_WGMMA_M64N208(INSTR, IMMS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %106, 0;\n" INSTR " {" \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103" \
               "}, %104, %105, p, " IMMS ";\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]) \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define SYMMKIT_WGMMA_M64N216(INSTR, IMMS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %110, 0;\n" INSTR " {" \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107" \
               "}, %108, %109, p, " IMMS ";\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]) \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define SYMMKIT_WGMMA_M64N224(INSTR, IMMS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %114, 0;\n" INSTR " {" \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111" \
               "}, %112, %113, p, " IMMS ";\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]) \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))

__device__ __forceinline__ void mma_m64n(float (&d)[4], u64 desc_a, u64 desc_b, u32 accumulate, __nv_bfloat16) {
  SYMMKIT_WGMMA_M64N8("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16", "1, 1, 0, 0");
}
__device__ __forceinline__ void mma_m64n(float (&d)[4], u64 desc_a, u64 desc_b, u32 accumulate, fp8e4m3) {
  SYMMKIT_WGMMA_M64N8("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", "1, 1");
}

__device__ __forceinline__ void mma_m64n(float (&d)[8], u64 desc_a, u64 desc_b, u32 accumulate, __nv_bfloat16) {
  SYMMKIT_WGMMA_M64N16("wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16", "1, 1, 0, 0");
}
__device__ __forceinline__ void mma_m64n(float (&d)[8], u64 desc_a, u64 desc_b, u32 accumulate, fp8e4m3) {
  SYMMKIT_WGMMA_M64N16("wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3", "1, 1");
}

__device__ __forceinline__ void mma_m64n(float (&d)[16], u64 desc_a, u64 desc_b, u32 accumulate, __nv_bfloat16) {
  SYMMKIT_WGMMA_M64N32("wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16", "1, 1, 0, 0");
}
__device__ __forceinline__ void mma_m64n(float (&d)[16], u64 desc_a, u64 desc_b, u32 accumulate, fp8e4m3) {
  SYMMKIT_WGMMA_M64N32("wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3", "1, 1");
}

__device__ __forceinline__ void mma_m64n(float (&d)[32], u64 desc_a, u64 desc_b, u32 accumulate, __nv_bfloat16) {
  SYMMKIT_WGMMA_M64N64("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", "1, 1, 0, 0");
}
__device__ __forceinline__ void mma_m64n(float (&d)[32], u64 desc_a, u64 desc_b, u32 accumulate, fp8e4m3) {
  SYMMKIT_WGMMA_M64N64("wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3", "1, 1");
}

__device__ __forceinline__ void mma_m64n(float (&d)[40], u64 desc_a, u64 desc_b, u32 accumulate, __nv_bfloat16) {
  SYMMKIT_WGMMA_M64N80("wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16", "1, 1, 0, 0");
}
__device__ __forceinline__ void mma_m64n(float (&d)[40], u64 desc_a, u64 desc_b, u32 accumulate, fp8e4m3) {
  SYMMKIT_WGMMA_M64N80("wgmma.mma_async.sync.aligned.m64n80k32.f32.e4m3.e4m3", "1, 1");
}

__device__ __forceinline__ void mma_m64n(float (&d)[48], u64 desc_a, u64 desc_b, u32 accumulate, __nv_bfloat16) {
  SYMMKIT_WGMMA_M64N96("wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16", "1, 1, 0, 0");
}
__device__ __forceinline__ void mma_m64n(float (&d)[48], u64 desc_a, u64 desc_b, u32 accumulate, fp8e4m3) {
  SYMMKIT_WGMMA_M64N96("wgmma.mma_async.sync.aligned.m64n96k32.f32.e4m3.e4m3", "1, 1");
}

__device__ __forceinline__ void mma_m64n(float (&d)[56], u64 desc_a, u64 desc_b, u32 accumulate, __nv_bfloat16) {
  SYMMKIT_WGMMA_M64N112("wgmma.mma_async.sync.aligned.m64n112k16.f32.bf16.bf16", "1, 1, 0, 0");
}
__device__ __forceinline__ void mma_m64n(float (&d)[56], u64 desc_a, u64 desc_b, u32 accumulate, fp8e4m3) {
  SYMMKIT_WGMMA_M64N112("wgmma.mma_async.sync.aligned.m64n112k32.f32.e4m3.e4m3", "1, 1");
}

__device__ __forceinline__ void mma_m64n(float (&d)[64], u64 desc_a, u64 desc_b, u32 accumulate, __nv_bfloat16) {
  SYMMKIT_WGMMA_M64N128("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", "1, 1, 0, 0");
}
__device__ __forceinline__ void mma_m64n(float (&d)[64], u64 desc_a, u64 desc_b, u32 accumulate, fp8e4m3) {
  SYMMKIT_WGMMA_M64N128("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3", "1, 1");
}

__device__ __forceinline__ void mma_m64n(float (&d)[80], u64 desc_a, u64 desc_b, u32 accumulate, __nv_bfloat16) {
  SYMMKIT_WGMMA_M64N160("wgmma.mma_async.sync.aligned.m64n160k16.f32.bf16.bf16", "1, 1, 0, 0");
}
__device__ __forceinline__ void mma_m64n(float (&d)[80], u64 desc_a, u64 desc_b, u32 accumulate, fp8e4m3) {
  SYMMKIT_WGMMA_M64N160("wgmma.mma_async.sync.aligned.m64n160k32.f32.e4m3.e4m3", "1, 1");
}

__device__ __forceinline__ void mma_m64n(float (&d)[96], u64 desc_a, u64 desc_b, u32 accumulate, __nv_bfloat16) {
  SYMMKIT_WGMMA_M64N192("wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16", "1, 1, 0, 0");
}
__device__ __forceinline__ void mma_m64n(float (&d)[96], u64 desc_a, u64 desc_b, u32 accumulate, fp8e4m3) {
  SYMMKIT_WGMMA_M64N192("wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3", "1, 1");
}

__device__ __forceinline__ void mma_m64n(float (&d)[100], u64 desc_a, u64 desc_b, u32 accumulate, __nv_bfloat16) {
  SYMMKIT_WGMMA_M64N200("wgmma.mma_async.sync.aligned.m64n200k16.f32.bf16.bf16", "1, 1, 0, 0");
}
__device__ __forceinline__ void mma_m64n(float (&d)[100], u64 desc_a, u64 desc_b, u32 accumulate, fp8e4m3) {
  SYMMKIT_WGMMA_M64N200("wgmma.mma_async.sync.aligned.m64n200k32.f32.e4m3.e4m3", "1, 1");
}

__device__ __forceinline__ void mma_m64n(float (&d)[104], u64 desc_a, u64 desc_b, u32 accumulate, __nv_bfloat16) {
  SYMMKIT_WGMMA_M64N208("wgmma.mma_async.sync.aligned.m64n208k16.f32.bf16.bf16", "1, 1, 0, 0");
}
__device__ __forceinline__ void mma_m64n(float (&d)[104], u64 desc_a, u64 desc_b, u32 accumulate, fp8e4m3) {
  SYMMKIT_WGMMA_M64N208("wgmma.mma_async.sync.aligned.m64n208k32.f32.e4m3.e4m3", "1, 1");
}

__device__ __forceinline__ void mma_m64n(float (&d)[108], u64 desc_a, u64 desc_b, u32 accumulate, __nv_bfloat16) {
  SYMMKIT_WGMMA_M64N216("wgmma.mma_async.sync.aligned.m64n216k16.f32.bf16.bf16", "1, 1, 0, 0");
}
__device__ __forceinline__ void mma_m64n(float (&d)[108], u64 desc_a, u64 desc_b, u32 accumulate, fp8e4m3) {
  SYMMKIT_WGMMA_M64N216("wgmma.mma_async.sync.aligned.m64n216k32.f32.e4m3.e4m3", "1, 1");
}

__device__ __forceinline__ void mma_m64n(float (&d)[112], u64 desc_a, u64 desc_b, u32 accumulate, __nv_bfloat16) {
  SYMMKIT_WGMMA_M64N224("wgmma.mma_async.sync.aligned.m64n224k16.f32.bf16.bf16", "1, 1, 0, 0");
}
__device__ __forceinline__ void mma_m64n(float (&d)[112], u64 desc_a, u64 desc_b, u32 accumulate, fp8e4m3) {
  SYMMKIT_WGMMA_M64N224("wgmma.mma_async.sync.aligned.m64n224k32.f32.e4m3.e4m3", "1, 1");
}

#undef SYMMKIT_WGMMA_M64N8

#undef SYMMKIT_WGMMA_M64N16

#undef SYMMKIT_WGMMA_M64N32

#undef SYMMKIT_WGMMA_M64N64

#undef SYMMKIT_WGMMA_M64N80

#undef SYMMKIT_WGMMA_M64N96

#undef SYMMKIT_WGMMA_M64N112

#undef SYMMKIT_WGMMA_M64N128

#undef SYMMKIT_WGMMA_M64N160

#undef SYMMKIT_WGMMA_M64N192

#undef SYMMKIT_WGMMA_M64N200

#undef SYMMKIT_WGMMA_M64N208

#undef SYMMKIT_WGMMA_M64N216

#undef SYMMKIT_WGMMA_M64N224

}  // namespace gemm
}  // namespace symmkit
