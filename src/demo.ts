// `symmkit demo`: the main job. Started alone, it launches its own ranks (one per GPU, or 4 CPU ranks
// without GPUs) and runs in each: every collective checked against a reference on fresh random data,
// then timed, with a table on rank 0; then a tensor-parallel MLP block on the fused matmuls
// (src/demo-mlp.ts). Any wrong result makes it exit non-zero.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { SymmkitError } from "./errors.js";
import type { CpuProcessGroup } from "./cpu/process-group.js";
import { HostTensor } from "./cpu/host-tensor.js";
import { readDistEnv } from "./distributed/env.js";
import { launch } from "./distributed/launcher.js";
import { detectBackend, init, type AnyProcessGroup, type CudaProcessGroup } from "./init.js";
import { reduceInto } from "./ops/coll/reduce.js";
import { CPU_ALL_REDUCE_ALGORITHMS, TUNABLE_ALGORITHMS } from "./ops/coll/registry.js";
import { decodeToF32, encode, type DType, type RawArray } from "./runtime/dtype.js";
import { hostUniform } from "./runtime/random.js";
import { defaultStream } from "./runtime/stream.js";
import { deviceCount } from "./runtime/device.js";
import { freshSeed, Tensor } from "./runtime/tensor.js";
import { startTogether } from "./bench/collectives.js";
import { graphTimeUs, median, table } from "./bench/report.js";
import { timeAcrossHosts } from "./bench/hosts.js";
import { cpuMlpDemo, gpuMlpDemo } from "./demo-mlp.js";
import { readEnvVar } from "./settings.js";

const CPU_RANKS = 4;

/** Entry point of `symmkit demo`: launches the ranks unless it already is one. */
export async function demo(): Promise<number> {
  if (process.env.WORLD_SIZE !== undefined) return demoRank();
  const { backend, reason } = detectBackend();
  const n = backend === "cuda" ? deviceCount() : CPU_RANKS;
  process.stdout.write(
    `symmkit demo: ${backend === "cuda" ? `${n} GPU(s)` : `no GPU (${reason}); ${n} CPU ranks`}\n`,
  );
  const cli = path.join(path.dirname(fileURLToPath(import.meta.url)), "cli.js");
  return launch({
    nprocPerNode: n,
    nnodes: 1,
    nodeRank: 0,
    masterAddr: "127.0.0.1",
    masterPort: 0,
    command: [cli, "demo"],
    graceMs: 3000,
  });
}

interface Row {
  readonly op: string;
  readonly algorithm: string;
  readonly bytes: number;
  readonly us: number;
  /** nccl-tests' bus bandwidth factor for this collective at this world size. */
  readonly busFactor: number;
}

function fail(what: string, detail: string): never {
  throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", `demo: ${what} is wrong: ${detail}`);
}

function sameBits(got: RawArray, want: RawArray, what: string): void {
  for (let i = 0; i < want.length; i++)
    if (!Object.is(got[i], want[i])) fail(what, `element ${i} is ${got[i]}, expected ${want[i]}`);
}

function rowsTable(rows: readonly Row[]): string {
  return table(
    ["collective", "algorithm", "bytes", "us", "algbw GB/s", "busbw GB/s"],
    rows.map((r) => [
      r.op,
      r.algorithm,
      String(r.bytes),
      r.us.toFixed(1),
      (r.bytes / r.us / 1e3).toFixed(2),
      ((r.bytes / r.us / 1e3) * r.busFactor).toFixed(2),
    ]),
  );
}

async function demoRank(): Promise<number> {
  const env = readDistEnv();
  if (env.worldSize > env.localWorldSize) return hostsDemoRank();
  const group = await init();
  const seed = BigInt((await shareSeed(group)).toString());
  const say = (s: string): void => void (group.rank === 0 && process.stdout.write(`${s}\n`));
  const rows = group.backend === "cpu" ? cpuDemo(group, seed, say) : await gpuDemo(group, seed, say);
  const world = group.worldSize;
  say(rowsTable(rows));
  if (group.backend === "cpu") cpuMlpDemo(group, seed, say);
  else await gpuMlpDemo(group, seed, say);
  if (group.backend === "cpu") {
    say(
      `No GPU was found, so this ran on symmkit's CPU backend (${world} processes sharing memory). On NVIDIA GPUs the same ` +
        "program uses symmetric memory over NVLink (CUDA VMM), symmkit's kernels compiled by NVRTC, and NCCL as the baseline.",
    );
  }
  say("demo: every result matched its reference");
  await group.destroy();
  return 0;
}

/**
 * A job on several hosts (symmkit run --nnodes M on each): the all-reduce across hosts, hierarchical
 * (symmkit inside each host, NCCL between) and flat NCCL, checked and timed; then the MLP block inside
 * each host on its own group. On 2 hosts the hierarchical sum is bit for bit each host's rank-order sum,
 * rounded, then the two hosts' sums added and rounded once; on more hosts NCCL's order decides, within
 * rounding.
 */
async function hostsDemoRank(): Promise<number> {
  const group = await init({ acrossHosts: true });
  const c = group.collectives;
  const { rank, worldSize: world, device } = group;
  const seed = BigInt((await shareSeed(group)).toString());
  const say = (s: string): void => void (rank === 0 && process.stdout.write(`${s}\n`));
  say(
    `${c.hosts} hosts x ${c.perHost} x ${device.props.name}: bf16 all-reduce across hosts, hierarchical ` +
      "(symmkit inside each host, NCCL between hosts) against NCCL over all ranks ...",
  );
  const dtype: DType = "bf16";
  const stream = defaultStream(device);
  const rows: Row[] = [];
  for (const bytes of [4096, 65536, 1 << 20, 16 << 20]) {
    const n = bytes / 2;
    const inputOf = (r: number): RawArray => encode(dtype, hostUniform(n, seed, r, -1, 1));
    const sum = (xs: RawArray[]): RawArray => {
      const out = encode(dtype, new Float32Array(n));
      reduceInto(dtype, "sum", xs, 0, out, 0, n);
      return out;
    };
    // One host's inputs at a time: the reference never holds more than a host's worth.
    const hostSums = Array.from({ length: c.hosts }, (_, h) =>
      sum(group.ranks.slice(h * c.perHost, (h + 1) * c.perHost).map(inputOf)),
    );
    const want = sum(hostSums);
    const x = Tensor.fromHost(inputOf(group.ranks[rank]!), dtype);
    const outs = (["hierarchical", "nccl"] as const).map(() => Tensor.empty([n], dtype));
    const runs = (["hierarchical", "nccl"] as const).map(
      (algorithm, i) => (): void => void c.allReduce(x, { algorithm, output: outs[i]!, stream }),
    );
    for (const run of runs) run();
    group.synchronize(stream);
    // The last (n mod ranks per host) elements go through NCCL over every rank: no host-first model there.
    if (c.hosts === 2 && n % c.perHost === 0)
      sameBits(outs[0]!.toHost({ stream }), want, `all-reduce hierarchical (${bytes} bytes)`);
    for (const [i, what] of ["hierarchical", "nccl"].entries()) {
      const a = decodeToF32(dtype, outs[i]!.toHost({ stream }));
      const b = decodeToF32(dtype, want);
      for (let k = 0; k < n; k++)
        if (Math.abs(a[k]! - b[k]!) > 0.02 * world)
          fail(`all-reduce ${what} (${bytes} bytes)`, `element ${k}`);
    }
    const us = await timeAcrossHosts(group, stream, runs, { perGraph: 10, replays: 10 });
    for (const [i, algorithm] of ["hierarchical", "nccl"].entries())
      rows.push({ op: "all-reduce", algorithm, bytes, us: us[i]!, busFactor: (2 * (world - 1)) / world });
    for (const t of [x, ...outs]) t.dispose();
  }
  say(
    c.hosts === 2
      ? "hierarchical matched each host's rank-order sum, then the hosts' sum, bit for bit; NCCL within bf16 rounding"
      : "hierarchical and NCCL within bf16 rounding of the reference (on more than 2 hosts NCCL's order decides)",
  );
  say(rowsTable(rows));
  if (group.sharesGpus)
    say("(ranks share GPUs here, symmkit run --share-gpus: the times say nothing of speed)");
  say(`the MLP block inside each host, on its ${c.perHost} GPU(s) (collectives.local):`);
  await gpuMlpDemo(c.local, seed, say);
  say("demo: every result matched its reference");
  await group.destroy();
  return 0;
}

async function shareSeed(group: { rank: number; store: AnyProcessGroup["store"] }): Promise<Buffer> {
  if (group.rank === 0)
    await group.store.set("demo/seed", String(readEnvVar("SYMMKIT_TEST_SEED") ?? freshSeed()));
  return group.store.get("demo/seed");
}

/** Median microseconds of `f` over `reps` calls after two warm-ups. */
function timeIt(f: () => void, reps: number): number {
  const per: number[] = [];
  for (let i = 0; i < reps + 2; i++) {
    const t0 = performance.now();
    f();
    if (i >= 2) per.push((performance.now() - t0) * 1000);
  }
  return median(per);
}

function cpuDemo(group: CpuProcessGroup, seed: bigint, say: (s: string) => void): Row[] {
  const c = group.collectives;
  const { rank, worldSize: world } = group;
  const dtype: DType = "bf16";
  const inputOf = (r: number, n: number): RawArray => encode(dtype, hostUniform(n, seed, r, -1, 1));
  const rows: Row[] = [];
  for (const bytes of [4096, 65536, 1 << 20]) {
    const n = bytes / 2;
    say(`checking and timing ${bytes}-byte bf16 collectives on ${world} ranks ...`);
    const inputs = Array.from({ length: world }, (_, r) => inputOf(r, n));
    const want = encode(dtype, new Float32Array(n));
    reduceInto(dtype, "sum", inputs, 0, want, 0, n);
    const x = HostTensor.fromHost(inputs[rank]!, dtype);
    for (const algorithm of CPU_ALL_REDUCE_ALGORITHMS.filter((a) => a !== "auto")) {
      const out = HostTensor.empty([n], dtype);
      c.allReduce(x, { algorithm, output: out });
      sameBits(out.raw, want, `all-reduce ${algorithm} (${bytes} bytes)`);
      rows.push({
        op: "all-reduce",
        algorithm,
        bytes,
        us: timeIt(() => c.allReduce(x, { algorithm, output: out }), 10),
        busFactor: (2 * (world - 1)) / world,
      });
    }
    const gathered = HostTensor.empty([n], dtype);
    const part = x.slice(0, n / world);
    c.allGather(part, gathered);
    inputs.forEach((inp, r) =>
      sameBits(
        gathered.raw.subarray((r * n) / world, ((r + 1) * n) / world),
        inp.subarray(0, n / world),
        "all-gather",
      ),
    );
    rows.push({
      op: "all-gather",
      algorithm: "pull",
      bytes,
      us: timeIt(() => c.allGather(part, gathered), 10),
      busFactor: (world - 1) / world,
    });
    const scattered = HostTensor.empty([n / world], dtype);
    c.reduceScatter(x, scattered);
    sameBits(scattered.raw, want.subarray((rank * n) / world, ((rank + 1) * n) / world), "reduce-scatter");
    rows.push({
      op: "reduce-scatter",
      algorithm: "pull",
      bytes,
      us: timeIt(() => c.reduceScatter(x, scattered), 10),
      busFactor: (world - 1) / world,
    });
  }
  return rows;
}

/** On GPUs: symmkit's collectives on symmetric memory checked bit for bit and timed against NCCL. */
async function gpuDemo(group: CudaProcessGroup, seed: bigint, say: (s: string) => void): Promise<Row[]> {
  const { rank, worldSize: world, device } = group;
  const c = group.collectives;
  const stream = defaultStream(device);
  const dtype: DType = "bf16";
  say(
    `GPUs: ${world} x ${device.props.name}; checking and timing bf16 collectives, symmkit against NCCL ...`,
  );
  const rows: Row[] = [];
  for (const bytes of [4096, 65536, 1 << 20, 16 << 20]) {
    const n = bytes / 2;
    const inputs = Array.from({ length: world }, (_, r) => encode(dtype, hostUniform(n, seed, r, -1, 1)));
    const want = encode(dtype, new Float32Array(n));
    reduceInto(dtype, "sum", inputs, 0, want, 0, n);
    const x = Tensor.fromHost(inputs[rank]!, dtype);
    const out = Tensor.empty([n], dtype);
    // Every algorithm the registry has that fits this group (plain input: staged in the buffer).
    const algorithms = TUNABLE_ALGORITHMS["all-reduce"].filter((a) =>
      c.canRun("all-reduce", a, bytes, bytes),
    );
    for (const algorithm of algorithms) {
      c.allReduce(x, { algorithm, output: out, stream });
      group.synchronize(stream);
      const got = out.toHost({ stream });
      if (algorithm === "nccl") {
        const a = decodeToF32(dtype, got);
        const b = decodeToF32(dtype, want);
        for (let i = 0; i < n; i++)
          if (Math.abs(a[i]! - b[i]!) > 0.02 * world) fail("NCCL all-reduce", `element ${i}`);
      } else {
        sameBits(got, want, `all-reduce ${algorithm} (${bytes} bytes)`);
      }
      const us = await graphTimeUs(stream, () => c.allReduce(x, { algorithm, output: out, stream }), {
        perGraph: 10,
        replays: 10,
        beforeReplay: () => startTogether(group, stream),
        sync: () => group.synchronize(stream),
      });
      rows.push({ op: "all-reduce", algorithm, bytes, us, busFactor: (2 * (world - 1)) / world });
    }
    for (const t of [x, out]) t.dispose();
  }
  say(
    "symmkit's all-reduce matched the reference bit for bit; NCCL within bf16 rounding (times include copying the input into the symmetric buffer)",
  );
  return rows;
}
