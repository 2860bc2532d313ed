// One rank of the GPU soak (test/gpu/soak.test.ts): SOAK_CALLS mixed collective calls (every collective
// and algorithm, auto included; bf16, f16, f32; 1 to 65536 elements, odd sizes among them; every tenth
// call a replay of a graph captured in the warm-up) on inputs that change every call (rank r holds
// (r + 1) * k, k = 1..5, so every sum is exact); every 50th output checked exactly; then the GPU's free
// memory (within 2 MiB) and this process's open descriptors must be what they were after the warm-up. Every rank draws
// the same plan from the run's seed. Prints "soak ok ..." or "soak WRONG ...".
import fs from "node:fs";
import { exitFlushed } from "../../../src/exit.js";
import { init } from "../../../src/init.js";
import { TUNABLE_ALGORITHMS, type CollectiveName } from "../../../src/ops/coll/registry.js";
import type { DType } from "../../../src/runtime/dtype.js";
import { Graph } from "../../../src/runtime/graph.js";
import { hostRandInt } from "../../../src/runtime/random.js";
import { Stream } from "../../../src/runtime/stream.js";
import { freshSeed, Tensor } from "../../../src/runtime/tensor.js";
import { readEnvVar } from "../../../src/settings.js";
import { sectionTimer } from "./guards.js";

const group = await init({ backend: "cuda", stagingBytes: 16 << 20 });
const c = group.collectives;
const { rank, worldSize: world, device } = group;
const calls = Number(process.env.SOAK_CALLS ?? 100_000);
if (rank === 0) await group.store.set("seed", String(readEnvVar("SYMMKIT_TEST_SEED") ?? freshSeed()));
const seed = BigInt((await group.store.get("seed")).toString());
if (rank === 0) console.log(`seed ${seed} (replay with SYMMKIT_TEST_SEED=${seed})`);
const lap = sectionTimer(rank);
const stream = Stream.create(device);

const COLLECTIVES = Object.keys(TUNABLE_ALGORITHMS) as CollectiveName[];
const DTYPES: DType[] = ["bf16", "f16", "f32"];
const SIZES = [1, 7, 1024, 4097, 65536];
const algorithms = (col: CollectiveName): string[] => ["auto", ...TUNABLE_ALGORITHMS[col]];

interface Case {
  readonly col: CollectiveName;
  readonly algorithm: string;
  readonly input: Tensor;
  readonly output: Tensor;
  readonly n: number;
}
const tensors = new Map<string, { input: Tensor; output: Tensor }>();
function makeCase(col: CollectiveName, algorithm: string, dtype: DType, size: number): Case {
  // Reduce-scatter needs world chunks; the others take size elements per rank.
  const n = size;
  const key = `${col}/${dtype}/${n}`;
  let t = tensors.get(key);
  if (!t) {
    const inCount = col === "reduce-scatter" ? n * world : n;
    const outCount = col === "all-gather" ? n * world : n;
    t = {
      input: Tensor.empty([inCount], dtype, { device }),
      output: Tensor.empty([outCount], dtype, { device }),
    };
    tensors.set(key, t);
  }
  return { col, algorithm, n, ...t };
}

function run(k: Case, s: Stream = stream): void {
  const algorithm = k.algorithm as never;
  if (k.col === "all-reduce") c.allReduce(k.input, { algorithm, output: k.output, stream: s });
  else if (k.col === "all-gather") c.allGather(k.input, k.output, { algorithm, stream: s });
  else c.reduceScatter(k.input, k.output, { algorithm, stream: s });
}

function check(k: Case, scale: number): string | undefined {
  const got = k.output.toHost({ stream, decode: true });
  for (let i = 0; i < got.length; i++) {
    const want =
      k.col === "all-gather" ? (Math.floor(i / k.n) + 1) * scale : (scale * world * (world + 1)) / 2;
    if (got[i] !== want)
      return `${k.col}/${k.algorithm} ${k.output.dtype} n=${k.n}: element ${i} is ${got[i]}, expected ${want}`;
  }
  return undefined;
}

// The plan: for each call, (collective, algorithm, dtype, size, scale, graph?).
const words = hostRandInt(calls * 5, seed, 0, 0, 2 ** 32);
const pick = <T>(xs: readonly T[], w: number): T => xs[w % xs.length]!;
const cases: Case[] = [];
const graphs = new Map<Case, Graph>();
// Warm-up: every combination once (kernels loaded, tensors made), and one graph per combination.
for (const col of COLLECTIVES)
  for (const algorithm of algorithms(col))
    for (const dtype of DTYPES)
      for (const size of SIZES) {
        const k = makeCase(col, algorithm, dtype, size);
        k.input.fill(rank + 1, stream);
        run(k);
        cases.push(k);
        graphs.set(
          k,
          Graph.capture(stream, () => run(k)),
        );
      }
group.synchronize(stream);
await group.barrier();
lap(`warm-up: ${cases.length} combinations, a graph each`);
const fds = (): number => fs.readdirSync("/proc/self/fd").length;
const before = { free: device.memoryInfo().freeBytes, fds: fds() };
const t0 = Date.now();
let checked = 0;
let wrong: string | undefined;
for (let i = 0; i < calls && !wrong; i++) {
  const k = pick(cases, words[5 * i]!);
  const scale = 1 + (words[5 * i + 1]! % 5);
  k.input.fill((rank + 1) * scale, stream);
  if (words[5 * i + 2]! % 10 === 0) graphs.get(k)!.launch(stream);
  else run(k);
  if (i % 50 === 0 || i === calls - 1) {
    group.synchronize(stream);
    wrong = check(k, scale);
    checked++;
  }
}
group.synchronize(stream);
const ms = Date.now() - t0;
const after = { free: device.memoryInfo().freeBytes, fds: fds() };
for (const g of graphs.values()) g.dispose();
// The driver may round its own bookkeeping; anything that grows with the calls would show far beyond.
const flat = before.free - after.free <= 2 << 20 && after.fds === before.fds;
console.log(
  `soak ${wrong ? `WRONG ${wrong}` : flat ? "ok" : "NOT FLAT"}: ${calls} calls (${cases.length} combinations) in ${ms} ms, ` +
    `${checked} checked; free GPU memory ${before.free} -> ${after.free} bytes; open descriptors ${before.fds} -> ${after.fds}`,
);
await group.barrier();
await exitFlushed(wrong || !flat ? 1 : 0);
