// All-to-all on GPUs: allToAll and allToAllV. Algorithm nccl: one NCCL group of matched sends and receives,
// this rank's own chunk copied on the stream, bytes moved as u8 so every dtype goes; the call first meets
// the peers in a barrier kernel whose signals carry the call's fingerprint, so that a rank in another call
// is caught (CollectiveMismatchError) instead of NCCL pairing two calls' data.
// Algorithm ll (allToAll, auto up to A2A_LL_AUTO_MAX_BYTES a chunk): one kernel (coll/p2p.cuh
// p2p_ll_all_to_all) sends each peer its chunk as send/recv's ll message and receives theirs, copying its
// own: no barrier, no round trip. A rank calling another algorithm meets no signal of it: both wait until
// their deadline and name the peer.
// Algorithm copy_engine (allToAll): copy-engine copies, x staged piece by piece under the peers' reads
// of the previous piece, at any size (./all-to-all-ce.ts).
// pull and copy_engine read a symmetric x where the peers' copies are, a plain one where it was staged, so
// every rank must pass x alike. Ranks that do not are caught: pull's barriers then meet in different pads
// (the symmetric tensor's, the staging buffer's), so each waits until its deadline and names a peer;
// copy_engine signals in the inbox either way, so a symmetric x's call carries another kind.
// Algorithm pull (allToAll): one kernel (coll/collectives.cuh all_to_all_pull) copies x into this rank's
// staging buffer (a symmetric x is read in place), meets the peers, reads its chunk from every rank's
// buffer, and meets them again; auto takes it above ll's chunks where the staging buffer holds x, up to
// A2A_PULL_AUTO_MAX_BYTES for a plain x, and at world 2 up to copy_engine's A2A_CE_AUTO_MIN_BYTES (NCCL or
// copy_engine are faster above).
// allToAllV learns every rank's counts first (nccl: one NCCL all-gather of each rank's side; copy_engine:
// each side staged with x, read from every rank's staging buffer after a barrier kernel) and one host
// wait, and every rank judges them alike (allToAllVVerdict): a call that cannot run is refused on every
// rank with nothing written. That host wait keeps it out of CUDA graphs. copy_engine then copies this
// rank's rows out of every rank's staged x, and meets the peers again before anyone restages.
// allToAllV with the counts on the device (algorithm pull: coll/all_to_all_v.cuh): x and a side with the
// counts staged by the stream, a barrier kernel, one kernel that judges every rank's side alike and
// pulls this rank's rows, a barrier kernel; no host wait, so capturable. A refusal is recorded on the
// device (SyncWatch's refusal record) and thrown by the next group.synchronize().
import { InvalidArgumentError } from "../../errors.js";
import type { CallShape } from "../../distributed/fingerprint.js";
import { CALL_TAG_PARAM, SYMM_VIEW_PARAM } from "../../distributed/device-layouts.js";
import { Graph } from "../../runtime/graph.js";
import type { Kernel } from "../../runtime/kernel.js";
import { copyDeviceToDevice, copyHostToDevice, DeviceMemory, memset } from "../../runtime/memory.js";
import { sharedModule } from "../../runtime/module.js";
import type { Stream } from "../../runtime/stream.js";
import { Tensor } from "../../runtime/tensor.js";
import { THREADS } from "../coll/registry.js";
import { overlaps } from "../gemm/matmul.js";
import type { CollectiveOptions, GpuGroup } from "../gpu-group.js";
import { checkAlgorithm, checkCapacity, checkTensorArg } from "../validate.js";
import {
  allToAllVVerdict,
  checkAllToAll,
  checkAllToAllV,
  checkAllToAllVCounts,
  clampI32,
  decodeSides,
  encodeSide,
  GPU_ALL_TO_ALL_ALGORITHMS,
  GPU_ALL_TO_ALL_V_ALGORITHMS,
  rowsOf,
  rowSizeRefusal,
  sideLength,
  type GpuAllToAllAlgorithm,
  type GpuAllToAllVAlgorithm,
} from "./checks.js";
import { CopyEngineAllToAll } from "./all-to-all-ce.js";
import { ncclExchange, type ExchangeInput } from "./exchange.js";
import { A2AV_PROGRAM, ALL_TO_ALL_PULL, P2P_CHUNK_BYTES, P2P_PROGRAM } from "./programs.js";
import { p2pLlBlocks } from "./p2p.js";
import { GPU_ALL_TO_ALL_AUTO, GPU_ALL_TO_ALL_V_AUTO } from "./records.js";
import { autoPick } from "../records.js";

/** all_to_all_v_pull: the staging buffer's SymmView; out, its row bytes, the side's bytes; recv counts,
 * the refusal record. */
export const A2AV_PARAMS = [SYMM_VIEW_PARAM, "ptr", "u64", "u64", "ptr", "ptr"] as const;
/** all_to_all_v.cuh's kThreads and kSideFixed. */
const A2AV_THREADS = 512;
const A2AV_SIDE_FIXED = 4;
/** The refusals all_to_all_v_pull records (its kStaging .. kOut), in words. */
export const A2AV_REFUSALS: Readonly<Record<number, (rank: number, detail: number) => string>> = {
  0x101: (r, d) =>
    `rank ${r}'s x needs ${d} bytes of the symmetric staging buffer (with its side), more than it holds; pass a larger stagingBytes to init() (or SYMMKIT_STAGING_BYTES)`,
  0x102: rowSizeRefusal,
  0x103: (r, d) => `rank ${r} sends a negative row count to rank ${d}`,
  0x104: (r, d) => `rank ${r}'s sendCounts add up to ${d} rows, more than its x has`,
  0x105: (r, d) => `rank ${r} receives ${d} rows, more than its out holds`,
};
/** p2p_ll_all_to_all: the inbox's SymmView, x, out, the chunk's bytes, blocks per side, CallTag, put's
 * chunk. */
const A2A_LL_PARAMS = [SYMM_VIEW_PARAM, "ptr", "ptr", "u64", "u32", CALL_TAG_PARAM, "u64"] as const;

export class GpuAllToAll {
  readonly #ctx: GpuGroup;
  #a2av: Kernel<typeof A2AV_PARAMS> | undefined;
  #ll: Kernel<typeof A2A_LL_PARAMS> | undefined;
  #ce: CopyEngineAllToAll | undefined;
  /** allToAllV's published sides (see #allToAllV). */
  #sides: DeviceMemory | undefined;

  constructor(ctx: GpuGroup) {
    this.#ctx = ctx;
    ctx.group.watch.describeRefusals("allToAllV (counts on the device)", A2AV_REFUSALS);
  }

  /** allToAll (see GpuCollectives.allToAll). */
  allToAll(
    input: ExchangeInput,
    out: Tensor,
    options: CollectiveOptions & { algorithm?: GpuAllToAllAlgorithm } = {},
  ): Tensor {
    const what = "allToAll";
    checkTensorArg(what, "x", input);
    const x = this.#ctx.local(input, what);
    checkAllToAll(what, this.#ctx.world, x, out, overlaps);
    const requested = options.algorithm ?? "auto";
    checkAlgorithm(what, requested, GPU_ALL_TO_ALL_ALGORITHMS);
    this.#ctx.onDevice(what, out);
    const algorithm = requested === "auto" ? this.autoAllToAll(input, x) : requested;
    this.#allToAll(what, input, x, out, algorithm, this.#ctx.stream(options));
    return out;
  }

  /** allToAllV (see GpuCollectives.allToAllV), counts on the host or on the device. */
  allToAllV(
    x: Tensor,
    out: Tensor,
    sendCounts: readonly number[] | Tensor,
    options: CollectiveOptions & {
      recvCounts?: readonly number[];
      recvCountsOut?: Tensor;
      algorithm?: GpuAllToAllVAlgorithm;
    },
  ): { output: Tensor; recvCounts: number[] | Tensor } {
    const what = "allToAllV";
    const world = this.#ctx.world;
    const requested = options.algorithm ?? "auto";
    checkAlgorithm(what, requested, GPU_ALL_TO_ALL_V_ALGORITHMS);
    if (sendCounts instanceof Tensor) {
      checkAllToAllVCounts(what, world, x, out, sendCounts, options, overlaps);
      if (requested !== "auto" && requested !== "pull")
        throw new InvalidArgumentError(
          `${what}: counts on the device go with algorithm pull (or auto); ${requested} takes them as an array`,
        );
      const counts = [sendCounts, options.recvCountsOut].filter((t) => t !== undefined);
      for (const t of [x, out, ...counts]) this.#ctx.onDevice(what, t);
      const stream = this.#ctx.stream(options);
      if (options.recvCountsOut === undefined && Graph.activeCapture(stream) !== undefined)
        throw new InvalidArgumentError(
          `${what}: inside a CUDA graph capture, pass recvCountsOut (i32, ${world} elements) for the counts received`,
        );
      const recvCounts =
        options.recvCountsOut ?? Tensor.empty([world], "i32", { device: this.#ctx.device, stream });
      this.#allToAllVOnDevice(x, out, sendCounts, recvCounts, stream);
      return { output: out, recvCounts };
    }
    checkAllToAllV(what, world, x, out, sendCounts, options, overlaps);
    if (requested === "pull")
      throw new InvalidArgumentError(
        `${what}: algorithm pull takes the counts on the device (an i32 tensor of ${world} elements); with an array, use nccl or copy_engine`,
      );
    this.#ctx.onDevice(what, x);
    this.#ctx.onDevice(what, out);
    const algorithm =
      requested === "auto" ? autoPick(GPU_ALL_TO_ALL_V_AUTO, { countsOnDevice: false }) : requested;
    const recvCounts = this.#allToAllV(
      what,
      x,
      out,
      sendCounts,
      options.recvCounts,
      algorithm,
      this.#ctx.stream(options),
    );
    return { output: out, recvCounts };
  }

  /** What auto runs (the records' rules, over whether the staging buffer holds x or x is symmetric). */
  autoAllToAll(input: ExchangeInput, x: Tensor): Exclude<GpuAllToAllAlgorithm, "auto"> {
    const plain = input instanceof Tensor;
    const fitsStaging = !plain || x.nbytes <= this.#ctx.capacityBytes;
    return autoPick(GPU_ALL_TO_ALL_AUTO, {
      world: this.#ctx.world,
      fitsStaging,
      plain,
      bytes: x.nbytes,
      chunkBytes: x.nbytes / this.#ctx.world,
    });
  }

  #allToAll(
    what: string,
    input: ExchangeInput,
    x: Tensor,
    out: Tensor,
    algorithm: Exclude<GpuAllToAllAlgorithm, "auto">,
    stream: Stream,
  ): void {
    const ctx = this.#ctx;
    const chunk = x.nbytes / ctx.world;
    if (algorithm === "ll") {
      const tag = ctx.tag({ kind: "all-to-all/ll", dtype: x.dtype, count: x.numel }, stream);
      if (ctx.world === 1) return copyDeviceToDevice(out.ptr, x.ptr, x.nbytes, stream);
      // 2 world - 1 groups of blocks (a send and a receive per peer, the own chunk's copy), one block per
      // SM at most in all: every side must run at once (p2p.cuh).
      const groups = 2 * ctx.world - 1;
      const blocks = Math.max(1, Math.min(p2pLlBlocks(chunk), Math.floor(ctx.device.props.smCount / groups)));
      this.#llKernel().launch(
        { grid: groups * blocks, block: THREADS, stream },
        ctx.inboxView,
        x,
        out,
        chunk,
        blocks,
        tag,
        P2P_CHUNK_BYTES,
      );
      return;
    }
    if (algorithm === "pull") {
      const plain = input instanceof Tensor;
      checkCapacity(what, plain ? x.nbytes : 0, ctx.capacityBytes);
      const tag = ctx.tag({ kind: "all-to-all/pull", dtype: x.dtype, count: x.numel }, stream);
      if (ctx.world === 1) return copyDeviceToDevice(out.ptr, x.ptr, x.nbytes, stream);
      ctx
        .moving(ALL_TO_ALL_PULL)
        .launch(
          { grid: ctx.blocks(x.nbytes), block: THREADS, stream },
          plain ? ctx.stagingView : input.deviceView(),
          plain ? x.ptr : 0n,
          out,
          chunk,
          tag,
        );
      return;
    }
    if (algorithm === "copy_engine") {
      const ce = (this.#ce ??= new CopyEngineAllToAll(ctx));
      if (ctx.world > 1) ce.check(what, input, x);
      const kind =
        input instanceof Tensor ? "all-to-all/copy_engine" : "all-to-all/copy_engine (symmetric x)";
      const tag = ctx.tag({ kind, dtype: x.dtype, count: x.numel }, stream);
      if (ctx.world === 1) return copyDeviceToDevice(out.ptr, x.ptr, x.nbytes, stream);
      return ce.run(input, x, out, tag, stream);
    }
    this.#fingerprint({ kind: "all-to-all/nccl", dtype: x.dtype, count: x.numel }, stream);
    ncclExchange(
      this.#ctx.comm,
      this.#ctx.rank,
      this.#ctx.world,
      x,
      out,
      (r) => [r * chunk, chunk],
      (r) => [r * chunk, chunk],
      stream,
    );
  }

  #llKernel(): Kernel<typeof A2A_LL_PARAMS> {
    return (this.#ll ??= sharedModule(P2P_PROGRAM, this.#ctx.device).kernel(
      "symmkit::p2p::p2p_ll_all_to_all",
      A2A_LL_PARAMS,
    ));
  }

  /** allToAllV with the counts as an array. Returns the rows received from each rank. */
  #allToAllV(
    what: string,
    x: Tensor,
    out: Tensor,
    sendCounts: readonly number[],
    recvCounts: readonly number[] | undefined,
    algorithm: Exclude<GpuAllToAllVAlgorithm, "auto">,
    stream: Stream,
  ): number[] {
    const ctx = this.#ctx;
    const { world, rank, comm, staging } = ctx;
    if (Graph.activeCapture(stream) !== undefined)
      throw new InvalidArgumentError(
        `${what}: algorithm ${algorithm} learns the peers' counts through the host, which a CUDA graph cannot hold; call it outside the capture`,
      );
    const rowBytes = rowsOf(x).rowElems * x.elementBytes;
    const side = sideLength(world);
    const viaNccl = algorithm === "nccl";
    // copy_engine stages the side, then x where it fits (src/ops/exchange/checks.ts encodeSide).
    const headerBytes = align16(4 * side);
    if (!viaNccl) checkCapacity(what, headerBytes, ctx.capacityBytes);
    const needed = viaNccl || headerBytes + x.nbytes <= ctx.capacityBytes ? 0 : headerBytes + x.nbytes;
    const mine = encodeSide(rowsOf(out).rows, sendCounts, recvCounts, needed, rowsOf(x).rows, rowBytes);
    const count = rowsOf(x).rowElems;
    const tag = ctx.tag(
      { kind: viaNccl ? "all-to-all-v/nccl" : "all-to-all-v/copy_engine", dtype: x.dtype, count },
      stream,
    );
    const barrier = (step: 0 | 1): void => {
      if (world > 1) ctx.groupBarrier(ctx.stagingView, stream, tag, step);
    };
    // This rank's side and every rank's, in scratch kept between calls: each call is done with it once
    // toHost below has waited for the stream.
    const at = align16(4 * side);
    this.#sides =
      this.#sides && this.#sides.bytes >= at * (world + 1) ? this.#sides : this.#grow(at * (world + 1));
    const all = Tensor.fromMemory(this.#sides, [world * side], "i32", at);
    if (viaNccl) {
      const local = Tensor.fromMemory(this.#sides, [side], "i32");
      copyHostToDevice(local.ptr, mine, stream);
      barrier(0);
      comm.allGather(local, all, stream);
    } else {
      copyHostToDevice(staging.tensor.ptr, mine, stream);
      if (needed === 0) copyDeviceToDevice(staging.tensor.ptr + BigInt(headerBytes), x.ptr, x.nbytes, stream);
      barrier(0);
      for (let r = 0; r < world; r++)
        copyDeviceToDevice(all.ptr + BigInt(4 * side * r), staging.bufferPtrs[r]!, 4 * side, stream);
    }
    const sides = decodeSides(all.toHost({ stream }), world);
    const verdict = allToAllVVerdict(what, sides, ctx.capacityBytes, "nccl");
    const received = sides.map((s) => s.sendCounts[rank]!);
    const recvAt = prefix(received);
    if (viaNccl) {
      if (verdict !== undefined) throw new InvalidArgumentError(verdict);
      const sendAt = prefix(sendCounts);
      ncclExchange(
        this.#ctx.comm,
        this.#ctx.rank,
        this.#ctx.world,
        x,
        out,
        (r) => [sendAt[r]! * rowBytes, sendCounts[r]! * rowBytes],
        (r) => [recvAt[r]! * rowBytes, received[r]! * rowBytes],
        stream,
      );
      return received;
    }
    if (verdict === undefined) {
      // Our rows in each rank's staged x start after the rows it sends to lower ranks; rank-rotated, so
      // that the copy engines of all ranks read from different ranks at each step.
      for (let i = 0; i < world; i++) {
        const r = (rank + i) % world;
        const skip = sides[r]!.sendCounts.subarray(0, rank).reduce((a, b) => a + b, 0);
        const from = staging.bufferPtrs[r]! + BigInt(headerBytes + skip * rowBytes);
        copyDeviceToDevice(out.ptr + BigInt(recvAt[r]! * rowBytes), from, received[r]! * rowBytes, stream);
      }
    }
    // Nobody restages while a peer may still read its buffer; on a refusal too.
    barrier(1);
    if (verdict !== undefined) throw new InvalidArgumentError(verdict);
    return received;
  }

  /**
   * allToAllV with the counts in `sendCounts` (i32 [world] on the device), algorithm pull: the side and x
   * staged by the stream, a barrier kernel, all_to_all_v_pull (which judges the call and copies this
   * rank's rows), a barrier kernel. No host wait: capturable. The rows received from each rank go to
   * `recvCounts` (i32 [world]; -1 each when the GPU refused the call: see coll/all_to_all_v.cuh).
   */
  #allToAllVOnDevice(x: Tensor, out: Tensor, sendCounts: Tensor, recvCounts: Tensor, stream: Stream): void {
    const ctx = this.#ctx;
    const { world, staging, device } = ctx;
    // Resolved before anything is enqueued: a first use compiles or loads the module, which waits for
    // the GPU; behind this call's own barrier kernel that wait would be on the peers.
    const kernel = (this.#a2av ??= sharedModule(A2AV_PROGRAM, device).kernel(
      `symmkit::a2av::all_to_all_v_pull<${world}>`,
      A2AV_PARAMS,
    ));
    const { rowElems, rows } = rowsOf(x);
    const rowBytes = rowElems * x.elementBytes;
    const headerBytes = align16(4 * (A2AV_SIDE_FIXED + world));
    checkCapacity("allToAllV", headerBytes, ctx.capacityBytes);
    const fits = headerBytes + x.nbytes <= ctx.capacityBytes;
    // No row size in the fingerprint: the kernel judges it (kRowBytes), so that a rank whose rows differ is
    // refused on every rank instead of found out of step, and the group stays usable.
    const tag = ctx.tag({ kind: "all-to-all-v/pull", dtype: x.dtype, count: 0 }, stream);
    const side = staging.tensor.ptr;
    const needed = fits ? 0 : headerBytes + x.nbytes;
    for (const [i, value] of [rows, rowsOf(out).rows, needed, rowBytes].entries())
      memset(side + BigInt(4 * i), clampI32(value), 4, 1, stream);
    copyDeviceToDevice(side + BigInt(4 * A2AV_SIDE_FIXED), sendCounts.ptr, 4 * world, stream);
    if (fits && x.nbytes > 0) copyDeviceToDevice(side + BigInt(headerBytes), x.ptr, x.nbytes, stream);
    ctx.groupBarrier(ctx.stagingView, stream, tag);
    const grid = Math.max(1, Math.min(2 * device.props.smCount, Math.ceil(out.nbytes / (64 << 10))));
    kernel.launch(
      { grid, block: A2AV_THREADS, stream },
      ctx.stagingView,
      out,
      rowBytes,
      headerBytes,
      recvCounts,
      ctx.refusalPtr,
    );
    // Nobody restages while a peer may still read its buffer; on a refusal too.
    ctx.groupBarrier(ctx.stagingView, stream, tag, 1);
  }

  #grow(bytes: number): DeviceMemory {
    this.#sides?.dispose();
    return DeviceMemory.alloc(bytes, this.#ctx.device);
  }

  dispose(): void {
    this.#sides?.dispose();
    this.#ce?.dispose();
  }

  /** A group-wide NCCL call's barrier kernel, its signals carrying the call's fingerprint. */
  #fingerprint(shape: CallShape, stream: Stream): void {
    const tag = this.#ctx.tag(shape, stream);
    if (this.#ctx.world > 1) this.#ctx.groupBarrier(this.#ctx.stagingView, stream, tag);
  }
}

const align16 = (n: number): number => Math.ceil(n / 16) * 16;

/** Running sums: where each rank's rows start. */
function prefix(counts: ArrayLike<number>): number[] {
  const at: number[] = [];
  let sum = 0;
  for (let i = 0; i < counts.length; i++) {
    at.push(sum);
    sum += counts[i]!;
  }
  return at;
}
