// `symmkit run -n N -- symmkit bench ag-gemm|gemm-rs|gemm-ar`: the fused tensor-parallel matmuls against
// their floor and their baselines, in one run. Shapes are the full problem m x n x k:
//   ag-gemm: every rank holds m / world rows of A [., k] and its own weight [n, k]; it computes the
//     [m, n] product of the gathered A.
//   gemm-rs: every rank holds A [m, k / world] and B [n, k / world]; it gets its m / world rows of the
//     [m, n] sum over ranks.
//   gemm-ar: likewise, and every rank gets the whole [m, n] sum (a row-parallel layer at decode sizes).
// Implementations: symmkit's fused constructions, symmkit sequential (collective then GEMM, or GEMM then
// collective), NCCL + cuBLASLt in sequence, and the floors: symmkit's GEMM alone and cuBLASLt alone on
// one rank's GEMM (communication fully hidden). Each is validated first (the fused and sequential
// results bit for bit against each other and against symmkit's GEMM of the gathered A for ag-gemm; the
// NCCL + cuBLASLt result within bf16 rounding), then timed as GPU time from CUDA-graph replays (median),
// the implementations' graphs replayed in turn round after round (graphTimeManyUs), every rank starting
// each replay together.
import { SymmkitError } from "../errors.js";
import { ProcessGroup } from "../distributed/process-group.js";
import { GpuCollectives } from "../ops/gpu-collectives.js";
import type {
  AllGatherMatmulAlgorithm,
  MatmulAllReduceAlgorithm,
  MatmulReduceScatterAlgorithm,
} from "../ops/fused/checks.js";
import type { LtElem } from "../ops/gemm/cublaslt-matmul.js";
import { matmul } from "../ops/gemm/matmul.js";
import { deviceCount } from "../runtime/device.js";
import { dtypeInfo } from "../runtime/dtype.js";
import { Stream } from "../runtime/stream.js";
import { freshSeed, Tensor } from "../runtime/tensor.js";
import { timeTogether } from "./collectives.js";
import { relFrobenius, type GemmShape } from "./gemm.js";
import { startProgress } from "./progress.js";
import { benchEnvironment, table, type BenchEnvironment } from "./report.js";

export type FusedBench = "ag-gemm" | "gemm-rs" | "gemm-ar";

/** The reference systems' layers (m x n x k, full problem): Llama 3 8B/70B-like column- and row-parallel
 * matmuls at 2 ranks, the shapes of ANCHORS.md, and smaller m for the crossover. */
export const DEFAULT_FUSED_SHAPES: Record<FusedBench, string> = {
  "ag-gemm": "1024x8192x8192,2048x8192x8192,4096x8192x8192,8192x8192x8192,16384x6656x16384,8192x14336x4096",
  "gemm-rs": "1024x8192x8192,2048x8192x8192,4096x8192x8192,8192x8192x8192,16384x16384x6656,8192x4096x14336",
  // Llama-70B's row-parallel MLP down projection (k = 28672 in all) at decode and small prefill sizes.
  "gemm-ar":
    "1x8192x28672,8x8192x28672,32x8192x28672,64x8192x28672,128x8192x28672,256x8192x28672,512x8192x28672",
};

const FUSED_IMPLS: Record<FusedBench, readonly string[]> = {
  "ag-gemm": ["fused_copy_engine", "fused_pull", "sequential", "nccl_cublaslt"],
  "gemm-rs": ["fused", "sequential", "nccl_cublaslt"],
  "gemm-ar": ["fused", "sequential", "nccl_cublaslt"],
};
const FLOORS = ["gemm_alone", "cublaslt_alone"] as const;

export interface FusedRow {
  readonly m: number;
  readonly n: number;
  readonly k: number;
  /** The GEMM one rank computes: 2 x m x n x k flops (ag-gemm), 2 x m x n x k / world (gemm-rs). */
  readonly rankFlops: number;
  readonly us: Readonly<Record<string, number>>;
}

export interface FusedBenchResult {
  readonly environment: BenchEnvironment;
  readonly bench: FusedBench;
  readonly dtype: LtElem;
  readonly seed: string;
  readonly implementations: readonly string[];
  readonly rows: readonly FusedRow[];
}

type Group = ProcessGroup<GpuCollectives>;

function fail(what: string): never {
  throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", what);
}

/** Bytes of the staging buffer the fused constructions need for `shape` on `world` ranks: a shard of A
 * (all-gather + GEMM), the partials of the output (GEMM + reduce-scatter), every rank's partial of the
 * output (GEMM + all-reduce). */
function stagingFor(bench: FusedBench, [m, n, k]: GemmShape, world: number, elem: LtElem): number {
  if (bench === "ag-gemm") return (m / world) * k * dtypeInfo(elem).bytes;
  return (bench === "gemm-ar" ? world : 1) * m * n * 2;
}

/** The staging buffer a group needs to run every fused construction on `shapes`. */
export function fusedStagingBytes(
  bench: FusedBench,
  shapes: readonly GemmShape[],
  world: number,
  elem: LtElem,
): number {
  return Math.max(1 << 20, ...shapes.map((s) => stagingFor(bench, s, world, elem)));
}

export async function benchFused(o: {
  bench: FusedBench;
  shapes: readonly GemmShape[];
  elem: LtElem;
  implementations?: readonly string[] | undefined;
  /** Run in this group (its staging buffer large enough: fusedStagingBytes) instead of a new one. */
  group?: Group;
}): Promise<FusedBenchResult | undefined> {
  const world0 = o.group?.worldSize ?? Number(process.env.WORLD_SIZE ?? 1);
  for (const [m, , k] of o.shapes) {
    if ((o.bench !== "gemm-ar" && m % world0 !== 0) || (o.bench !== "ag-gemm" && k % world0 !== 0))
      fail(
        `bench ${o.bench}: shape ${m}x?x${k}: ${o.bench === "ag-gemm" ? "m" : o.bench === "gemm-rs" ? "m and k" : "k"} must divide by ${world0} ranks`,
      );
  }
  const staging = fusedStagingBytes(o.bench, o.shapes, world0, o.elem);
  const group: Group =
    o.group ?? (await ProcessGroup.world<GpuCollectives>({}, (g) => GpuCollectives.create(g, staging)));
  const { device, rank, worldSize: world } = group;
  const c = group.collectives;
  const stream = Stream.create(device);
  const comm = await group.nccl();
  if (rank === 0) await group.store.set(`bench/${o.bench}/seed`, String(freshSeed()));
  const seed = BigInt((await group.store.get(`bench/${o.bench}/seed`)).toString());
  using progress = startProgress({ title: o.bench, total: o.shapes.length, rank });
  progress.log(`seed ${seed}`);
  const chosen = o.implementations
    ? FUSED_IMPLS[o.bench].filter((i) => i === "nccl_cublaslt" || o.implementations!.includes(i))
    : FUSED_IMPLS[o.bench];
  const implementations = [...chosen, ...FLOORS];
  const scales =
    o.elem === "fp8e4m3"
      ? {
          scaleA: Tensor.fromHost([0.5], "f32", { device }),
          scaleB: Tensor.fromHost([0.25], "f32", { device }),
        }
      : {};
  const rows: FusedRow[] = [];
  for (const [m, n, k] of o.shapes) {
    progress.step(`${o.bench} ${m}x${n}x${k}: validating and timing ${implementations.join(", ")} ...`);
    const gen = { device, stream, seed, low: -1, high: 1 };
    const ag = o.bench === "ag-gemm";
    const rankK = ag ? k : k / world;
    const a = Tensor.rand(ag ? [m / world, k] : [m, rankK], o.elem, { ...gen, offset: BigInt(rank) << 40n });
    const b = Tensor.rand([n, rankK], o.elem, { ...gen, offset: (BigInt(rank) << 40n) + (1n << 39n) });
    const outRows = o.bench === "gemm-rs" ? m / world : m;
    const outs = implementations.map(() => Tensor.empty([outRows, n], "bf16", { device }));
    const floorOuts = FLOORS.map(() => Tensor.empty([m, n], "bf16", { device }));
    const gathered = Tensor.empty([m, k], o.elem, { device });
    const floorA = ag ? gathered : a;
    const runs = implementations.map((name, i): (() => void) => {
      if (name === "gemm_alone")
        return () => void matmul(floorA, b, { out: floorOuts[0]!, stream, ...scales });
      if (name === "cublaslt_alone")
        return () => void matmul(floorA, b, { out: floorOuts[1]!, stream, impl: "cublaslt", ...scales });
      if (ag)
        return () =>
          void c.allGatherMatmul(a, b, {
            algorithm: name as AllGatherMatmulAlgorithm,
            out: outs[i]!,
            gathered,
            stream,
            ...scales,
          });
      if (o.bench === "gemm-ar")
        return () =>
          void c.matmulAllReduce(a, b, {
            algorithm: name as MatmulAllReduceAlgorithm,
            out: outs[i]!,
            stream,
            ...scales,
          });
      return () =>
        void c.matmulReduceScatter(a, b, {
          algorithm: name as MatmulReduceScatterAlgorithm,
          out: outs[i]!,
          stream,
          ...scales,
        });
    });
    for (const run of runs) run();
    group.synchronize(stream);
    comm.synchronize(stream);
    validate(o.bench, implementations, outs, rank, world, `${m}x${n}x${k}`);
    const flops = 2 * m * n * rankK;
    const perGraph = Math.max(2, Math.min(50, Math.ceil(10e-3 / (flops / 600e12))));
    const times = await timeTogether(group, stream, runs, { perGraph, replays: 10 });
    const us = Object.fromEntries(implementations.map((name, i) => [name, times[i]!]));
    rows.push({ m, n, k, rankFlops: flops, us });
    progress.log(`  ${implementations.map((x) => `${x} ${us[x]!.toFixed(1)}`).join(", ")} us`);
    for (const t of [a, b, gathered, ...outs, ...floorOuts]) t.dispose();
  }
  stream.dispose();
  const result =
    rank === 0
      ? {
          environment: benchEnvironment(device, world, deviceCount()),
          bench: o.bench,
          dtype: o.elem,
          seed: seed.toString(),
          implementations,
          rows,
        }
      : undefined;
  if (!o.group) await group.destroy();
  return result;
}

/**
 * symmkit's constructions (fused and sequential) bit for bit equal: they run the same GEMM arithmetic and
 * sum in rank order. NCCL + cuBLASLt within bf16 rounding of them.
 */
function validate(
  bench: FusedBench,
  names: readonly string[],
  outs: readonly Tensor[],
  rank: number,
  world: number,
  shape: string,
): void {
  const ours = names.flatMap((n, i) =>
    n.startsWith("fused") || n === "sequential" ? [[n, outs[i]!.toHost()] as const] : [],
  );
  const [first, want] = ours[0]!;
  for (const [name, got] of ours) {
    for (let i = 0; i < want.length; i++)
      if (got[i] !== want[i])
        fail(
          `${bench} ${shape}: ${name} and ${first} differ at element ${i} (rank ${rank} of ${world}); not timing a wrong kernel`,
        );
  }
  const j = names.indexOf("nccl_cublaslt");
  if (j >= 0) {
    const rel = relFrobenius(
      outs[j]!.toHost({ decode: true }),
      outs[names.indexOf(ours[0]![0])]!.toHost({ decode: true }),
    );
    if (!(rel < 1e-2))
      fail(`${bench} ${shape}: NCCL + cuBLASLt differs from symmkit by ${rel} (relative Frobenius)`);
  }
}

export function formatFused(r: FusedBenchResult): string {
  const impls = r.implementations;
  // Where no fused construction was timed (--implementations), symmkit's best is its sequential one.
  const fusedOnly = impls.filter((i) => i.startsWith("fused"));
  const fused = fusedOnly.length ? fusedOnly : impls.filter((i) => i === "sequential");
  const header = [
    "m",
    "n",
    "k",
    ...impls.map((i) => `${i} us`),
    "best fused TFLOP/s",
    "fused/gemm_alone",
    "speedup vs nccl_cublaslt",
    "fused/sequential",
  ];
  const rows = r.rows.map((x) => {
    const best = Math.min(...fused.map((i) => x.us[i]!));
    return [
      String(x.m),
      String(x.n),
      String(x.k),
      ...impls.map((i) => x.us[i]!.toFixed(1)),
      (x.rankFlops / best / 1e6).toFixed(0),
      (best / x.us.gemm_alone!).toFixed(3),
      (x.us.nccl_cublaslt! / best).toFixed(2),
      (best / x.us.sequential!).toFixed(3),
    ];
  });
  return [
    `${r.bench}, ${r.dtype}, ${r.environment.worldSize} x ${r.environment.device}`,
    table(header, rows),
  ].join("\n");
}
