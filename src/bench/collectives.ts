// `symmkit run -n N -- symmkit bench all-reduce`: symmkit's all-reduce algorithms against NCCL in the same
// run, GPU time from CUDA-graph replays of back-to-back operations (median of many replays), each
// implementation validated first: bit for bit against the host reference (f32 accumulation in rank
// order) up to 4 MiB, and above that symmkit's algorithms bit for bit against each other and NCCL within
// bf16 rounding. symmkit's algorithms run on a symmetric input (zero-copy, as a user reaches peak speed)
// and again on a plain tensor, which the kernel copies into the staging buffer itself ("_plain").
import { SymmkitError } from "../errors.js";
import { ProcessGroup } from "../dist/process-group.js";
import { GpuCollectives } from "../ops/gpu-collectives.js";
import { reduceInto } from "../ops/reduce.js";
import type { GpuAllReduceAlgorithm } from "../ops/gpu-collectives.js";
import { deviceCount } from "../runtime/device.js";
import { decodeToF32, encode, type DType, type RawArray } from "../runtime/dtype.js";
import { hostUniform } from "../runtime/random.js";
import { Stream } from "../runtime/stream.js";
import { freshSeed, Tensor } from "../runtime/tensor.js";
import { benchEnvironment, graphTimeUs, table, type BenchEnvironment } from "./report.js";

export interface CollectiveRow {
  readonly bytes: number;
  readonly count: number;
  readonly dtype: DType;
  /** Microseconds per operation, by implementation. */
  readonly us: Readonly<Record<string, number>>;
}

export interface CollectiveBenchResult {
  readonly environment: BenchEnvironment;
  readonly collective: "all-reduce" | "all-gather";
  readonly implementations: readonly string[];
  readonly rows: readonly CollectiveRow[];
}

/** Each algorithm on a symmetric input (zero-copy), then symmkit's on a plain tensor (copied in by the kernel). */
const IMPLEMENTATIONS: readonly { name: string; algorithm: GpuAllReduceAlgorithm; plain: boolean }[] = [
  { name: "one_shot", algorithm: "one_shot", plain: false },
  { name: "two_shot", algorithm: "two_shot", plain: false },
  { name: "nccl", algorithm: "nccl", plain: false },
  { name: "one_shot_plain", algorithm: "one_shot", plain: true },
  { name: "two_shot_plain", algorithm: "two_shot", plain: true },
];

/** "4K:64M" -> 4 KiB, 16 KiB, ..., 64 MiB (powers of 4). */
export function parseSizes(spec: string): number[] {
  const unit = (s: string): number => {
    const m = /^(\d+)([KMG]?)$/i.exec(s);
    if (!m) throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", `size ${s}: expected e.g. 4K, 1M, 1G`);
    return (
      Number(m[1]) *
      { "": 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3 }[m[2]!.toUpperCase() as "" | "K" | "M" | "G"]
    );
  };
  const [a, b] = spec.split(":");
  const lo = unit(a!);
  const hi = b === undefined ? lo : unit(b);
  const out: number[] = [];
  for (let s = lo; s <= hi; s *= 4) out.push(s);
  return out;
}

type BenchGroup = ProcessGroup<GpuCollectives>;

/** One size of a collective benchmark: its inputs and outputs, made by the benchmark. */
interface SizeCase {
  readonly row: Omit<CollectiveRow, "us">;
  /** Enqueues implementation i on the stream. */
  readonly run: (i: number) => void;
  /** Checks the outputs of one run of every implementation, once they completed. */
  readonly validate: () => void;
  readonly dispose: () => Promise<void>;
}

/**
 * The frame every collective benchmark shares: the world group (staging for the largest size), a stream,
 * then per size one validated run of every implementation and graph timing of each; the result on rank 0.
 */
async function benchCollective(
  collective: CollectiveBenchResult["collective"],
  implementations: readonly string[],
  sizes: readonly number[],
  prepare: (group: BenchGroup, stream: Stream, bytes: number) => Promise<SizeCase>,
): Promise<CollectiveBenchResult | undefined> {
  const group = await ProcessGroup.world<GpuCollectives>({}, (g) =>
    GpuCollectives.create(g, Math.max(...sizes, 1 << 20)),
  );
  const { device, rank, worldSize: world } = group;
  const comm = await group.nccl();
  const stream = Stream.create(device);
  const rows: CollectiveRow[] = [];
  for (const bytes of sizes) {
    if (rank === 0)
      process.stdout.write(
        `${collective} ${bytes} bytes: validating and timing ${implementations.join(", ")} ...\n`,
      );
    const c = await prepare(group, stream, bytes);
    implementations.forEach((_, i) => c.run(i));
    group.synchronize(stream);
    comm.synchronize(stream);
    c.validate();
    await group.barrier();
    const us: Record<string, number> = {};
    for (const [i, name] of implementations.entries()) {
      us[name] = await graphTimeUs(stream, () => c.run(i), {
        perGraph: bytes <= 1 << 20 ? 20 : 5,
        beforeReplay: () => group.barrier(),
        sync: () => group.synchronize(stream),
      });
    }
    rows.push({ ...c.row, us });
    await c.dispose();
  }
  stream.dispose();
  const result =
    rank === 0
      ? { environment: benchEnvironment(device, world, deviceCount()), collective, implementations, rows }
      : undefined;
  await group.destroy();
  return result;
}

export async function benchAllReduce(options: {
  sizes: number[];
  dtype: DType;
}): Promise<CollectiveBenchResult | undefined> {
  let seed: bigint | undefined;
  return benchCollective(
    "all-reduce",
    IMPLEMENTATIONS.map((i) => i.name),
    options.sizes,
    async (group, stream, bytes) => {
      const { device, rank, worldSize: world } = group;
      if (seed === undefined) {
        if (rank === 0) await group.store.set("bench/seed", String(freshSeed()));
        seed = BigInt((await group.store.get("bench/seed")).toString());
      }
      const s = seed;
      const count = Math.floor(bytes / 2);
      const sym = await group.symmetric.empty([count], options.dtype);
      const x = Tensor.rand([count], options.dtype, {
        seed: s,
        offset: rank,
        low: -1,
        high: 1,
        device,
        stream,
      });
      sym.tensor.copyFrom(x, stream);
      const outs = IMPLEMENTATIONS.map(() => Tensor.empty([count], options.dtype, { device }));
      return {
        row: { bytes, count, dtype: options.dtype },
        run: (i) => {
          const { algorithm, plain } = IMPLEMENTATIONS[i]!;
          group.collectives.allReduce(plain ? x : sym, { algorithm, output: outs[i]!, stream });
        },
        validate: () =>
          validate(
            outs.map((o) => o.toHost({ stream })),
            options.dtype,
            count,
            world,
            s,
            bytes,
          ),
        dispose: async () => {
          for (const t of [x, ...outs]) t.dispose();
          await sym.dispose();
        },
      };
    },
  );
}

/** all-gather per rank of `bytes` (sizes are per-rank inputs): pull, copy engine and NCCL on a symmetric
 * input, validated exactly against the inputs first. */
export async function benchAllGather(options: {
  sizes: number[];
  dtype: DType;
}): Promise<CollectiveBenchResult | undefined> {
  const algorithms = ["pull", "copy_engine", "nccl"] as const;
  return benchCollective("all-gather", algorithms, options.sizes, async (group, stream, bytes) => {
    const { device, rank, worldSize: world } = group;
    const count = Math.floor(bytes / 2);
    const sym = await group.symmetric.empty([count], options.dtype);
    sym.tensor.fill(rank + 1, stream);
    const outs = algorithms.map(() => Tensor.empty([count * world], options.dtype, { device }));
    return {
      row: { bytes: bytes * world, count: count * world, dtype: options.dtype },
      run: (i) => void group.collectives.allGather(sym, outs[i]!, { algorithm: algorithms[i]!, stream }),
      validate: () => {
        for (const [i, o] of outs.entries()) {
          const g = o.toHost({ stream, decode: true });
          for (let j = 0; j < g.length; j++) {
            if (g[j] !== Math.floor(j / count) + 1)
              throw new SymmkitError(
                "SYMMKIT_INVALID_ARGUMENT",
                `all-gather ${algorithms[i]} ${bytes}: element ${j} is ${g[j]}`,
              );
          }
        }
      },
      dispose: async () => {
        for (const t of outs) t.dispose();
        await sym.dispose();
      },
    };
  });
}

function validate(
  outs: RawArray[],
  dtype: DType,
  count: number,
  world: number,
  seed: bigint,
  bytes: number,
): void {
  const fail = (what: string): never => {
    throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", `all-reduce ${bytes} bytes: ${what} (seed ${seed})`);
  };
  const [oneShot, twoShot, nccl, ...plain] = outs as [RawArray, RawArray, RawArray, ...RawArray[]];
  for (const [name, other] of [
    ["two-shot", twoShot],
    ...plain.map((p, j) => [`plain input ${j}`, p] as const),
  ] as const) {
    for (let i = 0; i < count; i++)
      if (oneShot[i] !== other[i]) fail(`one-shot and ${name} differ at element ${i}`);
  }
  if (bytes <= 4 << 20) {
    const want = encode(dtype, new Float32Array(count));
    const inputs = Array.from({ length: world }, (_, r) => encode(dtype, hostUniform(count, seed, r, -1, 1)));
    reduceInto(dtype, "sum", inputs, 0, want, 0, count);
    for (let i = 0; i < count; i++)
      if (oneShot[i] !== want[i]) fail(`element ${i} is ${oneShot[i]}, the reference ${want[i]}`);
  }
  const a = decodeToF32(dtype, oneShot);
  const b = decodeToF32(dtype, nccl);
  for (let i = 0; i < count; i++)
    if (Math.abs(a[i]! - b[i]!) > 0.02 * world) fail(`element ${i}: symmkit ${a[i]}, NCCL ${b[i]}`);
}

export function formatCollectives(r: CollectiveBenchResult): string {
  const world = r.environment.worldSize;
  // nccl-tests: all-reduce moves 2(W-1)/W of the bytes per rank, all-gather (W-1)/W of the output.
  const bus = ((r.collective === "all-reduce" ? 2 : 1) * (world - 1)) / world;
  const header = [
    "bytes",
    "count",
    ...r.implementations.flatMap((i) => [`${i} us`, `${i} busbw`]),
    "best/nccl",
  ];
  const rows = r.rows.map((row) => {
    const best = Math.min(...r.implementations.filter((i) => i !== "nccl").map((i) => row.us[i]!));
    return [
      String(row.bytes),
      String(row.count),
      ...r.implementations.flatMap((i) => [
        row.us[i]!.toFixed(1),
        ((row.bytes / row.us[i]! / 1e3) * bus).toFixed(1),
      ]),
      (best / row.us.nccl!).toFixed(2),
    ];
  });
  return [
    `${r.collective}, ${r.rows[0]?.dtype ?? ""}, ${world} x ${r.environment.device}`,
    table(header, rows),
  ].join("\n");
}
