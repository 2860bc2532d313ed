// Signals and the barrier of the CPU backend: device/include/symmkit/sync/ written for processes that
// share memory. A slot is an i32 in a rank's pad, 0 when idle; a put turns it 0 -> 1 and a wait 1 -> 0
// with Atomics.compareExchange, so slots are idle again after every matched pair and a fast rank cannot
// overrun a slow one. Atomics are sequentially consistent: a rank's plain writes before a put are visible
// to the rank that completes the matching wait. Every wait is bounded: past the deadline it throws
// SymmTimeoutError naming the peer that never signalled.
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
          { rank: env.rank, block: 0, peer, phase, thread: 0, waitedMs: waited },
          env.timeoutMs,
        );
      }
      // Ranks may outnumber cores: after a short spin, give the core away briefly between polls.
      if (polls > 256) Atomics.wait(nap, 0, 0, 0.05);
    }
  }
}

export function putSignal(env: CpuSyncEnv, pad: Int32Array, slot: number, peer: number, phase: number): void {
  boundedWait(env, peer, phase, () => Atomics.compareExchange(pad, slot, 0, 1) === 0);
}

export function waitSignal(
  env: CpuSyncEnv,
  pad: Int32Array,
  slot: number,
  peer: number,
  phase: number,
): void {
  boundedWait(env, peer, phase, () => Atomics.compareExchange(pad, slot, 1, 0) === 1);
}

/** Every rank of the group meets here: signal each peer, then wait for each peer's signal. */
export function barrier(env: CpuSyncEnv, phase: number): void {
  const slot = (from: number): number => BARRIER_SLOTS * env.world + from;
  for (let p = 0; p < env.world; p++)
    if (p !== env.rank) putSignal(env, env.pads[p]!, slot(env.rank), p, phase);
  for (let p = 0; p < env.world; p++)
    if (p !== env.rank) waitSignal(env, env.pads[env.rank]!, slot(p), p, phase);
}
