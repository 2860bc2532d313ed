// What every family of the CPU backend's calls shares: the pads (sync env), the staging symmetric
// tensor, the group's call number and the running call's fingerprint, the send whose acknowledgement the
// staging buffer waits for, and the failed wait after which every call is refused. Every rank stages its
// input in its own symmetric buffer, meets the others (barrier: our writes are done, peers may read
// them), reads what it needs from the peers' buffers, and meets them again (we are done reading, peers
// may overwrite).
import type { DType, RawArray } from "../runtime/dtype.js";
import { checkCapacity } from "../ops/validate.js";
import { CallTag, CollectiveMismatchError, fingerprint, type CallShape } from "../distributed/fingerprint.js";
import "../ops/call-kinds.js"; // the operations' kinds, before this group fingerprints a call
import { SymmTimeoutError } from "../distributed/sync-watch.js";
import { rawView, type HostTensor } from "./host-tensor.js";
import type { CpuSymmetricTensor } from "./symmetric.js";
import { ACK_SLOTS, barrier, waitSignal, type CpuSyncEnv } from "./sync.js";

/** Offsets within a staging buffer: 16-byte aligned. */
export const align16 = (n: number): number => Math.ceil(n / 16) * 16;

export class CpuGroup {
  readonly sync: CpuSyncEnv;
  readonly #staging: CpuSymmetricTensor;
  /** Collective calls made so far (the fingerprints' call number; every rank in step counts the same). */
  #seq = 0;
  /** The running call's fingerprint, and how many barriers it has met. */
  #tag = new CallTag(0, 0);
  #step = 0;
  /** The send whose acknowledgement our staging buffer waits for. */
  #pendingAck: { peer: number; word: bigint } | undefined;
  /** The wait that failed: the pads are out of step since, so every later call is refused. */
  #failed: SymmTimeoutError | CollectiveMismatchError | undefined;

  constructor(sync: CpuSyncEnv, staging: CpuSymmetricTensor) {
    this.sync = sync;
    this.#staging = staging;
  }

  get capacityBytes(): number {
    return this.#staging.capacityBytes;
  }

  /** The group's call number (what a call's turn is taken from, see takeTurns). */
  get calls(): number {
    return this.#seq;
  }

  /** Takes the number of a call refused before it took its own. */
  spendCall(): void {
    this.#seq++;
  }

  /** `count` elements of `dtype` in rank r's staging buffer, from byte `at`. */
  view(r: number, dtype: DType, at: number, count: number): RawArray {
    return rawView(dtype, this.#staging.peer(r, [this.capacityBytes], "u8").raw.buffer, at, count);
  }

  /** Rank r's staging buffer as `count` elements like `like`'s, from element `at`. */
  staged(r: number, like: HostTensor, count: number, at = 0): RawArray {
    return this.view(r, like.dtype, at * like.elementBytes, count);
  }

  /** Copies `t` into our staging buffer, once a receiver of our last send has taken it. */
  stage(t: HostTensor, what: string): void {
    checkCapacity(what, t.nbytes, this.capacityBytes);
    this.settleSend();
    (this.staged(this.sync.rank, t, t.numel) as Uint8Array).set(t.raw as Uint8Array);
  }

  /** A send left its message in our staging buffer: the next writer waits for `peer`'s acknowledgement. */
  sent(peer: number, word: bigint): void {
    this.#pendingAck = { peer, word };
  }

  /** Waits until the receiver of our last send has taken it from our staging buffer. */
  settleSend(): void {
    const ack = this.#pendingAck;
    if (ack === undefined) return;
    const { rank, world, pads } = this.sync;
    this.guard(() => waitSignal(this.sync, pads[rank]!, ACK_SLOTS * world + ack.peer, ack.peer, ack.word));
    this.#pendingAck = undefined;
  }

  /** Starts a collective call: refused once a wait failed, else fingerprinted. */
  begin(shape: CallShape): void {
    this.usable();
    this.#tag = fingerprint(this.#seq++, shape);
    this.#step = 0;
  }

  /** Refuses every call once a wait failed. */
  usable(): void {
    const e = this.#failed;
    if (e === undefined) return;
    const note = "An earlier call of this group failed so; the group cannot be used any more.";
    throw e instanceof SymmTimeoutError
      ? new SymmTimeoutError(e.record, e.timeoutMs, { note })
      : new CollectiveMismatchError(e.rank, e.peer, e.ours, e.theirs, { note, shapes: e.shapes });
  }

  /** Runs a wait; one that fails leaves the pads out of step, so it is remembered. */
  guard(wait: () => void): void {
    try {
      wait();
    } catch (e) {
      if (e instanceof SymmTimeoutError || e instanceof CollectiveMismatchError) this.#failed ??= e;
      throw e;
    }
  }

  /** A barrier of the running call: its signals carry the call's fingerprint, step by step. */
  meet(): void {
    const step = this.#step++ & 1;
    this.guard(() => barrier(this.sync, this.#tag, step));
  }
}
