// allToAll's copy_engine: the data moves by copy-engine copies, no SM moves a byte between GPUs, and any x
// goes whatever the staging buffer's size. The caller's stream (S) stages x piece by piece in two halves
// of this rank's staging buffer, each round a piece of every peer's chunk, and signals the peers; two side
// streams (R, rounds alternating; one where there is one round) forked from it wait for every peer's
// round, copy this rank's pieces out of their staging buffers over NVLink and acknowledge. S stages round
// k + 1 while the peers read round k, and copies this rank's own chunk piece by piece meanwhile; it
// restages a half only once every peer acknowledged the round that used it, and the call ends once every
// peer acknowledged the last: nobody restages while a peer may still read. A symmetric x is read in place: one round, no staging. The
// signals (coll/p2p.cuh p2p_ce_signal_all) are send/recv copy_engine's slots, carrying the call's
// fingerprint, so a rank in another call is caught; every slot is idle after the call (graph-replayable).
// test/ce-all-to-all-protocol.test.ts models run()'s order of work under random schedules: change both
// together.
import type { CallTag } from "../../distributed/fingerprint.js";
import { CALL_TAG_PARAM, SYMM_VIEW_PARAM } from "../../distributed/device-layouts.js";
import type { Kernel } from "../../runtime/kernel.js";
import { copyDeviceToDevice } from "../../runtime/memory.js";
import { sharedModule } from "../../runtime/module.js";
import { SideStream } from "../../runtime/side-stream.js";
import type { Stream } from "../../runtime/stream.js";
import { Tensor } from "../../runtime/tensor.js";
import type { GpuGroup } from "../gpu-group.js";
import { checkCapacity } from "../validate.js";
import type { ExchangeInput } from "./exchange.js";
import { P2P_ACK_BASE, P2P_NONE } from "./p2p.js";
import { P2P_PROGRAM } from "./programs.js";

/** p2p_ce_signal_all: the inbox's SymmView; the put's slot base (P2P_NONE: none) and parity; the waits'
 * slot base and parities (a mask); the call's CallTag. */
const SIGNAL_ALL_PARAMS = [SYMM_VIEW_PARAM, "u32", "u32", "u32", "u32", CALL_TAG_PARAM] as const;
/** p2p.cuh's slot bases: ready signals from 0, acknowledgements from kAckBase. */
const READY = 0;
const ACK = P2P_ACK_BASE;

/** A round's piece of a chunk, at least (where the staging buffer holds it): each round costs about 7 µs
 * of waits and copy starts beside its copies, while the first round's staging is exposed. */
const MIN_PIECE = 16 << 20;
/** The bytes of each peer's chunk a round stages: a quarter of the chunk but at least MIN_PIECE, held to
 * its share of half the staging buffer (the other half is read meanwhile) and to the chunk; a multiple of
 * 16. On 2 H200s at 128 MiB chunks, 437-441 µs with pieces of 16-32 MiB against 461 in one round and 508 in
 * 8 MiB pieces; at 32 MiB chunks 128 µs in two rounds, 132 in one, 139 in four. 0 where the buffer is too
 * small. */
export function copyEnginePiece(capacityBytes: number, world: number, chunk: number): number {
  const up16 = (n: number): number => Math.ceil(n / 16) * 16;
  const share = Math.floor(capacityBytes / 2 / Math.max(1, world - 1) / 16) * 16;
  return Math.min(share, up16(chunk), Math.max(MIN_PIECE, up16(chunk / 4)));
}

export class CopyEngineAllToAll {
  readonly #ctx: GpuGroup;
  #signalKernel: Kernel<typeof SIGNAL_ALL_PARAMS> | undefined;
  #sides: SideStream[] | undefined;

  constructor(ctx: GpuGroup) {
    this.#ctx = ctx;
  }

  /** Refuses a plain x where the staging buffer cannot hold 16 bytes for each peer, twice (a piece of 0);
   * resolves the signal kernel (a first use compiles or loads its module, which waits for the GPU, and so
   * for whatever the call had already enqueued). Before the call takes its fingerprint. */
  check(what: string, input: ExchangeInput, x: Tensor): void {
    const { world, capacityBytes } = this.#ctx;
    if (input instanceof Tensor && x.nbytes > 0) checkCapacity(what, 32 * (world - 1), capacityBytes);
    this.#kernel();
  }

  /** out[r * chunk ...] = rank r's x[rank * chunk ...] (see the header), tagged `tag`; checked first. */
  run(input: ExchangeInput, x: Tensor, out: Tensor, tag: CallTag, S: Stream): void {
    const ctx = this.#ctx;
    const { world, rank } = ctx;
    const chunk = x.nbytes / world;
    const symmetric = !(input instanceof Tensor);
    const piece = symmetric ? chunk : copyEnginePiece(ctx.capacityBytes, world, chunk);
    const rounds = Math.max(1, Math.ceil(chunk / Math.max(piece, 1)));
    const half = symmetric ? 0 : piece * (world - 1);
    const span = (k: number): [bigint, number] => [
      BigInt(k * piece),
      Math.max(0, Math.min(piece, chunk - k * piece)),
    ];
    const signal = (s: Stream, put: number, putParity: number, wait: number, parities: number): void =>
      this.#kernel().launch(
        { grid: 1, block: 32, stream: s },
        ctx.inboxView,
        put,
        putParity,
        wait,
        parities,
        tag,
      );
    const own = BigInt(rank * chunk);
    // The second read stream only where a second round would use it.
    const sides = (this.#sides ??= [new SideStream(ctx.device), new SideStream(ctx.device)]).slice(
      0,
      Math.min(2, rounds),
    );
    const reads = sides.map((side) => side.fork(S));
    for (let k = 0; k < rounds; k++) {
      const [at, n] = span(k);
      const slab = ctx.staging.tensor.ptr + BigInt((k & 1) * half);
      // S: round k's pieces into half k & 1 (slot d - 1 for the peer d ranks ahead), then ready; before
      // round k + 1 restages half (k + 1) & 1, every peer's ack of round k - 1.
      if (!symmetric)
        for (let d = 1; d < world; d++)
          copyDeviceToDevice(
            slab + BigInt((d - 1) * piece),
            x.ptr + BigInt(((rank + d) % world) * chunk) + at,
            n,
            S,
          );
      const restage = k >= 1 && k + 1 < rounds;
      signal(S, READY, k & 1, restage ? ACK : P2P_NONE, restage ? 1 << ((k - 1) & 1) : 0);
      copyDeviceToDevice(out.ptr + own + at, x.ptr + own + at, n, S);
      // R (round k's side stream of two, so that one round's wait is queued while the other reads):
      // acknowledge round k - 2 (read on it before), wait for every peer's round k, read it (from the peer
      // d ranks behind, so that at each step every rank reads from another).
      // The put goes before the wait (p2p_ce_signal_all's order): the peer stages round k only once it has
      // our ack of round k - 2.
      const R = reads[k & 1]!;
      signal(R, k >= 2 ? ACK : P2P_NONE, k & 1, READY, 1 << (k & 1));
      for (let d = 1; d < world; d++) {
        const r = (rank - d + world) % world;
        const from = symmetric
          ? input.bufferPtrs[r]! + own + at
          : ctx.staging.bufferPtrs[r]! + BigInt((k & 1) * half + (d - 1) * piece);
        copyDeviceToDevice(out.ptr + BigInt(r * chunk) + at, from, n, R);
      }
    }
    for (let k = Math.max(0, rounds - 2); k < rounds; k++) signal(reads[k & 1]!, ACK, k & 1, P2P_NONE, 0);
    for (const side of sides) side.join(S);
    // The acknowledgements of the last two rounds (the loop consumed those of rounds 0 .. rounds - 3).
    signal(S, P2P_NONE, 0, ACK, rounds >= 2 ? 3 : 1);
  }

  #kernel(): Kernel<typeof SIGNAL_ALL_PARAMS> {
    return (this.#signalKernel ??= sharedModule(P2P_PROGRAM, this.#ctx.device).kernel(
      "symmkit::p2p::p2p_ce_signal_all",
      SIGNAL_ALL_PARAMS,
    ));
  }

  dispose(): void {
    for (const side of this.#sides ?? []) side.dispose();
  }
}
