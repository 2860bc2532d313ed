// One rank of the point-to-point and all-to-all check (test/gpu/distributed.test.ts): send, recv,
// sendRecv, allToAll and allToAllV on GPUs, every algorithm, bit for bit against what the peers sent
// (every rank draws every rank's bytes from the shared seed): every dtype; sizes 1, 7, 4097 and powers
// of two to 64 MiB; messages of several put chunks (and copy_engine chunks, in a group with a small
// staging buffer), an empty one, misaligned views; uneven and zero counts (a rank that sends nothing, one that receives everything);
// a symmetric x read in place; outputs poisoned inside guards; a CUDA graph replayed with the inputs
// changed in between; a rank 50 ms late; 1000 calls alternating sizes, peers and algorithms (200 when ranks share a GPU); the same
// calls on NCCL agreeing; bad input a typed error with nothing written. Seeded, the seed printed.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { assertSameBits, sharedSeed } from "../../support/agree.js";
import { init } from "../../../src/init.js";
import { InvalidArgumentError } from "../../../src/errors.js";
import { HostTensor, rawView } from "../../../src/cpu/host-tensor.js";
import { dtypeInfo, type DType, type RawArray } from "../../../src/runtime/dtype.js";
import { Graph } from "../../../src/runtime/graph.js";
import { defaultStream } from "../../../src/runtime/stream.js";
import { Tensor } from "../../../src/runtime/tensor.js";
import { readEnvVar } from "../../../src/settings.js";
import { GpuCollectives } from "../../../src/ops/gpu-collectives.js";
import { guardsIntact, poisoned } from "./guards.js";

const group = await init({ backend: "cuda", stagingBytes: 128 << 20 });
const c = group.collectives;
const { rank, worldSize: world } = group;
const stream = defaultStream(group.device);
const seed = await sharedSeed(group.store, rank);
const DTYPES: DType[] = ["f32", "f16", "bf16", "fp8e4m3", "fp8e5m2", "i32", "u32", "u8", "i64"];
const A2A = ["pull", "nccl", "auto"] as const;

let draws = 0;
/** `n` elements of `dtype`, random bytes; every rank draws the same for the same call order. */
function bytesOf(dtype: DType, n: number): RawArray {
  const b = HostTensor.rand([n * dtypeInfo(dtype).bytes], "u8", { seed, offset: draws++ }).raw;
  return rawView(dtype, b.buffer, 0, n);
}
/** Every rank's input, drawn in rank order. */
const everyRank = (dtype: DType, n: (r: number) => number): RawArray[] =>
  Array.from({ length: world }, (_, r) => bytesOf(dtype, n(r)));
const bytes = (raw: RawArray): Uint8Array => new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength);
const typed = (e: unknown): boolean =>
  e instanceof InvalidArgumentError && e.code === "SYMMKIT_INVALID_ARGUMENT";

/** allToAll's answer for this rank: chunk `rank` of every rank's x, in rank order. */
function allToAllWant(xs: RawArray[]): Uint8Array {
  const chunk = xs[0]!.byteLength / world;
  const want = new Uint8Array(xs[0]!.byteLength);
  for (let r = 0; r < world; r++)
    want.set(bytes(xs[r]!).subarray(rank * chunk, (rank + 1) * chunk), r * chunk);
  return want;
}

function checkAllToAll(dtype: DType, perRank: number, algorithm: (typeof A2A)[number]): void {
  const xs = everyRank(dtype, () => perRank * world);
  const x = Tensor.fromHost(xs[rank]!, dtype);
  const [whole, out] = poisoned(dtype, [perRank * world]);
  c.allToAll(x, out, { algorithm });
  const what = `allToAll ${algorithm} ${dtype} ${perRank} per rank`;
  assertSameBits(bytes(out.toHost()), allToAllWant(xs), what, seed);
  guardsIntact(whole, what);
  for (const t of [x, whole]) t.dispose();
}

// allToAll: every algorithm, every dtype, odd sizes.
for (const algorithm of A2A)
  for (const dtype of DTYPES) for (const n of [1, 7, 4097]) checkAllToAll(dtype, n, algorithm);
// Powers of two, bytes per rank 1 KiB .. 32 MiB (pull holds up to the 128 MiB staging buffer); chunks
// rounded down to whole bytes where the world does not divide them.
for (let b = 1024; b <= 32 << 20; b *= 8)
  for (const algorithm of A2A) checkAllToAll("u8", Math.max(1, Math.floor(b / world)), algorithm);
if (rank === 0) console.log("allToAll: every algorithm, dtype and size exact");

// A symmetric x, read in place by pull.
{
  const n = 4099 * world;
  const xs = everyRank("bf16", () => n);
  const sx = await group.symmetric.empty([n], "bf16");
  sx.tensor.copyFrom(Tensor.fromHost(xs[rank]!, "bf16"));
  stream.synchronize();
  for (const algorithm of A2A) {
    const [whole, out] = poisoned("bf16", [n]);
    c.allToAll(sx, out, { algorithm });
    assertSameBits(bytes(out.toHost()), allToAllWant(xs), `allToAll ${algorithm} symmetric x`, seed);
    guardsIntact(whole, `allToAll ${algorithm} symmetric x`);
  }
  await sx.dispose();
}

// sendRecv with every peer (pairs in one order on every rank), sizes differing both ways, every algorithm;
// messages of several chunks (put pipelines 1 MiB chunks), an empty one, a misaligned view; send + recv
// in a ring.
const P2P = ["put", "copy_engine", "nccl", "auto"] as const;
function exchangePair(
  dtype: DType,
  na: number,
  nb: number,
  algorithm: (typeof P2P)[number],
  offset = 0,
): void {
  for (let a = 0; a < world; a++) {
    for (let b = a + 1; b < world; b++) {
      const fromA = bytesOf(dtype, na);
      const fromB = bytesOf(dtype, nb);
      if (rank !== a && rank !== b) continue;
      const [mine, theirs, peer] = rank === a ? [fromA, fromB, b] : [fromB, fromA, a];
      const [whole, out] = poisoned(dtype, [theirs.length + offset]);
      const target = out.slice(offset);
      // Drawn nothing here: only a and b get this far, and every rank's draws must stay in step.
      const xWhole = Tensor.empty([mine.length + offset], dtype);
      const x = xWhole.slice(offset);
      const src = Tensor.fromHost(mine, dtype);
      x.copyFrom(src);
      c.sendRecv(x, target, peer, { algorithm });
      const what = `sendRecv ${algorithm} ${dtype} ${na}/${nb} +${offset} ${a}<->${b}`;
      assertSameBits(bytes(target.toHost()), bytes(theirs), what, seed);
      guardsIntact(whole, what);
      for (const t of [xWhole, src, whole]) t.dispose();
    }
  }
}
for (const algorithm of P2P) {
  for (const dtype of DTYPES) exchangePair(dtype, 1 + (dtype.length % 5), 4097, algorithm);
  exchangePair("u8", (5 << 20) + 3, 7, algorithm);
  exchangePair("bf16", 3 << 20, (2 << 20) + 1, algorithm);
  exchangePair("f32", 0, 33, algorithm);
  exchangePair("u8", 100_001, 65_536, algorithm, 3);
}
{
  const xs = everyRank("f32", (r) => 1000 + r);
  const left = (rank + world - 1) % world;
  const right = (rank + 1) % world;
  for (const algorithm of P2P) {
    const [whole, out] = poisoned("f32", [1000 + left]);
    // Even ranks send first, odd ranks receive first: a send completes once its receiver has the message.
    if (rank % 2 === 0) {
      c.send(Tensor.fromHost(xs[rank]!, "f32"), right, { algorithm });
      c.recv(out, left, { algorithm });
    } else {
      c.recv(out, left, { algorithm });
      c.send(Tensor.fromHost(xs[rank]!, "f32"), right, { algorithm });
    }
    assertSameBits(bytes(out.toHost()), bytes(xs[left]!), `send/recv ring ${algorithm}`, seed);
    guardsIntact(whole, `send/recv ring ${algorithm}`);
  }
}
// Back to back with no host wait in between, the receiver 50 ms late: a sender must wait for the acks
// before it reuses an inbox buffer (put), and a pull all-to-all for its peers' reads before restaging.
{
  const sizes = [(5 << 20) + 11, 1 << 20, 3];
  const msgs = sizes.map((n) => bytesOf("u8", n));
  const n2 = 3001 * world;
  const a2a = [everyRank("u8", () => n2), everyRank("u8", () => n2)];
  if (rank < 2) {
    const peer = 1 - rank;
    if (rank === 1) await sleep(50);
    const outs = sizes.map((n) => Tensor.empty([n], "u8"));
    const sent = rank === 0 ? msgs.map((m) => Tensor.fromHost(m, "u8")) : [];
    for (const x of sent) c.send(x, peer, { algorithm: "put" });
    if (rank === 1) outs.forEach((o) => c.recv(o, peer, { algorithm: "put" }));
    stream.synchronize();
    if (rank === 1)
      outs.forEach((o, i) =>
        assertSameBits(bytes(o.toHost()), bytes(msgs[i]!), `back-to-back put ${i}`, seed),
      );
  }
  if (rank === world - 1) await sleep(50);
  const xs = a2a.map((all) => Tensor.fromHost(all[rank]!, "u8"));
  const outs = xs.map(() => Tensor.empty([n2], "u8"));
  xs.forEach((x, i) => c.allToAll(x, outs[i]!, { algorithm: "pull" }));
  outs.forEach((o, i) =>
    assertSameBits(bytes(o.toHost()), allToAllWant(a2a[i]!), `back-to-back pull ${i}`, seed),
  );
}
// copy_engine in chunks of half the staging buffer: a group whose buffer is 8 MiB cuts messages into 4
// MiB chunks, so these take up to 4 (both halves reused, the sender waiting for the acks), both ways at
// once, back to back with the receiver 50 ms late, and replayed in a graph with new data.
{
  const small = await group.newGroupWith<GpuCollectives>(group.ranks, (g) =>
    GpuCollectives.create(g, 8 << 20),
  );
  const sc = small!.collectives;
  const sizes = [(13 << 20) + 5, 4 << 20, (9 << 20) + 1, 0];
  for (const [i, n] of sizes.entries()) {
    const m = sizes[(i + 1) % sizes.length]!;
    const all = everyRank("u8", (r) => (r % 2 === 0 ? n : m));
    const peer = rank ^ 1;
    if (peer >= world) continue;
    const [whole, out] = poisoned("u8", [all[peer]!.length]);
    sc.sendRecv(Tensor.fromHost(all[rank]!, "u8"), out, peer, { algorithm: "copy_engine" });
    small!.synchronize();
    const what = `copy_engine sendRecv ${n}/${m} bytes in 4 MiB chunks`;
    assertSameBits(bytes(out.toHost()), bytes(all[peer]!), what, seed);
    guardsIntact(whole, what);
  }
  const msgs = [(13 << 20) + 5, 3, 5 << 20].map((n) => bytesOf("u8", n));
  if (rank < 2 && world >= 2) {
    const peer = 1 - rank;
    if (rank === 1) await sleep(50);
    const outs = msgs.map((m) => Tensor.empty([m.length], "u8"));
    if (rank === 0)
      for (const m of msgs) sc.send(Tensor.fromHost(m, "u8"), peer, { algorithm: "copy_engine" });
    else for (const o of outs) sc.recv(o, peer, { algorithm: "copy_engine" });
    small!.synchronize();
    if (rank === 1)
      outs.forEach((o, i) =>
        assertSameBits(bytes(o.toHost()), bytes(msgs[i]!), `back-to-back copy_engine ${i}`, seed),
      );
  }
  const n = (11 << 20) + 7;
  const x = Tensor.empty([n], "u8");
  const out = Tensor.empty([n], "u8");
  const peer = rank ^ 1;
  const graph =
    peer < world
      ? Graph.capture(stream, () => void sc.sendRecv(x, out, peer, { algorithm: "copy_engine", stream }))
      : undefined;
  for (let replay = 0; replay < 3; replay++) {
    const all = everyRank("u8", () => n);
    if (!graph) continue;
    x.copyFrom(Tensor.fromHost(all[rank]!, "u8"));
    graph.launch(stream);
    small!.synchronize(stream);
    assertSameBits(bytes(out.toHost()), bytes(all[peer]!), `copy_engine graph replay ${replay}`, seed);
  }
  graph?.dispose();
  await small!.destroy();
}
if (rank === 0) console.log("sendRecv, send/recv: exact");

// allToAllV: uneven and zero counts, 1-D and 2-D, recvCounts given or learned.
function countMatrix(kind: string): number[][] {
  const r = HostTensor.rand([world * world], "i32", { seed, offset: draws++, low: 0, high: 9 })
    .raw as Int32Array;
  const m = Array.from({ length: world }, (_, s) =>
    Array.from({ length: world }, (_, d) => r[s * world + d]!),
  );
  if (kind === "silent") m[0]!.fill(0);
  if (kind === "sink") for (const row of m) row.fill(0).splice(world - 1, 1, 13);
  if (kind === "zero") for (const row of m) row.fill(0);
  return m;
}
const A2AV = ["copy_engine", "nccl", "auto"] as const;
/** allToAllV's count matrices, and its rows: dtype and shape of one row. */
const A2AV_KINDS = ["random", "silent", "sink", "zero"];
const A2AV_ROWS: [DType, number[]][] = [
  ["u8", []],
  ["f16", [3]],
  ["bf16", [4097]],
];
for (const algorithm of A2AV)
  for (const kind of A2AV_KINDS)
    for (const [dtype, rowShape] of A2AV_ROWS) {
      const m = countMatrix(kind);
      const rowElems = rowShape.reduce((a, b) => a * b, 1);
      const xs = everyRank(dtype, (r) => m[r]!.reduce((a, b) => a + b, 0) * rowElems);
      const received = m.map((row) => row[rank]!);
      const recvRows = received.reduce((a, b) => a + b, 0);
      const spare = 2;
      const [whole, out] = poisoned(dtype, [recvRows + spare, ...rowShape]);
      const x = Tensor.fromHost(xs[rank]!, dtype, {
        shape: [m[rank]!.reduce((a, b) => a + b, 0), ...rowShape],
      });
      const given = kind === "random" ? { recvCounts: received } : {};
      const got = c.allToAllV(x, out, m[rank]!, { ...given, algorithm });
      assert.deepEqual(got.recvCounts, received, `allToAllV ${algorithm} ${kind} recvCounts`);
      const want = new Uint8Array(out.nbytes);
      want.set(bytes(out.toHost()));
      const rowBytes = rowElems * dtypeInfo(dtype).bytes;
      let at = 0;
      for (let s = 0; s < world; s++) {
        const skip = m[s]!.slice(0, rank).reduce((a, b) => a + b, 0) * rowBytes;
        want.set(bytes(xs[s]!).subarray(skip, skip + received[s]! * rowBytes), at);
        at += received[s]! * rowBytes;
      }
      const gotBytes = bytes(out.toHost());
      const what = `allToAllV ${algorithm} ${kind} ${dtype}`;
      assertSameBits(gotBytes.subarray(0, at), want.subarray(0, at), what, seed);
      for (let i = at; i < gotBytes.length; i++)
        if (gotBytes[i] !== want[i]) assert.fail(`${what}: spare row written`);
      guardsIntact(whole, what);
    }
// Judged by the group: one rank's out too small, then one rank's recvCounts wrong (and for copy_engine
// one rank's x beyond the 128 MiB staging buffer); every rank refuses.
for (const algorithm of A2AV) {
  const m = countMatrix("random").map((row) => row.map((v) => v + 1));
  const xs = everyRank("u8", (r) => m[r]!.reduce((a, b) => a + b, 0));
  const need = m.reduce((a, row) => a + row[rank]!, 0);
  if (algorithm === "copy_engine") {
    const big = rank === world - 1 ? 129 << 20 : world;
    const [whole, out] = poisoned("u8", [big]);
    const before = out.toHost();
    assert.throws(
      () =>
        c.allToAllV(Tensor.zeros([big], "u8"), out, new Array<number>(world).fill(big / world), {
          algorithm,
        }),
      (e: unknown) => typed(e) && new RegExp(`rank ${world - 1}'s x needs`).test(String(e)),
      "allToAllV staging",
    );
    assertSameBits(out.toHost(), before, "allToAllV staging: nothing written", seed);
    guardsIntact(whole, "allToAllV staging");
  }
  for (const fault of ["small", "counts"]) {
    const [whole, out] = poisoned("u8", [fault === "small" && rank === world - 1 ? need - 1 : need]);
    const before = out.toHost();
    const wrong = m.map((row) => row[rank]!);
    if (fault === "counts" && rank === 0) wrong[0]! += 1;
    assert.throws(
      () => c.allToAllV(Tensor.fromHost(xs[rank]!, "u8"), out, m[rank]!, { recvCounts: wrong, algorithm }),
      (e: unknown) => typed(e) && new RegExp(`rank ${fault === "small" ? world - 1 : 0}`).test(String(e)),
      `allToAllV ${algorithm} ${fault}`,
    );
    assertSameBits(out.toHost(), before, `allToAllV ${fault}: nothing written`, seed);
    guardsIntact(whole, `allToAllV ${fault}`);
  }
}
if (rank === 0) console.log("allToAllV: exact, spare rows kept, group-judged errors on every rank");

// Counts on the device (algorithm pull, and auto given a counts tensor): the same rows as the host form;
// a CUDA graph replayed with new counts and rows in between (x and out of fixed capacity); refusals
// judged by the GPU alike on every rank: counts -1, nothing written, group.synchronize() throws, and the
// group goes on.
{
  const onDevice = (row: readonly number[]): Tensor => Tensor.fromHost(Int32Array.from(row), "i32");
  /** out's expected bytes: what every source sends this rank, packed, then `before` past it. */
  const expected = (
    m: number[][],
    xs: RawArray[],
    rowBytes: number,
    before: Uint8Array,
  ): [Uint8Array, number] => {
    const want = before.slice();
    let at = 0;
    for (let s = 0; s < world; s++) {
      const skip = m[s]!.slice(0, rank).reduce((a, b) => a + b, 0) * rowBytes;
      const n = m[s]![rank]! * rowBytes;
      want.set(bytes(xs[s]!).subarray(skip, skip + n), at);
      at += n;
    }
    return [want, at];
  };
  for (const algorithm of ["pull", "auto"] as const)
    for (const kind of A2AV_KINDS)
      for (const [dtype, rowShape] of A2AV_ROWS) {
        const m = countMatrix(kind);
        const rowElems = rowShape.reduce((a, b) => a * b, 1);
        const rowBytes = rowElems * dtypeInfo(dtype).bytes;
        // One spare row in x (sent by no one) and two in out (kept as they were).
        const xs = everyRank(dtype, (r) => (m[r]!.reduce((a, b) => a + b, 0) + 1) * rowElems);
        const recvRows = m.reduce((a, row) => a + row[rank]!, 0);
        const [whole, out] = poisoned(dtype, [recvRows + 2, ...rowShape]);
        const x = Tensor.fromHost(xs[rank]!, dtype, {
          shape: [m[rank]!.reduce((a, b) => a + b, 0) + 1, ...rowShape],
        });
        const counts = onDevice(m[rank]!);
        const before = bytes(out.toHost());
        const got = c.allToAllV(x, out, counts, { algorithm });
        group.synchronize();
        const what = `allToAllV on the device ${algorithm} ${kind} ${dtype}`;
        assert.deepEqual(
          Array.from(got.recvCounts.toHost() as Int32Array),
          m.map((row) => row[rank]!),
          `${what}: recvCounts`,
        );
        const [want] = expected(m, xs, rowBytes, before);
        assertSameBits(bytes(out.toHost()), want, what, seed);
        guardsIntact(whole, what);
        for (const t of [x, counts, got.recvCounts, whole]) t.dispose();
      }
  // A graph: x and out of fixed capacity, the counts and rows changed before each replay.
  {
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
    record();
    group.synchronize();
    const graph = Graph.capture(stream, record);
    for (let replay = 0; replay < 4; replay++) {
      const m = countMatrix(replay % 2 === 0 ? "random" : "sink");
      const xs = everyRank("bf16", () => capacity * rowElems);
      const inputs = [
        Tensor.fromHost(xs[rank]!, "bf16", { shape: [capacity, rowElems] }),
        onDevice(m[rank]!),
      ];
      x.copyFrom(inputs[0]!, stream);
      counts.copyFrom(inputs[1]!, stream);
      const before = bytes(out.toHost({ stream }));
      graph.launch(stream);
      group.synchronize(stream);
      for (const t of inputs) t.dispose();
      const what = `allToAllV on the device, graph replay ${replay}`;
      assert.deepEqual(
        Array.from(recv.toHost() as Int32Array),
        m.map((row) => row[rank]!),
        `${what}: recvCounts`,
      );
      const [want] = expected(m, xs, rowBytes, before);
      assertSameBits(bytes(out.toHost()), want, what, seed);
      guardsIntact(whole, what);
    }
    graph.dispose();
    for (const t of [x, counts, recv, whole]) t.dispose();
  }
  // Refused on the GPU: the last rank's counts add up to more rows than its x has; then one rank's out is
  // too small. Every rank: counts -1, out untouched, synchronize throws (once); the calls after go
  // through.
  for (const fault of ["rows", "out"] as const) {
    const m = countMatrix("random").map((row) => row.map((v) => v + 1));
    const sent = m[rank]!.reduce((a, b) => a + b, 0);
    const xRows = fault === "rows" && rank === world - 1 ? sent - 1 : sent;
    const need = m.reduce((a, row) => a + row[rank]!, 0);
    const [whole, out] = poisoned("u8", [fault === "out" && rank === 0 ? need - 1 : need]);
    const x = Tensor.fromHost(everyRank("u8", (r) => (r === rank ? xRows : 0))[rank]!, "u8");
    const counts = onDevice(m[rank]!);
    const before = out.toHost();
    const got = c.allToAllV(x, out, counts);
    const blamed = fault === "rows" ? world - 1 : 0;
    assert.throws(
      () => group.synchronize(),
      (e: unknown) => typed(e) && new RegExp(`refused on every rank: rank ${blamed}\\b`).test(String(e)),
      `allToAllV on the device, ${fault} refused`,
    );
    assert.deepEqual(Array.from(got.recvCounts.toHost() as Int32Array), new Array<number>(world).fill(-1));
    assertSameBits(out.toHost(), before, `allToAllV on the device, ${fault}: nothing written`, seed);
    guardsIntact(whole, `allToAllV on the device, ${fault}`);
    group.synchronize();
    for (const t of [x, counts, got.recvCounts, whole]) t.dispose();
  }
  if (rank === 0)
    console.log("allToAllV with counts on the device: exact, in a replayed graph, refusals on every rank");
}

// A CUDA graph of allToAll (both algorithms) and sendRecv, replayed with the inputs changed in between.
{
  const n = 3000 * world;
  const x = Tensor.empty([n], "bf16");
  const peer = rank ^ 1;
  const pairs = peer < world;
  const p2pIn = Tensor.empty([513], "f32");
  const outs = A2A.map(() => Tensor.empty([n], "bf16"));
  const p2pOuts = P2P.map(() => Tensor.empty([513], "f32"));
  const graph = Graph.capture(stream, () => {
    A2A.forEach((algorithm, i) => c.allToAll(x, outs[i]!, { algorithm, stream }));
    if (pairs) P2P.forEach((algorithm, i) => c.sendRecv(p2pIn, p2pOuts[i]!, peer, { algorithm, stream }));
  });
  for (let replay = 0; replay < 6; replay++) {
    const xs = everyRank("bf16", () => n);
    const ps = everyRank("f32", () => 513);
    x.copyFrom(Tensor.fromHost(xs[rank]!, "bf16"));
    p2pIn.copyFrom(Tensor.fromHost(ps[rank]!, "f32"));
    graph.launch();
    stream.synchronize();
    for (const [i, o] of outs.entries())
      assertSameBits(bytes(o.toHost()), allToAllWant(xs), `graph replay ${replay} ${A2A[i]}`, seed);
    if (pairs)
      for (const [i, o] of p2pOuts.entries())
        assertSameBits(
          bytes(o.toHost()),
          bytes(ps[peer]!),
          `graph replay ${replay} sendRecv ${P2P[i]}`,
          seed,
        );
  }
  graph.dispose();
}
if (rank === 0) console.log("graph replays with changed inputs: exact");

// A straggler, then 1000 calls alternating sizes, peers, algorithms and kinds (200 when ranks share a GPU:
// there every call waits for the GPU's time slices).
const CALLS = readEnvVar("SYMMKIT_SHARE_GPUS") ? 200 : 1000;
if (rank === world - 1) await sleep(50);
for (let i = 0; i < CALLS; i++) {
  const n = [1, 7, 4097, 65536][i % 4]!;
  if (i % 5 === 4) {
    const m = countMatrix(i % 2 === 0 ? "random" : "silent");
    const xs = everyRank("u8", (r) => m[r]!.reduce((a, b) => a + b, 0));
    const out = Tensor.empty([m.reduce((a, row) => a + row[rank]!, 0)], "u8");
    const x = Tensor.fromHost(xs[rank]!, "u8");
    c.allToAllV(x, out, m[rank]!);
    stream.synchronize();
    for (const t of [x, out]) t.dispose();
    continue;
  }
  if (i % 5 === 2) {
    exchangePair("u8", n, [7, 70_000, 1][i % 3]!, P2P[i % P2P.length]!);
    continue;
  }
  checkAllToAll(i % 3 === 0 ? "f16" : "u8", n, A2A[i % 3]!);
}
if (rank === 0) console.log(`straggler and ${CALLS} alternating calls: exact`);

// Bad input: typed errors, nothing written.
{
  const [whole, out] = poisoned("f32", [8 * world]);
  const before = out.toHost();
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
  for (const [what, call] of bad) {
    assert.throws(call, typed, what);
    assertSameBits(out.toHost(), before, `${what}: nothing written`, seed);
  }
  guardsIntact(whole, "bad inputs");
}
c.barrier();
stream.synchronize();
console.log(`gpu exchange ok rank ${rank}`);
await group.destroy();
