// One rank of the GPU collectives check (test/gpu/distributed.test.ts): symmkit's all-reduce (one-shot,
// two-shot), all-gather and reduce-scatter against the host reference bit for bit (f32 accumulation in
// rank order), against NCCL on exactly representable data, bitwise identical on every rank, with
// poisoned outputs and guard regions; misaligned outputs, symmetric inputs, graph capture and replay,
// 1000 calls alternating sizes and algorithms, a rank delayed 50 ms, and bad inputs.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { init } from "../../../src/init.js";
import { InvalidArgumentError } from "../../../src/errors.js";
import { reduceInto } from "../../../src/ops/reduce.js";
import type { ReduceOp } from "../../../src/ops/validate.js";
import { Device, deviceCount } from "../../../src/runtime/device.js";
import { encode, type DType, type RawArray } from "../../../src/runtime/dtype.js";
import { Graph } from "../../../src/runtime/graph.js";
import { hostUniform } from "../../../src/runtime/random.js";
import { defaultStream } from "../../../src/runtime/stream.js";
import { freshSeed, Tensor } from "../../../src/runtime/tensor.js";

const group = await init({ backend: "cuda", stagingBytes: 16 << 20 });
const c = group.collectives;
const { rank, worldSize: world } = group;
if (rank === 0) await group.store.set("seed", String(process.env.SYMMKIT_TEST_SEED ?? freshSeed()));
const seed = BigInt((await group.store.get("seed")).toString());
if (rank === 0) console.log(`seed ${seed} (replay with SYMMKIT_TEST_SEED=${seed})`);
const GUARD = 64;

const hostInput = (dtype: DType, n: number, r: number, salt = 0): RawArray =>
  encode(dtype, hostUniform(n, seed, r + 100 * salt, -2, 2));
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

for (const dtype of ["f32", "bf16", "f16"] as const) {
  for (const n of [1, 7, 4097, 1_000_003]) {
    const inputs = Array.from({ length: world }, (_, r) => hostInput(dtype, n, r));
    const x = Tensor.fromHost(inputs[rank]!, dtype);
    for (const algorithm of ["one_shot", "two_shot"] as const) {
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
    c.allGather(x, gathered);
    group.synchronize();
    const g = gathered.toHost();
    inputs.forEach((inp, r) =>
      same(g.subarray(r * n, (r + 1) * n), inp, `allGather ${dtype} n=${n} from rank ${r}`),
    );
    guardsIntact(gWhole, n * world, 0, `allGather ${dtype} n=${n}`);
    // The copy-engine all-gather, with its progress flags (poisoned first: the call zeroes, then raises).
    const [ceWhole, ceGathered] = poisoned(dtype, n * world);
    const progress = Tensor.full([world + 1], 7, "u32");
    c.allGather(x, ceGathered, { algorithm: "copy_engine", progressFlags: progress });
    group.synchronize();
    same(ceGathered.toHost(), g, `copy-engine allGather ${dtype} n=${n}`);
    guardsIntact(ceWhole, n * world, 0, `copy-engine allGather ${dtype} n=${n}`);
    assert.deepEqual(
      [...(progress.toHost() as Uint32Array)],
      [...(Array(world).fill(1) as number[]), 7],
      "progress flags",
    );
    for (const t of [ceWhole, progress]) t.dispose();
    const big = Array.from({ length: world }, (_, r) => hostInput(dtype, n * world, r, 1));
    const [sWhole, scattered] = poisoned(dtype, n);
    c.reduceScatter(Tensor.fromHost(big[rank]!, dtype), scattered);
    group.synchronize();
    same(scattered.toHost(), reference(dtype, "sum", big, rank * n, n), `reduceScatter ${dtype} n=${n}`);
    guardsIntact(sWhole, n, 0, `reduceScatter ${dtype} n=${n}`);
    for (const t of [x, gWhole, sWhole]) t.dispose();
  }
}
console.log(
  "all-reduce (one-shot, two-shot; sum, max, min), all-gather, reduce-scatter: bit for bit with the reference, guards intact, ranks agree",
);

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
  await sym.dispose();
}
console.log("NCCL agrees bit for bit on exact data; symmetric inputs work without a copy");

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
  const graph = Graph.capture(stream, () => {
    c.allReduce(x, { algorithm: "one_shot", output: a, stream });
    c.allGather(x, gathered, { stream });
    c.allReduce(x, { algorithm: "two_shot", output: b, stream });
    c.allGather(x, ceGathered, { stream, algorithm: "copy_engine", progressFlags: progress });
  });
  for (let r = 0; r < 3; r++) {
    a.fill(0);
    b.fill(0);
    ceGathered.fill(0);
    progress.fill(0);
    graph.launch();
    group.synchronize(stream);
    const want = reference("bf16", "sum", inputs, 0, n);
    same(a.toHost(), want, `graph replay ${r}: one-shot`);
    same(b.toHost(), want, `graph replay ${r}: two-shot`);
    same(gathered.toHost().subarray(0, n), inputs[0]!, `graph replay ${r}: all-gather`);
    same(ceGathered.toHost(), gathered.toHost(), `graph replay ${r}: copy-engine all-gather`);
    assert.deepEqual(
      [...(progress.toHost() as Uint32Array)],
      Array(world).fill(1),
      `graph replay ${r}: flags`,
    );
  }
  graph.dispose();
  console.log("graph of four collectives replayed 3 times: correct");
}

// 1000 calls in a row, alternating sizes and algorithms, checked every time; a rank delayed now and then.
{
  const sizes = [3, 4096, 777, 20_000];
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
  for (let i = 0; i < 1000; i++) {
    const k = i % sizes.length;
    if (rank === world - 1 && i % 100 === 0) await sleep(50);
    c.allReduce(xs[k]!, { algorithm: i % 3 === 0 ? "one_shot" : "two_shot", output: outs[k]! });
    if (i % 10 === 9 || rank === world - 1) {
      group.synchronize();
      same(outs[k]!.toHost(), expected[k]!, `call ${i}`);
    }
  }
  group.synchronize();
  console.log("1000 calls alternating sizes and algorithms, a rank delayed 50 ms every 100: correct");
}

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
  rejects(
    () => c.allReduce(Tensor.zeros([5 << 20], "f32"), { output: Tensor.empty([5 << 20], "f32") }),
    /exceed the 16777216-byte/,
  );
  if (deviceCount() > 1) {
    const other = Device.get((group.device.ordinal + 1) % deviceCount());
    rejects(() => c.allReduce(Tensor.zeros([16], "f32", { device: other })), /must be on cuda:/);
    Device.setDefault(group.device);
  }
  group.synchronize();
  assert.deepEqual(
    [...(out.toHost() as Float32Array)],
    new Array(16).fill(5),
    "a rejected call wrote nothing",
  );
  console.log("bad inputs: typed errors, nothing written");
}

await group.destroy();
console.log("gpu collectives ok");
