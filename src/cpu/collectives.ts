// The CPU backend's collectives: the GPU algorithms, step by step, on processes that share memory,
// written to be read as the reference for the GPU kernels. This facade holds the group's context
// (group.ts: pads, staging buffer, call numbers, fingerprints) and hands each call to its family:
// coll.ts (all-reduce, all-gather, reduce-scatter, broadcast), fused.ts (the fused matmuls and
// all-reduce + RMSNorm), exchange.ts (send/recv, sendRecv, all-to-all(v)) and moe.ts (dispatch, combine).
import type { ReduceOp } from "../ops/validate.js";
import type {
  CpuAllGatherAlgorithm,
  CpuAllReduceAlgorithm,
  CpuReduceScatterAlgorithm,
} from "../ops/coll/registry.js";
import type { Collectives } from "../ops/collectives.js";
import type {
  AllGatherMatmulOptions,
  CpuFusedMatmulAlgorithm,
  FusedMatmulOptions,
  MatmulAllReduceOptions,
} from "../ops/fused/checks.js";
import type { AllReduceRmsNormOptions, CpuArNormAlgorithm } from "../ops/norm/checks.js";
import type { CpuExchangeAlgorithm } from "../ops/exchange/checks.js";
import type {
  CombineOptions,
  CpuCombineAlgorithm,
  CpuMoeAlgorithm,
  DispatchOptions,
  DispatchResult,
  MoeHandle,
} from "../ops/moe/checks.js";
import { SPENT_CALL, SPENT_MESSAGE, takeCollectiveTurns, type Turns } from "../distributed/fingerprint.js";
import * as coll from "./coll.js";
import { CpuExchange, type AllToAllVOptions } from "./exchange.js";
import * as fused from "./fused.js";
import { CpuGroup } from "./group.js";
import type { HostTensor } from "./host-tensor.js";
import * as moe from "./moe.js";
import type { CpuSymmetricTensor } from "./symmetric.js";
import type { CpuSyncEnv } from "./sync.js";

export { ONE_SHOT_MAX_BYTES } from "./coll.js";

/** The algorithms the CPU backend accepts, by operation. */
export interface CpuAlgorithms {
  readonly allReduce: CpuAllReduceAlgorithm;
  readonly allGather: CpuAllGatherAlgorithm;
  readonly reduceScatter: CpuReduceScatterAlgorithm;
  readonly allGatherMatmul: CpuFusedMatmulAlgorithm;
  readonly matmulReduceScatter: CpuFusedMatmulAlgorithm;
  readonly matmulAllReduce: CpuFusedMatmulAlgorithm;
  readonly allReduceRmsNorm: CpuArNormAlgorithm;
  readonly sendRecv: CpuExchangeAlgorithm;
  readonly allToAll: CpuExchangeAlgorithm;
  readonly allToAllV: CpuExchangeAlgorithm;
  readonly moe: CpuMoeAlgorithm;
  readonly combine: CpuCombineAlgorithm;
}

export class CpuCollectives implements Collectives<HostTensor, HostTensor, CpuAlgorithms> {
  readonly #group: CpuGroup;
  readonly #exchange: CpuExchange;

  constructor(sync: CpuSyncEnv, staging: CpuSymmetricTensor) {
    this.#group = new CpuGroup(sync, staging);
    this.#exchange = new CpuExchange(this.#group);
  }

  get capacityBytes(): number {
    return this.#group.capacityBytes;
  }

  /** Sum (or max, min) of `input` over all ranks, into `output` (default: a new tensor). */
  allReduce(
    input: HostTensor,
    options: { op?: ReduceOp; algorithm?: CpuAllReduceAlgorithm; output?: HostTensor } = {},
  ): HostTensor {
    return coll.allReduce(this.#group, input, options);
  }

  /**
   * All-reduce + bias + residual + RMSNorm, the reference (see GpuCollectives.allReduceRmsNorm): the
   * all-reduce, then the norm on the host in the kernels' order of operations (src/ops/norm/rms-norm.ts), so
   * the result has the GPU's bits.
   */
  allReduceRmsNorm(
    x: HostTensor,
    options: AllReduceRmsNormOptions<HostTensor> & { algorithm?: CpuArNormAlgorithm },
  ): { output: HostTensor; residualOut: HostTensor | undefined } {
    return fused.allReduceRmsNorm(this.#group, x, options);
  }

  /** Every rank's `input`, in rank order, into `output` (world x input elements). */
  allGather(
    input: HostTensor,
    output: HostTensor,
    options: { algorithm?: CpuAllGatherAlgorithm } = {},
  ): HostTensor {
    return coll.allGather(this.#group, input, output, options.algorithm ?? "auto");
  }

  /** Chunk `rank` of the reduction of every rank's `input` (world x output elements), into `output`. */
  reduceScatter(
    input: HostTensor,
    output: HostTensor,
    options: { op?: ReduceOp; algorithm?: CpuReduceScatterAlgorithm } = {},
  ): HostTensor {
    return coll.reduceScatter(this.#group, input, output, options.op ?? "sum", options.algorithm ?? "auto");
  }

  /**
   * All-gather + GEMM, the reference: every rank's aShard [rows, k] gathered in rank order into
   * `gathered` [world x rows, k], then out = gathered x b^T ([world x rows, n], bf16). The GPU backend
   * fuses the two; here they run one after the other.
   */
  allGatherMatmul(
    aShard: HostTensor,
    b: HostTensor,
    options: AllGatherMatmulOptions<HostTensor> & { algorithm?: CpuFusedMatmulAlgorithm } = {},
  ): { out: HostTensor; gathered: HostTensor } {
    return fused.allGatherMatmul(this.#group, aShard, b, options);
  }

  /**
   * GEMM + reduce-scatter, the reference: this rank's partial a x b^T ([m, n], rounded to bf16 as a GEMM
   * stores it), then rows [rank x m / world, ...) of the sum over ranks in rank order (f32, one rounding)
   * into `out` [m / world, n].
   */
  matmulReduceScatter(
    a: HostTensor,
    b: HostTensor,
    options: FusedMatmulOptions<HostTensor> & { algorithm?: CpuFusedMatmulAlgorithm } = {},
  ): HostTensor {
    return fused.matmulReduceScatter(this.#group, a, b, options);
  }

  /**
   * GEMM + all-reduce, the reference: this rank's partial a x b^T ([m, n], rounded to bf16 as a GEMM
   * stores it), summed over ranks in rank order (f32, one rounding) into `out` on every rank; with
   * `rmsNorm`, allReduceRmsNorm of the partial instead, its output in `out`.
   */
  matmulAllReduce(
    a: HostTensor,
    b: HostTensor,
    options: MatmulAllReduceOptions<HostTensor> & { algorithm?: CpuFusedMatmulAlgorithm } = {},
  ): HostTensor {
    return fused.matmulAllReduce(this.#group, a, b, options);
  }

  /** `tensor` of rank `root` into `tensor` of every rank. */
  broadcast(tensor: HostTensor, root: number): HostTensor {
    return coll.broadcast(this.#group, tensor, root);
  }

  /**
   * Hands `tensor` to `peer`, which must call recv. Returns once the data is staged and the peer told;
   * our staging buffer is reused only after the peer acknowledged, so ring exchanges cannot deadlock.
   */
  send(tensor: HostTensor, peer: number, options: { algorithm?: CpuExchangeAlgorithm } = {}): void {
    this.#exchange.send(tensor, peer, options);
  }

  recv(tensor: HostTensor, peer: number, options: { algorithm?: CpuExchangeAlgorithm } = {}): HostTensor {
    return this.#exchange.recv(tensor, peer, options);
  }

  /** Sends `x` to `peer` and receives `out` from it, in one call on both ranks (sizes may differ). */
  sendRecv(
    x: HostTensor,
    out: HostTensor,
    peer: number,
    options: { algorithm?: CpuExchangeAlgorithm } = {},
  ): HostTensor {
    return this.#exchange.sendRecv(x, out, peer, options);
  }

  /** Chunk j of `x` to rank j; chunk i of `out` from rank i (world equal chunks). */
  allToAll(x: HostTensor, out: HostTensor, options: { algorithm?: CpuExchangeAlgorithm } = {}): HostTensor {
    return this.#exchange.allToAll(x, out, options);
  }

  /**
   * Uneven all-to-all: x's first sendCounts[0] rows to rank 0, the next sendCounts[1] to rank 1, and so on;
   * out receives rank 0's rows for this rank first, then rank 1's, packed. The counts are exchanged first
   * (recvCounts, when given, is checked against them); every rank judges the whole group's counts
   * (allToAllVVerdict), so a call that cannot run is refused on every rank with nothing written.
   * Rows of out past those received are left as they are.
   */
  allToAllV(
    x: HostTensor,
    out: HostTensor,
    sendCounts: readonly number[],
    options?: { recvCounts?: readonly number[]; algorithm?: CpuExchangeAlgorithm },
  ): { output: HostTensor; recvCounts: number[] };
  /**
   * The counts as an i32 tensor of world elements (the GPU's capturable form, there algorithm pull):
   * here read on the host and judged by the group as GPUs judge them (a rank's rows of another size
   * than rank 0's too), on x's first rows (x may hold more, as a buffer of fixed capacity does); a
   * refusal throws at once, on every rank. The rows received from each rank go to `recvCountsOut` (a new
   * i32 tensor unless given, apart from x and out).
   */
  allToAllV(
    x: HostTensor,
    out: HostTensor,
    sendCounts: HostTensor,
    options?: { recvCountsOut?: HostTensor; algorithm?: CpuExchangeAlgorithm },
  ): { output: HostTensor; recvCounts: HostTensor };
  allToAllV(
    x: HostTensor,
    out: HostTensor,
    sendCounts: readonly number[] | HostTensor,
    options: AllToAllVOptions = {},
  ): { output: HostTensor; recvCounts: number[] | HostTensor } {
    return this.#exchange.allToAllV(x, out, sendCounts, options);
  }

  /**
   * MoE dispatch, the reference: each (token, slot) pair to its expert's owner, expert-major (layout:
   * src/ops/moe/checks.ts, rows: src/ops/moe/route.ts). Every rank stages its tokens, routes and
   * per-expert counts; once all have, each computes every rank's rows from the counts and pulls the
   * rows of its own experts. Returns the dispatched tokens, their weights (and scales), the rows per
   * local expert, and the handle combine takes.
   */
  dispatch(
    tokens: HostTensor,
    topkIdx: HostTensor,
    topkWeights: HostTensor,
    options: DispatchOptions<HostTensor> & { algorithm?: CpuMoeAlgorithm },
  ): DispatchResult<HostTensor> {
    return moe.dispatch(this.#group, tokens, topkIdx, topkWeights, options);
  }

  /**
   * MoE combine, the reference: each expert owner's output rows back to the tokens they came from, each
   * token the weighted sum over its slots in slot order (src/ops/moe/route.ts combineToken), or per_rank
   * (combineTokenByRank), bf16.
   */
  combine(
    expertOut: HostTensor,
    handle: MoeHandle<HostTensor>,
    options: CombineOptions<HostTensor> & { algorithm?: CpuCombineAlgorithm } = {},
  ): HostTensor {
    return moe.combine(this.#group, expertOut, handle, options);
  }

  /** Every rank of the group meets here, through shared memory. */
  barrier(): void {
    const g = this.#group;
    g.begin({ kind: "barrier", count: 0 });
    g.settleSend();
    g.meet();
  }

  static {
    // A call refused before it took its number takes it all the same (see takeTurns).
    const call: Turns<CpuCollectives> = {
      at: (o) => o.#group.calls,
      spend: (o) => {
        o.#group.spendCall();
        return SPENT_CALL;
      },
    };
    const message = (sends: boolean, receives: boolean): Turns<CpuCollectives> => ({
      at: (o) => o.#exchange.messages,
      // The peer: send(x, peer), recv(out, peer), sendRecv(x, out, peer).
      spend: (o, _a, b, c) =>
        o.#exchange.skip(sends && receives ? c : b, sends, receives) ? SPENT_MESSAGE : undefined,
    });
    takeCollectiveTurns(CpuCollectives.prototype, call, message, ["broadcast"]);
  }
}
