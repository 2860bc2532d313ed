// A model of send/recv's ll flow control (coll/p2p.cuh ll_send_part and ll_recv_part), run under random
// schedules: a sender side and a receiver side of a few blocks of a few threads exchange a sequence of
// messages (each its own kernel on both sides) through two buffers, one per chunk parity. The sender's
// blocks write chunk j (flag j + 1) once the acknowledged count is at least j - 1; the receiver's threads
// poll their lines, and the last of its blocks to count chunk j, on counter j mod rounds, raises the
// acknowledgement to j + 1. A line that holds a later chunk's flag than the one its reader waits for was
// overwritten while still to be read: on a GPU that reader waits until its deadline. With the kernel's
// P2P_LL_ROUNDS counters no schedule does that; with two, the model finds the schedule that did on GPUs
// (a block without lines in a partial last chunk counting it before a slower block counted the chunk two
// before), and with full chunks of fewer lines than a side's threads it finds one with four.
import assert from "node:assert/strict";
import { test } from "node:test";
import { P2P_LL_MAX_BLOCKS } from "../src/ops/exchange/p2p.js";
import { P2P_LL_CHUNK_BYTES, P2P_LL_ROUNDS } from "../src/ops/exchange/programs.js";
import { schedule } from "./support/schedules.js";

interface Shape {
  /** Blocks a side, threads a block, lines of a full chunk, counters of blocks done. */
  readonly blocks: number;
  readonly threads: number;
  readonly lines: number;
  readonly rounds: number;
}

/** Runs `messages` (lines each) through the model under the schedule of `seed`: undefined when every
 * message arrived, else what went wrong. */
function simulate(s: Shape, messages: readonly number[], seed: number): string | undefined {
  const random = schedule(seed);
  const L = s.lines;
  const span = s.blocks * s.threads;
  const chunksOf = (n: number): number => Math.max(1, Math.ceil(n / L));
  const linesOf = (n: number, i: number): number => Math.max(0, Math.min(L, n - i * L));
  // Two buffers of L lines and a header line (index L): the flag (chunk + 1) each line holds.
  const buffers = [new Array<number>(L + 1).fill(0), new Array<number>(L + 1).fill(0)];
  let acked = 0;
  const counters = new Array<number>(s.rounds).fill(0);
  // Each block's speed for this schedule: one is often much slower than the rest.
  const speed = (): number => (random() < 0.3 ? 0.02 : 0.2 + random());
  const sendSpeed = Array.from({ length: s.blocks }, speed);
  const recvSpeed = Array.from({ length: s.blocks }, speed);

  // Sender: message m's kernel starts once m - 1's has ended on the sender.
  let sent = 0;
  let sm = 0;
  type SendBlock = { chunk: number; line: number; done: boolean };
  const sendBlocks = (): SendBlock[] =>
    Array.from({ length: s.blocks }, () => ({ chunk: 0, line: -1, done: false }));
  let sb = sendBlocks();
  // Block b's lines of a chunk: those whose thread, line mod span, is one of b's.
  const ownLine = (b: number, l: number): boolean => Math.floor((l % span) / s.threads) === b;
  function sendStep(b: number): boolean {
    const blk = sb[b]!;
    const n = messages[sm]!;
    const j = sent + blk.chunk;
    if (blk.line === -1) {
      if (j >= 2 && acked < j - 1) return false;
      blk.line = 0;
      // Block 0's thread 0 writes a message's header with its first chunk.
      if (blk.chunk === 0 && b === 0) buffers[j & 1]![L] = j + 1;
      return true;
    }
    const lines = linesOf(n, blk.chunk);
    while (blk.line < lines && !ownLine(b, blk.line)) blk.line++;
    if (blk.line < lines) {
      buffers[j & 1]![blk.line] = j + 1;
      blk.line++;
      return true;
    }
    blk.chunk++;
    blk.line = -1;
    if (blk.chunk === chunksOf(n)) blk.done = true;
    return true;
  }

  // Receiver: each thread polls its lines of the block's chunk; then the block counts the chunk.
  let received = 0;
  let rm = 0;
  type RecvBlock = { chunk: number; next: number[]; header: boolean; done: boolean };
  const recvBlocks = (): RecvBlock[] =>
    Array.from({ length: s.blocks }, () => ({ chunk: 0, next: [], header: false, done: false }));
  let rb = recvBlocks();
  function recvStep(b: number): boolean | string {
    const blk = rb[b]!;
    const n = messages[rm]!;
    const j = received + blk.chunk;
    const buf = buffers[j & 1]!;
    const poll = (l: number): boolean | string => {
      if (buf[l] === j + 1) return true;
      if (buf[l]! > j + 1)
        return `message ${rm}, chunk ${j}: block ${b} found line ${l} holding chunk ${buf[l]! - 1}'s flag`;
      return false;
    };
    if (blk.chunk === 0 && b === 0 && !blk.header) {
      const got = poll(L);
      if (got === true) blk.header = true;
      return got;
    }
    const lines = linesOf(n, blk.chunk);
    if (blk.next.length === 0) blk.next = Array.from({ length: s.threads }, (_, t) => b * s.threads + t);
    // One thread's poll: the first whose next line is still to be read.
    const t = blk.next.findIndex((l) => l < lines);
    if (t >= 0) {
      const got = poll(blk.next[t]!);
      if (got === true) blk.next[t]! += span;
      return got;
    }
    // Every thread is done with the chunk (the block's barrier): thread 0 counts it.
    const slot = j % s.rounds;
    const last = counters[slot] === s.blocks - 1;
    counters[slot] = last ? 0 : counters[slot]! + 1;
    if (last) acked = Math.max(acked, j + 1);
    blk.chunk++;
    blk.next = [];
    if (blk.chunk === chunksOf(n)) blk.done = true;
    return true;
  }

  for (let steps = 0; sm < messages.length || rm < messages.length; steps++) {
    if (steps > 1_000_000) return "no end after a million steps";
    const actors: [() => boolean | string, number][] = [];
    if (sm < messages.length)
      sb.forEach((blk, b) => void (blk.done || actors.push([() => sendStep(b), sendSpeed[b]!])));
    if (rm < messages.length)
      rb.forEach((blk, b) => void (blk.done || actors.push([() => recvStep(b), recvSpeed[b]!])));
    // The actors in an order weighted by their speeds; the first that can moves. None can: none ever will.
    const order = actors
      .map(([step, w]) => ({ step, key: -Math.log(1 - random()) / w }))
      .sort((p, q) => p.key - q.key);
    let moved = false;
    for (const { step } of order) {
      const got = step();
      if (typeof got === "string") return got;
      if ((moved = got)) break;
    }
    if (!moved) return "stuck: every block waits";
    if (sm < messages.length && sb.every((blk) => blk.done)) {
      sent += chunksOf(messages[sm]!);
      sm++;
      sb = sendBlocks();
    }
    if (rm < messages.length && rb.every((blk) => blk.done)) {
      received += chunksOf(messages[rm]!);
      rm++;
      rb = recvBlocks();
    }
  }
  if (counters.some((c) => c !== 0)) return `counters left at ${counters.join(", ")}`;
  return undefined;
}

// Blocks, threads and full chunks in the kernel's proportion: a full chunk has twice a side's threads in
// lines (32768 lines, at most 32 x 512 threads).
const SHAPE = { blocks: 3, threads: 2, lines: 12 } as const;
/** Messages of several chunks with partial last chunks that leave blocks without lines, single chunks,
 * an empty message. */
const messages = (L: number): number[] => [2 * L + 3, L + 1, 3 * L + 2, 0, 5, 2 * L + 7, L, 4 * L + 1];
/** What the first of 400 schedules that went wrong reported. */
const firstWrong = (s: Shape): string | undefined =>
  Array.from({ length: 400 }, (_, i) => simulate(s, messages(s.lines), i + 1)).find((r) => r !== undefined);

test(`ll's flow control with ${P2P_LL_ROUNDS} counters: no schedule overwrites a line before it is read, every message arrives`, () => {
  assert.equal(firstWrong({ ...SHAPE, rounds: P2P_LL_ROUNDS }), undefined);
});

test("ll's flow control with two counters: the model finds the schedule that overwrote a line still to be read", () => {
  assert.match(firstWrong({ ...SHAPE, rounds: 2 }) ?? "none", /found line \d+ holding chunk \d+'s flag/);
});

test("ll's flow control needs every block to have lines in every full chunk, as the kernel's sides have", () => {
  const short = { ...SHAPE, lines: 3, rounds: P2P_LL_ROUNDS };
  assert.match(firstWrong(short) ?? "none", /found line \d+ holding chunk \d+'s flag/);
  // A side's threads (coll/p2p.cuh kThreads a block; compile.test checks it against the kernel too)
  // against a full chunk's lines of 8 payload bytes.
  assert.ok(P2P_LL_MAX_BLOCKS * 512 <= P2P_LL_CHUNK_BYTES / 8);
});
