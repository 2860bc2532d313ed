// A model of allToAll's copy_engine (src/ops/exchange/all-to-all-ce.ts run, signals coll/p2p.cuh
// p2p_ce_signal_all and sync/signal.cuh's one-slot put and wait), run under random schedules: W ranks make
// the same calls back to back, each of some rounds, a plain x staged piece by piece in two halves of each
// rank's staging buffer, and in turn with them send/recv copy_engine's sendRecv between pairs of ranks on
// the same slots and staging buffer. Each rank's streams are FIFO queues (the caller's S and two read
// streams forked from it and joined back), a signal kernel a thread per peer (its put, then its waits), a
// read of a peer's half two steps (begun, ended). What must never happen: a read that finds a half holding another round
// than its own, a half restaged while a peer still reads it, a wait that finds another call's signal, or
// a state where nothing can move. The same schedules with the restaging wait dropped (allToAll's or the
// send's), the final wait taking only the last round's acknowledgements, or a signal kernel waiting before
// it puts, must each go wrong. The model mirrors the order of work run() and GpuPointToPoint's sendRecv enqueue (change them
// together).
import assert from "node:assert/strict";
import { test } from "node:test";
import { schedule } from "./support/schedules.js";

/** What the model runs: the protocol as built, or with one of its rules dropped. */
type Variant =
  "as built" | "no restage wait" | "final wait one round" | "wait before put" | "send restages at once";
/** A call every rank makes: an allToAll of some rounds, or a sendRecv of some chunks each way with the
 * paired rank (r xor 1). */
type Call =
  { readonly op: "allToAll"; readonly rounds: number } | { readonly op: "sendRecv"; readonly chunks: number };

type Slot = { kind: "ready" | "ack"; from: number; parity: number };
/** Whom a signal or read addresses: every peer (allToAll), or the paired rank (sendRecv). */
type Peers = "all" | "pair";
type Op =
  | { kind: "stage"; round: number }
  | {
      kind: "signal";
      peers: Peers;
      put?: "ready" | "ack";
      putParity: number;
      wait?: "ready" | "ack";
      waitParities: number[];
    }
  | { kind: "read"; peers: Peers; round: number };
/** An op on one of a rank's streams (0: S, 1 and 2: the read streams), after `after` (ops of other
 * streams: a fork's or a join's event). */
type Queued = { op: Op; call: number; after: [number, number][] };

/** A rank's queues for `calls`, as all-to-all-ce.ts run() and p2p.ts sendRecv (#ceRecv on side streams,
 * then #ceSend on S) enqueue them. */
function enqueue(calls: readonly Call[], variant: Variant): Queued[][] {
  const q: Queued[][] = [[], [], []];
  const last = (s: number): [number, number][] => (q[s]!.length > 0 ? [[s, q[s]!.length - 1]] : []);
  // A join: S's next op after what the read streams held.
  const joined: [number, number][] = [];
  calls.forEach((c, call) => {
    // A fork: each read stream's first op of the call after everything enqueued on S so far.
    const fork = last(0);
    const forked = [false, false];
    const push = (s: number, op: Op): void => {
      const after = s > 0 ? (forked[s - 1] ? [] : fork) : joined.splice(0);
      if (s > 0) forked[s - 1] = true;
      q[s]!.push({ op, call, after });
    };
    const join = (streams: number): void => {
      for (let s = 1; s <= streams; s++) joined.push(...last(s));
    };
    if (c.op === "sendRecv") {
      const n = c.chunks;
      for (let i = 0; i < n; i++) {
        const r = 1 + (i & 1);
        push(r, { kind: "signal", peers: "pair", wait: "ready", putParity: 0, waitParities: [i & 1] });
        push(r, { kind: "read", peers: "pair", round: i });
        push(r, { kind: "signal", peers: "pair", put: "ack", putParity: i & 1, waitParities: [] });
      }
      for (let i = 0; i < n; i++) {
        if (i >= 2 && variant !== "send restages at once")
          push(0, { kind: "signal", peers: "pair", wait: "ack", putParity: 0, waitParities: [i & 1] });
        push(0, { kind: "stage", round: i });
        push(0, { kind: "signal", peers: "pair", put: "ready", putParity: i & 1, waitParities: [] });
      }
      for (let i = Math.max(0, n - 2); i < n; i++)
        push(0, { kind: "signal", peers: "pair", wait: "ack", putParity: 0, waitParities: [i & 1] });
      return join(Math.min(2, n));
    }
    const rounds = c.rounds;
    for (let k = 0; k < rounds; k++) {
      push(0, { kind: "stage", round: k });
      const restage = k >= 1 && k + 1 < rounds && variant !== "no restage wait";
      push(0, {
        kind: "signal",
        peers: "all",
        put: "ready",
        putParity: k & 1,
        ...(restage ? { wait: "ack" as const } : {}),
        waitParities: restage ? [(k - 1) & 1] : [],
      });
      const r = 1 + (k & 1);
      push(r, {
        kind: "signal",
        peers: "all",
        ...(k >= 2 ? { put: "ack" as const } : {}),
        putParity: k & 1,
        wait: "ready",
        waitParities: [k & 1],
      });
      push(r, { kind: "read", peers: "all", round: k });
    }
    for (let k = Math.max(0, rounds - 2); k < rounds; k++)
      push(1 + (k & 1), { kind: "signal", peers: "all", put: "ack", putParity: k & 1, waitParities: [] });
    join(Math.min(2, rounds));
    const mask = rounds >= 2 && variant !== "final wait one round" ? [0, 1] : [(rounds - 1) & 1];
    push(0, { kind: "signal", peers: "all", wait: "ack", putParity: 0, waitParities: mask });
  });
  return q;
}

/** Runs `calls` on `world` ranks under the schedule of `seed`: undefined when every call ended right. */
function simulate(world: number, calls: readonly Call[], variant: Variant, seed: number): string | undefined {
  const random = schedule(seed);
  const queues = Array.from({ length: world }, () => enqueue(calls, variant));
  // Each rank's pad: slot -> the call whose signal it holds (undefined: idle).
  const pads = Array.from({ length: world }, () => new Map<string, number>());
  const key = (s: Slot): string => `${s.kind} ${s.from} ${s.parity}`;
  // Each rank's staging halves: the (call, round) staged there. The halves of different calls may lie
  // elsewhere in the buffer (allToAll's are W - 1 pieces, send/recv's a chunk), so a read in progress is
  // kept by call and half, and a stage must find no read of another call, nor of its own half.
  const halves = Array.from({ length: world }, () => [
    { call: -1, round: -1 },
    { call: -1, round: -1 },
  ]);
  const reading = Array.from({ length: world }, () => new Map<string, number>());
  const readKey = (call: number, half: number): string => `${call} ${half}`;
  // Per rank and stream: the next op, and the progress of the running one (per-peer thread steps, or read
  // steps per peer).
  const head = queues.map(() => [0, 0, 0]);
  type Running = { steps: number[] };
  const running = queues.map(() => [undefined, undefined, undefined] as (Running | undefined)[]);
  const done = (r: number, s: number, i: number): boolean => head[r]![s]! > i;
  const peers = (r: number, whom: Peers): number[] =>
    whom === "pair" ? [r ^ 1] : Array.from({ length: world - 1 }, (_, t) => (r + 1 + t) % world);

  /** One step of rank r's stream s: true if it moved, a string if something went wrong. */
  function step(r: number, s: number): boolean | string {
    const queued = queues[r]![s]![head[r]![s]!];
    if (!queued) return false;
    if (!queued.after.every(([t, i]) => done(r, t, i))) return false;
    const { op, call } = queued;
    const ps = op.kind === "stage" ? [] : peers(r, op.peers);
    const run = (running[r]![s] ??= { steps: ps.map(() => 0) });
    const finish = (): true => {
      running[r]![s] = undefined;
      head[r]![s]!++;
      return true;
    };
    if (op.kind === "stage") {
      const half = op.round & 1;
      for (const [k, n] of reading[r]!) {
        const [c, h] = k.split(" ").map(Number);
        if (n > 0 && (c !== call || h === half))
          return `rank ${r} restaged half ${half} for call ${call} round ${op.round} while a peer read call ${c}'s half ${h}`;
      }
      Object.assign(halves[r]![half]!, { call, round: op.round });
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
        const k = readKey(call, op.round & 1);
        if (at === 0) {
          if (h.call !== call || h.round !== op.round)
            return `rank ${r} read rank ${p}'s half ${op.round & 1} for call ${call} round ${op.round}, holding call ${h.call} round ${h.round}`;
          reading[p]!.set(k, (reading[p]!.get(k) ?? 0) + 1);
          run.steps[t] = 1;
          return true;
        }
        if (at === 1) {
          reading[p]!.set(k, reading[p]!.get(k)! - 1);
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
            if (held !== call)
              return `rank ${r} found call ${held}'s ${wait} from rank ${p} waiting in call ${call}`;
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
    for (let r = 0; r < world; r++)
      for (let s = 0; s < 3; s++) if (queues[r]![s]![head[r]![s]!]) actors.push([r, s]);
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

/** allToAll calls back to back of 1, 2, 3 and 5 rounds. */
const ALL_TO_ALL: Call[] = [3, 1, 5, 2, 1, 3].map((rounds) => ({ op: "allToAll", rounds }));
/** The same with sendRecv calls of 1 to 5 chunks between them, on the same slots and staging buffer. */
const MIXED: Call[] = ALL_TO_ALL.flatMap((c, i) => [c, { op: "sendRecv", chunks: [3, 1, 5, 2, 1, 4][i]! }]);
const firstWrong = (
  world: number,
  calls: readonly Call[],
  variant: Variant,
  seeds = 200,
): string | undefined =>
  Array.from({ length: seeds }, (_, i) => simulate(world, calls, variant, i + 1)).find(
    (r) => r !== undefined,
  );

for (const world of [2, 3, 4])
  test(`allToAll copy_engine at world ${world}: no schedule reads a half restaged under it, mixes calls or stalls`, () => {
    assert.equal(firstWrong(world, ALL_TO_ALL, "as built"), undefined);
  });

for (const world of [2, 4])
  test(`allToAll and sendRecv copy_engine in turn at world ${world}, on the same slots: nothing goes wrong`, () => {
    assert.equal(firstWrong(world, MIXED, "as built"), undefined);
  });

test("allToAll copy_engine without the restaging wait: a half is restaged while a peer reads it", () => {
  assert.match(firstWrong(3, ALL_TO_ALL, "no restage wait") ?? "none", /restaged half|read rank \d+'s half/);
});

test("allToAll copy_engine waiting for the last round's acknowledgements only: the next call finds one left", () => {
  assert.match(firstWrong(3, ALL_TO_ALL, "final wait one round") ?? "none", /found call \d+'s ack/);
});

test("sendRecv copy_engine restaging a half before its acknowledgement: a read finds a later chunk", () => {
  assert.match(firstWrong(2, MIXED, "send restages at once") ?? "none", /read rank \d+'s half/);
});

test("allToAll copy_engine with signal kernels that wait before they put: the ranks stall", () => {
  assert.match(firstWrong(2, ALL_TO_ALL, "wait before put") ?? "none", /stuck/);
});
