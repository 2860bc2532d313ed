// The CPU backend's collectives: the GPU algorithms, step by step, on processes that share memory. They
// are written to be read as the reference for the GPU kernels. Every rank stages its input in its own
// symmetric buffer, meets the others (barrier: our writes are done, peers may read them), reads what it
// needs from the peers' buffers, and meets them again (we are done reading, peers may overwrite).
// Reductions follow src/ops/coll/reduce.ts, so every rank gets bitwise the same result.
import type { RawArray } from "../runtime/dtype.js";
import { reduceInto } from "../ops/coll/reduce.js";
import {
  checkAlgorithm,
  checkCapacity,
  checkDivisible,
  checkNumel,
  checkPeer,
  checkReduction,
  checkSameDtype,
  checkTensorArg,
  type ReduceOp,
} from "../ops/validate.js";
import {
  CPU_ALL_GATHER_ALGORITHMS,
  CPU_ALL_REDUCE_ALGORITHMS,
  CPU_REDUCE_SCATTER_ALGORITHMS,
  type CpuAllGatherAlgorithm,
  type CpuAllReduceAlgorithm,
  type CpuReduceScatterAlgorithm,
} from "../ops/coll/registry.js";
import type { Collectives } from "../ops/collectives.js";
import {
  checkAllGatherMatmul,
  checkMatmulAllReduce,
  checkMatmulReduceScatter,
  CPU_FUSED_MATMUL_ALGORITHMS,
  type AllGatherMatmulOptions,
  type CpuFusedMatmulAlgorithm,
  type FusedMatmulOptions,
  type MatmulAllReduceOptions,
} from "../ops/fused/checks.js";
import {
  checkAllReduceRmsNorm,
  checkNormAliasing,
  CPU_AR_NORM_ALGORITHMS,
  normOperandsDigest,
  type AllReduceRmsNormOptions,
  type CpuArNormAlgorithm,
} from "../ops/norm/checks.js";
import { rmsNormRows } from "../ops/norm/rms-norm.js";
import { HostTensor, hostOverlaps, rawView, sameHostSpan } from "./host-tensor.js";
import { hostMatmul } from "./matmul.js";
import type { CpuSymmetricTensor } from "./symmetric.js";
import { ACK_SLOTS, barrier, putSignal, READY_SLOTS, waitSignal, type CpuSyncEnv } from "./sync.js";
import {
  CallTag,
  CollectiveMismatchError,
  fingerprint,
  SPENT_CALL,
  SPENT_MESSAGE,
  takeCollectiveTurns,
  type CallAs,
  type CallShape,
  type Turns,
} from "../distributed/fingerprint.js";
import { SymmTimeoutError } from "../distributed/sync-watch.js";
import { InvalidArgumentError } from "../errors.js";
import type { DType } from "../runtime/dtype.js";
import {
  allToAllVVerdict,
  checkAllToAll,
  checkAllToAllV,
  checkAllToAllVTensors,
  checkCountList,
  checkSendRecv,
  CPU_EXCHANGE_ALGORITHMS,
  decodeSides,
  encodeSide,
  sideLength,
  type CpuExchangeAlgorithm,
} from "../ops/exchange/checks.js";
import {
  checkCombine,
  checkDispatch,
  dispatchHeader,
  dispatchVerdict,
  firstBadId,
  MOE_HEADER_FIXED,
  checkDispatchInto,
  stagedRows,
  CPU_MOE_ALGORITHMS,
  type CombineOptions,
  type CpuMoeAlgorithm,
  type DispatchOptions,
  type DispatchResult,
  type MoeHandle,
} from "../ops/moe/checks.js";
import { combineToken, expertCounts, receivedCounts, routeRows } from "../ops/moe/route.js";

const align16 = (n: number): number => Math.ceil(n / 16) * 16;
/** A tensor's elements as bytes (raw arrays of 2-byte dtypes index elements, not bytes). */
const byteView = (raw: RawArray): Uint8Array => new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength);

/** Byte offsets of one rank's dispatch in its staging buffer. */
function moeStaging(tokens: number, topk: number, rowBytes: number, experts: number) {
  const ids = align16(4 * (MOE_HEADER_FIXED + experts));
  const weights = align16(ids + 4 * tokens * topk);
  const at = align16(weights + 4 * tokens * topk);
  const scales = align16(at + tokens * rowBytes);
  return { ids, weights, tokens: at, scales, end: scales + 4 * tokens };
}

/** Below this many bytes, "auto" picks one-shot (one barrier round less); above, two-shot (less reading). */
export const ONE_SHOT_MAX_BYTES = 64 * 1024;

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
}

export class CpuCollectives implements Collectives<HostTensor, HostTensor, CpuAlgorithms> {
  readonly #sync: CpuSyncEnv;
  readonly #staging: CpuSymmetricTensor;
  /** Collective calls made so far (the fingerprints' call number; every rank in step counts the same). */
  #seq = 0;
  /** The running call's fingerprint, and how many barriers it has met. */
  #tag = new CallTag(0, 0);
  #step = 0;
  /** Messages sent to and received from each peer (send/recv's call numbers, per pair), and their sum
   * (what tells a point-to-point call that took its numbers from one that did not). */
  readonly #sent: number[];
  readonly #received: number[];
  #messages = 0;
  /** The send whose acknowledgement our staging buffer waits for. */
  #pendingAck: { peer: number; word: bigint } | undefined;
  /** The wait that failed: the pads are out of step since, so every later call is refused. */
  #failed: SymmTimeoutError | CollectiveMismatchError | undefined;

  constructor(sync: CpuSyncEnv, staging: CpuSymmetricTensor) {
    this.#sync = sync;
    this.#staging = staging;
    this.#sent = new Array<number>(sync.world).fill(0);
    this.#received = new Array<number>(sync.world).fill(0);
  }

  get capacityBytes(): number {
    return this.#staging.capacityBytes;
  }

  /** Rank r's staging buffer as `count` elements like `like`'s, from element `at`. */
  #staged(r: number, like: HostTensor, count: number, at = 0): RawArray {
    const buffer = this.#staging.peer(r, [this.capacityBytes], "u8").raw.buffer;
    return rawView(like.dtype, buffer, at * like.elementBytes, count);
  }

  /** Copies `t` into our staging buffer, once a receiver of our last send has taken it. */
  #stage(t: HostTensor, what: string): void {
    checkCapacity(what, t.nbytes, this.capacityBytes);
    this.#settleSend();
    (this.#staged(this.#sync.rank, t, t.numel) as Uint8Array).set(t.raw as Uint8Array);
  }

  #settleSend(): void {
    const ack = this.#pendingAck;
    if (ack === undefined) return;
    const { rank, world, pads } = this.#sync;
    this.#guard(() => waitSignal(this.#sync, pads[rank]!, ACK_SLOTS * world + ack.peer, ack.peer, ack.word));
    this.#pendingAck = undefined;
  }

  /** Starts a collective call: refused once a wait failed, else fingerprinted. */
  #begin(shape: CallShape): void {
    this.#usable();
    this.#tag = fingerprint(this.#seq++, shape);
    this.#step = 0;
  }

  #usable(): void {
    const e = this.#failed;
    if (e === undefined) return;
    const note = "An earlier call of this group failed so; the group cannot be used any more.";
    throw e instanceof SymmTimeoutError
      ? new SymmTimeoutError(e.record, e.timeoutMs, { note })
      : new CollectiveMismatchError(e.rank, e.peer, e.ours, e.theirs, { note, shapes: e.shapes });
  }

  /** Runs a wait; one that fails leaves the pads out of step, so it is remembered. */
  #guard(wait: () => void): void {
    try {
      wait();
    } catch (e) {
      if (e instanceof SymmTimeoutError || e instanceof CollectiveMismatchError) this.#failed ??= e;
      throw e;
    }
  }

  /** A barrier of the running call: its signals carry the call's fingerprint, step by step. */
  #meet(): void {
    const step = this.#step++ & 1;
    this.#guard(() => barrier(this.#sync, this.#tag, step));
  }

  /** Sum (or max, min) of `input` over all ranks, into `output` (default: a new tensor). */
  allReduce(
    input: HostTensor,
    options: { op?: ReduceOp; algorithm?: CpuAllReduceAlgorithm; output?: HostTensor } = {},
  ): HostTensor {
    const what = "allReduce";
    checkTensorArg(what, "input", input);
    if (options.output !== undefined) checkTensorArg(what, "output", options.output);
    const op = options.op ?? "sum";
    const algorithm = options.algorithm ?? "auto";
    const output = options.output ?? HostTensor.empty(input.shape, input.dtype);
    checkReduction(what, op, input.dtype);
    checkAlgorithm(what, algorithm, CPU_ALL_REDUCE_ALGORITHMS);
    checkSameDtype(what, input, output);
    checkNumel(what, "output", output, input.numel);
    return this.#allReduce(input, output, op, algorithm);
  }

  /** The all-reduce of checked arguments; `as` fingerprints it as part of another call. */
  #allReduce(
    input: HostTensor,
    output: HostTensor,
    op: ReduceOp,
    algorithm: CpuAllReduceAlgorithm,
    as?: CallAs,
  ): HostTensor {
    checkCapacity("allReduce", input.nbytes, this.capacityBytes);
    const twoShot = algorithm === "two_shot" || (algorithm === "auto" && input.nbytes > ONE_SHOT_MAX_BYTES);
    const kind = as?.kind ?? (twoShot ? "all-reduce/two_shot" : "all-reduce/one_shot");
    this.#begin({ kind, dtype: input.dtype, op, count: input.numel, dims: as?.dims });
    return twoShot ? this.#twoShot(input, output, op) : this.#oneShot(input, output, op);
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
    const what = "allReduceRmsNorm";
    const p = checkAllReduceRmsNorm(what, x, options);
    checkAlgorithm(what, options.algorithm ?? "auto", CPU_AR_NORM_ALGORITHMS);
    const output = options.output ?? HostTensor.empty(x.shape, x.dtype);
    checkNormAliasing(what, x, options, output, hostOverlaps, sameHostSpan);
    const sum = HostTensor.empty(x.shape, x.dtype);
    const o = options;
    // The digest of weight and bias joins the fingerprint: they must be the same on every rank.
    const digest = normOperandsDigest(o.weight.raw, o.bias?.raw);
    this.#allReduce(x, sum, "sum", "auto", {
      kind: "all-reduce-rms-norm/sequential",
      dims: [p.hidden, digest],
    });
    rmsNormRows(
      p,
      sum.raw,
      { weight: o.weight.raw, bias: o.bias?.raw, residual: o.residual?.raw },
      output.raw,
      o.residualOut?.raw,
    );
    return { output, residualOut: o.residualOut };
  }

  /** Each rank reads every peer's whole buffer and reduces all of it. */
  #oneShot(input: HostTensor, output: HostTensor, op: ReduceOp): HostTensor {
    const { world } = this.#sync;
    const n = input.numel;
    this.#stage(input, "allReduce");
    this.#meet();
    const all = Array.from({ length: world }, (_, r) => this.#staged(r, input, n));
    reduceInto(input.dtype, op, all, 0, output.raw, 0, n);
    this.#meet();
    return output;
  }

  /**
   * Reduce-scatter by loads (rank r reduces chunk r of every buffer into its own), then all-gather by
   * copies (every rank reads chunk r from rank r).
   */
  #twoShot(input: HostTensor, output: HostTensor, op: ReduceOp): HostTensor {
    const { rank, world } = this.#sync;
    const n = input.numel;
    const chunk = Math.ceil(n / world);
    const range = (r: number): [number, number] => [Math.min(n, r * chunk), Math.min(n, (r + 1) * chunk)];
    this.#stage(input, "allReduce");
    this.#meet();
    const all = Array.from({ length: world }, (_, r) => this.#staged(r, input, n));
    const [s, e] = range(rank);
    reduceInto(input.dtype, op, all, s, all[rank]!, s, e - s);
    this.#meet();
    for (let r = 0; r < world; r++) {
      const [rs, re] = range(r);
      (output.raw as Uint8Array).set(all[r]!.subarray(rs, re) as Uint8Array, rs);
    }
    this.#meet();
    return output;
  }

  /** Every rank's `input`, in rank order, into `output` (world x input elements). */
  allGather(
    input: HostTensor,
    output: HostTensor,
    options: { algorithm?: CpuAllGatherAlgorithm } = {},
  ): HostTensor {
    return this.#allGather(input, output, options.algorithm ?? "auto", { kind: "all-gather/pull" });
  }

  #allGather(input: HostTensor, output: HostTensor, algorithm: string, as: CallAs): HostTensor {
    const what = "allGather";
    const { world } = this.#sync;
    checkTensorArg(what, "input", input);
    checkTensorArg(what, "output", output);
    checkAlgorithm(what, algorithm, CPU_ALL_GATHER_ALGORITHMS);
    checkSameDtype(what, input, output);
    checkNumel(what, "output", output, input.numel * world);
    const n = input.numel;
    this.#begin({ ...as, dtype: input.dtype, count: n });
    this.#stage(input, what);
    this.#meet();
    for (let r = 0; r < world; r++)
      (output.raw as Uint8Array).set(this.#staged(r, input, n) as Uint8Array, r * n);
    this.#meet();
    return output;
  }

  /** Chunk `rank` of the reduction of every rank's `input` (world x output elements), into `output`. */
  reduceScatter(
    input: HostTensor,
    output: HostTensor,
    options: { op?: ReduceOp; algorithm?: CpuReduceScatterAlgorithm } = {},
  ): HostTensor {
    return this.#reduceScatter(input, output, options.op ?? "sum", options.algorithm ?? "auto", {
      kind: "reduce-scatter/pull",
    });
  }

  #reduceScatter(
    input: HostTensor,
    output: HostTensor,
    op: ReduceOp,
    algorithm: string,
    as: CallAs,
  ): HostTensor {
    const what = "reduceScatter";
    checkTensorArg(what, "input", input);
    checkTensorArg(what, "output", output);
    checkAlgorithm(what, algorithm, CPU_REDUCE_SCATTER_ALGORITHMS);
    const { rank, world } = this.#sync;
    checkReduction(what, op, input.dtype);
    checkSameDtype(what, input, output);
    checkDivisible(what, input, world);
    checkNumel(what, "output", output, input.numel / world);
    const n = output.numel;
    this.#begin({ ...as, dtype: input.dtype, op, count: input.numel });
    this.#stage(input, what);
    this.#meet();
    const all = Array.from({ length: world }, (_, r) => this.#staged(r, input, input.numel));
    reduceInto(input.dtype, op, all, rank * n, output.raw, 0, n);
    this.#meet();
    return output;
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
    const what = "allGatherMatmul";
    checkTensorArg(what, "aShard", aShard);
    checkTensorArg(what, "b", b);
    checkAlgorithm(what, options.algorithm ?? "auto", CPU_FUSED_MATMUL_ALGORITHMS);
    const p = checkAllGatherMatmul(what, this.#sync.world, aShard, b, options);
    const gathered = options.gathered ?? HostTensor.empty([p.m, p.k], p.elem);
    const out = options.out ?? HostTensor.empty([p.m, p.n], "bf16");
    this.#allGather(aShard, gathered, "auto", { kind: "all-gather-matmul/sequential", dims: [p.k] });
    hostMatmul(p, gathered, b, out, options);
    return { out, gathered };
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
    const what = "matmulReduceScatter";
    checkTensorArg(what, "a", a);
    checkTensorArg(what, "b", b);
    checkAlgorithm(what, options.algorithm ?? "auto", CPU_FUSED_MATMUL_ALGORITHMS);
    const p = checkMatmulReduceScatter(what, this.#sync.world, a, b, options);
    checkCapacity(what, p.m * p.n * 2, this.capacityBytes);
    const out = options.out ?? HostTensor.empty([p.shardRows, p.n], "bf16");
    const partial = hostMatmul(p, a, b, HostTensor.empty([p.m, p.n], "bf16"), options);
    this.#reduceScatter(partial, out, "sum", "auto", {
      kind: "matmul-reduce-scatter/sequential",
      dims: [p.n, p.k],
    });
    return out;
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
    const what = "matmulAllReduce";
    checkTensorArg(what, "a", a);
    checkTensorArg(what, "b", b);
    checkAlgorithm(what, options.algorithm ?? "auto", CPU_FUSED_MATMUL_ALGORITHMS);
    const { p } = checkMatmulAllReduce(what, a, b, options);
    const out =
      options.out ??
      HostTensor.empty([p.m, p.n], options.rmsNorm?.outputScale !== undefined ? "fp8e4m3" : "bf16");
    const r = options.rmsNorm?.residualOut;
    if (hostOverlaps(out, a) || hostOverlaps(out, b) || (r && (hostOverlaps(r, a) || hostOverlaps(r, b))))
      throw new InvalidArgumentError(`${what}: out or rmsNorm.residualOut overlaps an input`);
    const partial = hostMatmul(p, a, b, HostTensor.empty([p.m, p.n], "bf16"), options);
    if (options.rmsNorm === undefined)
      return this.#allReduce(partial, out, "sum", "auto", {
        kind: "matmul-all-reduce/sequential",
        dims: [p.n, p.k],
      });
    this.allReduceRmsNorm(partial, { ...options.rmsNorm, output: out });
    return out;
  }

  /** `tensor` of rank `root` into `tensor` of every rank. */
  broadcast(tensor: HostTensor, root: number): HostTensor {
    const what = "broadcast";
    checkTensorArg(what, "tensor", tensor);
    const { rank, world } = this.#sync;
    if (root !== rank) checkPeer(what, root, world, rank);
    checkCapacity(what, tensor.nbytes, this.capacityBytes);
    this.#begin({ kind: "broadcast", dtype: tensor.dtype, count: tensor.numel, dims: [root] });
    if (rank === root) this.#stage(tensor, what);
    this.#meet();
    if (rank !== root) (tensor.raw as Uint8Array).set(this.#staged(root, tensor, tensor.numel) as Uint8Array);
    this.#meet();
    return tensor;
  }

  /**
   * Hands `tensor` to `peer`, which must call recv. Returns once the data is staged and the peer told;
   * our staging buffer is reused only after the peer acknowledged, so ring exchanges cannot deadlock.
   */
  send(tensor: HostTensor, peer: number, options: { algorithm?: CpuExchangeAlgorithm } = {}): void {
    const { rank, world } = this.#sync;
    checkTensorArg("send", "tensor", tensor);
    checkPeer("send", peer, world, rank);
    checkAlgorithm("send", options.algorithm ?? "auto", CPU_EXCHANGE_ALGORITHMS);
    this.#send(tensor, peer, "send");
  }

  /** A checked send (of `what`: send or sendRecv). */
  #send(tensor: HostTensor, peer: number, what: string): void {
    const { rank, world, pads } = this.#sync;
    this.#usable();
    this.#stage(tensor, what);
    const word = this.#messageWord(this.#sent, peer, tensor);
    this.#guard(() => putSignal(this.#sync, pads[peer]!, READY_SLOTS * world + rank, peer, word));
    this.#pendingAck = { peer, word };
  }

  /** A message's call word: its number between this pair (one way) and its size (the pair needs no
   * field: its slots are its own). */
  #messageWord(counts: number[], peer: number, t: HostTensor): bigint {
    this.#messages++;
    const seq = counts[peer]!++;
    return fingerprint(seq, { kind: "send-recv", dtype: t.dtype, count: t.numel }).word;
  }

  /** Takes the numbers of a point-to-point call with `peer` that was refused (see takeTurns); false where
   * `peer` names no pair. */
  #skipMessages(peer: unknown, sends: boolean, receives: boolean): boolean {
    const { rank, world } = this.#sync;
    if (!Number.isInteger(peer) || (peer as number) < 0 || (peer as number) >= world || peer === rank)
      return false;
    this.#messages++;
    if (sends) this.#sent[peer as number]!++;
    if (receives) this.#received[peer as number]!++;
    return true;
  }

  recv(tensor: HostTensor, peer: number, options: { algorithm?: CpuExchangeAlgorithm } = {}): HostTensor {
    const { rank, world } = this.#sync;
    checkTensorArg("recv", "tensor", tensor);
    checkPeer("recv", peer, world, rank);
    checkAlgorithm("recv", options.algorithm ?? "auto", CPU_EXCHANGE_ALGORITHMS);
    checkCapacity("recv", tensor.nbytes, this.capacityBytes);
    return this.#recv(tensor, peer);
  }

  /** A checked recv. */
  #recv(tensor: HostTensor, peer: number): HostTensor {
    const { rank, world, pads } = this.#sync;
    this.#usable();
    const word = this.#messageWord(this.#received, peer, tensor);
    this.#guard(() => waitSignal(this.#sync, pads[rank]!, READY_SLOTS * world + peer, peer, word));
    (tensor.raw as Uint8Array).set(this.#staged(peer, tensor, tensor.numel) as Uint8Array);
    this.#guard(() => putSignal(this.#sync, pads[peer]!, ACK_SLOTS * world + rank, peer, word));
    return tensor;
  }

  /** Sends `x` to `peer` and receives `out` from it, in one call on both ranks (sizes may differ). */
  sendRecv(
    x: HostTensor,
    out: HostTensor,
    peer: number,
    options: { algorithm?: CpuExchangeAlgorithm } = {},
  ): HostTensor {
    const what = "sendRecv";
    checkSendRecv(what, x, out, hostOverlaps);
    checkPeer(what, peer, this.#sync.world, this.#sync.rank);
    checkAlgorithm(what, options.algorithm ?? "auto", CPU_EXCHANGE_ALGORITHMS);
    checkCapacity(what, out.nbytes, this.capacityBytes);
    // Both messages' numbers are taken, or neither (takeTurns spends both for a refused call).
    this.#send(x, peer, what);
    return this.#recv(out, peer);
  }

  /** Chunk j of `x` to rank j; chunk i of `out` from rank i (world equal chunks). */
  allToAll(x: HostTensor, out: HostTensor, options: { algorithm?: CpuExchangeAlgorithm } = {}): HostTensor {
    const what = "allToAll";
    const { rank, world } = this.#sync;
    checkAllToAll(what, world, x, out, hostOverlaps);
    checkAlgorithm(what, options.algorithm ?? "auto", CPU_EXCHANGE_ALGORITHMS);
    const n = x.numel / world;
    this.#begin({ kind: "all-to-all/pull", dtype: x.dtype, count: x.numel });
    this.#stage(x, what);
    this.#meet();
    for (let r = 0; r < world; r++)
      (out.raw as Uint8Array).set(this.#staged(r, x, n, rank * n) as Uint8Array, r * n);
    this.#meet();
    return out;
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
   * here read on the host, and the call made as with an array on x's first rows (x may hold more, as a
   * buffer of fixed capacity does; a refusal throws at once); the rows received from each rank go to
   * `recvCountsOut` (a new i32 tensor unless given).
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
    options: {
      recvCounts?: readonly number[];
      recvCountsOut?: HostTensor;
      algorithm?: CpuExchangeAlgorithm;
    } = {},
  ): { output: HostTensor; recvCounts: number[] | HostTensor } {
    if (sendCounts instanceof HostTensor) {
      const what = "allToAllV";
      const world = this.#sync.world;
      if (options.recvCounts !== undefined)
        throw new InvalidArgumentError(
          `${what}: recvCounts (the rows expected) goes with counts as an array; with counts in a tensor, read the returned recvCounts`,
        );
      const given = options.recvCountsOut;
      for (const t of given === undefined ? [sendCounts] : [sendCounts, given])
        if (t.dtype !== "i32" || t.numel !== world)
          throw new InvalidArgumentError(`${what}: counts in a tensor are i32 tensors of ${world} elements`);
      // As on GPUs, the group judges these counts (a rank's adding up to more rows than its x has, or
      // negative, is refused on every rank), and x may hold more rows than they send: its first ones.
      const counts = Array.from(sendCounts.raw as Int32Array);
      const { recvCounts } = this.#allToAllV(
        x,
        out,
        counts,
        { algorithm: options.algorithm ?? "auto" },
        true,
      );
      const into = given ?? HostTensor.empty([world], "i32");
      (into.raw as Int32Array).set(recvCounts);
      return { output: out, recvCounts: into };
    }
    return this.#allToAllV(x, out, sendCounts, options);
  }

  #allToAllV(
    x: HostTensor,
    out: HostTensor,
    sendCounts: readonly number[],
    options: { recvCounts?: readonly number[]; algorithm?: CpuExchangeAlgorithm },
    groupJudgesCounts = false,
  ): { output: HostTensor; recvCounts: number[] } {
    const what = "allToAllV";
    const { rank, world } = this.#sync;
    const rows = groupJudgesCounts
      ? checkAllToAllVTensors(what, x, out, hostOverlaps)
      : checkAllToAllV(what, world, x, out, sendCounts, hostOverlaps);
    const said = options.recvCounts;
    if (said !== undefined) checkCountList(what, "recvCounts", said, world);
    checkAlgorithm(what, options.algorithm ?? "auto", CPU_EXCHANGE_ALGORITHMS);
    // Our side (src/ops/exchange/checks.ts encodeSide), then x's rows when they fit.
    const side = sideLength(world);
    const headerBytes = align16(4 * side);
    checkCapacity(what, headerBytes, this.capacityBytes);
    const fits = headerBytes + x.nbytes <= this.capacityBytes;
    this.#begin({ kind: "all-to-all-v/pull", dtype: x.dtype, count: rows.x.rowElems });
    this.#settleSend();
    const needed = fits ? 0 : headerBytes + x.nbytes;
    (this.#view(rank, "i32", 0, side) as Int32Array).set(
      encodeSide(rows.out.rows, sendCounts, said, needed, rows.x.rows),
    );
    if (fits) (this.#view(rank, x.dtype, headerBytes, x.numel) as Uint8Array).set(x.raw as Uint8Array);
    this.#meet();
    const published = new Int32Array(world * side);
    for (let r = 0; r < world; r++) published.set(this.#view(r, "i32", 0, side) as Int32Array, r * side);
    const sides = decodeSides(published, world);
    const verdict = allToAllVVerdict(what, sides, this.capacityBytes);
    const recvCounts = sides.map((s) => s.sendCounts[rank]!);
    if (verdict === undefined) {
      const e = rows.x.rowElems;
      let at = 0;
      for (let r = 0; r < world; r++) {
        const skip = sides[r]!.sendCounts.subarray(0, rank).reduce((a, b) => a + b, 0);
        const n = recvCounts[r]! * e;
        (out.raw as Uint8Array).set(
          this.#view(r, x.dtype, headerBytes + skip * e * x.elementBytes, n) as Uint8Array,
          at,
        );
        at += n;
      }
    }
    this.#meet();
    if (verdict !== undefined) throw new InvalidArgumentError(verdict);
    return { output: out, recvCounts };
  }

  /** `count` elements of `dtype` in rank r's staging buffer, from byte `at`. */
  #view(r: number, dtype: DType, at: number, count: number): RawArray {
    return rawView(dtype, this.#staging.peer(r, [this.capacityBytes], "u8").raw.buffer, at, count);
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
    const what = "dispatch";
    const { rank, world } = this.#sync;
    const p = checkDispatch(what, world, tokens, topkIdx, topkWeights, options);
    checkAlgorithm(what, options?.algorithm ?? "auto", CPU_MOE_ALGORITHMS);
    const into = options.into;
    if (into !== undefined) {
      checkDispatchInto(what, p, options.maxRows, rank, world, into);
      if (!(into.tokens instanceof HostTensor))
        throw new InvalidArgumentError(`${what}: into must be a result of this CPU group's dispatch`);
    }
    const ids = topkIdx.raw as Int32Array;
    const E = p.numExperts;
    const F = MOE_HEADER_FIXED;
    // Our side: the header (src/ops/moe/checks.ts), then ids, weights, tokens, scales.
    const at = moeStaging(p.tokens, p.topk, p.hidden * tokens.elementBytes, E);
    // The header always fits where the group's does (E is the group's); the data may not, which every
    // rank then learns from the header and refuses alike.
    checkCapacity(what, at.ids, this.capacityBytes);
    this.#begin({ kind: "moe-dispatch/pull", dtype: p.dtype, count: p.hidden, dims: [p.topk, E] });
    this.#settleSend();
    const mine = this.#view(rank, "i32", 0, F + E) as Int32Array;
    mine.set(dispatchHeader(p, options.maxRows, at.end, this.capacityBytes));
    if (at.end <= this.capacityBytes) {
      mine[1] = firstBadId(p, ids);
      mine.set(expertCounts(ids, E), F);
      (this.#view(rank, "i32", at.ids, ids.length) as Int32Array).set(ids);
      (this.#view(rank, "f32", at.weights, ids.length) as Float32Array).set(topkWeights.raw as Float32Array);
      (this.#view(rank, "u8", at.tokens, tokens.nbytes) as Uint8Array).set(byteView(tokens.raw));
      if (options.scales !== undefined)
        (this.#view(rank, "f32", at.scales, p.tokens) as Float32Array).set(
          options.scales.raw as Float32Array,
        );
    }
    this.#meet();
    const headers = Array.from({ length: world }, (_, r) => this.#view(r, "i32", 0, F + E) as Int32Array);
    const counts = headers.map((h) => h.subarray(F));
    const received = Array.from({ length: world }, (_, r) => receivedCounts(counts, r, p));
    const total = received.map((c) => c.reduce((a, b) => a + b, 0));
    const verdict = dispatchVerdict(what, headers, total, E, this.capacityBytes);
    if (verdict !== undefined) {
      this.#meet();
      throw new InvalidArgumentError(verdict);
    }
    const rowsOut = options.maxRows ?? total[rank]!;
    const out = into ?? {
      tokens: HostTensor.zeros([rowsOut, p.hidden], p.dtype),
      weights: HostTensor.zeros([rowsOut], "f32"),
      scales: p.dtype === "fp8e4m3" ? HostTensor.zeros([rowsOut], "f32") : undefined,
    };
    // Spare rows are zero: an earlier dispatch's rows go first.
    if (into) for (const t of [into.tokens, into.weights, into.scales]) if (t) byteView(t.raw).fill(0);
    const rowBytes = p.hidden * tokens.elementBytes;
    const dest = byteView(out.tokens.raw);
    for (let s = 0; s < world; s++) {
      const t = headers[s]![0]!;
      const from = moeStaging(t, p.topk, rowBytes, E);
      const sIds = this.#view(s, "i32", from.ids, t * p.topk) as Int32Array;
      const sWeights = this.#view(s, "f32", from.weights, t * p.topk) as Float32Array;
      const sTokens = this.#view(s, "u8", from.tokens, t * rowBytes) as Uint8Array;
      const sScales = this.#view(s, "f32", from.scales, t) as Float32Array;
      const rows = routeRows(counts, s, sIds, p);
      for (let i = 0; i < rows.length; i++) {
        if (sIds[i]! < 0 || Math.floor(sIds[i]! / p.localExperts) !== rank) continue;
        const row = rows[i]!;
        const token = Math.floor(i / p.topk);
        dest.set(sTokens.subarray(token * rowBytes, (token + 1) * rowBytes), row * rowBytes);
        (out.weights.raw as Float32Array)[row] = sWeights[i]!;
        if (out.scales !== undefined) (out.scales.raw as Float32Array)[row] = sScales[token]!;
      }
    }
    const rowsOfPairs = routeRows(counts, rank, ids, p);
    const counted = received[rank]!;
    this.#meet();
    if (into) {
      // Written again in place: the result's tensors, and its handle now describes this dispatch.
      (into.counts.raw as Int32Array).set(counted);
      (into.handle.expert.raw as Int32Array).set(ids);
      (into.handle.row.raw as Int32Array).set(rowsOfPairs);
      (into.handle.weights.raw as Float32Array).set(topkWeights.raw as Float32Array);
      Object.assign(into.handle, { received: total[rank]!, receivedByRank: total });
      return into;
    }
    const shape = [p.tokens, p.topk];
    const handle: MoeHandle<HostTensor> = {
      problem: p,
      rank,
      world,
      received: total[rank]!,
      receivedByRank: total,
      expert: HostTensor.fromHost(ids.slice(), "i32", { shape }),
      row: HostTensor.fromHost(rowsOfPairs, "i32", { shape }),
      weights: HostTensor.fromHost((topkWeights.raw as Float32Array).slice(), "f32", { shape }),
    };
    return {
      ...out,
      counts: HostTensor.fromHost(counted, "i32", { shape: [p.localExperts] }),
      handle,
    };
  }

  /**
   * MoE combine, the reference: each expert owner's output rows back to the tokens they came from, each
   * token the weighted sum over its slots in slot order (src/ops/moe/route.ts combineToken), bf16.
   */
  combine(
    expertOut: HostTensor,
    handle: MoeHandle<HostTensor>,
    options: CombineOptions<HostTensor> & { algorithm?: CpuMoeAlgorithm } = {},
  ): HostTensor {
    const what = "combine";
    const { rank, world } = this.#sync;
    checkCombine(what, rank, world, expertOut, handle, options.out);
    checkAlgorithm(what, options.algorithm ?? "auto", CPU_MOE_ALGORITHMS);
    const p = handle.problem;
    const out = options.out ?? HostTensor.empty([p.tokens, p.hidden], "bf16");
    if (hostOverlaps(out, expertOut)) throw new InvalidArgumentError(`${what}: out overlaps expertOut`);
    // The largest rank's rows: every rank judges the staging buffer's room alike.
    checkCapacity(what, stagedRows(handle) * p.hidden * 2, this.capacityBytes);
    const n = handle.received * p.hidden;
    this.#begin({ kind: "moe-combine/pull", dtype: "bf16", count: p.hidden, dims: [p.topk, p.numExperts] });
    this.#stage(
      HostTensor.over(expertOut.raw.buffer, expertOut.raw.byteOffset, [n], "bf16", () => true),
      what,
    );
    this.#meet();
    const staged = Array.from(
      { length: world },
      (_, r) => this.#view(r, "bf16", 0, this.capacityBytes / 2) as Uint16Array,
    );
    const expert = handle.expert.raw as Int32Array;
    const row = handle.row.raw as Int32Array;
    const weights = handle.weights.raw as Float32Array;
    const K = p.topk;
    for (let t = 0; t < p.tokens; t++) {
      combineToken(
        p.hidden,
        K,
        (k) => expert[t * K + k]! >= 0,
        (k) => weights[t * K + k]!,
        (k, i) => staged[Math.floor(expert[t * K + k]! / p.localExperts)]![row[t * K + k]! * p.hidden + i]!,
        out.raw as Uint16Array,
        t * p.hidden,
      );
    }
    this.#meet();
    return out;
  }

  /** Every rank of the group meets here, through shared memory. */
  barrier(): void {
    this.#begin({ kind: "barrier", count: 0 });
    this.#settleSend();
    this.#meet();
  }

  static {
    // A call refused before it took its number takes it all the same (see takeTurns).
    const call: Turns<CpuCollectives> = {
      at: (o) => o.#seq,
      spend: (o) => {
        o.#seq++;
        return SPENT_CALL;
      },
    };
    const message = (sends: boolean, receives: boolean): Turns<CpuCollectives> => ({
      at: (o) => o.#messages,
      // The peer: send(x, peer), recv(out, peer), sendRecv(x, out, peer).
      spend: (o, _a, b, c) =>
        o.#skipMessages(sends && receives ? c : b, sends, receives) ? SPENT_MESSAGE : undefined,
    });
    takeCollectiveTurns(CpuCollectives.prototype, call, message, ["broadcast"]);
  }
}
