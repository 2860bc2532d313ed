// Signals and the barrier of the CPU backend: device/include/symmkit/sync/ written for processes that
// share memory. A slot is an i64 in a rank's pad, 0 when idle; a put turns it 0 -> value and a wait
// value -> 0 with Atomics.compareExchange, so slots are idle again after every matched pair and a fast
// rank cannot overrun a slow one. The value is a word of the call's CallTag (src/distributed/fingerprint.ts),
// as on GPUs: the call word on every signal, the shape word beside it on a call's first barrier; a wait
// that finds another non-zero value is met by a peer in another call (or the same call with other
// shapes) and throws CollectiveMismatchError. Atomics are sequentially consistent: a rank's plain
// writes before a put are visible to the rank that completes the matching wait. Every wait is bounded:
// past the deadline it throws SymmTimeoutError naming the peer that never signalled.
import { CollectiveMismatchError, type CallTag } from "../distributed/fingerprint.js";
import { SymmTimeoutError } from "../distributed/sync-watch.js";
import { sleepSync } from "../sleep.js";

export interface CpuSyncEnv {
  readonly rank: number;
  readonly world: number;
  /** Each rank's signal pad, mapped here (index: group rank). */
  readonly pads: readonly BigInt64Array[];
  readonly timeoutMs: number;
}

/** Pad slots, `world` in each group: barrier call words, barrier shape words, "data ready" from each
 * sender, "consumed". */
export const BARRIER_SLOTS = 0;
export const SHAPE_SLOTS = 1;
export const READY_SLOTS = 2;
export const ACK_SLOTS = 3;
export const SLOT_GROUPS = 4;
/** Bytes of a slot. */
export const SLOT_BYTES = 8;

function boundedWait(env: CpuSyncEnv, peer: number, phase: bigint, done: () => boolean): void {
  if (done()) return;
  const start = performance.now();
  for (let polls = 1; ; polls++) {
    if (done()) return;
    if (polls % 64 === 0) {
      const waited = performance.now() - start;
      if (waited > env.timeoutMs) {
        throw new SymmTimeoutError(
          {
            kind: "gave-up",
            rank: env.rank,
            block: 0,
            peer,
            phase,
            thread: 0,
            waitedMs: waited,
            expected: 0n,
            got: 0n,
          },
          env.timeoutMs,
        );
      }
      // Ranks may outnumber cores: after a short spin, give the core away briefly between polls.
      if (polls > 256) sleepSync(0.05);
    }
  }
}

/** A word as the i64 the pads hold. */
const slotValue = (word: bigint): bigint => BigInt.asIntN(64, word);

export function putSignal(
  env: CpuSyncEnv,
  pad: BigInt64Array,
  slot: number,
  peer: number,
  word: bigint,
): void {
  const value = slotValue(word);
  boundedWait(env, peer, word, () => Atomics.compareExchange(pad, slot, 0n, value) === 0n);
}

/** Waits for `word`; with `call` (the call word) it is that call's shape word. */
export function waitSignal(
  env: CpuSyncEnv,
  pad: BigInt64Array,
  slot: number,
  peer: number,
  word: bigint,
  call?: bigint,
): void {
  const value = slotValue(word);
  boundedWait(env, peer, call ?? word, () => {
    const seen = Atomics.compareExchange(pad, slot, value, 0n);
    if (seen !== 0n && seen !== value) {
      const got = BigInt.asUintN(64, seen);
      throw call === undefined
        ? new CollectiveMismatchError(env.rank, peer, word, got)
        : new CollectiveMismatchError(env.rank, peer, call, call, { shapes: [word, got] });
    }
    return seen === value;
  });
}

/** Every rank of the group meets here: signal each peer, then wait for each peer's signal. The call's
 * first barrier (`step` 0) also exchanges its shape word, when it has one. */
export function barrier(env: CpuSyncEnv, tag: CallTag, step: number): void {
  const word = step === 0 ? tag.word : tag.step(1).word;
  const shape = step === 0 && tag.shapeHi !== 0 ? tag.shape : undefined;
  const slot = (group: number, from: number): number => group * env.world + from;
  for (let p = 0; p < env.world; p++) {
    if (p === env.rank) continue;
    putSignal(env, env.pads[p]!, slot(BARRIER_SLOTS, env.rank), p, word);
    if (shape !== undefined) putSignal(env, env.pads[p]!, slot(SHAPE_SLOTS, env.rank), p, shape);
  }
  for (let p = 0; p < env.world; p++) {
    if (p === env.rank) continue;
    waitSignal(env, env.pads[env.rank]!, slot(BARRIER_SLOTS, p), p, word);
    if (shape !== undefined) waitSignal(env, env.pads[env.rank]!, slot(SHAPE_SLOTS, p), p, shape, tag.word);
  }
}
