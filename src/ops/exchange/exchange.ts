// Point-to-point and all-to-all on GPUs. Algorithm nccl: send, recv and sendRecv are NCCL's send and
// receive (sendRecv as one NCCL group); allToAll and allToAllV are one NCCL group of matched sends and
// receives, this rank's own chunk copied on the stream. Bytes move as u8, so every dtype goes. NCCL
// matches point-to-point calls in order per pair, as symmkit's CPU backend does. The group-wide calls
// first meet in a barrier kernel whose signals carry the call's fingerprint, so that a rank in another
// call is caught (CollectiveMismatchError) instead of NCCL pairing two calls' data.
// Algorithm put (send, recv, sendRecv; auto): one kernel (coll/p2p.cuh) whose blocks store the message
// into the receiver's inbox (a symmetric buffer of its own, two chunks per sender) in chunks of
// P2P_CHUNK_BYTES, signalling each stripe; the receiver's blocks copy it out and acknowledge. Messages
// between a pair carry a fingerprint of their number in that direction, dtype and size, so a
// mismatched pair is caught (CollectiveMismatchError) instead of mixing data.
// Algorithm pull (allToAll): one kernel (coll/collectives.cuh all_to_all_pull) copies x into this rank's
// staging buffer (a symmetric x is read in place), meets the peers, reads its chunk from every rank's
// buffer, and meets them again; auto takes it whenever the staging buffer holds x.
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
import { CallTag, fingerprint, type CallShape } from "../../distributed/fingerprint.js";
import { CALL_TAG_PARAM, SYMM_VIEW_PARAM } from "../../distributed/device-layouts.js";
import type { NcclComm, NcclSpan } from "../../distributed/nccl-comm.js";
import { MAX_SYMMETRIC_WORLD, type SymmetricTensor } from "../../distributed/symmetric-memory.js";
import type { Device } from "../../runtime/device.js";
import { Graph } from "../../runtime/graph.js";
import type { Kernel } from "../../runtime/kernel.js";
import { copyDeviceToDevice, copyHostToDevice, DeviceMemory, memset } from "../../runtime/memory.js";
import { Event } from "../../runtime/event.js";
import { Stream } from "../../runtime/stream.js";
import { Tensor } from "../../runtime/tensor.js";
import type { ProgramSpec } from "../../runtime/module.js";
import { WORLD_SIZES } from "../coll/programs.js";
import { THREADS, type CollectiveContext } from "../coll/registry.js";
import { checkCapacity } from "../validate.js";
import {
  allToAllVVerdict,
  decodeSides,
  encodeSide,
  rowsOf,
  clampI32,
  sideLength,
  type GpuAllToAllAlgorithm,
  type GpuAllToAllVAlgorithm,
  type GpuSendRecvAlgorithm,
} from "./checks.js";

/** The put pipeline's chunk (coll/p2p.cuh): every rank's inbox holds two per sender. */
export const P2P_CHUNK_BYTES = 1 << 20;
/** p2p.cuh's kMaxBlocks. */
export const P2P_MAX_BLOCKS = 16;
export const P2P_PROGRAM: ProgramSpec = {
  name: "symmkit/coll/p2p",
  source: '#include "symmkit/coll/p2p.cuh"\n',
  nameExpressions: ["symmkit::p2p::p2p_put", "symmkit::p2p::p2p_ce_signal"],
};
/** p2p_ce_signal: the inbox's SymmView; the peer waited for and its slot, the peer signalled and its slot
 * (P2P_NONE: none), the message's CallTag. */
export const P2P_SIGNAL_PARAMS = [SYMM_VIEW_PARAM, "u32", "u32", "u32", "u32", CALL_TAG_PARAM] as const;
/** p2p.cuh's kNone, and kAckBase: the ack slots follow every sender's ready slots (kMaxWorld of them). */
const P2P_NONE = 0xffff_ffff;
const P2P_ACK_BASE = MAX_SYMMETRIC_WORLD * P2P_MAX_BLOCKS * 2;
/** p2p.cuh's slot(rank, block 0, parity): copy_engine signals on put's block-0 slots. */
const ceSlot = (rank: number, parity: number): number => rank * P2P_MAX_BLOCKS * 2 + parity;
/** copy_engine's chunk: half the staging buffer (one half filled while the receiver copies the other),
 * at most 64 MiB, a multiple of 16 bytes. Every rank's staging buffer is the same size, so both sides of
 * a message cut it alike. */
export function copyEngineChunk(capacityBytes: number): number {
  return Math.max(16, Math.floor(Math.min(capacityBytes / 2, 64 << 20) / 16) * 16);
}
/** p2p_put: the inbox's SymmView; x, its bytes, peer, blocks, CallTag; out, its bytes, peer, blocks,
 * CallTag; the chunk. */
export const P2P_PARAMS = [
  SYMM_VIEW_PARAM,
  "ptr",
  "u64",
  "u32",
  "u32",
  CALL_TAG_PARAM,
  "ptr",
  "u64",
  "u32",
  "u32",
  CALL_TAG_PARAM,
  "u64",
] as const;

/** Blocks one side of a message runs: one per 64 KiB of its first chunk, a power of two (it divides the
 * chunk's 16-byte groups, so blocks x stripe never exceeds a chunk), at most P2P_MAX_BLOCKS. Both sides
 * compute it from the size alone. */
export function p2pBlocks(bytes: number): number {
  const want = Math.max(1, Math.ceil(Math.min(bytes, P2P_CHUNK_BYTES) / (64 << 10)));
  return Math.min(P2P_MAX_BLOCKS, 2 ** Math.ceil(Math.log2(want)));
}

/** allToAllV with the counts on the device (coll/all_to_all_v.cuh), one kernel per world size. */
export const A2AV_PROGRAM: ProgramSpec = {
  name: "symmkit/coll/all_to_all_v",
  source: '#include "symmkit/coll/all_to_all_v.cuh"\n',
  nameExpressions: [1, ...WORLD_SIZES].map((w) => `symmkit::a2av::all_to_all_v_pull<${w}>`),
};
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
  0x102: (r, d) => `rank ${r}'s rows are ${d} bytes, not the size of rank 0's`,
  0x103: (r, d) => `rank ${r} sends a negative row count to rank ${d}`,
  0x104: (r, d) => `rank ${r}'s sendCounts add up to ${d} rows, more than its x has`,
  0x105: (r, d) => `rank ${r} receives ${d} rows, more than its out holds`,
};
/** What the exchange uses of the group's collectives: their context, and the put algorithm's inbox. */
export type ExchangeContext = Pick<
  CollectiveContext,
  | "rank"
  | "world"
  | "comm"
  | "staging"
  | "stagingView"
  | "capacityBytes"
  | "groupBarrier"
  | "allGatherKernel"
  | "blocks"
> & {
  readonly device: Device;
  /** put's inbox: world x 2 chunks of P2P_CHUNK_BYTES, and its pad's signal slots. */
  readonly inbox: SymmetricTensor;
  p2pKernel(): Kernel<typeof P2P_PARAMS>;
  p2pSignalKernel(): Kernel<typeof P2P_SIGNAL_PARAMS>;
  /** allToAllV pull's kernel for this world size. */
  a2avKernel(): Kernel<typeof A2AV_PARAMS>;
  /** Where a kernel records a call it refused (SyncWatch.refusalPtr). */
  readonly refusalPtr: bigint;
  /** The next group call's fingerprint, for its kernels. */
  tag(shape: CallShape, stream: Stream): CallTag;
};

/** What allToAll takes: a plain tensor, or a symmetric one read in place. */
export type ExchangeInput = Tensor | SymmetricTensor;

/** `count` bytes of `t` from byte `at`, as NCCL moves them (every dtype as u8). */
export const bytes = (t: Tensor, at = 0, count = t.nbytes): NcclSpan => ({
  ptr: t.ptr + BigInt(at),
  numel: count,
  dtype: "u8",
});

type P2p = Exclude<GpuSendRecvAlgorithm, "auto">;
/** The tag of p2p_put's side that does not run. */
const NO_MESSAGE = new CallTag(0, 0);

export class GpuExchange {
  readonly #ctx: ExchangeContext;
  readonly #inboxView: Uint8Array;
  /** put's and copy_engine's messages sent to and received from each peer (their fingerprints' numbers),
   * and how many numbers were taken in all (what tells a call that took its numbers from one that did
   * not: GpuCollectives' takeTurns). */
  readonly #sent: number[];
  readonly #received: number[];
  #messages = 0;
  /** allToAllV's published sides (see allToAllV). */
  #sides: DeviceMemory | undefined;
  /** copy_engine sendRecv's receiving stream, forked from and joined to the caller's. */
  #sideStream: { stream: Stream; fork: Event; join: Event } | undefined;

  constructor(ctx: ExchangeContext) {
    this.#ctx = ctx;
    this.#inboxView = ctx.inbox.deviceView();
    this.#sent = new Array<number>(ctx.world).fill(0);
    this.#received = new Array<number>(ctx.world).fill(0);
  }

  /** How many message numbers this exchange has taken, in either direction with any peer. */
  get messages(): number {
    return this.#messages;
  }

  /** The next message's number in one direction of a pair: `count` is #sent or #received. */
  #take(count: number[], peer: number): number {
    this.#messages++;
    return count[peer]!++;
  }

  /** Takes the numbers of a point-to-point call with `peer` that was refused before taking them (see
   * takeTurns); false where `peer` names no pair. */
  skip(peer: unknown, sends: boolean, receives: boolean): boolean {
    const { rank, world } = this.#ctx;
    if (!Number.isInteger(peer) || (peer as number) < 0 || (peer as number) >= world || peer === rank)
      return false;
    if (sends) this.#take(this.#sent, peer as number);
    if (receives) this.#take(this.#received, peer as number);
    return true;
  }

  send(x: Tensor, peer: number, algorithm: P2p, stream: Stream): void {
    if (algorithm === "put") return this.#put(x, peer, undefined, 0, stream);
    if (algorithm === "copy_engine") {
      this.#ceKernelReady();
      return this.#ceSend(x, peer, stream);
    }
    this.#ctx.comm.send(bytes(x, 0, x.nbytes), peer, stream);
  }

  recv(out: Tensor, peer: number, algorithm: P2p, stream: Stream): void {
    if (algorithm === "put") return this.#put(undefined, 0, out, peer, stream);
    if (algorithm === "copy_engine") {
      this.#ceKernelReady();
      return this.#ceRecv(out, peer, stream);
    }
    this.#ctx.comm.recv(bytes(out, 0, out.nbytes), peer, stream);
  }

  sendRecv(x: Tensor, out: Tensor, peer: number, algorithm: P2p, stream: Stream): void {
    if (algorithm === "put") return this.#put(x, peer, out, peer, stream);
    if (algorithm === "copy_engine") {
      this.#ceKernelReady();
      // Both directions at once (the receive on a side stream), so two ranks exchanging cannot deadlock.
      const side = this.#side();
      side.fork.record(stream);
      side.stream.waitEvent(side.fork);
      this.#ceRecv(out, peer, side.stream);
      side.join.record(side.stream);
      this.#ceSend(x, peer, stream);
      stream.waitEvent(side.join);
      return;
    }
    const comm = this.#ctx.comm;
    comm.group(() => {
      comm.send(bytes(x, 0, x.nbytes), peer, stream);
      comm.recv(bytes(out, 0, out.nbytes), peer, stream);
    });
  }

  /** copy_engine's signal kernel, resolved before a call enqueues anything: a first use compiles or loads
   * the module, which waits for the GPU, and so for whatever this call had already enqueued. */
  #ceKernelReady(): void {
    this.#ctx.p2pSignalKernel();
  }

  /** A message's fingerprint: its number in the pair's count (#sent or #received, shared by put and
   * copy_engine: one order per pair), its algorithm and size. The pair needs no field: its slots are its own. */
  #messageTag(
    kind: "send-recv" | "send-recv/copy_engine",
    t: Tensor,
    count: number[],
    peer: number,
  ): CallTag {
    return fingerprint(this.#take(count, peer), { kind, dtype: t.dtype, count: t.numel });
  }

  /** copy_engine's signal step: wait for `waitPeer` at `waitSlot` of this rank's pad, then signal
   * `putPeer` at `putSlot` of its pad (P2P_NONE: skip). */
  #signal(
    stream: Stream,
    tag: CallTag,
    waitPeer: number,
    waitSlot: number,
    putPeer: number,
    putSlot: number,
  ): void {
    this.#ctx
      .p2pSignalKernel()
      .launch({ grid: 1, block: 1, stream }, this.#inboxView, waitPeer, waitSlot, putPeer, putSlot, tag);
  }

  /** x to `peer` by copy_engine (see p2p.cuh): staged chunk by chunk in this rank's staging buffer, the
   * receiver's copy engine reads each; done once the receiver has acknowledged the last. */
  #ceSend(x: Tensor, peer: number, stream: Stream): void {
    const { rank, staging, capacityBytes } = this.#ctx;
    const tag = this.#messageTag("send-recv/copy_engine", x, this.#sent, peer);
    const chunk = copyEngineChunk(capacityBytes);
    const chunks = Math.max(1, Math.ceil(x.nbytes / chunk));
    const ack = (i: number): number => P2P_ACK_BASE + ceSlot(peer, i & 1);
    for (let i = 0; i < chunks; i++) {
      // Half i & 1 is free once chunk i - 2's ack came.
      if (i >= 2) this.#signal(stream, tag, peer, ack(i), P2P_NONE, 0);
      const n = Math.min(chunk, x.nbytes - i * chunk);
      copyDeviceToDevice(staging.tensor.ptr + BigInt((i & 1) * chunk), x.ptr + BigInt(i * chunk), n, stream);
      this.#signal(stream, tag, P2P_NONE, 0, peer, ceSlot(rank, i & 1));
    }
    for (let i = Math.max(0, chunks - 2); i < chunks; i++)
      this.#signal(stream, tag, peer, ack(i), P2P_NONE, 0);
  }

  /** Into `out` from `peer` by copy_engine: each chunk copied out of the sender's staging buffer once it
   * is ready, then acknowledged. */
  #ceRecv(out: Tensor, peer: number, stream: Stream): void {
    const { rank, staging, capacityBytes } = this.#ctx;
    const tag = this.#messageTag("send-recv/copy_engine", out, this.#received, peer);
    const chunk = copyEngineChunk(capacityBytes);
    const chunks = Math.max(1, Math.ceil(out.nbytes / chunk));
    for (let i = 0; i < chunks; i++) {
      const n = Math.min(chunk, out.nbytes - i * chunk);
      this.#signal(stream, tag, peer, ceSlot(peer, i & 1), P2P_NONE, 0);
      const half = staging.bufferPtrs[peer]! + BigInt((i & 1) * chunk);
      copyDeviceToDevice(out.ptr + BigInt(i * chunk), half, n, stream);
      this.#signal(stream, tag, P2P_NONE, 0, peer, P2P_ACK_BASE + ceSlot(rank, i & 1));
    }
  }

  #side(): { stream: Stream; fork: Event; join: Event } {
    const device = this.#ctx.device;
    this.#sideStream ??= {
      stream: Stream.create(device),
      fork: Event.create(device, { timing: false }),
      join: Event.create(device, { timing: false }),
    };
    return this.#sideStream;
  }

  /** One p2p_put launch: a send side, a receive side, or both. */
  #put(x: Tensor | undefined, to: number, out: Tensor | undefined, from: number, stream: Stream): void {
    const sendBlocks = x ? p2pBlocks(x.nbytes) : 0;
    const recvBlocks = out ? p2pBlocks(out.nbytes) : 0;
    const sendTag = x ? this.#messageTag("send-recv", x, this.#sent, to) : NO_MESSAGE;
    const recvTag = out ? this.#messageTag("send-recv", out, this.#received, from) : NO_MESSAGE;
    this.#ctx
      .p2pKernel()
      .launch(
        { grid: sendBlocks + recvBlocks, block: THREADS, stream },
        this.#inboxView,
        x?.ptr ?? 0n,
        x?.nbytes ?? 0,
        to,
        sendBlocks,
        sendTag,
        out?.ptr ?? 0n,
        out?.nbytes ?? 0,
        from,
        recvBlocks,
        recvTag,
        P2P_CHUNK_BYTES,
      );
  }

  /** What auto runs: pull when the staging buffer holds x (or x is symmetric), else nccl. */
  autoAllToAll(input: ExchangeInput, x: Tensor): Exclude<GpuAllToAllAlgorithm, "auto"> {
    return !(input instanceof Tensor) || x.nbytes <= this.#ctx.capacityBytes ? "pull" : "nccl";
  }

  allToAll(
    what: string,
    input: ExchangeInput,
    x: Tensor,
    out: Tensor,
    algorithm: Exclude<GpuAllToAllAlgorithm, "auto">,
    stream: Stream,
  ): void {
    const ctx = this.#ctx;
    const chunk = x.nbytes / ctx.world;
    if (algorithm === "pull") {
      const plain = input instanceof Tensor;
      checkCapacity(what, plain ? x.nbytes : 0, ctx.capacityBytes);
      const tag = ctx.tag({ kind: "all-to-all/pull", dtype: x.dtype, count: x.numel }, stream);
      if (ctx.world === 1) return copyDeviceToDevice(out.ptr, x.ptr, x.nbytes, stream);
      ctx
        .allGatherKernel("all_to_all_pull")
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

  /** See GpuCollectives.allToAllV. Returns the rows received from each rank. */
  allToAllV(
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
    const mine = encodeSide(rowsOf(out).rows, sendCounts, recvCounts, needed, rowsOf(x).rows);
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
    const verdict = allToAllVVerdict(what, sides, ctx.capacityBytes);
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
  allToAllVOnDevice(x: Tensor, out: Tensor, sendCounts: Tensor, recvCounts: Tensor, stream: Stream): void {
    const ctx = this.#ctx;
    const { world, staging, device } = ctx;
    // Resolved before anything is enqueued: a first use compiles or loads the module, which waits for
    // the GPU; behind this call's own barrier kernel that wait would be on the peers.
    const kernel = ctx.a2avKernel();
    const { rowElems, rows } = rowsOf(x);
    const rowBytes = rowElems * x.elementBytes;
    const headerBytes = align16(4 * (A2AV_SIDE_FIXED + world));
    checkCapacity("allToAllV", headerBytes, ctx.capacityBytes);
    const fits = headerBytes + x.nbytes <= ctx.capacityBytes;
    const tag = ctx.tag({ kind: "all-to-all-v/pull", dtype: x.dtype, count: rowElems }, stream);
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
    if (this.#sideStream) for (const x of Object.values(this.#sideStream)) x.dispose();
  }

  /** A group-wide NCCL call's barrier kernel, its signals carrying the call's fingerprint. */
  #fingerprint(shape: CallShape, stream: Stream): void {
    const tag = this.#ctx.tag(shape, stream);
    if (this.#ctx.world > 1) this.#ctx.groupBarrier(this.#ctx.stagingView, stream, tag);
  }
}

/** One NCCL group on `comm` (this rank `rank` of `world`): span `send(r)` of x to rank r, span `recv(r)` of
 * out from rank r ([byte offset, bytes]); this rank's own span copied. Empty spans are skipped on both
 * sides (both know them). */
export function ncclExchange(
  comm: NcclComm,
  rank: number,
  world: number,
  x: Tensor,
  out: Tensor,
  send: (r: number) => [number, number],
  recv: (r: number) => [number, number],
  stream: Stream,
): void {
  const [from, n] = send(rank);
  const [to] = recv(rank);
  copyDeviceToDevice(out.ptr + BigInt(to), x.ptr + BigInt(from), n, stream);
  if (world === 1) return;
  comm.group(() => {
    for (let i = 1; i < world; i++) {
      // Rank-rotated, so that not every rank starts with rank 0.
      const r = (rank + i) % world;
      const [sa, sn] = send(r);
      const [ra, rn] = recv(r);
      if (sn > 0) comm.send(bytes(x, sa, sn), r, stream);
      if (rn > 0) comm.recv(bytes(out, ra, rn), r, stream);
    }
  });
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
