// The interfaces the collectives implement, so that the compiler holds them to the same calls, defaults and
// return values: Collectives for both backends on symmetric memory (GpuCollectives on GPU memory,
// CpuCollectives on shared host memory), GroupCollectives (its calls that need no symmetric memory) for a
// group across hosts (HostsCollectives), which refuses the rest. A backend names its own tensor types, the
// algorithms it has, and its extra options (GPUs: the stream).
import type { AllGatherMatmulOptions, FusedMatmulOptions, MatmulAllReduceOptions } from "./fused/checks.js";
import type { AllReduceRmsNormOptions } from "./norm/checks.js";
import type { ReduceOp } from "./validate.js";
import type { CombineOptions, DispatchOptions, DispatchResult, MoeHandle } from "./moe/checks.js";

/** The algorithm names a backend accepts, by operation ("auto" among them). */
export interface AlgorithmNames {
  readonly allReduce: string;
  readonly allGather: string;
  readonly reduceScatter: string;
  readonly allGatherMatmul: string;
  readonly matmulReduceScatter: string;
  readonly matmulAllReduce: string;
  readonly allReduceRmsNorm: string;
  /** send, recv and sendRecv share one list. */
  readonly sendRecv: string;
  readonly allToAll: string;
  readonly allToAllV: string;
  /** dispatch's. */
  readonly moe: string;
  readonly combine: string;
}

/** The algorithm names of the calls every group has, across hosts too (GroupCollectives). */
export type GroupAlgorithmNames = Pick<
  AlgorithmNames,
  "allReduce" | "allGather" | "reduceScatter" | "sendRecv" | "allToAll"
>;

/**
 * The calls every group's collectives have, also a group across hosts (HostsCollectives). `T`: the
 * backend's tensor; `In`: what a collective takes as input (GPUs: a plain or a symmetric tensor); `A`: its
 * algorithms; `X`: options every call takes (GPUs: `stream`).
 */
export interface GroupCollectives<T, In, A extends GroupAlgorithmNames, X extends object = object> {
  /** Sum (or max, min) of `input` over all ranks, into `output`; without one, into a new tensor. Returns
   * the output. */
  allReduce(input: In, options?: X & { op?: ReduceOp; algorithm?: A["allReduce"]; output?: T }): T;
  /** Every rank's `input`, in rank order, into `output` (world x input elements). Returns `output`. */
  allGather(input: In, output: T, options?: X & { algorithm?: A["allGather"] }): T;
  /** Chunk `rank` of the reduction of every rank's `input` (world x output elements), into `output`. */
  reduceScatter(input: In, output: T, options?: X & { op?: ReduceOp; algorithm?: A["reduceScatter"] }): T;
  /** `x` to `peer`, which calls recv (or sendRecv) with a tensor of the same bytes; ordered per pair. */
  send(x: T, peer: number, options?: X & { algorithm?: A["sendRecv"] }): void;
  /** Into `out`, what `peer` sent (send or sendRecv). Returns `out`. */
  recv(out: T, peer: number, options?: X & { algorithm?: A["sendRecv"] }): T;
  /** `x` to `peer` and `out` from it in one call (sizes may differ); the peer calls sendRecv, or send and
   * recv. Returns `out`. */
  sendRecv(x: T, out: T, peer: number, options?: X & { algorithm?: A["sendRecv"] }): T;
  /** Chunk j of `x` to rank j; chunk i of `out` from rank i (world equal chunks). Returns `out`. */
  allToAll(x: In, out: T, options?: X & { algorithm?: A["allToAll"] }): T;
  /** Every rank meets here (GPUs: in stream order, on the device). */
  barrier(options?: X): void;
}

/** The calls that need memory symmetric over the whole group: a group across hosts refuses them. */
export type SymmetricCall =
  | "allGatherMatmul"
  | "matmulReduceScatter"
  | "matmulAllReduce"
  | "allReduceRmsNorm"
  | "allToAllV"
  | "dispatch"
  | "combine";

/** What a group without such memory has in place of those calls: calls that refuse with a typed error. */
export type Refused<K extends string> = { readonly [P in K]: (...args: unknown[]) => never };

/** Every call of a group on symmetric memory (GpuCollectives, CpuCollectives). */
export interface Collectives<
  T,
  In,
  A extends AlgorithmNames,
  X extends object = object,
> extends GroupCollectives<T, In, A, X> {
  /** Bytes of the group's staging buffer: the largest plain input a staging algorithm takes. */
  readonly capacityBytes: number;
  /**
   * All-gather + GEMM, a column-parallel linear layer: `aShard` [rows, k] on each rank (plain, or a
   * symmetric tensor read in place), `b` this rank's weight [n, k] (or [k, n] with layoutB "kn"); returns
   * out = gather(aShard) x b^T ([world x rows, n], bf16) and the gathered A ([world x rows, k]), both
   * allocated unless given. bf16, or fp8 e4m3 with per-tensor scales (scaleA the same on every rank).
   * `fused` runs the GEMM while the peers' shards arrive (see src/ops/fused/fused-matmul.ts); the result is
   * bitwise the GEMM of the gathered A. A plain shard is staged in the group's symmetric buffer.
   */
  allGatherMatmul(
    aShard: In,
    b: T,
    options?: X & AllGatherMatmulOptions<T> & { algorithm?: A["allGatherMatmul"] },
  ): { out: T; gathered: T };
  /**
   * GEMM + reduce-scatter, a row-parallel linear layer: `a` [m, k] (this rank's slice of the contraction),
   * `b` [n, k] (or [k, n]); returns this rank's rows [rank x m / world, ...) of the sum over ranks of
   * a x b^T, [m / world, n] bf16. Every rank's partial is rounded to bf16 and the partials are summed in
   * f32 in rank order, rounded once: every run and every rank gives the same bits, equal to symmkit's
   * GEMM then reduce-scatter. `fused` needs m x n x 2 bytes of the staging buffer.
   */
  matmulReduceScatter(
    a: T,
    b: T,
    options?: X & FusedMatmulOptions<T> & { algorithm?: A["matmulReduceScatter"] },
  ): T;
  /**
   * GEMM + all-reduce, a row-parallel linear layer: `a` [m, k] (this rank's slice of the contraction),
   * `b` this rank's weight [n, k] (or [k, n] with layoutB "kn"); returns the sum over ranks of a x b^T,
   * [m, n] bf16 on every rank (each rank's partial rounded to bf16, summed in rank order in f32, rounded
   * once), or with `rmsNorm` allReduceRmsNorm of the partial (out its output). Algorithms: `fused` (one
   * split-K GEMM whose epilogue pushes its tiles to every rank and sums them as they land; it needs
   * world x m x n x 2 bytes of the staging buffer), `sequential` (auto: symmkit's GEMM, then symmkit's
   * all-reduce or allReduceRmsNorm; the same bits as fused) and `nccl_cublaslt`.
   */
  matmulAllReduce(
    a: T,
    b: T,
    options?: X & MatmulAllReduceOptions<T> & { algorithm?: A["matmulAllReduce"] },
  ): T;
  /**
   * All-reduce + bias + residual + RMSNorm, the op after a row-parallel layer: with s = the sum of `x`
   * ([rows, hidden], bf16 or f16) over ranks rounded to its dtype, h = (s + bias) + residual rounded,
   * returns output = h / sqrt(mean(h^2) + eps) x weight over each row (x's dtype, or fp8e4m3 times
   * 1 / outputScale) and writes h to residualOut when given. f32 arithmetic in one fixed order: every
   * algorithm and every rank gives the same bits (device/include/symmkit/fused/ar_rms_norm.cuh).
   */
  allReduceRmsNorm(
    x: In,
    options: X & AllReduceRmsNormOptions<T> & { algorithm?: A["allReduceRmsNorm"] },
  ): { output: T; residualOut: T | undefined };
  /**
   * Uneven all-to-all by rows of x's first dimension: x's first sendCounts[0] rows to rank 0, the next
   * sendCounts[1] to rank 1, ...; out receives each rank's rows for this rank, packed in rank order.
   *
   * Counts as a host array (algorithms nccl, the auto pick, and copy_engine): they are exchanged first
   * (recvCounts, when given, is checked against them) and judged alike on every rank: a call that cannot
   * run (an out too small, wrong recvCounts, for copy_engine an x beyond the staging buffer) throws on
   * every rank with nothing written. Returns out and the rows received from each rank. Both wait on the
   * host for the counts, so neither can be captured in a CUDA graph.
   *
   * Counts as an i32 tensor of world elements on this GPU (algorithm pull, the auto pick): no host wait,
   * so the call can be captured. x is staged in the staging buffer; one kernel reads every rank's counts,
   * judges the call alike on every rank and copies this rank's rows. Returns out and `recvCountsOut` (a
   * new i32 tensor unless given; needed inside a capture) with the rows received from each rank. A call
   * the GPU refuses (a rank's counts adding up to more rows than its x has, or negative; rows of
   * another size than rank 0's; an out too
   * small; an x beyond the staging buffer) writes no row, sets the counts to -1 and makes the next
   * group.synchronize() throw InvalidArgumentError saying why, on every rank. x may hold more rows than
   * the counts send (a buffer of fixed capacity, as in a replayed graph): its first ones go.
   */
  allToAllV(
    x: T,
    out: T,
    sendCounts: readonly number[],
    options?: X & { recvCounts?: readonly number[]; algorithm?: A["allToAllV"] },
  ): { output: T; recvCounts: number[] };
  /** The same with the counts as an i32 tensor of world elements (see above): on GPUs no host wait, so
   * capturable. */
  allToAllV(
    x: T,
    out: T,
    sendCounts: T,
    options?: X & { recvCountsOut?: T; algorithm?: A["allToAllV"] },
  ): { output: T; recvCounts: T };
  /**
   * MoE dispatch: each (token, slot) pair of `tokens` [tokens, hidden] (bf16, or fp8e4m3 with per-token
   * `scales`) to its expert's owner, expert-major (layout: src/ops/moe/checks.ts), with its weight (and
   * scale), the rows per local expert, and the handle combine takes. The group's staging buffer holds
   * the staged tokens. Algorithm pull waits on the host for the peers' counts (to size the outputs and
   * judge the call alike on every rank): a refused call throws on every rank, and it cannot be captured.
   * Algorithm pull_device (auto inside a capture, with `into` or with maxRows) needs maxRows: a kernel
   * judges and routes, no host wait, so it can be captured, with `into` (an eager pull_device result of the
   * same shapes, whose tensors it writes again); a refused call writes nothing, sets counts to -1 on every
   * rank, and the next group.synchronize() throws InvalidArgumentError saying why.
   */
  dispatch(
    tokens: T,
    topkIdx: T,
    topkWeights: T,
    options: X & DispatchOptions<T> & { algorithm?: A["moe"] },
  ): DispatchResult<T>;
  /**
   * MoE combine: `expertOut` (this rank's experts' output, row for row as dispatched, bf16) back to the
   * tokens of `handle`'s dispatch, each the weighted sum over its slots (f32, every operation rounded,
   * then bf16): in slot order (`pull`, auto), or per_rank: each expert owner sums the token's slots on it
   * in slot order and rounds that to bf16, the partials added in rank order (src/ops/moe/route.ts
   * combineTokenByRank), so a token's row crosses once per owner rank, not once per slot. With `pull`, a
   * symmetric `expertOut` (every rank passes one of this group's) is read in place by the peers, with no
   * copy into the staging buffer; a plain one is staged. Graph-capturable.
   */
  combine(
    expertOut: T,
    handle: MoeHandle<T>,
    options?: X & CombineOptions<T> & { algorithm?: A["combine"] },
  ): T;
}
