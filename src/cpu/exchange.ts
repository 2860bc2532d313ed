// Point-to-point and all-to-all on the CPU backend. A message is staged in the sender's staging buffer
// and signalled on the receiver's pad with a word that carries its number between the pair (one way),
// dtype and size, so a mismatched pair is caught (CollectiveMismatchError) instead of mixing data; the
// receiver copies it out and acknowledges, and the sender's staging buffer is written again only after
// that acknowledgement (CpuGroup.settleSend), so ring exchanges cannot deadlock. allToAll and allToAllV
// are group calls: staged, then pulled between two barriers.
import { InvalidArgumentError } from "../errors.js";
import { fingerprint } from "../distributed/fingerprint.js";
import { checkAlgorithm, checkCapacity, checkPeer, checkTensorArg } from "../ops/validate.js";
import {
  allToAllVVerdict,
  checkAllToAll,
  checkAllToAllV,
  checkAllToAllVCounts,
  checkSendRecv,
  CPU_EXCHANGE_ALGORITHMS,
  decodeSides,
  encodeSide,
  sideLength,
  type CpuExchangeAlgorithm,
  type Rows,
} from "../ops/exchange/checks.js";
import { align16, type CpuGroup } from "./group.js";
import { HostTensor, hostOverlaps } from "./host-tensor.js";
import { ACK_SLOTS, putSignal, READY_SLOTS, waitSignal } from "./sync.js";

/** allToAllV's options, with the counts as an array (recvCounts) or in a tensor (recvCountsOut). */
export interface AllToAllVOptions {
  recvCounts?: readonly number[];
  recvCountsOut?: HostTensor;
  algorithm?: CpuExchangeAlgorithm;
}

export class CpuExchange {
  readonly #group: CpuGroup;
  /** Messages sent to and received from each peer (send/recv's call numbers, per pair), and their sum
   * (what tells a point-to-point call that took its numbers from one that did not). */
  readonly #sent: number[];
  readonly #received: number[];
  #messages = 0;

  constructor(group: CpuGroup) {
    this.#group = group;
    this.#sent = new Array<number>(group.sync.world).fill(0);
    this.#received = new Array<number>(group.sync.world).fill(0);
  }

  /** What a point-to-point call's turn is taken from (see takeTurns). */
  get messages(): number {
    return this.#messages;
  }

  /** Takes the numbers of a point-to-point call with `peer` that was refused (see takeTurns); false where
   * `peer` names no pair. */
  skip(peer: unknown, sends: boolean, receives: boolean): boolean {
    const { rank, world } = this.#group.sync;
    if (!Number.isInteger(peer) || (peer as number) < 0 || (peer as number) >= world || peer === rank)
      return false;
    this.#messages++;
    if (sends) this.#sent[peer as number]!++;
    if (receives) this.#received[peer as number]!++;
    return true;
  }

  send(tensor: HostTensor, peer: number, options: { algorithm?: CpuExchangeAlgorithm }): void {
    const { rank, world } = this.#group.sync;
    checkTensorArg("send", "tensor", tensor);
    checkPeer("send", peer, world, rank);
    checkAlgorithm("send", options.algorithm ?? "auto", CPU_EXCHANGE_ALGORITHMS);
    this.#send(tensor, peer, "send");
  }

  recv(tensor: HostTensor, peer: number, options: { algorithm?: CpuExchangeAlgorithm }): HostTensor {
    const g = this.#group;
    const { rank, world } = g.sync;
    checkTensorArg("recv", "tensor", tensor);
    checkPeer("recv", peer, world, rank);
    checkAlgorithm("recv", options.algorithm ?? "auto", CPU_EXCHANGE_ALGORITHMS);
    checkCapacity("recv", tensor.nbytes, g.capacityBytes);
    return this.#recv(tensor, peer);
  }

  sendRecv(
    x: HostTensor,
    out: HostTensor,
    peer: number,
    options: { algorithm?: CpuExchangeAlgorithm },
  ): HostTensor {
    const what = "sendRecv";
    const g = this.#group;
    checkSendRecv(what, x, out, hostOverlaps);
    checkPeer(what, peer, g.sync.world, g.sync.rank);
    checkAlgorithm(what, options.algorithm ?? "auto", CPU_EXCHANGE_ALGORITHMS);
    checkCapacity(what, out.nbytes, g.capacityBytes);
    // Both messages' numbers are taken, or neither (takeTurns spends both for a refused call).
    this.#send(x, peer, what);
    return this.#recv(out, peer);
  }

  /** A checked send (of `what`: send or sendRecv). */
  #send(tensor: HostTensor, peer: number, what: string): void {
    const g = this.#group;
    const { rank, world, pads } = g.sync;
    g.usable();
    g.stage(tensor, what);
    const word = this.#messageWord(this.#sent, peer, tensor);
    g.guard(() => putSignal(g.sync, pads[peer]!, READY_SLOTS * world + rank, peer, word));
    g.sent(peer, word);
  }

  /** A checked recv. */
  #recv(tensor: HostTensor, peer: number): HostTensor {
    const g = this.#group;
    const { rank, world, pads } = g.sync;
    g.usable();
    const word = this.#messageWord(this.#received, peer, tensor);
    g.guard(() => waitSignal(g.sync, pads[rank]!, READY_SLOTS * world + peer, peer, word));
    (tensor.raw as Uint8Array).set(g.staged(peer, tensor, tensor.numel) as Uint8Array);
    g.guard(() => putSignal(g.sync, pads[peer]!, ACK_SLOTS * world + rank, peer, word));
    return tensor;
  }

  /** A message's call word: its number between this pair (one way) and its size (the pair needs no
   * field: its slots are its own). */
  #messageWord(counts: number[], peer: number, t: HostTensor): bigint {
    this.#messages++;
    const seq = counts[peer]!++;
    return fingerprint(seq, { kind: "send-recv", dtype: t.dtype, count: t.numel }).word;
  }

  allToAll(x: HostTensor, out: HostTensor, options: { algorithm?: CpuExchangeAlgorithm }): HostTensor {
    const what = "allToAll";
    const g = this.#group;
    const { rank, world } = g.sync;
    checkAllToAll(what, world, x, out, hostOverlaps);
    checkAlgorithm(what, options.algorithm ?? "auto", CPU_EXCHANGE_ALGORITHMS);
    const n = x.numel / world;
    g.begin({ kind: "all-to-all/pull", dtype: x.dtype, count: x.numel });
    g.stage(x, what);
    g.meet();
    for (let r = 0; r < world; r++)
      (out.raw as Uint8Array).set(g.staged(r, x, n, rank * n) as Uint8Array, r * n);
    g.meet();
    return out;
  }

  /** The counts as an array, or as an i32 tensor read on the host (see CpuCollectives.allToAllV). */
  allToAllV(
    x: HostTensor,
    out: HostTensor,
    sendCounts: readonly number[] | HostTensor,
    options: AllToAllVOptions,
  ): { output: HostTensor; recvCounts: number[] | HostTensor } {
    const what = "allToAllV";
    const world = this.#group.sync.world;
    checkAlgorithm(what, options.algorithm ?? "auto", CPU_EXCHANGE_ALGORITHMS);
    if (!(sendCounts instanceof HostTensor)) {
      const rows = checkAllToAllV(what, world, x, out, sendCounts, options, hostOverlaps);
      return this.#allToAllV(x, out, rows, sendCounts, options.recvCounts, rows.x.rowElems);
    }
    const rows = checkAllToAllVCounts(what, world, x, out, sendCounts, options, hostOverlaps);
    // As on GPUs (algorithm pull), the group judges these counts and the row size (allToAllVVerdict): a
    // rank's counts adding up to more rows than its x has, negative, or rows of another size than rank 0's
    // are refused on every rank, so the fingerprint carries no row size. x may hold more rows than the
    // counts send: its first ones go.
    const counts = Array.from(sendCounts.raw as Int32Array);
    const { recvCounts } = this.#allToAllV(x, out, rows, counts, undefined, 0);
    const into = options.recvCountsOut ?? HostTensor.empty([world], "i32");
    (into.raw as Int32Array).set(recvCounts);
    return { output: out, recvCounts: into };
  }

  /** Every rank publishes its side (src/ops/exchange/checks.ts encodeSide), then x's rows when they fit;
   * every rank judges every side alike (allToAllVVerdict), so a call that cannot run is refused on every
   * rank with nothing written. `count`: the element count the call's fingerprint carries (a row's with
   * counts as an array, as on GPUs; none with counts in a tensor, see allToAllV). */
  #allToAllV(
    x: HostTensor,
    out: HostTensor,
    rows: { readonly x: Rows; readonly out: Rows },
    sendCounts: readonly number[],
    said: readonly number[] | undefined,
    count: number,
  ): { output: HostTensor; recvCounts: number[] } {
    const what = "allToAllV";
    const g = this.#group;
    const { rank, world } = g.sync;
    const side = sideLength(world);
    const headerBytes = align16(4 * side);
    checkCapacity(what, headerBytes, g.capacityBytes);
    const fits = headerBytes + x.nbytes <= g.capacityBytes;
    g.begin({ kind: "all-to-all-v/pull", dtype: x.dtype, count });
    g.settleSend();
    const needed = fits ? 0 : headerBytes + x.nbytes;
    (g.view(rank, "i32", 0, side) as Int32Array).set(
      encodeSide(rows.out.rows, sendCounts, said, needed, rows.x.rows, rows.x.rowElems * x.elementBytes),
    );
    if (fits) (g.view(rank, x.dtype, headerBytes, x.numel) as Uint8Array).set(x.raw as Uint8Array);
    g.meet();
    const published = new Int32Array(world * side);
    for (let r = 0; r < world; r++) published.set(g.view(r, "i32", 0, side) as Int32Array, r * side);
    const sides = decodeSides(published, world);
    const verdict = allToAllVVerdict(what, sides, g.capacityBytes);
    const recvCounts = sides.map((s) => s.sendCounts[rank]!);
    if (verdict === undefined) {
      const e = rows.x.rowElems;
      let at = 0;
      for (let r = 0; r < world; r++) {
        const skip = sides[r]!.sendCounts.subarray(0, rank).reduce((a, b) => a + b, 0);
        const n = recvCounts[r]! * e;
        (out.raw as Uint8Array).set(
          g.view(r, x.dtype, headerBytes + skip * e * x.elementBytes, n) as Uint8Array,
          at,
        );
        at += n;
      }
    }
    g.meet();
    if (verdict !== undefined) throw new InvalidArgumentError(verdict);
    return { output: out, recvCounts };
  }
}
