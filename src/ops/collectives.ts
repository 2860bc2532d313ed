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
  /** dispatch and combine share one list. */
  readonly moe: string;
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
  /** `x` to `peer` and `out` from it in one call on both ranks (sizes may differ). Returns `out`. */
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
  /** gather(aShard) x b^T, and the gathered A (see GpuCollectives.allGatherMatmul). */
  allGatherMatmul(
    aShard: In,
    b: T,
    options?: X & AllGatherMatmulOptions<T> & { algorithm?: A["allGatherMatmul"] },
  ): { out: T; gathered: T };
  /** This rank's rows of the sum over ranks of a x b^T (see GpuCollectives.matmulReduceScatter). */
  matmulReduceScatter(
    a: T,
    b: T,
    options?: X & FusedMatmulOptions<T> & { algorithm?: A["matmulReduceScatter"] },
  ): T;
  /** The sum over ranks of a x b^T on every rank, optionally normalised (see GpuCollectives.matmulAllReduce). */
  matmulAllReduce(
    a: T,
    b: T,
    options?: X & MatmulAllReduceOptions<T> & { algorithm?: A["matmulAllReduce"] },
  ): T;
  /** allReduce, + bias + residual, RMSNorm (see GpuCollectives.allReduceRmsNorm). */
  allReduceRmsNorm(
    x: In,
    options: X & AllReduceRmsNormOptions<T> & { algorithm?: A["allReduceRmsNorm"] },
  ): { output: T; residualOut: T | undefined };
  /** Uneven all-to-all by rows of x's first dimension (see CpuCollectives.allToAllV). */
  allToAllV(
    x: T,
    out: T,
    sendCounts: readonly number[],
    options?: X & { recvCounts?: readonly number[]; algorithm?: A["allToAllV"] },
  ): { output: T; recvCounts: number[] };
  /** The same with the counts as an i32 tensor of world elements: on GPUs no host wait, so capturable
   * (see GpuCollectives.allToAllV). */
  allToAllV(
    x: T,
    out: T,
    sendCounts: T,
    options?: X & { recvCountsOut?: T; algorithm?: A["allToAllV"] },
  ): { output: T; recvCounts: T };
  /** MoE dispatch: every (token, slot) pair to its expert's owner, expert-major (src/ops/moe/checks.ts). */
  dispatch(
    tokens: T,
    topkIdx: T,
    topkWeights: T,
    options: X & DispatchOptions<T> & { algorithm?: A["moe"] },
  ): DispatchResult<T>;
  /** MoE combine: the experts' output back to the dispatched tokens, weighted, summed in slot order. */
  combine(expertOut: T, handle: MoeHandle<T>, options?: X & CombineOptions<T> & { algorithm?: A["moe"] }): T;
}
