// A model of allToAll's copy_engine (src/ops/exchange/all-to-all-ce.ts run, signals coll/p2p.cuh
// p2p_ce_signal_all and sync/signal.cuh's one-slot put and wait), run under random schedules: W ranks make
// the same calls back to back, each of some rounds, a plain x staged piece by piece in two halves of each
// rank's staging buffer. Each rank's streams are FIFO queues (the caller's S and two read streams forked
// from it and joined back), a signal kernel a thread per peer (its put, then its waits), a read of a peer's
// half two steps (begun, ended). What must never happen: a read that finds a half holding another round
// than its own, a half restaged while a peer still reads it, a wait that finds another call's signal, or
// a state where nothing can move. The same schedules with the restaging wait dropped, the final wait
// taking only the last round's acknowledgements, or a signal kernel waiting before it puts, must each go
// wrong. The model mirrors run()'s order of enqueued work (change both together); send/recv's copy_engine,
// which shares the slots, is not in it.
import assert from "node:assert/strict";
import { test } from "node:test";

/** What the model runs: the protocol as built, or with one of its rules dropped. */
type Variant = "as built" | "no restage wait" | "final wait one round" | "wait before put";

type Slot = { kind: "ready" | "ack"; from: number; parity: number };
type Op =
  | { kind: "stage"; round: number }
  | { kind: "signal"; put?: "ready" | "ack"; putParity: number; wait?: "ready" | "ack"; waitParities: number[] }
  | { kind: "read"; round: number };
/** An op on one of a rank's streams (0: S, 1 and 2: the read streams), after `after` (ops of other
 * streams: a fork's or a join's event). */
type Queued = { op: Op; call: number; after: [number, number][] };

/** Rank-side queues of `calls` (rounds each), as run() enqueues them. */
function enqueue(calls: readonly number[], variant: Variant): Queued[][] {
  const q: Queued[][] = [[], [], []];
  const last = (s: number): [number, number][] => (q[s]!.length > 0 ? [[s, q[s]!.length - 1]] : []);
  calls.forEach((rounds, call) => {
    // Fork: each read stream after everything enqueued on S so far.
    const fork = last(0);
    const forked = [false, false];
    const joinPending: [number, number][] = [];
    const push = (s: number, op: Op): void => {
      const after = s > 0 ? (forked[s - 1] ? [] : fork) : joinPending.splice(0);
      if (s > 0) forked[s - 1] = true;
      q[s]!.push({ op, call, after });
    };
    const sides = Math.min(2, rounds);
    for (let k = 0; k < rounds; k++) {
      push(0, { kind: "stage", round: k });
      const restage = k >= 1 && k + 1 < rounds && variant !== "no restage wait";
      push(0, {
        kind: "signal",
        put: "ready",
        putParity: k & 1,
        ...(restage ? { wait: "ack" as const } : {}),
        waitParities: restage ? [(k - 1) & 1] : [],
      });
      const r = 1 + (k & 1);
      push(r, {
        kind: "signal",
        ...(k >= 2 ? { put: "ack" as const } : {}),
        putParity: k & 1,
        wait: "ready",
        waitParities: [k & 1],
      });
      push(r, { kind: "read", round: k });
    }
    for (let k = Math.max(0, rounds - 2); k < rounds; k++)
      push(1 + (k & 1), { kind: "signal", put: "ack", putParity: k & 1, waitParities: [] });
    // Join: S after everything enqueued on the read streams in use.
    for (let s = 1; s <= sides; s++) joinPending.push(...last(s));
    const mask = rounds >= 2 && variant !== "final wait one round" ? [0, 1] : [(rounds - 1) & 1];
    push(0, { kind: "signal", wait: "ack", putParity: 0, waitParities: mask });
  });
  return q;
}

function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 2 ** 32;
  };
}

/** Runs `calls` on `world` ranks under the schedule of `seed`: undefined when every call ended right. */
function simulate(world: number, calls: readonly number[], variant: Variant, seed: number): string | undefined {
  const random = rng(seed);
  const queues = Array.from({ length: world }, () => enqueue(calls, variant));
  // Each rank's pad: slot -> the call whose signal it holds (undefined: idle).
  const pads = Array.from({ length: world }, () => new Map<string, number>());
  const key = (s: Slot): string => `${s.kind} ${s.from} ${s.parity}`;
  // Each rank's staging halves: the (call, round) staged there; reads in progress of each half.
  const halves = Array.from({ length: world }, () => [
    { call: -1, round: -1, readers: 0 },
    { call: -1, round: -1, readers: 0 },
  ]);
  // Per rank and stream: the next op, and the progress of the running one (per-peer thread steps, or read
  // steps per peer).
  const head = queues.map(() => [0, 0, 0]);
  type Running = { steps: number[] };
  const running = queues.map(() => [undefined, undefined, undefined] as (Running | undefined)[]);
  const done = (r: number, s: number, i: number): boolean => head[r]![s]! > i;
  const peers = (r: number): number[] => Array.from({ length: world - 1 }, (_, t) => (r + 1 + t) % world);

  /** One step of rank r's stream s: true if it moved, a string if something went wrong. */
  function step(r: number, s: number): boolean | string {
    const queued = queues[r]![s]![head[r]![s]!];
    if (!queued) return false;
    if (!queued.after.every(([t, i]) => done(r, t, i))) return false;
    const { op, call } = queued;
    const ps = peers(r);
    const run = (running[r]![s] ??= { steps: ps.map(() => 0) });
    const finish = (): true => {
      running[r]![s] = undefined;
      head[r]![s]!++;
      return true;
    };
    if (op.kind === "stage") {
      const h = halves[r]![op.round & 1]!;
      if (h.readers > 0) return `rank ${r} restaged half ${op.round & 1} for call ${call} round ${op.round} while a peer read it`;
      Object.assign(h, { call, round: op.round });
      return finish();
    }
    // A thread per peer; pick one that can move.
    const order = ps.map((_, t) => t).sort(() => random() - 0.5);
    for (const t of order) {
      const p = ps[t]!;
      const at = run.steps[t]!;
      if (op.kind === "read") {
        // Read p's half: begin (check it holds this round), then end.
        const h = halves[p]![op.round & 1]!;
        if (at === 0) {
          if (h.call !== call || h.round !== op.round)
            return `rank ${r} read rank ${p}'s half ${op.round & 1} for call ${call} round ${op.round}, holding call ${h.call} round ${h.round}`;
          h.readers++;
          run.steps[t] = 1;
          return true;
        }
        if (at === 1) {
          h.readers--;
          run.steps[t] = 2;
          return true;
        }
        continue;
      }
      // A signal thread: its put, then its waits in order (or the waits first, in that variant).
      const acts: (() => boolean | string)[] = [];
      const put = op.put;
      if (put)
        acts.push(() => {
          const slot = key({ kind: put, from: r, parity: op.putParity });
          if (pads[p]!.has(slot)) return false;
          pads[p]!.set(slot, call);
          return true;
        });
      const wait = op.wait;
      if (wait)
        for (const parity of op.waitParities)
          acts.push(() => {
            const slot = key({ kind: wait, from: p, parity });
            const held = pads[r]!.get(slot);
            if (held === undefined) return false;
            if (held !== call) return `rank ${r} found call ${held}'s ${wait} from rank ${p} waiting in call ${call}`;
            pads[r]!.delete(slot);
            return true;
          });
      if (variant === "wait before put" && put) acts.push(acts.shift()!);
      if (at < acts.length) {
        const got = acts[at]!();
        if (got === true) run.steps[t] = at + 1;
        if (got !== false) return got;
      }
    }
    const need = op.kind === "read" ? 2 : (op.put ? 1 : 0) + (op.wait ? op.waitParities.length : 0);
    if (run.steps.every((n) => n >= need)) return finish();
    return false;
  }

  for (let moves = 0; ; moves++) {
    if (moves > 200_000) return "no end";
    const actors: [number, number][] = [];
    for (let r = 0; r < world; r++) for (let s = 0; s < 3; s++) if (queues[r]![s]![head[r]![s]!]) actors.push([r, s]);
    if (actors.length === 0) break;
    let moved = false;
    for (const [r, s] of actors.sort(() => random() - 0.5)) {
      const got = step(r, s);
      if (typeof got === "string") return got;
      if ((moved = got)) break;
    }
    if (!moved) return "stuck: every stream waits";
  }
  for (const [r, pad] of pads.entries())
    if (pad.size > 0) return `rank ${r}'s pad left with ${[...pad.keys()].join(", ")}`;
  return undefined;
}

/** Calls back to back of 1, 2, 3 and 5 rounds. */
const CALLS = [3, 1, 5, 2, 1, 3];
const firstWrong = (world: number, variant: Variant, seeds = 200): string | undefined =>
  Array.from({ length: seeds }, (_, i) => simulate(world, CALLS, variant, i + 1)).find((r) => r !== undefined);

for (const world of [2, 3, 4])
  test(`allToAll copy_engine at world ${world}: no schedule reads a half restaged under it, mixes calls or stalls`, () => {
    assert.equal(firstWrong(world, "as built"), undefined);
  });

test("allToAll copy_engine without the restaging wait: a half is restaged while a peer reads it", () => {
  assert.match(firstWrong(3, "no restage wait") ?? "none", /restaged half|read rank \d+'s half/);
});

test("allToAll copy_engine waiting for the last round's acknowledgements only: the next call restages under a read", () => {
  assert.match(firstWrong(3, "final wait one round") ?? "none", /restaged half|read rank \d+'s half|found call/);
});

test("allToAll copy_engine with signal kernels that wait before they put: the ranks stall", () => {
  assert.match(firstWrong(2, "wait before put") ?? "none", /stuck/);
});
