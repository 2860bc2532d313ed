// One rank of the point-to-point and all-to-all check (test/gpu/distributed.test.ts), at any world from 2
// to 8: send, recv, sendRecv, allToAll and allToAllV on GPUs, every algorithm, bit for bit against what
// the peers sent: every dtype; sizes 1, 7, 4097 and powers of two to 32 MiB; messages of several put
// chunks (and copy_engine chunks, in a group with a small staging buffer), an empty one, misaligned
// views; uneven and zero counts (a rank that sends nothing, one that receives everything); a symmetric x
// read in place; outputs poisoned inside guards; CUDA graphs replayed with the inputs changed in between;
// ranks 50 ms late; 500 calls alternating sizes, peers and algorithms back to back (100 when ranks share
// a GPU); the same calls on NCCL agreeing; bad input a typed error with nothing written.
//
// Each section makes its inputs and poisoned outputs first, meets the peers at a store barrier, enqueues
// its calls back to back, waits once, and only then computes what each output must hold: no rank does
// host work while a peer's kernel waits for it, so the run also passes under a short
// SYMMKIT_SYNC_TIMEOUT_MS. Messages are a hash of (seed, case, sender, receiver, word), so a rank makes
// only what it sends and receives, at a few ns a byte. Pairs meet in rounds: every pair once, each rank
// in at most one pair per round. Seeded, the seed printed; each section printed with its seconds.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { assertSameBits, sharedSeed } from "../../support/agree.js";
import { init } from "../../../src/init.js";
import { InvalidArgumentError } from "../../../src/errors.js";
import { rawView } from "../../../src/cpu/host-tensor.js";
import { dtypeInfo, type DType, type RawArray } from "../../../src/runtime/dtype.js";
import { Graph } from "../../../src/runtime/graph.js";
import { defaultStream } from "../../../src/runtime/stream.js";
import { Tensor } from "../../../src/runtime/tensor.js";
import { readEnvVar } from "../../../src/settings.js";
import { GpuCollectives } from "../../../src/ops/gpu-collectives.js";
import { GUARD, poisoned } from "./guards.js";

const STAGING_BYTES = 128 << 20;
const group = await init({ backend: "cuda", stagingBytes: STAGING_BYTES });
const c = group.collectives;
const { rank, worldSize: world } = group;
assert.ok(world >= 2, `the exchange check needs 2 or more ranks, got ${world}`);
const stream = defaultStream(group.device);
const seed = await sharedSeed(group.store, rank);
const DTYPES: DType[] = ["f32", "f16", "bf16", "fp8e4m3", "fp8e5m2", "i32", "u32", "u8", "i64"];
const A2A = ["pull", "nccl", "auto"] as const;
const P2P = ["put", "copy_engine", "nccl", "auto"] as const;
const A2AV = ["copy_engine", "nccl", "auto"] as const;

const started = performance.now();
let sectionStarted = started;
/** Rank 0 prints a section's result with its seconds (store barriers included: the group's time). */
function done(what: string): void {
  const now = performance.now();
  if (rank === 0) console.log(`${what} (${((now - sectionStarted) / 1000).toFixed(1)} s)`);
  sectionStarted = now;
}

// ---- Messages: any rank can make any of them, so each makes only its own.
const KEY0 = Number(seed & 0xffff_ffffn) | 0;
const KEY1 = Number((seed >> 32n) & 0xffff_ffffn) | 0;
/** murmur3's finaliser: a bijection on 32 bits. */
function mix(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}
/** Cases are numbered alike on every rank, taking part or not. */
let tags = 0;
/** The `nbytes` bytes `src` sends `dst` in case `tag` (`dst` = world: a row sent to no one). */
function message(tag: number, src: number, dst: number, nbytes: number): Uint8Array {
  // Whole 8-byte words, so that any dtype can view them.
  const words = new Uint32Array(Math.ceil(nbytes / 8) * 2);
  const key = mix(mix(mix(KEY0 ^ tag) ^ KEY1) ^ (src * 257 + dst));
  for (let i = 0; i < words.length; i++) words[i] = mix((key + Math.imul(i, 0x9e3779b9)) | 0);
  return new Uint8Array(words.buffer, 0, nbytes);
}
function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
const bytes = (raw: RawArray): Uint8Array => new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength);
const size = (dtype: DType): number => dtypeInfo(dtype).bytes;
const elements = (dtype: DType, b: Uint8Array): RawArray =>
  rawView(dtype, b.buffer, b.byteOffset, b.byteLength / size(dtype));
const upload = (dtype: DType, b: Uint8Array, shape?: number[]): Tensor =>
  Tensor.fromHost(elements(dtype, b), dtype, shape ? { shape } : {});
const sum = (v: readonly number[]): number => v.reduce((a, b) => a + b, 0);
const typed = (e: unknown): boolean =>
  e instanceof InvalidArgumentError && e.code === "SYMMKIT_INVALID_ARGUMENT";

// ---- Poisoned outputs: one read of the whole tensor checks the guards and what lies between them.
const POISON = new Map<DType, Uint8Array>();
for (const dtype of DTYPES) {
  const [whole] = poisoned(dtype, [0]);
  POISON.set(dtype, bytes(whole.toHost()).slice(0, size(dtype)));
  whole.dispose();
}
function poison(dtype: DType, n: number): Uint8Array {
  const one = POISON.get(dtype)!;
  const out = new Uint8Array(n * one.length);
  if (n === 0) return out;
  out.set(one);
  // Doubling copies: a 129 MiB output costs milliseconds, not an element at a time.
  for (let have = one.length; have < out.length; have *= 2)
    out.copyWithin(have, 0, Math.min(have, out.length - have));
  return out;
}
/** `whole` (made by poisoned) holds the poison in its guards and `inner` between them. */
function expectPoisoned(whole: Tensor, inner: Uint8Array, what: string): void {
  const got = bytes(whole.toHost());
  const g = GUARD * whole.elementBytes;
  assert.equal(got.length, inner.length + 2 * g, `${what}: size`);
  const guard = poison(whole.dtype, GUARD);
  if (
    Buffer.compare(got.subarray(0, g), guard) !== 0 ||
    Buffer.compare(got.subarray(got.length - g), guard) !== 0
  )
    assert.fail(`${what}: guard overwritten (seed ${seed})`);
  assertSameBits(
    elements(whole.dtype, got.subarray(g, g + inner.length)),
    elements(whole.dtype, inner),
    what,
    seed,
  );
}

// ---- Batches: every input made before the store barrier, every check after the one wait.
interface Case {
  /** Enqueues the case's calls (no host work that a peer could wait on). */
  run(): void;
  /** Once the stream is done: what the outputs must hold. */
  check(): void;
  readonly tensors: Tensor[];
}
async function batch(cases: readonly Case[], late?: number): Promise<void> {
  await group.barrier();
  if (rank === late) await sleep(50);
  for (const k of cases) k.run();
  group.synchronize();
  for (const k of cases) k.check();
  for (const k of cases) for (const t of k.tensors) t.dispose();
}

/** Every pair of ranks once, in rounds in which each rank has at most one peer (the circle method; at an
 * odd world one rank sits each round out). */
function rounds(n: number): [number, number][][] {
  const m = n + (n % 2);
  const out: [number, number][][] = [];
  for (let r = 0; r < m - 1; r++) {
    const pairs: [number, number][] = [[m - 1, r]];
    for (let i = 1; i < m / 2; i++) pairs.push([(r + i) % (m - 1), (r - i + m - 1) % (m - 1)]);
    out.push(pairs.filter(([a, b]) => a < n && b < n).map(([a, b]) => (a < b ? [a, b] : [b, a])));
  }
  return out;
}
const ROUNDS = rounds(world);
/** This rank's peer in round `r` (of ROUNDS, cyclically), if it has one. */
function peerIn(r: number): number | undefined {
  const pair = ROUNDS[r % ROUNDS.length]!.find(([a, b]) => a === rank || b === rank);
  return pair === undefined ? undefined : pair[0] === rank ? pair[1] : pair[0];
}

// ---- allToAll.
/** allToAll of `perRank` elements per rank: x and the poisoned out made now. */
function allToAllCase(
  dtype: DType,
  perRank: number,
  algorithm: (typeof A2A)[number],
  what = `allToAll ${algorithm} ${dtype} ${perRank} per rank`,
): Case {
  const tag = tags++;
  const chunk = perRank * size(dtype);
  const x = upload(dtype, concat(Array.from({ length: world }, (_, d) => message(tag, rank, d, chunk))));
  const [whole, out] = poisoned(dtype, [perRank * world]);
  return {
    run: () => void c.allToAll(x, out, { algorithm }),
    check: () =>
      expectPoisoned(
        whole,
        concat(Array.from({ length: world }, (_, s) => message(tag, s, rank, chunk))),
        what,
      ),
    tensors: [x, whole],
  };
}

// ---- sendRecv.
/** sendRecv of the pairs of round `round`: the lower rank sends `lowSends` elements, the higher
 * `highSends`, both viewed from element `offset` of their tensors. */
function pairCase(
  algorithm: (typeof P2P)[number],
  dtype: DType,
  round: number,
  lowSends: number,
  highSends: number,
  offset = 0,
): Case | undefined {
  const tag = tags++;
  const peer = peerIn(round);
  if (peer === undefined) return undefined;
  const [nSend, nRecv] = rank < peer ? [lowSends, highSends] : [highSends, lowSends];
  const eb = size(dtype);
  const xWhole = upload(dtype, concat([new Uint8Array(offset * eb), message(tag, rank, peer, nSend * eb)]));
  const x = xWhole.slice(offset);
  const [whole, out] = poisoned(dtype, [nRecv + offset]);
  const target = out.slice(offset);
  const what = `sendRecv ${algorithm} ${dtype} ${nSend}/${nRecv} +${offset} with rank ${peer}`;
  return {
    run: () => void c.sendRecv(x, target, peer, { algorithm }),
    check: () =>
      expectPoisoned(whole, concat([poison(dtype, offset), message(tag, peer, rank, nRecv * eb)]), what),
    tensors: [xWhole, whole],
  };
}
function ringCase(algorithm: (typeof P2P)[number]): Case {
  const tag = tags++;
  const left = (rank + world - 1) % world;
  const right = (rank + 1) % world;
  const x = upload("f32", message(tag, rank, right, 4 * (1000 + rank)));
  const [whole, out] = poisoned("f32", [1000 + left]);
  const o = { algorithm };
  return {
    // Even ranks send first, odd ranks receive first: a send completes once its receiver has it.
    run: () => {
      if (rank % 2 === 0) {
        c.send(x, right, o);
        c.recv(out, left, o);
      } else {
        c.recv(out, left, o);
        c.send(x, right, o);
      }
    },
    check: () =>
      expectPoisoned(whole, message(tag, left, rank, 4 * (1000 + left)), `send/recv ring ${algorithm}`),
    tensors: [x, whole],
  };
}
// Every kernel compiled or loaded once, all ranks together, before any section counts on peers' timing.
{
  const warm: Case[] = A2A.map((a) => allToAllCase("u8", 1, a, `first allToAll ${a}`));
  // Two rounds: at an odd world the rank left out of the first has a peer in the second.
  for (const r of [0, 1])
    for (const algorithm of P2P) {
      const k = pairCase(algorithm, "u8", r, 16, 16);
      if (k) warm.push(k);
    }
  await batch(warm);
  const counts = Tensor.fromHost(
    Int32Array.from({ length: world }, () => 1),
    "i32",
  );
  const x = Tensor.zeros([world], "u8");
  const out = Tensor.empty([world], "u8");
  await group.barrier();
  for (const algorithm of A2AV) c.allToAllV(x, out, new Array<number>(world).fill(1), { algorithm });
  const got = c.allToAllV(x, out, counts);
  group.synchronize();
  for (const t of [counts, x, out, got.recvCounts]) t.dispose();
  done("first call of every kernel");
}

// Every algorithm, every dtype, odd sizes; then powers of two, bytes per rank 1 KiB .. 32 MiB (pull holds
// up to the 128 MiB staging buffer), chunks rounded down to whole bytes where the world does not divide
// them; then a symmetric x, read in place by pull.
{
  const cases: Case[] = [];
  for (const algorithm of A2A)
    for (const dtype of DTYPES) for (const n of [1, 7, 4097]) cases.push(allToAllCase(dtype, n, algorithm));
  for (let b = 1024; b <= 32 << 20; b *= 8)
    for (const algorithm of A2A)
      cases.push(allToAllCase("u8", Math.max(1, Math.floor(b / world)), algorithm));
  const n = 4099;
  const tag = tags++;
  const sx = await group.symmetric.empty([n * world], "bf16");
  const src = upload("bf16", concat(Array.from({ length: world }, (_, d) => message(tag, rank, d, 2 * n))));
  sx.tensor.copyFrom(src);
  const want = (): Uint8Array =>
    concat(Array.from({ length: world }, (_, s) => message(tag, s, rank, 2 * n)));
  for (const algorithm of A2A) {
    const [whole, out] = poisoned("bf16", [n * world]);
    cases.push({
      run: () => void c.allToAll(sx, out, { algorithm }),
      check: () => expectPoisoned(whole, want(), `allToAll ${algorithm} symmetric x`),
      tensors: [whole],
    });
  }
  await batch(cases);
  src.dispose();
  await sx.dispose();
  done(`allToAll: every algorithm, dtype and size exact, a symmetric x read in place; ${cases.length} calls`);
}

// sendRecv with every peer, one batch per algorithm: every dtype in every round (sizes differing both
// ways); messages of several chunks (put pipelines 1 MiB chunks), an empty one and a misaligned view,
// each in one round; send + recv in a ring.
const BIG_PAIRS: [DType, number, number, number][] = [
  ["u8", (5 << 20) + 3, 7, 0],
  ["bf16", 3 << 20, (2 << 20) + 1, 0],
  ["f32", 0, 33, 0],
  ["u8", 100_001, 65_536, 3],
];
for (const [i, algorithm] of P2P.entries()) {
  const cases: (Case | undefined)[] = [];
  for (const dtype of DTYPES)
    for (let r = 0; r < ROUNDS.length; r++)
      cases.push(pairCase(algorithm, dtype, r, 1 + (dtype.length % 5), 4097));
  for (const [k, [dtype, low, high, offset]] of BIG_PAIRS.entries())
    cases.push(pairCase(algorithm, dtype, i + k, low, high, offset));
  cases.push(ringCase(algorithm));
  await batch(cases.filter((k) => k !== undefined));
}
done(`sendRecv with every peer (${ROUNDS.length} rounds), send/recv ring, every algorithm: exact`);

// Back to back with no host wait in between, the receiver 50 ms late: a sender must wait for the acks
// before it reuses an inbox buffer (put), and a pull all-to-all for its peers' reads before restaging
// (the last rank 50 ms late).
{
  const tag = tags++;
  const sizes = [(5 << 20) + 11, 1 << 20, 3];
  const sent = rank === 0 ? sizes.map((n, i) => upload("u8", message(tag, 0, i, n))) : [];
  const got = rank === 1 ? sizes.map((n) => poisoned("u8", [n])) : [];
  const pulls = [0, 1].map(() => allToAllCase("u8", 3001, "pull", "back-to-back pull"));
  await group.barrier();
  if (rank === 1) await sleep(50);
  for (const x of sent) c.send(x, 1, { algorithm: "put" });
  for (const [, out] of got) c.recv(out, 0, { algorithm: "put" });
  if (rank === world - 1) await sleep(50);
  for (const k of pulls) k.run();
  group.synchronize();
  got.forEach(([whole], i) => expectPoisoned(whole, message(tag, 0, i, sizes[i]!), `back-to-back put ${i}`));
  for (const k of pulls) k.check();
  for (const t of [...sent, ...got.map(([whole]) => whole), ...pulls.flatMap((k) => k.tensors)]) t.dispose();
  done("back to back, receivers late: put and pull exact");
}

// copy_engine in chunks of half the staging buffer: a group whose buffer is 8 MiB cuts messages into 4
// MiB chunks, so these take up to 4 (both halves reused, the sender waiting for the acks), both ways at
// once, back to back; then rank 1 50 ms late for three messages from rank 0; then a graph replayed with
// new data.
{
  const small = (await group.newGroupWith<GpuCollectives>(group.ranks, (g) =>
    GpuCollectives.create(g, 8 << 20),
  ))!;
  const sc = small.collectives;
  const peer = peerIn(0);
  const ce = { algorithm: "copy_engine" } as const;
  {
    const sizes = [(13 << 20) + 5, 4 << 20, (9 << 20) + 1, 0];
    const cases: Case[] = [];
    for (const [i, n] of sizes.entries()) {
      const m = sizes[(i + 1) % sizes.length]!;
      const tag = tags++;
      if (peer === undefined) continue;
      const [nSend, nRecv] = rank < peer ? [n, m] : [m, n];
      const x = upload("u8", message(tag, rank, peer, nSend));
      const [whole, out] = poisoned("u8", [nRecv]);
      cases.push({
        run: () => void sc.sendRecv(x, out, peer, ce),
        check: () =>
          expectPoisoned(
            whole,
            message(tag, peer, rank, nRecv),
            `copy_engine sendRecv ${nSend}/${nRecv} bytes`,
          ),
        tensors: [x, whole],
      });
    }
    const tag = tags++;
    const msgs = [(13 << 20) + 5, 3, 5 << 20];
    const sent = rank === 0 ? msgs.map((n, i) => upload("u8", message(tag, 0, i, n))) : [];
    const got = rank === 1 ? msgs.map((n) => poisoned("u8", [n])) : [];
    await batch(cases);
    await group.barrier();
    if (rank === 1) await sleep(50);
    for (const x of sent) sc.send(x, 1, ce);
    for (const [, out] of got) sc.recv(out, 0, ce);
    small.synchronize();
    got.forEach(([whole], i) =>
      expectPoisoned(whole, message(tag, 0, i, msgs[i]!), `back-to-back copy_engine ${i}`),
    );
    for (const t of [...sent, ...got.map(([whole]) => whole)]) t.dispose();
  }
  // The graph: each replay's input copied in and its output copied out on the stream, checked at the end.
  const n = (11 << 20) + 7;
  const replays = [0, 1, 2].map(() => tags++);
  const inputs = peer === undefined ? [] : replays.map((tag) => upload("u8", message(tag, rank, peer, n)));
  const x = Tensor.empty([n], "u8");
  const out = Tensor.empty([n], "u8");
  const snaps = inputs.map(() => Tensor.empty([n], "u8"));
  await group.barrier();
  const graph =
    peer === undefined
      ? undefined
      : Graph.capture(stream, () => void sc.sendRecv(x, out, peer, { ...ce, stream }));
  if (graph)
    inputs.forEach((input, i) => {
      x.copyFrom(input, stream);
      graph.launch(stream);
      snaps[i]!.copyFrom(out, stream);
    });
  small.synchronize(stream);
  snaps.forEach((s, i) =>
    assertSameBits(s.toHost(), message(replays[i]!, peer!, rank, n), `copy_engine graph replay ${i}`, seed),
  );
  graph?.dispose();
  for (const t of [x, out, ...inputs, ...snaps]) t.dispose();
  await small.destroy();
  done("copy_engine in 4 MiB chunks, back to back, late receiver, graph replays: exact");
}

// ---- allToAllV.
type Matrix = number[][];
/** A count matrix (rows rank s sends rank d), 0..8 each, alike on every rank. */
function countMatrix(kind: "random" | "silent" | "sink" | "zero"): Matrix {
  const w = new Uint32Array(message(tags++, world, world, 4 * world * world).buffer, 0, world * world);
  const m = Array.from({ length: world }, (_, s) =>
    Array.from({ length: world }, (_, d) => w[s * world + d]! % 9),
  );
  if (kind === "silent") m[0]!.fill(0);
  if (kind === "sink") for (const row of m) row.fill(0).splice(world - 1, 1, 13);
  if (kind === "zero") for (const row of m) row.fill(0);
  return m;
}
const A2AV_KINDS = ["random", "silent", "sink", "zero"] as const;
/** allToAllV's rows: dtype and shape of one row. */
const A2AV_ROWS: [DType, number[]][] = [
  ["u8", []],
  ["f16", [3]],
  ["bf16", [4097]],
];
/** This rank's x for count matrix `m` in case `tag` (its rows for rank 0, then rank 1's, ...), and then
 * `spare` rows sent to no one. */
const vInput = (tag: number, m: Matrix, rowBytes: number, spare = 0): Uint8Array =>
  concat([
    ...m[rank]!.map((n, d) => message(tag, rank, d, n * rowBytes)),
    message(tag, rank, world, spare * rowBytes),
  ]);
/** What out holds after: every source's rows for this rank, packed in rank order. */
const vReceived = (tag: number, m: Matrix, rowBytes: number): Uint8Array =>
  concat(m.map((row, s) => message(tag, s, rank, row[rank]! * rowBytes)));
const column = (m: Matrix): number[] => m.map((row) => row[rank]!);

// Counts as host arrays: uneven and zero counts, 1-D and 2-D, recvCounts given or learned; then the
// group's refusals: one rank's out too small, one rank's recvCounts wrong (and for copy_engine one rank's
// x beyond the 128 MiB staging buffer); every rank refuses, nothing written.
{
  const cases: Case[] = [];
  for (const algorithm of A2AV)
    for (const kind of A2AV_KINDS)
      for (const [dtype, rowShape] of A2AV_ROWS) {
        const m = countMatrix(kind);
        const tag = tags++;
        const rowElems = rowShape.reduce((a, b) => a * b, 1);
        const rowBytes = rowElems * size(dtype);
        const x = upload(dtype, vInput(tag, m, rowBytes), [sum(m[rank]!), ...rowShape]);
        const received = column(m);
        const spare = 2;
        const [whole, out] = poisoned(dtype, [sum(received) + spare, ...rowShape]);
        const given = kind === "random" ? { recvCounts: received } : {};
        const what = `allToAllV ${algorithm} ${kind} ${dtype}`;
        let got: number[] = [];
        cases.push({
          run: () => {
            got = c.allToAllV(x, out, m[rank]!, { ...given, algorithm }).recvCounts;
          },
          check: () => {
            assert.deepEqual(got, received, `${what}: recvCounts`);
            expectPoisoned(
              whole,
              concat([vReceived(tag, m, rowBytes), poison(dtype, spare * rowElems)]),
              what,
            );
          },
          tensors: [x, whole],
        });
      }
  for (const algorithm of A2AV) {
    const m = countMatrix("random").map((row) => row.map((v) => v + 1));
    const need = sum(column(m));
    if (algorithm === "copy_engine") {
      // The last rank's x just over the staging buffer, in world equal parts.
      const per = rank === world - 1 ? Math.ceil((129 << 20) / world) : 1;
      const x = Tensor.zeros([per * world], "u8");
      // The verdict names the staging buffer before any out size.
      const [whole, out] = poisoned("u8", [world]);
      cases.push({
        run: () =>
          assert.throws(
            () => c.allToAllV(x, out, new Array<number>(world).fill(per), { algorithm }),
            (e: unknown) => typed(e) && new RegExp(`rank ${world - 1}'s x needs`).test(String(e)),
            "allToAllV staging",
          ),
        check: () => expectPoisoned(whole, poison("u8", world), "allToAllV staging: nothing written"),
        tensors: [x, whole],
      });
    }
    for (const fault of ["small", "counts"] as const) {
      const tag = tags++;
      const x = upload("u8", vInput(tag, m, 1));
      const [whole, out] = poisoned("u8", [fault === "small" && rank === world - 1 ? need - 1 : need]);
      const wrong = column(m);
      if (fault === "counts" && rank === 0) wrong[0]! += 1;
      const blamed = fault === "small" ? world - 1 : 0;
      cases.push({
        run: () =>
          assert.throws(
            () => c.allToAllV(x, out, m[rank]!, { recvCounts: wrong, algorithm }),
            (e: unknown) => typed(e) && new RegExp(`rank ${blamed}\\b`).test(String(e)),
            `allToAllV ${algorithm} ${fault}`,
          ),
        check: () =>
          expectPoisoned(whole, poison("u8", out.numel), `allToAllV ${algorithm} ${fault}: nothing written`),
        tensors: [x, whole],
      });
    }
  }
  await batch(cases);
  done("allToAllV: exact, spare rows kept, group-judged errors on every rank");
}

// Counts on the device (algorithm pull, and auto given a counts tensor): the same rows as the host form,
// one spare row in x (sent by no one); a CUDA graph replayed with new counts and rows in between (x and
// out of fixed capacity); refusals judged by the GPU alike on every rank: counts -1, nothing written,
// group.synchronize() throws, and the group goes on.
{
  const onDevice = (row: readonly number[]): Tensor => Tensor.fromHost(Int32Array.from(row), "i32");
  const cases: Case[] = [];
  for (const algorithm of ["pull", "auto"] as const)
    for (const kind of A2AV_KINDS)
      for (const [dtype, rowShape] of A2AV_ROWS) {
        const m = countMatrix(kind);
        const tag = tags++;
        const rowElems = rowShape.reduce((a, b) => a * b, 1);
        const rowBytes = rowElems * size(dtype);
        const x = upload(dtype, vInput(tag, m, rowBytes, 1), [sum(m[rank]!) + 1, ...rowShape]);
        const [whole, out] = poisoned(dtype, [sum(column(m)) + 2, ...rowShape]);
        const counts = onDevice(m[rank]!);
        const recv = Tensor.empty([world], "i32");
        const what = `allToAllV on the device ${algorithm} ${kind} ${dtype}`;
        cases.push({
          run: () => void c.allToAllV(x, out, counts, { algorithm, recvCountsOut: recv }),
          check: () => {
            assert.deepEqual(Array.from(recv.toHost()), column(m), `${what}: recvCounts`);
            expectPoisoned(whole, concat([vReceived(tag, m, rowBytes), poison(dtype, 2 * rowElems)]), what);
          },
          tensors: [x, whole, counts, recv],
        });
      }
  await batch(cases);

  // A graph: x and out of fixed capacity, the counts and rows changed before each replay; out and the
  // counts received copied aside after each, so that nothing waits between replays.
  const rowElems = 4097;
  const rowBytes = rowElems * 2;
  // Up to 8 rows to each rank ("random"), or 13 from each to the last ("sink").
  const capacity = 16 * world;
  const x = Tensor.zeros([capacity, rowElems], "bf16");
  const [whole, out] = poisoned("bf16", [capacity, rowElems]);
  const counts = Tensor.zeros([world], "i32");
  const recv = Tensor.zeros([world], "i32");
  const record = (): void =>
    void c.allToAllV(x, out, counts, { algorithm: "pull", stream, recvCountsOut: recv });
  const replays = [0, 1, 2, 3].map((i) => {
    const m = countMatrix(i % 2 === 0 ? "random" : "sink");
    const tag = tags++;
    const mine = vInput(tag, m, rowBytes);
    const rows = upload(
      "bf16",
      concat([mine, message(tag, rank, world, capacity * rowBytes - mine.length)]),
      [capacity, rowElems],
    );
    const snap = {
      before: Tensor.empty([capacity, rowElems], "bf16"),
      after: Tensor.empty([capacity, rowElems], "bf16"),
    };
    return { m, tag, rows, counts: onDevice(m[rank]!), recv: Tensor.empty([world], "i32"), ...snap };
  });
  await group.barrier();
  record();
  group.synchronize();
  const graph = Graph.capture(stream, record);
  for (const r of replays) {
    x.copyFrom(r.rows, stream);
    counts.copyFrom(r.counts, stream);
    r.before.copyFrom(out, stream);
    graph.launch(stream);
    r.after.copyFrom(out, stream);
    r.recv.copyFrom(recv, stream);
  }
  group.synchronize(stream);
  for (const [i, r] of replays.entries()) {
    const what = `allToAllV on the device, graph replay ${i}`;
    assert.deepEqual(Array.from(r.recv.toHost()), column(r.m), `${what}: recvCounts`);
    const want = bytes(r.before.toHost());
    want.set(vReceived(r.tag, r.m, rowBytes));
    assertSameBits(r.after.toHost(), elements("bf16", want), what, seed);
  }
  expectPoisoned(whole, bytes(replays[3]!.after.toHost()), "allToAllV on the device, graphs: guards");
  graph.dispose();
  for (const t of [
    x,
    whole,
    counts,
    recv,
    ...replays.flatMap((r) => [r.rows, r.counts, r.recv, r.before, r.after]),
  ])
    t.dispose();

  // Refused on the GPU: the last rank's counts add up to more rows than its x has; then one rank's out is
  // too small. Every rank: counts -1, out untouched, synchronize throws (once); the calls after go
  // through.
  for (const fault of ["rows", "out"] as const) {
    const m = countMatrix("random").map((row) => row.map((v) => v + 1));
    const tag = tags++;
    const sent = sum(m[rank]!);
    const xRows = fault === "rows" && rank === world - 1 ? sent - 1 : sent;
    const need = sum(column(m));
    const [whole, out] = poisoned("u8", [fault === "out" && rank === 0 ? need - 1 : need]);
    const x = upload("u8", message(tag, rank, rank, xRows));
    const counts = onDevice(m[rank]!);
    const blamed = fault === "rows" ? world - 1 : 0;
    await group.barrier();
    const got = c.allToAllV(x, out, counts);
    assert.throws(
      () => group.synchronize(),
      (e: unknown) => typed(e) && new RegExp(`refused on every rank: rank ${blamed}\\b`).test(String(e)),
      `allToAllV on the device, ${fault} refused`,
    );
    group.synchronize();
    assert.deepEqual(Array.from(got.recvCounts.toHost() as Int32Array), new Array<number>(world).fill(-1));
    expectPoisoned(whole, poison("u8", out.numel), `allToAllV on the device, ${fault}: nothing written`);
    for (const t of [x, counts, got.recvCounts, whole]) t.dispose();
  }
  done("allToAllV with counts on the device: exact, in a replayed graph, refusals on every rank");
}

// A CUDA graph of allToAll (every algorithm) and sendRecv (every algorithm, with this rank's peer of the
// first round), replayed with the inputs changed in between; each replay's outputs copied aside.
{
  const n = 3000;
  const peer = peerIn(0);
  const x = Tensor.empty([n * world], "bf16");
  const p2pIn = Tensor.empty([513], "f32");
  const outs = A2A.map(() => Tensor.empty([n * world], "bf16"));
  const p2pOuts = P2P.map(() => Tensor.empty([513], "f32"));
  const replays = [0, 1, 2].map(() => {
    const tag = tags++;
    return {
      tag,
      x: upload("bf16", concat(Array.from({ length: world }, (_, d) => message(tag, rank, d, 2 * n)))),
      p: upload("f32", message(tag, rank, peer ?? rank, 4 * 513)),
      outs: outs.map((o) => Tensor.empty(o.shape, "bf16")),
      p2pOuts: p2pOuts.map(() => Tensor.empty([513], "f32")),
    };
  });
  await group.barrier();
  const graph = Graph.capture(stream, () => {
    A2A.forEach((algorithm, i) => c.allToAll(x, outs[i]!, { algorithm, stream }));
    if (peer !== undefined)
      P2P.forEach((algorithm, i) => c.sendRecv(p2pIn, p2pOuts[i]!, peer, { algorithm, stream }));
  });
  for (const r of replays) {
    x.copyFrom(r.x, stream);
    p2pIn.copyFrom(r.p, stream);
    graph.launch(stream);
    r.outs.forEach((o, i) => o.copyFrom(outs[i]!, stream));
    r.p2pOuts.forEach((o, i) => o.copyFrom(p2pOuts[i]!, stream));
  }
  group.synchronize(stream);
  for (const [k, r] of replays.entries()) {
    const want = concat(Array.from({ length: world }, (_, s) => message(r.tag, s, rank, 2 * n)));
    r.outs.forEach((o, i) => assertSameBits(bytes(o.toHost()), want, `graph replay ${k} ${A2A[i]}`, seed));
    if (peer !== undefined)
      r.p2pOuts.forEach((o, i) =>
        assertSameBits(
          bytes(o.toHost()),
          message(r.tag, peer, rank, 4 * 513),
          `graph replay ${k} sendRecv ${P2P[i]}`,
          seed,
        ),
      );
  }
  graph.dispose();
  for (const t of [
    x,
    p2pIn,
    ...outs,
    ...p2pOuts,
    ...replays.flatMap((r) => [r.x, r.p, ...r.outs, ...r.p2pOuts]),
  ])
    t.dispose();
  done("graph replays with changed inputs: exact");
}

// Calls alternating sizes, peers, algorithms and kinds, enqueued back to back in batches of 50, the last
// rank 50 ms late for the first batch (fewer when ranks share a GPU: there every call waits for the
// GPU's time slices).
{
  const CALLS = readEnvVar("SYMMKIT_SHARE_GPUS") ? 100 : 500;
  for (let start = 0; start < CALLS; start += 50) {
    const cases: Case[] = [];
    for (let i = start; i < Math.min(CALLS, start + 50); i++) {
      const n = [1, 7, 4097, 65536][i % 4]!;
      if (i % 5 === 4) {
        const m = countMatrix(i % 2 === 0 ? "random" : "silent");
        const tag = tags++;
        const x = upload("u8", vInput(tag, m, 1));
        const [whole, out] = poisoned("u8", [sum(column(m))]);
        cases.push({
          run: () => void c.allToAllV(x, out, m[rank]!),
          check: () => expectPoisoned(whole, vReceived(tag, m, 1), `call ${i}: allToAllV auto`),
          tensors: [x, whole],
        });
      } else if (i % 5 === 2) {
        const k = pairCase(P2P[i % P2P.length]!, "u8", Math.floor(i / 5), n, [7, 70_000, 1][i % 3]!);
        if (k) cases.push(k);
      } else cases.push(allToAllCase(i % 3 === 0 ? "f16" : "u8", n, A2A[i % 3]!));
    }
    await batch(cases, start === 0 ? world - 1 : undefined);
  }
  done(`a straggler and ${CALLS} alternating calls back to back: exact`);
}

// Bad input: typed errors, nothing written.
{
  const [whole, out] = poisoned("f32", [8 * world]);
  const bad: [string, () => unknown][] = [
    ["dtype", () => c.allToAll(Tensor.empty([8 * world], "f16"), out)],
    [
      "indivisible",
      () => c.allToAll(Tensor.empty([8 * world + 1], "f32"), Tensor.empty([8 * world + 1], "f32")),
    ],
    ["numel", () => c.allToAll(Tensor.empty([4 * world], "f32"), out)],
    ["overlap", () => c.allToAll(out, out)],
    ["algorithm", () => c.allToAll(Tensor.empty([8 * world], "f32"), out, { algorithm: "ll" as "pull" })],
    [
      "counts sum",
      () => c.allToAllV(Tensor.empty([8 * world], "f32"), out, new Array<number>(world).fill(1)),
    ],
    ["counts length", () => c.allToAllV(Tensor.empty([8], "f32"), out, [8])],
    [
      "negative",
      () => c.allToAllV(Tensor.empty([8], "f32"), out, [9, -1, ...new Array<number>(world - 2).fill(0)]),
    ],
    ["self", () => c.sendRecv(Tensor.empty([4], "f32"), out, rank)],
    ["peer range", () => c.send(Tensor.empty([4], "f32"), world)],
    ["sendRecv overlap", () => c.sendRecv(out, out, (rank + 1) % world)],
    ["p2p algorithm", () => c.recv(out, (rank + 1) % world, { algorithm: "pull" as "nccl" })],
    [
      "allToAllV algorithm",
      () =>
        c.allToAllV(Tensor.empty([8], "f32"), out, [8, ...new Array<number>(world - 1).fill(0)], {
          algorithm: "put" as "nccl",
        }),
    ],
  ];
  for (const [what, call] of bad) assert.throws(call, typed, what);
  group.synchronize();
  expectPoisoned(whole, poison("f32", 8 * world), "bad inputs: nothing written");
  whole.dispose();
  done(`bad input: ${bad.length} typed errors, nothing written`);
}
c.barrier();
group.synchronize();
if (rank === 0) console.log(`total ${((performance.now() - started) / 1000).toFixed(1)} s at world ${world}`);
console.log(`gpu exchange ok rank ${rank}`);
await group.destroy();
