// `symmkit demo`: the main job. Started alone, it launches its own ranks (one per GPU, or 4 CPU ranks
// without GPUs) and runs in each: every collective checked against a reference on fresh random data,
// then timed, with a table on rank 0. Any wrong result makes it exit non-zero.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { SymmkitError } from "./errors.js";
import type { CpuProcessGroup } from "./cpu/process-group.js";
import { HostTensor } from "./cpu/host-tensor.js";
import { launch } from "./dist/launcher.js";
import type { ProcessGroup } from "./dist/process-group.js";
import { exchangeWord, SYNC_KERNELS, SYMM_VIEW_PARAM } from "./dist/sync-kernels.js";
import { detectBackend, init } from "./init.js";
import { reduceInto } from "./ops/reduce.js";
import { decodeToF32, encode, type DType, type RawArray } from "./runtime/dtype.js";
import { Event } from "./runtime/event.js";
import { sharedModule } from "./runtime/module.js";
import { hostUniform } from "./runtime/random.js";
import { defaultStream } from "./runtime/stream.js";
import { deviceCount } from "./runtime/device.js";
import { freshSeed, Tensor } from "./runtime/tensor.js";
import { median, table } from "./bench/report.js";

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

async function demoRank(): Promise<number> {
  const group = await init();
  const seed = BigInt((await shareSeed(group)).toString());
  const say = (s: string): void => void (group.rank === 0 && process.stdout.write(`${s}\n`));
  const rows = group.backend === "cpu" ? cpuDemo(group, seed, say) : await gpuDemo(group, seed, say);
  const world = group.worldSize;
  say(
    table(
      ["collective", "algorithm", "bytes", "us", "algbw GB/s", "busbw GB/s"],
      rows.map((r) => [
        r.op,
        r.algorithm,
        String(r.bytes),
        r.us.toFixed(1),
        (r.bytes / r.us / 1e3).toFixed(2),
        ((r.bytes / r.us / 1e3) * r.busFactor).toFixed(2),
      ]),
    ),
  );
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

async function shareSeed(group: ProcessGroup | CpuProcessGroup): Promise<Buffer> {
  if (group.rank === 0)
    await group.store.set("demo/seed", String(process.env.SYMMKIT_TEST_SEED ?? freshSeed()));
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
    for (const algorithm of ["one_shot", "two_shot"] as const) {
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

/**
 * On GPUs, until symmkit's own collectives land: NCCL's checked against the host, symmetric memory
 * written across GPUs and checked, and NCCL timed as the baseline they will be measured against.
 */
async function gpuDemo(group: ProcessGroup, seed: bigint, say: (s: string) => void): Promise<Row[]> {
  const { rank, worldSize: world, device } = group;
  say(`GPUs: ${world} x ${device.props.name}; checking symmetric memory and NCCL ...`);
  const n = 4096;
  const sym = await group.symmetric.empty([world * n], "u32");
  sharedModule(SYNC_KERNELS, device)
    .kernel("symmkit::exchange_pattern", [SYMM_VIEW_PARAM, "u64", "u32"])
    .launch({ grid: 4, block: 256 }, sym.deviceView(), n, Number(seed & 0xffffffffn));
  group.synchronize();
  const got = sym.tensor.toHost() as Uint32Array;
  for (let src = 0; src < world; src++) {
    for (let i = 0; i < n; i++) {
      if (got[src * n + i] !== exchangeWord(src, rank, i, Number(seed & 0xffffffffn)))
        fail("symmetric memory", `word ${i} from rank ${src}`);
    }
  }
  await sym.dispose();
  const comm = await group.nccl();
  const stream = defaultStream(device);
  const rows: Row[] = [];
  for (const bytes of [4096, 65536, 1 << 20, 16 << 20]) {
    const count = bytes / 2;
    const x = Tensor.rand([count], "bf16", { seed, offset: rank, low: -1, high: 1 });
    const y = Tensor.empty([count], "bf16");
    comm.allReduce(x, y, "sum", stream);
    comm.synchronize(stream);
    const want = new Float32Array(count);
    for (let r = 0; r < world; r++) {
      const xs = decodeToF32("bf16", encode("bf16", hostUniform(count, seed, r, -1, 1)));
      for (let i = 0; i < count; i++) want[i] = want[i]! + xs[i]!;
    }
    const ys = y.toHost({ decode: true, stream });
    for (let i = 0; i < count; i++) {
      if (Math.abs(ys[i]! - want[i]!) > 0.02 * world)
        fail("NCCL all-reduce", `element ${i} is ${ys[i]}, expected about ${want[i]}`);
    }
    const start = Event.create(device);
    const end = Event.create(device);
    const per: number[] = [];
    for (let rep = 0; rep < 22; rep++) {
      start.record(stream);
      for (let k = 0; k < 10; k++) comm.allReduce(x, y, "sum", stream);
      end.record(stream);
      comm.synchronize(stream);
      if (rep >= 2) per.push((end.elapsedMsSince(start) * 1000) / 10);
    }
    rows.push({
      op: "all-reduce",
      algorithm: "nccl",
      bytes,
      us: median(per),
      busFactor: (2 * (world - 1)) / world,
    });
    for (const t of [x, y]) t.dispose();
    start.dispose();
    end.dispose();
  }
  say("symmetric memory written across GPUs and NCCL all-reduce: correct");
  say(
    "symmkit's own collectives on symmetric memory (one-shot and two-shot all-reduce, all-gather, reduce-scatter) are not built yet; NCCL is timed here as their baseline.",
  );
  return rows;
}
