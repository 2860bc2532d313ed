// One rank of the GPU collectives check (test/gpu/distributed.test.ts): symmkit's all-reduce (one-shot,
// two-shot, lamport), all-gather (pull, ll, copy engine) and reduce-scatter (pull, lamport, copy engine)
// against the host reference bit for bit (f32 accumulation in rank order), against NCCL on exactly
// representable data, bitwise identical on every rank, with poisoned outputs and guard regions;
// misaligned outputs, symmetric inputs, in-place calls, inputs holding the mailbox sentinel, graph
// capture and replay, 1000 calls alternating sizes and algorithms, a rank delayed 50 ms, and bad inputs.
// Sizes up to 1 GiB: collectives-large.ts. Every size holds at any world size.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { init } from "../../../src/init.js";
import { InvalidArgumentError } from "../../../src/errors.js";
import { reduceInto } from "../../../src/ops/coll/reduce.js";
import type { GpuAllReduceAlgorithm } from "../../../src/ops/coll/registry.js";
import { AUTO_ALGORITHMS } from "../../../src/ops/coll/registry.js";
import type { ReduceOp } from "../../../src/ops/validate.js";
import { Device, deviceCount } from "../../../src/runtime/device.js";
import { decodeToF32, dtypeInfo, encode, type DType, type RawArray } from "../../../src/runtime/dtype.js";
import { Graph } from "../../../src/runtime/graph.js";
import { defaultStream } from "../../../src/runtime/stream.js";
import { freshSeed, Tensor } from "../../../src/runtime/tensor.js";
import { readEnvVar } from "../../../src/settings.js";
import { readDistEnv } from "../../../src/distributed/env.js";
import { sectionTimer } from "./guards.js";

/** The largest input below: a reduce-scatter of 1 000 003 f32 per rank from every rank, staged whole. */
const LARGEST = 4 * 1_000_003 * readDistEnv().worldSize;
/** 16 MiB, or what the largest input needs (beyond world 4), in whole MiB. */
const STAGING = Math.max(16, Math.ceil(LARGEST / (1 << 20))) << 20;
const group = await init({ backend: "cuda", stagingBytes: STAGING });
const c = group.collectives;
const { rank, worldSize: world } = group;
if (rank === 0) await group.store.set("seed", String(readEnvVar("SYMMKIT_TEST_SEED") ?? freshSeed()));
const seed = BigInt((await group.store.get("seed")).toString());
if (rank === 0) console.log(`seed ${seed} (replay with SYMMKIT_TEST_SEED=${seed})`);
const lap = sectionTimer(rank);
const GUARD = 64;

/** Rank r's input `salt`, uniform in [-2, 2): drawn on the GPU (the host's Philox would take seconds for
 * every rank's world x 1M elements at world 8), then brought to the host for the reference. */
function hostInput(dtype: DType, n: number, r: number, salt = 0): RawArray {
  const t = Tensor.rand([n], dtype, { seed, offset: BigInt(r + 100 * salt) << 32n, low: -2, high: 2 });
  const raw = t.toHost();
  t.dispose();
  return raw;
}
const exactInput = (dtype: DType, n: number, r: number): RawArray =>
  encode(
    dtype,
    Array.from({ length: n }, (_, i) => ((i * 37 + r * 101) % 64) - 32),
  );

function reference(dtype: DType, op: ReduceOp, inputs: RawArray[], at: number, n: number): RawArray {
  const out = encode(dtype, new Float32Array(n));
  reduceInto(dtype, op, inputs, at, out, 0, n);
  return out;
}

function same(got: RawArray, want: RawArray, what: string): void {
  for (let i = 0; i < want.length; i++)
    if (!Object.is(got[i], want[i]))
      assert.fail(`${what}: element ${i} is ${got[i]}, expected ${want[i]} (seed ${seed})`);
}

/** A NaN-poisoned buffer with guards; returns [whole, the n elements inside]. */
function poisoned(dtype: DType, n: number, offset = 0): [Tensor, Tensor] {
  const whole = Tensor.full([n + 2 * GUARD + offset], NaN, dtype);
  return [whole, whole.slice(GUARD + offset, GUARD + offset + n)];
}

function guardsIntact(whole: Tensor, n: number, offset: number, what: string): void {
  const all = whole.toHost();
  const nan = encode(whole.dtype, [NaN])[0];
  for (let i = 0; i < all.length; i++) {
    if (i >= GUARD + offset && i < GUARD + offset + n) continue;
    if (!Object.is(all[i], nan)) assert.fail(`${what}: guard element ${i} overwritten`);
  }
}

let agreed = 0;
async function agree(t: Tensor, what: string): Promise<void> {
  const raw = t.toHost();
  const h = crypto
    .createHash("sha256")
    .update(new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength))
    .digest("hex");
  const key = `agree/${agreed++}`;
  await group.store.set(`${key}/${rank}`, h);
  for (let r = 0; r < world; r++)
    assert.equal((await group.store.get(`${key}/${r}`)).toString(), h, `${what}: rank ${r} differs`);
}

/** Mailbox algorithms take what fits a slot (what one rank sends one peer). */
const fits = (bytesPerPeer: number): boolean => bytesPerPeer <= c.mailboxSlotBytes;
/** lamport_two_shot sends each peer a reduce-scatter and an all-gather chunk of 16-byte groups. */
const fitsTwoShot = (bytes: number): boolean => fits(32 * Math.ceil(Math.ceil(bytes / 16) / world));

for (const dtype of ["f32", "bf16", "f16"] as const) {
  for (const n of [1, 7, 4097, 1_000_003]) {
    const bytes = n * dtypeInfo(dtype).bytes;
    const inputs = Array.from({ length: world }, (_, r) => hostInput(dtype, n, r));
    const x = Tensor.fromHost(inputs[rank]!, dtype);
    const algorithms: GpuAllReduceAlgorithm[] = ["one_shot", "two_shot"];
    if (fits(bytes)) algorithms.push("lamport");
    if (fitsTwoShot(bytes)) algorithms.push("lamport_two_shot");
    for (const algorithm of algorithms) {
      for (const op of n === 4097 ? (["sum", "max", "min"] as const) : (["sum"] as const)) {
        for (const offset of n === 4097 ? [0, 1] : [0]) {
          const [whole, out] = poisoned(dtype, n, offset);
          c.allReduce(x, { algorithm, op, output: out });
          group.synchronize();
          const what = `allReduce ${algorithm} ${op} ${dtype} n=${n} offset ${offset}`;
          same(out.toHost(), reference(dtype, op, inputs, 0, n), what);
          guardsIntact(whole, n, offset, what);
          await agree(out, what);
          whole.dispose();
        }
      }
    }
    const [gWhole, gathered] = poisoned(dtype, n * world);
    c.allGather(x, gathered, { algorithm: "pull" });
    group.synchronize();
    const g = gathered.toHost();
    inputs.forEach((inp, r) =>
      same(g.subarray(r * n, (r + 1) * n), inp, `allGather ${dtype} n=${n} from rank ${r}`),
    );
    guardsIntact(gWhole, n * world, 0, `allGather ${dtype} n=${n}`);
    if (fits(bytes)) {
      for (const offset of [0, 1]) {
        const [llWhole, llGathered] = poisoned(dtype, n * world, offset);
        c.allGather(x, llGathered, { algorithm: "ll" });
        group.synchronize();
        same(llGathered.toHost(), g, `ll allGather ${dtype} n=${n} offset ${offset}`);
        guardsIntact(llWhole, n * world, offset, `ll allGather ${dtype} n=${n} offset ${offset}`);
        llWhole.dispose();
      }
    }
    // The copy-engine all-gather, with its progress flags (poisoned first: the call zeroes, then raises).
    const [ceWhole, ceGathered] = poisoned(dtype, n * world);
    const progress = Tensor.full([world + 1], 7, "u32");
    c.allGather(x, ceGathered, { algorithm: "copy_engine", progressFlags: progress });
    group.synchronize();
    same(ceGathered.toHost(), g, `copy-engine allGather ${dtype} n=${n}`);
    guardsIntact(ceWhole, n * world, 0, `copy-engine allGather ${dtype} n=${n}`);
    assert.deepEqual([...progress.toHost()], [...(Array(world).fill(1) as number[]), 7], "progress flags");
    for (const t of [ceWhole, progress]) t.dispose();
    const big = Array.from({ length: world }, (_, r) => hostInput(dtype, n * world, r, 1));
    const bigX = Tensor.fromHost(big[rank]!, dtype);
    const rsWant = reference(dtype, "sum", big, rank * n, n);
    for (const algorithm of [
      "pull",
      "copy_engine",
      ...(fits(bytes) ? (["lamport"] as const) : []),
    ] as const) {
      for (const offset of n === 4097 ? [0, 1] : [0]) {
        const [sWhole, scattered] = poisoned(dtype, n, offset);
        c.reduceScatter(bigX, scattered, { algorithm });
        group.synchronize();
        const what = `reduceScatter ${algorithm} ${dtype} n=${n} offset ${offset}`;
        same(scattered.toHost(), rsWant, what);
        guardsIntact(sWhole, n, offset, what);
        sWhole.dispose();
      }
      if (n === 4097) {
        // In place: the output is this rank's own chunk of the input.
        const y = Tensor.fromHost(big[rank]!, dtype);
        c.reduceScatter(y, y.slice(rank * n, (rank + 1) * n), { algorithm });
        group.synchronize();
        same(y.toHost().subarray(rank * n, (rank + 1) * n), rsWant, `reduceScatter ${algorithm} in place`);
        y.dispose();
      }
    }
    for (const t of [x, bigX, gWhole]) t.dispose();
  }
}
console.log(
  "all-reduce (one-shot, two-shot, lamport; sum, max, min), all-gather (pull, ll, copy engine), reduce-scatter (pull, lamport, copy engine; in place): bit for bit with the reference, guards intact, ranks agree",
);
lap("every size, dtype, op and algorithm");

// Lamport's sentinel (all bits set, a NaN) in the input travels as another NaN: the sum is NaN there and
// exact elsewhere, on every rank; in place on a plain tensor.
for (const dtype of ["f32", "bf16", "f16"] as const) {
  const n = 4099;
  const inputs = Array.from({ length: world }, (_, r) => {
    const a = exactInput(dtype, n, r);
    for (let i = r; i < n; i += 97) a[i] = dtype === "f32" ? 0xffffffff : 0xffff;
    return a;
  });
  const want = decodeToF32(dtype, reference(dtype, "sum", inputs, 0, n));
  for (const algorithm of ["lamport", "lamport_two_shot"] as const) {
    const x = Tensor.fromHost(inputs[rank]!, dtype);
    c.allReduce(x, { algorithm, output: x });
    group.synchronize();
    const got = decodeToF32(dtype, x.toHost());
    const what = `${algorithm} ${dtype} with sentinels`;
    for (let i = 0; i < n; i++)
      if (!Object.is(got[i], want[i])) assert.fail(`${what}: element ${i} is ${got[i]}, expected ${want[i]}`);
    await agree(x, what);
    x.dispose();
  }
}
console.log(
  "lamport, lamport two-shot: inputs holding the sentinel give NaN where they should, exact sums elsewhere, in place",
);
lap("the mailbox sentinel");

/** Bit for bit, except after NCCL, which reduces in its own order: within bf16 rounding then. */
function sameUnlessNccl(algorithm: string, got: RawArray, want: RawArray, what: string): void {
  if (algorithm !== "nccl") return same(got, want, what);
  const [a, b] = [decodeToF32("bf16", got), decodeToF32("bf16", want)];
  // NCCL rounds to bf16 after each of its world - 1 additions, partial sums growing with the world.
  const tol = 0.02 * world * Math.max(1, world - 1);
  for (let i = 0; i < a.length; i++)
    if (Math.abs(a[i]! - b[i]!) > tol)
      assert.fail(`${what} (nccl): element ${i} is ${a[i]}, expected ${b[i]}`);
}

// auto, from this machine's tune table when there is one (the package ships H200 tables), else the
// built-in rules: every size it picks for gives the reference.
{
  if (rank === 0) console.log(`auto's table: ${c.tuneTable ? c.tuneTable.file : "none, built-in rules"}`);
  for (const n of [7, 4097, 300_001, 3_000_000]) {
    const inputs = Array.from({ length: world }, (_, r) => hostInput("bf16", n * world, r, 2));
    const x = Tensor.fromHost(inputs[rank]!, "bf16");
    const want = reference("bf16", "sum", inputs, 0, n * world);
    const ar = c.allReduce(x).toHost();
    sameUnlessNccl(
      c.autoAlgorithm("all-reduce", x.nbytes, x.nbytes),
      ar,
      want,
      `auto allReduce n=${n * world}`,
    );
    const gathered = c.allGather(x.slice(0, n), Tensor.empty([n * world], "bf16"));
    const scattered = c.reduceScatter(x, Tensor.empty([n], "bf16"));
    group.synchronize();
    const g = gathered.toHost();
    inputs.forEach((inp, r) =>
      same(g.subarray(r * n, (r + 1) * n), inp.subarray(0, n), `auto allGather n=${n}`),
    );
    const rsWant = reference("bf16", "sum", inputs, rank * n, n);
    const rsAlgorithm = c.autoAlgorithm("reduce-scatter", scattered.nbytes, x.nbytes);
    sameUnlessNccl(rsAlgorithm, scattered.toHost(), rsWant, `auto reduceScatter n=${n}`);
    for (const t of [x, gathered, scattered]) t.dispose();
  }
  console.log("auto: all-reduce, all-gather and reduce-scatter correct at every size tried");
}
lap("auto");

// NCCL on exactly representable data gives the same bits; a symmetric input goes without a copy.
for (const dtype of ["f32", "bf16"] as const) {
  const n = 65536 + 5;
  const sym = await group.symmetric.empty([n], dtype);
  sym.tensor.copyFrom(Tensor.fromHost(exactInput(dtype, n, rank), dtype));
  const ours = c.allReduce(sym, { algorithm: "two_shot" });
  const theirs = c.allReduce(sym.tensor, { algorithm: "nccl" });
  group.synchronize();
  (await group.nccl()).synchronize();
  same(ours.toHost(), theirs.toHost(), `symmetric input vs NCCL, ${dtype}`);
  await group.barrier(); // every rank has read its input before any rank reduces in place
  c.allReduce(sym, { algorithm: "two_shot", output: sym.tensor });
  group.synchronize();
  same(sym.tensor.toHost(), theirs.toHost(), `in-place two-shot on a symmetric tensor, ${dtype}`);
  // In place, one-shot would overwrite what peers still read: it stages the input instead. Repeated, so
  // that a race would show.
  const exact = Tensor.fromHost(exactInput(dtype, n, rank), dtype);
  for (let i = 0; i < 20; i++) {
    await group.barrier();
    sym.tensor.copyFrom(exact);
    group.synchronize();
    await group.barrier();
    c.allReduce(sym, { algorithm: "one_shot", output: sym.tensor });
    group.synchronize();
    same(
      sym.tensor.toHost(),
      theirs.toHost(),
      `in-place one-shot on a symmetric tensor, ${dtype}, call ${i}`,
    );
  }
  exact.dispose();
  await sym.dispose();
}
console.log("NCCL agrees bit for bit on exact data; symmetric inputs work without a copy");
lap("NCCL, symmetric inputs, in place");

// Several collectives captured in one graph, replayed.
{
  const n = 10_001;
  const stream = defaultStream(group.device);
  const inputs = Array.from({ length: world }, (_, r) => exactInput("bf16", n, r));
  const x = Tensor.fromHost(inputs[rank]!, "bf16");
  const a = Tensor.empty([n], "bf16");
  const b = Tensor.empty([n], "bf16");
  const gathered = Tensor.empty([n * world], "bf16");
  const ceGathered = Tensor.empty([n * world], "bf16");
  const progress = Tensor.empty([world], "u32");
  const l = Tensor.empty([n], "bf16");
  const l2 = Tensor.empty([n], "bf16");
  const llGathered = Tensor.empty([n * world], "bf16");
  const scattered = Tensor.empty([Math.floor(n / world)], "bf16");
  const ceScattered = Tensor.empty([Math.floor(n / world)], "bf16");
  const head = x.slice(0, scattered.numel * world);
  const graph = Graph.capture(stream, () => {
    c.allReduce(x, { algorithm: "one_shot", output: a, stream });
    c.allGather(x, gathered, { algorithm: "pull", stream });
    c.allReduce(x, { algorithm: "lamport", output: l, stream });
    c.allReduce(x, { algorithm: "lamport_two_shot", output: l2, stream });
    c.allReduce(x, { algorithm: "two_shot", output: b, stream });
    c.allGather(x, ceGathered, { stream, algorithm: "copy_engine", progressFlags: progress });
    c.allGather(x, llGathered, { algorithm: "ll", stream });
    c.reduceScatter(head, scattered, { algorithm: "lamport", stream });
    c.reduceScatter(head, ceScattered, { algorithm: "copy_engine", stream });
  });
  for (let r = 0; r < 4; r++) {
    for (const t of [a, b, l, l2, ceGathered, llGathered, scattered, ceScattered, progress]) t.fill(0);
    graph.launch();
    group.synchronize(stream);
    const want = reference("bf16", "sum", inputs, 0, n);
    same(a.toHost(), want, `graph replay ${r}: one-shot`);
    same(b.toHost(), want, `graph replay ${r}: two-shot`);
    same(l.toHost(), want, `graph replay ${r}: lamport`);
    same(l2.toHost(), want, `graph replay ${r}: lamport two-shot`);
    same(gathered.toHost().subarray(0, n), inputs[0]!, `graph replay ${r}: all-gather`);
    same(ceGathered.toHost(), gathered.toHost(), `graph replay ${r}: copy-engine all-gather`);
    same(llGathered.toHost(), gathered.toHost(), `graph replay ${r}: ll all-gather`);
    same(
      scattered.toHost(),
      reference("bf16", "sum", inputs, rank * scattered.numel, scattered.numel),
      `graph replay ${r}: lamport reduce-scatter`,
    );
    same(ceScattered.toHost(), scattered.toHost(), `graph replay ${r}: copy-engine reduce-scatter`);
    assert.deepEqual([...progress.toHost()], Array(world).fill(1), `graph replay ${r}: flags`);
  }
  graph.dispose();
  console.log("graph of nine collectives replayed 4 times: correct");
}
lap("graph");

// 1000 calls in a row, alternating sizes and algorithms, checked every time; a rank delayed now and then.
{
  const sizes = [3, 4096, 777, 20_000, 65_537];
  const expected = sizes.map((n) =>
    reference(
      "f32",
      "sum",
      Array.from({ length: world }, (_, r) => exactInput("f32", n, r)),
      0,
      n,
    ),
  );
  const xs = sizes.map((n) => Tensor.fromHost(exactInput("f32", n, rank), "f32"));
  const outs = sizes.map((n) => Tensor.empty([n], "f32"));
  const gathers = sizes.map((n) => Tensor.empty([n * world], "f32"));
  const gatheredWant = sizes.map((n) => {
    const all = new Float32Array(n * world);
    for (let r = 0; r < world; r++) all.set(exactInput("f32", n, r) as Float32Array, r * n);
    return all;
  });
  // Reduce-scatters in between, copy engine and pull in turn: their staging slots outlive the kernel.
  const rsN = 1003;
  const rsIn = Tensor.fromHost(exactInput("f32", rsN * world, rank), "f32");
  const rsOut = Tensor.full([rsN], NaN, "f32");
  const rsInputs = Array.from({ length: world }, (_, r) => exactInput("f32", rsN * world, r));
  const rsWant = reference("f32", "sum", rsInputs, rank * rsN, rsN);
  for (let i = 0; i < 1000; i++) {
    const k = i % sizes.length;
    if (rank === world - 1 && i % 100 === 0) await sleep(50);
    const algorithm = (["one_shot", "two_shot", "lamport", "lamport_two_shot"] as const)[i % 4]!;
    c.allReduce(xs[k]!, { algorithm, output: outs[k]! });
    // ll all-gathers in between: the mailbox protocols keep their own call counts.
    if (i % 7 === 0) c.allGather(xs[k]!, gathers[k]!, { algorithm: "ll" });
    if (i % 3 === 1) c.reduceScatter(rsIn, rsOut, { algorithm: i % 2 ? "copy_engine" : "pull" });
    if (i % 10 === 9 || rank === world - 1) {
      group.synchronize();
      same(outs[k]!.toHost(), expected[k]!, `call ${i} (${algorithm})`);
      if (i >= 1) same(rsOut.toHost(), rsWant, `call ${i} (reduce-scatter)`);
      if (i % 7 === 0) same(gathers[k]!.toHost(), gatheredWant[k]!, `call ${i} (ll all-gather)`);
    }
  }
  group.synchronize();
  console.log(
    "1000 calls alternating sizes and algorithms (one-shot, two-shot, lamport, lamport two-shot, ll; copy-engine and pull reduce-scatter), a rank delayed 50 ms every 100: correct",
  );
}
lap("1000 alternating calls");

// Bad input: typed errors, nothing written.
{
  const out = Tensor.full([16], 5, "f32");
  const rejects = (f: () => unknown, pattern: RegExp): void =>
    assert.throws(
      f,
      (e: unknown) => e instanceof InvalidArgumentError && pattern.test(e.message),
      String(pattern),
    );
  rejects(() => c.allReduce(Tensor.zeros([16], "bf16"), { output: out }), /input is bf16 but output is f32/);
  rejects(() => c.allReduce(Tensor.zeros([15], "f32"), { output: out }), /output must have 15 elements/);
  rejects(() => c.allReduce(Tensor.zeros([16], "i32")), /reductions support f32, f16, bf16, not i32/);
  const beyond = new RegExp(`exceed the ${STAGING}-byte`);
  // 4 MiB past the staging buffer.
  const over = (STAGING >> 2) + (1 << 20);
  rejects(
    () =>
      c.allReduce(Tensor.zeros([over], "f32"), {
        algorithm: "two_shot",
        output: Tensor.empty([over], "f32"),
      }),
    beyond,
  );
  // A plain input larger than the staging buffer and the mailbox: auto runs it in pieces, with a
  // rank-order algorithm (never NCCL), and the sum is the rank-order one: small integers, exact.
  assert.ok(AUTO_ALGORITHMS["all-reduce"].includes(c.autoAlgorithm("all-reduce", 16 * over, 16 * over)));
  {
    const n = 4 * over + 3;
    const big = Tensor.full([n], rank + 1, "f32");
    const sum = c.allReduce(big).toHost() as Float32Array;
    const want = (world * (world + 1)) / 2;
    const i = sum.findIndex((v) => v !== want);
    assert.equal(i, -1, `auto all-reduce in pieces: element ${i} is ${sum[i]}, expected ${want}`);
    big.dispose();
  }
  // The copy-engine reduce-scatter receives world chunks into the staging buffer, even from a small input.
  const chunk = Math.ceil(STAGING / (4 * world)) + 4;
  const symIn = await group.symmetric.empty([chunk * world], "f32");
  rejects(() => c.reduceScatter(symIn, Tensor.empty([chunk], "f32"), { algorithm: "copy_engine" }), beyond);
  assert.notEqual(c.autoAlgorithm("reduce-scatter", chunk * 4, 0), "copy_engine");
  rejects(
    () => c.allReduce(Tensor.zeros([(c.mailboxSlotBytes >> 2) + 1], "f32"), { algorithm: "lamport" }),
    /exceed the \d+-byte mailbox slot/,
  );
  if (deviceCount() > 1) {
    const other = Device.get((group.device.ordinal + 1) % deviceCount());
    rejects(() => c.allReduce(Tensor.zeros([16], "f32", { device: other })), /must be on cuda:/);
    Device.setDefault(group.device);
  }
  group.synchronize();
  assert.deepEqual([...out.toHost()], new Array(16).fill(5), "a rejected call wrote nothing");
  await symIn.dispose();
  console.log("bad inputs: typed errors, nothing written");
}
lap("bad input");

await group.destroy();
console.log("gpu collectives ok");
