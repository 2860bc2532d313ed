// One rank of the large-size collectives check (test/gpu/distributed.test.ts): every algorithm that can
// run, NCCL included, at every power of two from 1 KiB to SYMMKIT_TEST_LARGE_MAX (default 1 GiB; bytes
// per rank: the all-reduce's input, the all-gather's output, the reduce-scatter's input), bf16, on plain
// inputs exactly representable in the sum: every output equal bit for bit to the closed-form result,
// guard regions intact. Inputs repeat with period 64, so the host builds them and the expected outputs
// by tiling and compares with memcmp.
import assert from "node:assert/strict";
import { init } from "../../../src/init.js";
import { algorithmRecord, TUNABLE_ALGORITHMS } from "../../../src/ops/coll/registry.js";
import { readDistEnv } from "../../../src/distributed/env.js";
import type { TunedCollective } from "../../../src/ops/tune-table.js";
import { encode, type RawArray } from "../../../src/runtime/dtype.js";
import { Tensor } from "../../../src/runtime/tensor.js";
import { readEnvVar } from "../../../src/settings.js";
import { sectionTimer } from "./guards.js";

const MAX = readEnvVar("SYMMKIT_TEST_LARGE_MAX");
const WORLD = readDistEnv().worldSize;
/** What the records measure of this program's call of `collective` at `bytes` per rank (see above): the
 * call's bytes (all-reduce and all-gather input, reduce-scatter output) and its plain input's. */
function measure(collective: TunedCollective, bytes: number): [number, number] {
  const part = 2 * Math.floor(bytes / 2 / WORLD);
  if (collective === "all-reduce") return [bytes, bytes];
  return collective === "all-gather" ? [part, part] : [part, part * WORLD];
}
// A staging buffer that every algorithm's record says holds its call at MAX (a plain input staged whole).
const stagingBytes = Math.max(
  MAX,
  ...Object.entries(TUNABLE_ALGORITHMS).flatMap(([collective, names]) =>
    names.map((a) => {
      const col = collective as TunedCollective;
      return algorithmRecord(col, a).stagingBytes?.(...measure(col, MAX), WORLD) ?? 0;
    }),
  ),
);
const group = await init({ backend: "cuda", stagingBytes });
const c = group.collectives;
const { rank, worldSize: world } = group;
const lap = sectionTimer(rank);
const PERIOD = 64;
const GUARD = 64;

/** Rank r's element i: an integer in [-32, 32), period 64 in i; sums over up to 8 ranks stay within
 * [-256, 256], exact in bf16 in any order. */
const value = (i: number, r: number): number => ((i * 37 + r * 101) % PERIOD) - 32;

/** n bf16 elements of the periodic f (f(i) for i < 64 sets the period), built by doubling copies. */
function periodic(n: number, f: (i: number) => number): Uint16Array {
  const tile = Array.from({ length: Math.min(n, PERIOD) }, (_, i) => f(i));
  const out = new Uint16Array(n);
  out.set(encode("bf16", tile));
  for (let have = PERIOD; have < n; have *= 2) out.copyWithin(have, 0, Math.min(have, n - have));
  return out;
}
const sumOver = (at: number) => (i: number) =>
  Array.from({ length: world }, (_, r) => value(at + i, r)).reduce((a, b) => a + b, 0);

function bytesOf(a: RawArray): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}

/** Runs `call` into a NaN-poisoned output with guards; checks it against `want` and the guards. */
function check(want: RawArray, what: string, call: (out: Tensor) => void): void {
  const n = want.length;
  const whole = Tensor.full([n + 2 * GUARD], NaN, "bf16");
  call(whole.slice(GUARD, GUARD + n));
  group.synchronize();
  const nan = encode("bf16", [NaN])[0];
  const head = whole.slice(0, GUARD).toHost();
  const tail = whole.slice(GUARD + n).toHost();
  for (const g of [head, tail])
    for (let i = 0; i < GUARD; i++) if (g[i] !== nan) assert.fail(`${what}: guard element overwritten`);
  const got = whole.slice(GUARD, GUARD + n).toHost();
  if (!bytesOf(got).equals(bytesOf(want))) {
    const i = got.findIndex((v, j) => v !== want[j]);
    assert.fail(
      `${what}: element ${i} is bf16 0x${got[i]!.toString(16)}, expected 0x${want[i]!.toString(16)}`,
    );
  }
  whole.dispose();
}

/** Whether the group's mailbox slot and staging buffer hold `algorithm`'s call at `bytes` per rank. */
const fits = (collective: TunedCollective, algorithm: string, bytes: number): boolean =>
  c.canRun(collective, algorithm, ...measure(collective, bytes));

for (let bytes = 1024; bytes <= MAX; bytes *= 2) {
  const count = bytes / 2;
  // all-reduce: count elements in and out.
  const x = Tensor.fromHost(
    periodic(count, (i) => value(i, rank)),
    "bf16",
  );
  const sum = periodic(count, sumOver(0));
  for (const algorithm of TUNABLE_ALGORITHMS["all-reduce"]) {
    if (!fits("all-reduce", algorithm, bytes)) continue;
    check(sum, `allReduce ${algorithm} ${bytes} bytes`, (out) => c.allReduce(x, { algorithm, output: out }));
  }
  x.dispose();
  // all-gather: n elements in from every rank, world x n out.
  const n = Math.floor(count / world);
  const part = Tensor.fromHost(
    periodic(n, (i) => value(i, rank)),
    "bf16",
  );
  const gathered = new Uint16Array(n * world);
  for (let r = 0; r < world; r++)
    gathered.set(
      periodic(n, (i) => value(i, r)),
      r * n,
    );
  for (const algorithm of TUNABLE_ALGORITHMS["all-gather"]) {
    if (!fits("all-gather", algorithm, bytes)) continue;
    check(gathered, `allGather ${algorithm} ${bytes} bytes`, (out) => c.allGather(part, out, { algorithm }));
  }
  part.dispose();
  // reduce-scatter: world x n elements in, chunk `rank` of the sum out.
  const whole = Tensor.fromHost(
    periodic(n * world, (i) => value(i, rank)),
    "bf16",
  );
  const chunk = periodic(n, sumOver(rank * n));
  for (const algorithm of TUNABLE_ALGORITHMS["reduce-scatter"]) {
    if (!fits("reduce-scatter", algorithm, bytes)) continue;
    check(chunk, `reduceScatter ${algorithm} ${bytes} bytes`, (out) =>
      c.reduceScatter(whole, out, { algorithm }),
    );
  }
  whole.dispose();
  if (rank === 0) console.log(`${bytes} bytes: every algorithm exact`);
  lap(`${bytes} bytes`);
}

await group.destroy();
console.log("large collectives ok");
