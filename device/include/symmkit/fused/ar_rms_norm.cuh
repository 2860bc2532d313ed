// symmkit/fused/ar_rms_norm.cuh: all-reduce + bias + residual + RMSNorm in one kernel, the op after every
// row-parallel layer at inference time, and the norm kernel alone (the sequential baselines' second step).
//
// Contract. x is [rows, hidden] of T (bf16, f16), hidden a multiple of 8 and at most
// kNormThreads x kNormSlots x 8; weight and bias are [hidden], residual, residual_out and out
// [rows, hidden]. For each row, in float32 with every operation rounded (__fadd_rn etc., never contracted
// into FMA), so that the host reference (src/ops/norm/rms-norm.ts) computes the same bits:
//   a   = sum over ranks of x in rank order, rounded to T          (what allReduce gives)
//   hr  = round_T((a + bias) + residual)                            (bias, residual optional) -> residual_out
//   ms  = (sum of hr^2 over the row, in the tree below) / hidden
//   y   = (hr * (1 / sqrt(ms + eps))) * weight                      -> out, rounded to T; or with an fp8 output
//         (out_scale_inv > 0) e4m3(y * out_scale_inv), saturated
// The sum of squares has one fixed order whatever the algorithm: a row is one block of kNormThreads;
// thread t adds, in order, the squares of the elements of groups t, t + kNormThreads, ... (8 elements of a
// group in order); each warp adds its lanes' sums by xor-butterfly (16, 8, 4, 2, 1); the 16 warp sums are
// added by xor-butterfly (8, 4, 2, 1). Every variant here computes a row so, so all give the same bits, on
// every rank. residual and bias are the same on every rank (two-shot variants add the owner's).
//
// Variants (W ranks, one block per row at a time, rows strided over the grid):
//   lamport_ar_rms_norm           one-shot through the Lamport mailbox (coll/mailbox.cuh: its buffers, call
//                                 count, refill and headers): push all of x to every peer, then reduce and
//                                 normalise each row as its groups arrive. Grid at most one block per SM,
//                                 more blocks than rows when a row is large: all of them send (one SM
//                                 pushing a row alone is slow), those with a row normalise it. A thread
//                                 loads S groups before storing any, and the weight, bias and residual
//                                 before it waits.
//   lamport_two_shot_ar_rms_norm  rows split in W contiguous chunks, rank p owns chunk p: push each chunk to
//                                 its owner; the owner reduces and adds, pushes hr into every peer's slot
//                                 after the reduce-scatter half, and normalises; others normalise the hr
//                                 they receive. The bits pushed are the bits kept (sentinel-cleaned).
//   pull_ar_rms_norm              one-shot between barriers (coll/collectives.cuh's contract): copy-in,
//                                 barrier, read every rank's row, normalise, barrier. Row r is copied in and
//                                 read by block r % grid on every rank.
//   pull_two_shot_ar_rms_norm     copy-in, barrier, the owner of row r reduces it and stores hr into row r
//                                 of every rank's scratch, barrier, every rank normalises from its scratch.
//   rms_norm_rows                 the norm alone, from a = an all-reduce's output.
#pragma once
#include "symmkit/coll/mailbox.cuh"

namespace symmkit {

constexpr u32 kNormThreads = 512;
/** Groups of 8 elements one thread holds per row at most: hidden <= kNormThreads x kNormSlots x 8 = 16384.
 * Kernels take the slots S they need as a template parameter (2: hidden <= 8192, else 4), so that small
 * rows do not pay registers for large ones; S changes no arithmetic. */
constexpr u32 kNormSlots = 4;

template <typename T>
struct NormIo {
  static_assert(sizeof(T) == 2, "the fused norm takes bf16 or f16");
  const T* bias;      // [hidden] or null
  const T* residual;  // [rows, hidden] or null
  T* residual_out;    // [rows, hidden] or null
  const T* weight;    // [hidden]
  void* out;          // [rows, hidden] of T, or of fp8 e4m3 when out_scale_inv > 0
  u64 rows;
  u32 hidden;
  float eps;
  float out_scale_inv;
  __device__ __forceinline__ u32 groups() const { return hidden / 8; }
};

/** The sum over the block (kNormThreads), in the contract's order; every thread gets it. red: 16 floats. */
__device__ __forceinline__ float norm_block_sum(float v, float* red) {
#pragma unroll
  for (u32 o = 16; o > 0; o /= 2) v = __fadd_rn(v, __shfl_xor_sync(~0u, v, o));
  const u32 lane = threadIdx.x % 32;
  if (lane == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  // Every warp adds the 16 warp sums the same way, so none waits for another's answer.
  float s = lane < 16 ? red[lane] : 0.0f;
#pragma unroll
  for (u32 o = 8; o > 0; o /= 2) s = __fadd_rn(s, __shfl_xor_sync(~0u, s, o));
  __syncthreads();  // red is reused by the next row
  return __shfl_sync(~0u, s, 0);
}

/** What a thread reads of row `row` besides the sums, loaded before it waits for them (the loads are in
 * flight while it polls): its groups of weight and, with `sums`, of bias and residual. */
template <typename T, u32 S>
struct RowOperands {
  u32x4 w[S], b[S], r[S];
  __device__ __forceinline__ RowOperands(const NormIo<T>& io, u64 row, bool sums) {
    const u32 gpr = io.groups();
#pragma unroll
    for (u32 j = 0; j < S; ++j) {
      const u32 gi = threadIdx.x + j * kNormThreads;
      w[j] = b[j] = r[j] = u32x4{0u, 0u, 0u, 0u};
      if (gi >= gpr) continue;
      w[j] = load_group(io.weight, gi, io.hidden);
      if (sums && io.bias) b[j] = load_group(io.bias, gi, io.hidden);
      if (sums && io.residual) r[j] = load_group(io.residual + row * io.hidden, gi, io.hidden);
    }
  }
};

/** a = f rounded to T and read back (pack, then unpack). */
template <typename T>
__device__ __forceinline__ void round_through(const float (&f)[8], float (&a)[8]) {
  Vec16<T>::unpack(Vec16<T>::pack(f), a);
}
/** bf16 two at a time (cvt.rn.bf16x2.f32: F2FP.PACK_AB on the ALU pipe): NVVM folds the pack and unpack
 * into one F2F.BF16.F32 per element, on the conversion pipe of 16 lanes a clock. The same round-to-nearest-
 * even bits. */
template <>
__device__ __forceinline__ void round_through<__nv_bfloat16>(const float (&f)[8], float (&a)[8]) {
#pragma unroll
  for (u32 k = 0; k < 8; k += 2) {
    u32 p;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(p) : "f"(f[k + 1]), "f"(f[k]));
    a[k] = __uint_as_float(p << 16);
    a[k + 1] = __uint_as_float(p & 0xffff0000u);
  }
}

/** hr of slot j from the rank-order f32 sum: rounded to T, plus bias, plus residual, rounded (an absent
 * operand is not added at all: adding +0 would turn -0 into +0). */
template <typename T, u32 S>
__device__ __forceinline__ u32x4 add_residual(const NormIo<T>& io, const RowOperands<T, S>& ops, u32 j, const float (&sum)[8]) {
  float a[8];
  round_through<T>(sum, a);
  if (io.bias) {
    float b[8];
    Vec16<T>::unpack(ops.b[j], b);
#pragma unroll
    for (u32 k = 0; k < 8; ++k) a[k] = __fadd_rn(a[k], b[k]);
  }
  if (io.residual) {
    float r[8];
    Vec16<T>::unpack(ops.r[j], r);
#pragma unroll
    for (u32 k = 0; k < 8; ++k) a[k] = __fadd_rn(a[k], r[k]);
  }
  return Vec16<T>::pack(a);
}

/** Group gi of dst (a row of T) = the 16 raw bytes v, element by element where dst is misaligned. */
template <typename T>
__device__ __forceinline__ void st_group_raw(T* dst, u32 gi, const u32x4& v) {
  T* d = dst + 8ull * gi;
  if (aligned16(d)) {
    st_128(d, v);
    return;
  }
  const u16* e = reinterpret_cast<const u16*>(&v);
  for (u32 k = 0; k < 8; ++k) reinterpret_cast<u16*>(d)[k] = e[k];
}

/** Writes residual_out and out of `row` from this thread's hr groups (slot j: group threadIdx.x + j x
 * kNormThreads). Every thread of the block calls it. */
template <typename T, u32 S>
__device__ __forceinline__ void finish_row(const NormIo<T>& io, u64 row, const u32x4 (&hr)[S],
                                           const RowOperands<T, S>& ops, float* red) {
  const u32 gpr = io.groups();
  const u64 base = row * io.hidden;
  float acc = 0.0f;
#pragma unroll
  for (u32 j = 0; j < S; ++j) {
    const u32 gi = threadIdx.x + j * kNormThreads;
    if (gi >= gpr) continue;
    if (io.residual_out) st_group_raw(io.residual_out + base, gi, hr[j]);
    float h[8];
    Vec16<T>::unpack(hr[j], h);
#pragma unroll
    for (u32 k = 0; k < 8; ++k) acc = __fadd_rn(acc, __fmul_rn(h[k], h[k]));
  }
  const float sum = norm_block_sum(acc, red);
  const float rstd =
      __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sum, static_cast<float>(io.hidden)), io.eps)));
#pragma unroll
  for (u32 j = 0; j < S; ++j) {
    const u32 gi = threadIdx.x + j * kNormThreads;
    if (gi >= gpr) continue;
    float h[8], w[8], y[8];
    Vec16<T>::unpack(hr[j], h);
    Vec16<T>::unpack(ops.w[j], w);
#pragma unroll
    for (u32 k = 0; k < 8; ++k) y[k] = __fmul_rn(__fmul_rn(h[k], rstd), w[k]);
    if (io.out_scale_inv > 0.0f) {
      u64 q = 0;
#pragma unroll
      for (u32 k = 0; k < 8; ++k) q |= static_cast<u64>(from_float<fp8e4m3>(__fmul_rn(y[k], io.out_scale_inv)).bits) << (8 * k);
      u8* dst = static_cast<u8*>(io.out) + base + 8ull * gi;
      if ((reinterpret_cast<u64>(dst) & 7) == 0) *reinterpret_cast<u64*>(dst) = q;
      else for (u32 k = 0; k < 8; ++k) dst[k] = static_cast<u8>(q >> (8 * k));
    } else {
      store_group(static_cast<T*>(io.out) + base, gi, y, 8);
    }
  }
}

#define SYMMKIT_NORM_PARAMS(T)                                                                                   \
  const T *bias, const T *residual, T *residual_out, const T *weight, void *out, u64 rows, u32 hidden, float eps, \
      float out_scale_inv
#define SYMMKIT_NORM_IO(T) \
  const NormIo<T> io { bias, residual, residual_out, weight, out, rows, hidden, eps, out_scale_inv }

/** This thread's groups of a row (slot j at byte at0 + 16 gi of each peer's slot in our buffer), once
 * every peer's has arrived, reduced in rank order with ours (mine[j]) into f[j]. While it takes few
 * registers (slots x ranks <= 4) every group of every peer is polled at once; else slot after slot. */
template <typename T, u32 W, u32 S>
__device__ __forceinline__ void gather_row(const LamportCall<T, W>& c, const WaitEnv& env, u64 at0, u32 gpr,
                                           const u32x4 (&mine)[S], float (&f)[S][8]) {
  const SymmView& v = c.v;
  if constexpr (S * W <= 4) {
    u32x4 raw[S][W];
    u32 waiting = v.rank;
    bounded_wait(env, waiting, c.tag.word, [&] {
      // Every group of every peer requested first, then checked: one round trip, not S x (W - 1).
#pragma unroll
      for (u32 j = 0; j < S; ++j) {
        const u32 gi = threadIdx.x + j * kNormThreads;
#pragma unroll
        for (u32 r = 0; r < W; ++r)
          if (gi < gpr && r != v.rank) raw[j][r] = ld_volatile_128(c.from(r) + at0 + 16ull * gi);
      }
      bool all = true;
#pragma unroll
      for (u32 j = 0; j < S; ++j) {
        const u32 gi = threadIdx.x + j * kNormThreads;
#pragma unroll
        for (u32 r = 0; r < W; ++r) {
          if (gi < gpr && r != v.rank && Sentinel<T>::any(raw[j][r])) {
            all = false;
            waiting = r;
          }
        }
      }
      return all;
    });
#pragma unroll
    for (u32 j = 0; j < S; ++j) {
      if (threadIdx.x + j * kNormThreads >= gpr) continue;
#pragma unroll
      for (u32 r = 0; r < W; ++r) raw[j][r] = r == v.rank ? Sentinel<T>::clean(mine[j]) : raw[j][r];
      reduce_ranks<T, OpSum, W>(raw[j], f[j]);
    }
  } else {
#pragma unroll
    for (u32 j = 0; j < S; ++j) {
      const u32 gi = threadIdx.x + j * kNormThreads;
      if (gi < gpr) reduce_arrived<T, OpSum, W>(c, env, at0 + 16ull * gi, Sentinel<T>::clean(mine[j]), f[j]);
    }
  }
}

/** This thread's groups of row `row` of x, raw (cleaned of the sentinel where they are reduced, as they
 * were sent). */
template <typename T, u32 S>
__device__ __forceinline__ void own_groups(const T* in, const NormIo<T>& io, u64 row, u32x4 (&mine)[S]) {
#pragma unroll
  for (u32 j = 0; j < S; ++j) {
    const u32 gi = threadIdx.x + j * kNormThreads;
    mine[j] = gi < io.groups() ? load_group(in + row * io.hidden, gi, io.hidden) : u32x4{0u, 0u, 0u, 0u};
  }
}

template <typename T, u32 W, u32 S>
__global__ void __launch_bounds__(kNormThreads) lamport_ar_rms_norm(const __grid_constant__ SymmView v, const T* in,
                                                                    MailboxState* s, u64 cap, const CallTag tag,
                                                                    SYMMKIT_NORM_PARAMS(T)) {
  SYMMKIT_NORM_IO(T);
  __shared__ float red[16];
  const LamportCounts counts = read_counts(s);
  const u32 rank = v.rank;
  const u32 gpr = io.groups();
  const u64 groups = rows * gpr;
  // Sending spreads over the whole grid (one SM pushing a row alone is slow); S groups loaded at a time.
  // The first groups are requested before anything waits for the call count (open, to()): the two
  // round trips overlap.
  const u64 n = rows * hidden;
  u64 base = global_thread();
  u32x4 x[S];
#pragma unroll
  for (u32 j = 0; j < S; ++j) {
    const u64 i = base + j * grid_threads();
    if (i < groups) x[j] = load_group(in, i, n);
  }
  const LamportCall<T, W> c(v, s, cap, tag, counts);
  c.open();
  while (base < groups) {
#pragma unroll
    for (u32 j = 0; j < S; ++j) {
      const u64 i = base + j * grid_threads();
      if (i >= groups) continue;
      const u32x4 y = Sentinel<T>::clean(x[j]);
#pragma unroll
      for (u32 k = 1; k < W; ++k) st_volatile_128(c.to((rank + k) % W) + 16 * i, y);
    }
    base += S * grid_threads();
#pragma unroll
    for (u32 j = 0; j < S; ++j) {
      const u64 i = base + j * grid_threads();
      if (i < groups) x[j] = load_group(in, i, n);
    }
  }
  const WaitEnv env = v.wait_env();
  c.arrived(env);
  for (u64 row = blockIdx.x; row < rows; row += gridDim.x) {
    u32x4 mine[S], hr[S];
    own_groups(in, io, row, mine);
    const RowOperands<T, S> ops(io, row, true);
    float f[S][8];
    gather_row<T, W, S>(c, env, row * gpr * 16ull, gpr, mine, f);
#pragma unroll
    for (u32 j = 0; j < S; ++j) hr[j] = add_residual(io, ops, j, f[j]);
    finish_row(io, row, hr, ops, red);
  }
  c.close(groups * 16);
}

template <typename T, u32 W, u32 S>
__global__ void __launch_bounds__(kNormThreads) lamport_two_shot_ar_rms_norm(const __grid_constant__ SymmView v,
                                                                             const T* in, MailboxState* s, u64 cap,
                                                                             const CallTag tag, SYMMKIT_NORM_PARAMS(T)) {
  SYMMKIT_NORM_IO(T);
  __shared__ float red[16];
  const LamportCall<T, W> c(v, s, cap, tag);
  const u32 rank = v.rank;
  const u32 gpr = io.groups();
  const u64 chunk = ceil_div(rows, W);  // rows per owner
  const u64 row_bytes = 16ull * gpr;
  const u64 ag = chunk * row_bytes;  // where the all-gather half of a slot starts
  c.open();
  // Each peer's chunk, spread over the whole grid; S groups loaded at a time.
  const u64 n = rows * hidden;
  for (u64 base = global_thread(); base < chunk * gpr; base += S * grid_threads()) {
#pragma unroll
    for (u32 k = 1; k < W; ++k) {
      const u32 p = (rank + k) % W;
      u32x4 x[S];
#pragma unroll
      for (u32 j = 0; j < S; ++j) {
        const u64 jj = base + j * grid_threads();
        if (jj < chunk * gpr && p * chunk * gpr + jj < rows * gpr)
          x[j] = Sentinel<T>::clean(load_group(in, p * chunk * gpr + jj, n));
      }
#pragma unroll
      for (u32 j = 0; j < S; ++j) {
        const u64 jj = base + j * grid_threads();
        if (jj < chunk * gpr && p * chunk * gpr + jj < rows * gpr)
          st_volatile_128(c.to(p) + 16 * jj, x[j]);
      }
    }
  }
  const WaitEnv env = v.wait_env();
  c.arrived(env);
  const u64 first = min(rows, rank * chunk);
  const u64 last = min(rows, first + chunk);
  // Owned rows first: peers wait for them.
  for (u64 row = first + blockIdx.x; row < last; row += gridDim.x) {
    const RowOperands<T, S> ops(io, row, true);
    u32x4 mine[S], hr[S];
    own_groups(in, io, row, mine);
    float f[S][8];
    const u64 at0 = (row - first) * row_bytes;
    gather_row<T, W, S>(c, env, at0, gpr, mine, f);
#pragma unroll
    for (u32 j = 0; j < S; ++j) {
      const u32 gi = threadIdx.x + j * kNormThreads;
      if (gi >= gpr) continue;
      hr[j] = Sentinel<T>::clean(add_residual(io, ops, j, f[j]));
#pragma unroll
      for (u32 k = 1; k < W; ++k)
        st_volatile_128(c.to((rank + k) % W) + ag + at0 + 16ull * gi, hr[j]);
    }
    finish_row(io, row, hr, ops, red);
  }
  // The other rows, from their owners' pushes: walk them in the owners' order of work.
  const u64 others = rows - (last - first);
  for (u64 o = blockIdx.x; o < others; o += gridDim.x) {
    const u64 row = o < first ? o : o + (last - first);
    const u32 owner = static_cast<u32>(row / chunk);
    const u8* from = c.from(owner) + ag + (row - owner * chunk) * row_bytes;
    const RowOperands<T, S> ops(io, row, false);
    u32x4 hr[S];
    bounded_wait(env, owner, tag.word, [&] {
      bool all = true;
#pragma unroll
      for (u32 j = 0; j < S; ++j) {
        const u32 gi = threadIdx.x + j * kNormThreads;
        if (gi >= gpr) continue;
        hr[j] = ld_volatile_128(from + 16ull * gi);
        all = all && !Sentinel<T>::any(hr[j]);
      }
      return all;
    });
    finish_row(io, row, hr, ops, red);
  }
  c.close(2 * ag);
}

template <typename T, u32 W>
__device__ __forceinline__ void copy_rows_in(const SymmView& v, const T* in, const NormIo<T>& io) {
  T* own = static_cast<T*>(v.buffers[v.rank]);
  const u32 gpr = io.groups();
  for (u64 row = blockIdx.x; row < io.rows; row += gridDim.x) {
#pragma unroll
    for (u32 j = 0; j < kNormSlots; ++j) {
      const u32 gi = threadIdx.x + j * kNormThreads;
      if (gi < gpr) copy_group(own + row * io.hidden, in + row * io.hidden, gi, io.hidden);
    }
  }
}

/** f = the rank-order sum of group gi of `row` over every rank's buffer. */
template <typename T, u32 W>
__device__ __forceinline__ void pull_group(const SymmView& v, const NormIo<T>& io, u64 row, u32 gi, float (&f)[8]) {
  u32x4 raw[W];
#pragma unroll
  for (u32 r = 0; r < W; ++r) raw[r] = load_group(static_cast<const T*>(v.buffers[r]) + row * io.hidden, gi, io.hidden);
  reduce_ranks<T, OpSum, W>(raw, f);
}

/** Normalises rows blockIdx.x, + gridDim.x, ...: sum(row, gi, f) puts group gi's rank-order sum in f. */
template <typename T, u32 S, typename Sum>
__device__ __forceinline__ void norm_rows(const NormIo<T>& io, float* red, Sum sum) {
  const u32 gpr = io.groups();
  for (u64 row = blockIdx.x; row < io.rows; row += gridDim.x) {
    const RowOperands<T, S> ops(io, row, true);
    u32x4 hr[S];
#pragma unroll
    for (u32 j = 0; j < S; ++j) {
      const u32 gi = threadIdx.x + j * kNormThreads;
      if (gi >= gpr) continue;
      float f[8];
      sum(row, gi, f);
      hr[j] = add_residual(io, ops, j, f);
    }
    finish_row(io, row, hr, ops, red);
  }
}

template <typename T, u32 W, u32 S>
__global__ void __launch_bounds__(kNormThreads) pull_ar_rms_norm(const __grid_constant__ SymmView v, const T* in,
                                                                 const CallTag tag, SYMMKIT_NORM_PARAMS(T)) {
  SYMMKIT_NORM_IO(T);
  __shared__ float red[16];
  if (in) copy_rows_in<T, W>(v, in, io);
  start_barrier(v, in != nullptr, tag);
  norm_rows<T, S>(io, red, [&](u64 row, u32 gi, float(&f)[8]) { pull_group<T, W>(v, io, row, gi, f); });
  symm_sync<true, false>(v, flat_block(), tag, 1);
}

template <typename T, u32 W, u32 S>
__global__ void __launch_bounds__(kNormThreads) pull_two_shot_ar_rms_norm(const __grid_constant__ SymmView v,
                                                                          const __grid_constant__ SymmView scratch,
                                                                          const T* in, const CallTag tag,
                                                                          SYMMKIT_NORM_PARAMS(T)) {
  SYMMKIT_NORM_IO(T);
  __shared__ float red[16];
  if (in) copy_rows_in<T, W>(v, in, io);
  start_barrier(v, in != nullptr, tag);
  const u32 gpr = io.groups();
  const u64 chunk = ceil_div(rows, W);
  const u64 first = min(rows, v.rank * chunk);
  const u64 last = min(rows, first + chunk);
  // Row r is handled by block r % grid on every rank (the barriers pair blocks of one index).
  for (u64 row = first_tile(first); row < last; row += gridDim.x) {
    const RowOperands<T, S> ops(io, row, true);
#pragma unroll
    for (u32 j = 0; j < S; ++j) {
      const u32 gi = threadIdx.x + j * kNormThreads;
      if (gi >= gpr) continue;
      float f[8];
      pull_group<T, W>(v, io, row, gi, f);
      const u32x4 h = add_residual(io, ops, j, f);
#pragma unroll
      for (u32 r = 0; r < W; ++r) st_128(static_cast<T*>(scratch.buffers[r]) + row * hidden + 8ull * gi, h);
    }
  }
  symm_sync<true, true>(v, flat_block(), tag, 1);
  const T* mine = static_cast<const T*>(scratch.buffers[v.rank]);
  for (u64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const RowOperands<T, S> ops(io, row, false);
    u32x4 hr[S];
#pragma unroll
    for (u32 j = 0; j < S; ++j) {
      const u32 gi = threadIdx.x + j * kNormThreads;
      if (gi < gpr) hr[j] = ld_128(mine + row * hidden + 8ull * gi);
    }
    finish_row(io, row, hr, ops, red);
  }
}

/** The norm alone: a is an all-reduce's output [rows, hidden] (may be io.out itself). */
template <typename T, u32 S>
__global__ void __launch_bounds__(kNormThreads) rms_norm_rows(const T* a, SYMMKIT_NORM_PARAMS(T)) {
  SYMMKIT_NORM_IO(T);
  __shared__ float red[16];
  norm_rows<T, S>(io, red, [&](u64 row, u32 gi, float(&f)[8]) {
    Vec16<T>::unpack(load_group(a + row * hidden, gi, hidden), f);
  });
}

#undef SYMMKIT_NORM_IO
#undef SYMMKIT_NORM_PARAMS

}  // namespace symmkit
