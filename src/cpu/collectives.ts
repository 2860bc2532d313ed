// The CPU backend's collectives: the GPU algorithms, step by step, on processes that share memory. They
// are written to be read as the reference for the GPU kernels. Every rank stages its input in its own
// symmetric buffer, meets the others (barrier: our writes are done, peers may read them), reads what it
// needs from the peers' buffers, and meets them again (we are done reading, peers may overwrite).
// Reductions follow src/ops/reduce.ts, so every rank gets bitwise the same result.
import type { RawArray } from "../runtime/dtype.js";
import { reduceInto } from "../ops/reduce.js";
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
  checkMatmulReduceScatter,
  CPU_FUSED_MATMUL_ALGORITHMS,
  type AllGatherMatmulOptions,
  type CpuFusedMatmulAlgorithm,
  type FusedMatmulOptions,
} from "../ops/fused-checks.js";
import {
  checkAllReduceRmsNorm,
  checkNormAliasing,
  CPU_AR_NORM_ALGORITHMS,
  type AllReduceRmsNormOptions,
  type CpuArNormAlgorithm,
} from "../ops/ar-norm-checks.js";
import { rmsNormRows } from "../ops/rms-norm.js";
import { HostTensor, hostOverlaps, rawView, sameHostSpan } from "./host-tensor.js";
import { hostMatmul } from "./matmul.js";
import type { CpuSymmetricTensor } from "./symmetric.js";
import { ACK_SLOTS, barrier, putSignal, READY_SLOTS, waitSignal, type CpuSyncEnv } from "./sync.js";
import {
  CollectiveMismatchError,
  fingerprint,
  type CallKind,
  type CallShape,
} from "../distributed/fingerprint.js";
import { SymmTimeoutError } from "../distributed/sync-watch.js";

/** Below this many bytes, "auto" picks one-shot (one barrier round less); above, two-shot (less reading). */
export const ONE_SHOT_MAX_BYTES = 64 * 1024;

/** The algorithms the CPU backend accepts, by operation. */
export interface CpuAlgorithms {
  readonly allReduce: CpuAllReduceAlgorithm;
  readonly allGather: CpuAllGatherAlgorithm;
  readonly reduceScatter: CpuReduceScatterAlgorithm;
  readonly allGatherMatmul: CpuFusedMatmulAlgorithm;
  readonly matmulReduceScatter: CpuFusedMatmulAlgorithm;
  readonly allReduceRmsNorm: CpuArNormAlgorithm;
}

export class CpuCollectives implements Collectives<HostTensor, HostTensor, CpuAlgorithms> {
  readonly #sync: CpuSyncEnv;
  readonly #staging: CpuSymmetricTensor;
  /** Collective calls made so far (the fingerprints' call number; every rank in step counts the same). */
  #seq = 0;
  /** The running call's fingerprint, and how many barriers it has met. */
  #phase = 0;
  #step = 0;
  /** Messages sent to and received from each peer (send/recv's call numbers, per pair). */
  readonly #sent: number[];
  readonly #received: number[];
  /** The send whose acknowledgement our staging buffer waits for. */
  #pendingAck: { peer: number; phase: number } | undefined;
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
    this.#guard(() => waitSignal(this.#sync, pads[rank]!, ACK_SLOTS * world + ack.peer, ack.peer, ack.phase));
    this.#pendingAck = undefined;
  }

  /** Starts a collective call: refused once a wait failed, else fingerprinted. */
  #begin(shape: CallShape): void {
    this.#usable();
    this.#phase = fingerprint(this.#seq++, shape);
    this.#step = 0;
  }

  #usable(): void {
    const e = this.#failed;
    if (e === undefined) return;
    const note = "An earlier call of this group failed so; the group cannot be used any more.";
    throw e instanceof SymmTimeoutError
      ? new SymmTimeoutError(e.record, e.timeoutMs, { note })
      : new CollectiveMismatchError(e.rank, e.peer, e.ours, e.theirs, { note });
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
    const phase = this.#phase + (this.#step++ & 1);
    this.#guard(() => barrier(this.#sync, phase));
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

  /** The all-reduce of checked arguments; `kind` fingerprints it as part of another call. */
  #allReduce(
    input: HostTensor,
    output: HostTensor,
    op: ReduceOp,
    algorithm: CpuAllReduceAlgorithm,
    kind?: CallKind,
    peer?: number,
  ): HostTensor {
    checkCapacity("allReduce", input.nbytes, this.capacityBytes);
    const twoShot = algorithm === "two_shot" || (algorithm === "auto" && input.nbytes > ONE_SHOT_MAX_BYTES);
    kind ??= twoShot ? "all-reduce/two_shot" : "all-reduce/one_shot";
    this.#begin({ kind, dtype: input.dtype, op, count: input.numel, peer });
    return twoShot ? this.#twoShot(input, output, op) : this.#oneShot(input, output, op);
  }

  /**
   * All-reduce + bias + residual + RMSNorm, the reference (see GpuCollectives.allReduceRmsNorm): the
   * all-reduce, then the norm on the host in the kernels' order of operations (src/ops/rms-norm.ts), so
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
    this.#allReduce(x, sum, "sum", "auto", "all-reduce-rms-norm/sequential", p.hidden);
    const o = options;
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
    return this.#allGather(input, output, options.algorithm ?? "auto", "all-gather/pull");
  }

  #allGather(input: HostTensor, output: HostTensor, algorithm: string, kind: CallKind): HostTensor {
    const what = "allGather";
    const { world } = this.#sync;
    checkTensorArg(what, "input", input);
    checkTensorArg(what, "output", output);
    checkAlgorithm(what, algorithm, CPU_ALL_GATHER_ALGORITHMS);
    checkSameDtype(what, input, output);
    checkNumel(what, "output", output, input.numel * world);
    const n = input.numel;
    this.#begin({ kind, dtype: input.dtype, count: n });
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
    return this.#reduceScatter(
      input,
      output,
      options.op ?? "sum",
      options.algorithm ?? "auto",
      "reduce-scatter/pull",
    );
  }

  #reduceScatter(
    input: HostTensor,
    output: HostTensor,
    op: ReduceOp,
    algorithm: string,
    kind: CallKind,
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
    this.#begin({ kind, dtype: input.dtype, op, count: input.numel });
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
    this.#allGather(aShard, gathered, "auto", "all-gather-matmul/sequential");
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
    this.#reduceScatter(partial, out, "sum", "auto", "matmul-reduce-scatter/sequential");
    return out;
  }

  /** `tensor` of rank `root` into `tensor` of every rank. */
  broadcast(tensor: HostTensor, root: number): HostTensor {
    const what = "broadcast";
    checkTensorArg(what, "tensor", tensor);
    const { rank, world } = this.#sync;
    if (root !== rank) checkPeer(what, root, world, rank);
    checkCapacity(what, tensor.nbytes, this.capacityBytes);
    this.#begin({ kind: "broadcast", dtype: tensor.dtype, count: tensor.numel, peer: root });
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
  send(tensor: HostTensor, peer: number): void {
    const { rank, world, pads } = this.#sync;
    checkTensorArg("send", "tensor", tensor);
    checkPeer("send", peer, world, rank);
    this.#usable();
    this.#stage(tensor, "send");
    const phase = this.#pairPhase(this.#sent, peer, rank, tensor);
    this.#guard(() => putSignal(this.#sync, pads[peer]!, READY_SLOTS * world + rank, peer, phase));
    this.#pendingAck = { peer, phase };
  }

  /** A message's fingerprint: its number between this pair (one way), its size, and its sender. */
  #pairPhase(counts: number[], peer: number, sender: number, t: HostTensor): number {
    const seq = counts[peer]!++;
    return fingerprint(seq, { kind: "send-recv", dtype: t.dtype, count: t.numel, peer: sender });
  }

  recv(tensor: HostTensor, peer: number): HostTensor {
    const { rank, world, pads } = this.#sync;
    checkTensorArg("recv", "tensor", tensor);
    checkPeer("recv", peer, world, rank);
    checkCapacity("recv", tensor.nbytes, this.capacityBytes);
    this.#usable();
    const phase = this.#pairPhase(this.#received, peer, peer, tensor);
    this.#guard(() => waitSignal(this.#sync, pads[rank]!, READY_SLOTS * world + peer, peer, phase));
    (tensor.raw as Uint8Array).set(this.#staged(peer, tensor, tensor.numel) as Uint8Array);
    this.#guard(() => putSignal(this.#sync, pads[peer]!, ACK_SLOTS * world + rank, peer, phase));
    return tensor;
  }

  /** Every rank of the group meets here, through shared memory. */
  barrier(): void {
    this.#begin({ kind: "barrier", count: 0 });
    this.#settleSend();
    this.#meet();
  }
}
