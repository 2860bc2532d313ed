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
import { HostTensor, rawView } from "./host-tensor.js";
import { hostMatmul } from "./matmul.js";
import type { CpuSymmetricTensor } from "./symmetric.js";
import { ACK_SLOTS, barrier, putSignal, READY_SLOTS, waitSignal, type CpuSyncEnv } from "./sync.js";

/** Below this many bytes, "auto" picks one-shot (one barrier round less); above, two-shot (less reading). */
export const ONE_SHOT_MAX_BYTES = 64 * 1024;

/** The algorithms the CPU backend accepts, by operation. */
export interface CpuAlgorithms {
  readonly allReduce: CpuAllReduceAlgorithm;
  readonly allGather: CpuAllGatherAlgorithm;
  readonly reduceScatter: CpuReduceScatterAlgorithm;
  readonly allGatherMatmul: CpuFusedMatmulAlgorithm;
  readonly matmulReduceScatter: CpuFusedMatmulAlgorithm;
}

export class CpuCollectives implements Collectives<HostTensor, HostTensor, CpuAlgorithms> {
  readonly #sync: CpuSyncEnv;
  readonly #staging: CpuSymmetricTensor;
  #phase = 0;
  /** The peer whose acknowledgement our staging buffer waits for after a send. */
  #pendingAck: number | undefined;

  constructor(sync: CpuSyncEnv, staging: CpuSymmetricTensor) {
    this.#sync = sync;
    this.#staging = staging;
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
    if (this.#pendingAck === undefined) return;
    const { rank, world, pads } = this.#sync;
    waitSignal(this.#sync, pads[rank]!, ACK_SLOTS * world + this.#pendingAck, this.#pendingAck, this.#phase);
    this.#pendingAck = undefined;
  }

  #meet(): void {
    barrier(this.#sync, this.#phase++);
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
    checkCapacity(what, input.nbytes, this.capacityBytes);
    const twoShot = algorithm === "two_shot" || (algorithm === "auto" && input.nbytes > ONE_SHOT_MAX_BYTES);
    return twoShot ? this.#twoShot(input, output, op) : this.#oneShot(input, output, op);
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
    const what = "allGather";
    const { world } = this.#sync;
    checkTensorArg(what, "input", input);
    checkTensorArg(what, "output", output);
    checkAlgorithm(what, options.algorithm ?? "auto", CPU_ALL_GATHER_ALGORITHMS);
    checkSameDtype(what, input, output);
    checkNumel(what, "output", output, input.numel * world);
    const n = input.numel;
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
    const what = "reduceScatter";
    checkTensorArg(what, "input", input);
    checkTensorArg(what, "output", output);
    checkAlgorithm(what, options.algorithm ?? "auto", CPU_REDUCE_SCATTER_ALGORITHMS);
    const op = options.op ?? "sum";
    const { rank, world } = this.#sync;
    checkReduction(what, op, input.dtype);
    checkSameDtype(what, input, output);
    checkDivisible(what, input, world);
    checkNumel(what, "output", output, input.numel / world);
    const n = output.numel;
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
    this.allGather(aShard, gathered);
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
    this.reduceScatter(partial, out);
    return out;
  }

  /** `tensor` of rank `root` into `tensor` of every rank. */
  broadcast(tensor: HostTensor, root: number): HostTensor {
    const what = "broadcast";
    checkTensorArg(what, "tensor", tensor);
    const { rank, world } = this.#sync;
    if (root !== rank) checkPeer(what, root, world, rank);
    checkCapacity(what, tensor.nbytes, this.capacityBytes);
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
    this.#stage(tensor, "send");
    putSignal(this.#sync, pads[peer]!, READY_SLOTS * world + rank, peer, this.#phase);
    this.#pendingAck = peer;
  }

  recv(tensor: HostTensor, peer: number): HostTensor {
    const { rank, world, pads } = this.#sync;
    checkTensorArg("recv", "tensor", tensor);
    checkPeer("recv", peer, world, rank);
    checkCapacity("recv", tensor.nbytes, this.capacityBytes);
    waitSignal(this.#sync, pads[rank]!, READY_SLOTS * world + peer, peer, this.#phase);
    (tensor.raw as Uint8Array).set(this.#staged(peer, tensor, tensor.numel) as Uint8Array);
    putSignal(this.#sync, pads[peer]!, ACK_SLOTS * world + rank, peer, this.#phase);
    return tensor;
  }

  /** Every rank of the group meets here, through shared memory. */
  barrier(): void {
    this.#settleSend();
    this.#meet();
  }
}
