// Signals and the barrier of the CPU backend: device/include/symmkit/sync/ written for processes that
// share memory. A slot is an i32 in a rank's pad, 0 when idle; a put turns it 0 -> value and a wait
// value -> 0 with Atomics.compareExchange, so slots are idle again after every matched pair and a fast
// rank cannot overrun a slow one. The value is the call's fingerprint (src/distributed/fingerprint.ts)
// with bit 31 set, as on GPUs: a wait that finds another non-zero value is met by a peer in another
// call and throws CollectiveMismatchError. Atomics are sequentially consistent: a rank's plain writes
// before a put are visible to the rank that completes the matching wait. Every wait is bounded: past
// the deadline it throws SymmTimeoutError naming the peer that never signalled.
import { CollectiveMismatchError, SIGNAL_MARK } from "../distributed/fingerprint.js";
import { SymmTimeoutError } from "../distributed/sync-watch.js";

export interface CpuSyncEnv {
  readonly rank: number;
  readonly world: number;
  /** Each rank's signal pad, mapped here (index: group rank). */
  readonly pads: readonly Int32Array[];
  readonly timeoutMs: number;
}

/** Pad slots: [0, world) barrier, [world, 2 world) "data ready" from each sender, [2 world, 3 world) "consumed". */
export const BARRIER_SLOTS = 0;
export const READY_SLOTS = 1;
export const ACK_SLOTS = 2;
export const SLOT_GROUPS = 3;

const nap = new Int32Array(new SharedArrayBuffer(4));

function boundedWait(env: CpuSyncEnv, peer: number, phase: number, done: () => boolean): void {
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
            expected: 0,
            got: 0,
          },
          env.timeoutMs,
        );
      }
      // Ranks may outnumber cores: after a short spin, give the core away briefly between polls.
      if (polls > 256) Atomics.wait(nap, 0, 0, 0.05);
    }
  }
}

/** The slot value of `phase`, as the i32 the pads hold. */
const signalValue = (phase: number): number => phase | SIGNAL_MARK | 0;

export function putSignal(env: CpuSyncEnv, pad: Int32Array, slot: number, peer: number, phase: number): void {
  const value = signalValue(phase);
  boundedWait(env, peer, phase, () => Atomics.compareExchange(pad, slot, 0, value) === 0);
}

export function waitSignal(
  env: CpuSyncEnv,
  pad: Int32Array,
  slot: number,
  peer: number,
  phase: number,
): void {
  const value = signalValue(phase);
  boundedWait(env, peer, phase, () => {
    const seen = Atomics.compareExchange(pad, slot, value, 0);
    if (seen !== 0 && seen !== value) throw new CollectiveMismatchError(env.rank, peer, value, seen);
    return seen === value;
  });
}

/** Every rank of the group meets here: signal each peer, then wait for each peer's signal. */
export function barrier(env: CpuSyncEnv, phase: number): void {
  const slot = (from: number): number => BARRIER_SLOTS * env.world + from;
  for (let p = 0; p < env.world; p++)
    if (p !== env.rank) putSignal(env, env.pads[p]!, slot(env.rank), p, phase);
  for (let p = 0; p < env.world; p++)
    if (p !== env.rank) waitSignal(env, env.pads[env.rank]!, slot(p), p, phase);
}
