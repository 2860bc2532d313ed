// Point-to-point on GPUs: send, recv and sendRecv. Algorithm ll (auto up to LL_AUTO_MAX_BYTES): one kernel
// (coll/p2p.cuh) whose sending blocks store the message as flagged 16-byte lines into the receiver's inbox
// and finish, while the receiving blocks poll their own memory; no signal, no wait for the receiver.
// Algorithm put (auto above): the same kernel's shape, storing the message into the inbox (two chunks
// per sender) in chunks of P2P_CHUNK_BYTES, signalling each stripe; the receiver's blocks copy it out
// and acknowledge, and the send completes once every chunk is acknowledged. Algorithm copy_engine: the
// sender stages chunks in its staging buffer, the receiver's copy engine reads them, a one-thread kernel
// waiting for and putting the same slots around the copies.
// Under auto each direction of a message picks ll or put by its own size, so a sendRecv may send by one
// and receive by the other (p2p.cuh's mixed kernels), matching the peer however it splits its calls.
// Messages between a pair carry a fingerprint of their number in that direction, dtype and size, so a
// mismatched pair is caught (CollectiveMismatchError) instead of mixing data. Algorithm nccl: NCCL's send
// and receive (sendRecv as one NCCL group), matched in order per pair as symmkit's are.
import { CallTag, fingerprint } from "../../distributed/fingerprint.js";
import { CALL_TAG_PARAM, SYMM_VIEW_PARAM } from "../../distributed/device-layouts.js";
import { MAX_SYMMETRIC_WORLD } from "../../distributed/symmetric-memory.js";
import type { Kernel } from "../../runtime/kernel.js";
import { copyDeviceToDevice } from "../../runtime/memory.js";
import { sharedModule } from "../../runtime/module.js";
import { SideStream } from "../../runtime/side-stream.js";
import type { Stream } from "../../runtime/stream.js";
import type { Tensor } from "../../runtime/tensor.js";
import { THREADS } from "../coll/registry.js";
import { overlaps } from "../gemm/matmul.js";
import type { CollectiveOptions, GpuGroup } from "../gpu-group.js";
import { checkAlgorithm, checkPeer, checkTensorArg } from "../validate.js";
import { checkSendRecv, GPU_SEND_RECV_ALGORITHMS, type GpuSendRecvAlgorithm } from "./checks.js";
import { P2P_CHUNK_BYTES, P2P_LL_CHUNK_BYTES, P2P_PROGRAM } from "./programs.js";
import { GPU_SEND_RECV_AUTO } from "./records.js";
import { autoPick } from "../records.js";
import { bytes } from "./exchange.js";

/** p2p.cuh's kMaxBlocks. */
export const P2P_MAX_BLOCKS = 16;
/** p2p_ce_signal: the inbox's SymmView; the peer waited for and its slot, the peer signalled and its slot
 * (P2P_NONE: none), the message's CallTag. */
export const P2P_SIGNAL_PARAMS = [SYMM_VIEW_PARAM, "u32", "u32", "u32", "u32", CALL_TAG_PARAM] as const;
/** p2p.cuh's kNone, and kAckBase: the ack slots follow every sender's ready slots (kMaxWorld of them). */
export const P2P_NONE = 0xffff_ffff;
export const P2P_ACK_BASE = MAX_SYMMETRIC_WORLD * P2P_MAX_BLOCKS * 2;
/** p2p.cuh's slot(rank, block 0, parity): copy_engine signals on put's block-0 slots. */
const ceSlot = (rank: number, parity: number): number => rank * P2P_MAX_BLOCKS * 2 + parity;
/** copy_engine's chunk: half the staging buffer (one half filled while the receiver copies the other),
 * at most 64 MiB, a multiple of 16 bytes. Every rank's staging buffer is the same size, so both sides of
 * a message cut it alike. */
export function copyEngineChunk(capacityBytes: number): number {
  return Math.max(16, Math.floor(Math.min(capacityBytes / 2, 64 << 20) / 16) * 16);
}
/** p2p.cuh's send/recv kernels (P2P_KERNELS): the inbox's SymmView; x, its bytes, peer, blocks, CallTag;
 * out, its bytes, peer, blocks, CallTag; the chunk. */
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

/** Most blocks one side of an ll message runs (its counts are per peer, not per block: put's pad slots
 * do not bound it). P2P_LL_MAX_BLOCKS x kThreads (512) threads are at most a full chunk's lines (32768):
 * coll/p2p.cuh's four counters of blocks done per sender rely on every block having lines in every full
 * chunk. */
export const P2P_LL_MAX_BLOCKS = 32;
/** Blocks one side of an ll message runs: one per 4 KiB of its first chunk (a line a thread), at most
 * P2P_LL_MAX_BLOCKS: 2.9 us at 64 KiB against 3.0 with 8 KiB a block, at most 16, on 2 H200s. The sides
 * need not agree (every line carries its own flag), but compute it alike. */
export function p2pLlBlocks(bytes: number): number {
  return Math.min(P2P_LL_MAX_BLOCKS, Math.max(1, Math.ceil(Math.min(bytes, P2P_LL_CHUNK_BYTES) / (4 << 10))));
}

type P2p = Exclude<GpuSendRecvAlgorithm, "auto">;
/** The algorithms a side of one p2p.cuh launch runs by. */
type Sided = "put" | "ll";
/** p2p.cuh's kernels by their sides' algorithms: index 2 x (send by ll) + (receive by ll). */
const P2P_KERNELS = ["p2p_put", "p2p_put_ll", "p2p_ll_put", "p2p_ll"] as const;
/** A message's fingerprint kind by the algorithm its side runs. */
const P2P_KINDS = { put: "send-recv", ll: "send-recv/ll" } as const;
type P2pOptions = CollectiveOptions & { algorithm?: GpuSendRecvAlgorithm };
/** The tag of a send/recv kernel's side that does not run. */
const NO_MESSAGE = new CallTag(0, 0);

export class GpuPointToPoint {
  readonly #ctx: GpuGroup;
  /** put's and copy_engine's messages sent to and received from each peer (their fingerprints' numbers),
   * and how many numbers were taken in all (what tells a call that took its numbers from one that did
   * not: GpuCollectives' takeTurns). */
  readonly #sent: number[];
  readonly #received: number[];
  #messages = 0;
  /** p2p.cuh's kernels, as P2P_KERNELS. */
  readonly #kernels: (Kernel<typeof P2P_PARAMS> | undefined)[] = [];
  #p2pSignal: Kernel<typeof P2P_SIGNAL_PARAMS> | undefined;
  /** copy_engine's receiving streams, forked from and joined to the caller's: a receive of several chunks
   * alternates them over two streams (one chunk's wait queued while the other copies), a recv of one chunk
   * runs on the caller's stream; a sendRecv receives on them (one, for one chunk) while the caller's
   * stream sends. */
  #sideStreams: SideStream[] | undefined;

  constructor(ctx: GpuGroup) {
    this.#ctx = ctx;
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

  /** send (see GpuCollectives.send). */
  send(x: Tensor, peer: number, options: P2pOptions): void {
    const [stream, algorithm] = this.#pointToPoint("send", x, peer, options);
    if (algorithm === "put" || algorithm === "ll")
      return this.#put([algorithm, algorithm], x, peer, undefined, 0, stream);
    if (algorithm === "copy_engine") {
      this.#ceKernelReady();
      return this.#ceSend(x, peer, stream);
    }
    this.#ctx.comm.send(bytes(x, 0, x.nbytes), peer, stream);
  }

  /** recv (see GpuCollectives.recv). */
  recv(out: Tensor, peer: number, options: P2pOptions): void {
    const [stream, algorithm] = this.#pointToPoint("recv", out, peer, options);
    if (algorithm === "put" || algorithm === "ll")
      return this.#put([algorithm, algorithm], undefined, 0, out, peer, stream);
    if (algorithm === "copy_engine") {
      this.#ceKernelReady();
      // A second stream only where a second chunk would use it.
      if (this.#ceChunks(out) === 1) return this.#ceRecv(out, peer, [stream]);
      const [side] = this.#sides();
      this.#ceRecv(out, peer, [stream, side!.fork(stream)]);
      return side!.join(stream);
    }
    this.#ctx.comm.recv(bytes(out, 0, out.nbytes), peer, stream);
  }

  /** sendRecv (see GpuCollectives.sendRecv). */
  sendRecv(x: Tensor, out: Tensor, peer: number, options: P2pOptions): void {
    const what = "sendRecv";
    checkSendRecv(what, x, out, overlaps);
    const [stream, algorithm] = this.#pointToPoint(what, x, peer, options);
    this.#ctx.onDevice(what, out);
    if (algorithm === "put" || algorithm === "ll") {
      // Under auto each side judges its own message, as the peer's matching side does (a sendRecv's
      // sides swapped, or a separate recv and send), so the two may differ.
      const recvAlgorithm = (options.algorithm ?? "auto") === "auto" ? this.#auto(out) : algorithm;
      return this.#put([algorithm, recvAlgorithm], x, peer, out, peer, stream);
    }
    if (algorithm === "copy_engine") {
      this.#ceKernelReady();
      // Both directions at once (the receive on side streams), so two ranks exchanging cannot deadlock.
      const sides = this.#sides().slice(0, Math.min(2, this.#ceChunks(out)));
      this.#ceRecv(
        out,
        peer,
        sides.map((side) => side.fork(stream)),
      );
      this.#ceSend(x, peer, stream);
      for (const side of sides) side.join(stream);
      return;
    }
    const comm = this.#ctx.comm;
    comm.group(() => {
      comm.send(bytes(x, 0, x.nbytes), peer, stream);
      comm.recv(bytes(out, 0, out.nbytes), peer, stream);
    });
  }

  /** Checks a point-to-point call; its stream and algorithm (auto judges t's message). Not a group call:
   * the group's call count stays as it is (the pair's own count numbers its messages). */
  #pointToPoint(what: string, t: Tensor, peer: number, options: P2pOptions): [Stream, P2p] {
    const g = this.#ctx;
    checkTensorArg(what, "tensor", t);
    checkPeer(what, peer, g.world, g.rank);
    const algorithm = options.algorithm ?? "auto";
    checkAlgorithm(what, algorithm, GPU_SEND_RECV_ALGORITHMS);
    g.onDevice(what, t);
    const stream = g.stream(options);
    g.group.watch.throwIfFailed();
    g.group.noteCapture(stream);
    return [stream, algorithm === "auto" ? this.#auto(t) : algorithm];
  }

  /** What auto sends or receives t's message by: ll or put, whose sides one launch may mix. */
  #auto(t: Tensor): Sided {
    const a = autoPick(GPU_SEND_RECV_AUTO, { bytes: t.nbytes });
    if (a === "ll" || a === "put") return a;
    throw new Error(`send/recv's auto picked ${a}, whose sides no launch mixes: the records miss a case`);
  }

  /** copy_engine's signal kernel, resolved before a call enqueues anything: a first use compiles or loads
   * the module, which waits for the GPU, and so for whatever this call had already enqueued. */
  #ceKernelReady(): void {
    this.#signalKernel();
  }

  /** The kernel whose sending side runs `send` and receiving side `recv` (p2p.cuh). */
  #putKernel(send: Sided, recv: Sided): Kernel<typeof P2P_PARAMS> {
    const i = (send === "ll" ? 2 : 0) + (recv === "ll" ? 1 : 0);
    return (this.#kernels[i] ??= sharedModule(P2P_PROGRAM, this.#ctx.device).kernel(
      `symmkit::p2p::${P2P_KERNELS[i]}`,
      P2P_PARAMS,
    ));
  }

  #signalKernel(): Kernel<typeof P2P_SIGNAL_PARAMS> {
    return (this.#p2pSignal ??= sharedModule(P2P_PROGRAM, this.#ctx.device).kernel(
      "symmkit::p2p::p2p_ce_signal",
      P2P_SIGNAL_PARAMS,
    ));
  }

  /** A message's fingerprint: its number in the pair's count (#sent or #received, shared by put and
   * copy_engine: one order per pair), its algorithm and size. The pair needs no field: its slots are its own. */
  #messageTag(
    kind: "send-recv" | "send-recv/ll" | "send-recv/copy_engine",
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
    this.#signalKernel().launch(
      { grid: 1, block: 1, stream },
      this.#ctx.inboxView,
      waitPeer,
      waitSlot,
      putPeer,
      putSlot,
      tag,
    );
  }

  /** x to `peer` by copy_engine (see p2p.cuh): staged chunk by chunk in this rank's staging buffer, the
   * receiver's copy engine reads each; done once the receiver has acknowledged the last. */
  #ceSend(x: Tensor, peer: number, stream: Stream): void {
    const { rank, staging, capacityBytes } = this.#ctx;
    const tag = this.#messageTag("send-recv/copy_engine", x, this.#sent, peer);
    const chunk = copyEngineChunk(capacityBytes);
    const chunks = this.#ceChunks(x);
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
   * is ready, then acknowledged; chunk i on streams[i & 1] (its wait and ack slots are half i & 1's, so
   * each stream keeps to its own). */
  #ceRecv(out: Tensor, peer: number, streams: readonly Stream[]): void {
    const { rank, staging, capacityBytes } = this.#ctx;
    const tag = this.#messageTag("send-recv/copy_engine", out, this.#received, peer);
    const chunk = copyEngineChunk(capacityBytes);
    const chunks = this.#ceChunks(out);
    for (let i = 0; i < chunks; i++) {
      const n = Math.min(chunk, out.nbytes - i * chunk);
      const stream = streams[i & 1]!;
      this.#signal(stream, tag, peer, ceSlot(peer, i & 1), P2P_NONE, 0);
      const half = staging.bufferPtrs[peer]! + BigInt((i & 1) * chunk);
      copyDeviceToDevice(out.ptr + BigInt(i * chunk), half, n, stream);
      this.#signal(stream, tag, P2P_NONE, 0, peer, P2P_ACK_BASE + ceSlot(rank, i & 1));
    }
  }

  /** copy_engine's chunks of a message of `t` (at least one). */
  #ceChunks(t: Tensor): number {
    return Math.max(1, Math.ceil(t.nbytes / copyEngineChunk(this.#ctx.capacityBytes)));
  }

  #sides(): SideStream[] {
    return (this.#sideStreams ??= [new SideStream(this.#ctx.device), new SideStream(this.#ctx.device)]);
  }

  /** One launch of p2p.cuh's sides: a send side, a receive side, or both, each by its algorithm. */
  #put(
    [sendBy, recvBy]: readonly [Sided, Sided],
    x: Tensor | undefined,
    to: number,
    out: Tensor | undefined,
    from: number,
    stream: Stream,
  ): void {
    // Both sides of a sendRecv run at once: a sender waiting for an acknowledgement must never hold the SM
    // its own receiving side needs (nor the peer's). ll's sides may differ from the peer's, so they keep
    // to half this GPU's SMs each; put's stripes must match the peer's, so its count (at most 16 a side)
    // comes from the size alone.
    const half = Math.max(1, Math.floor(this.#ctx.device.props.smCount / 2));
    const blocks = (by: Sided, bytes: number): number =>
      by === "ll" ? Math.min(half, p2pLlBlocks(bytes)) : p2pBlocks(bytes);
    const kernel = this.#putKernel(sendBy, recvBy);
    const sendBlocks = x ? blocks(sendBy, x.nbytes) : 0;
    const recvBlocks = out ? blocks(recvBy, out.nbytes) : 0;
    const sendTag = x ? this.#messageTag(P2P_KINDS[sendBy], x, this.#sent, to) : NO_MESSAGE;
    const recvTag = out ? this.#messageTag(P2P_KINDS[recvBy], out, this.#received, from) : NO_MESSAGE;
    kernel.launch(
      { grid: sendBlocks + recvBlocks, block: THREADS, stream },
      this.#ctx.inboxView,
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

  dispose(): void {
    for (const side of this.#sideStreams ?? []) side.dispose();
  }
}
