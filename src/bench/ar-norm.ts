// `symmkit run -n N -- symmkit bench ar-norm`: all-reduce + bias + residual + RMSNorm, tokens x hidden
// bf16 per rank, every algorithm of allReduceRmsNorm against the plain all-reduce of the same bytes
// (symmkit's algorithms, the best of them, and NCCL's) and NCCL's all-reduce followed by the norm kernel
// (the unfused path a framework runs). Every implementation is validated first (symmkit's algorithms
// bit for bit with each other; nccl and NCCL + norm, which sum in NCCL's order, within rounding of them),
// then timed as GPU time from CUDA-graph replays (median), the graphs replayed in turn, every rank
// starting each replay together.
import { SymmkitError } from "../errors.js";
import { ProcessGroup } from "../distributed/process-group.js";
import { GpuCollectives } from "../ops/gpu-collectives.js";
import {
  AR_NORM_AUTO,
  AR_NORM_RANK_ORDER,
  AR_NORM_TUNABLE,
  ncclNormTolerance,
  type ArNormAlgorithm,
} from "../ops/norm/checks.js";
import { roomFor } from "../ops/norm/ar-norm.js";
import type { TuneRule } from "../ops/tune-table.js";
import type { GpuAllReduceAlgorithm } from "../ops/coll/registry.js";
import { rmsNorm } from "../norm.js";
import { deviceCount } from "../runtime/device.js";
import type { DType } from "../runtime/dtype.js";
import { Stream } from "../runtime/stream.js";
import { freshSeed, Tensor } from "../runtime/tensor.js";
import { perGraphFor, timeTogether } from "./collectives.js";
import { relFrobenius } from "./gemm.js";
import { startProgress } from "./progress.js";
import { benchEnvironment, table, type BenchEnvironment } from "./report.js";

export const DEFAULT_AR_NORM_TOKENS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];
export const DEFAULT_AR_NORM_HIDDEN = [4096, 8192];
/** The plain all-reduces timed beside the fused op (their best is the goal's yardstick). */
const PLAIN: readonly Exclude<GpuAllReduceAlgorithm, "auto" | "nccl">[] = [
  "lamport",
  "lamport_two_shot",
  "one_shot",
  "two_shot",
];
const EPS = 1e-5;

export interface ArNormRow {
  readonly tokens: number;
  readonly hidden: number;
  /** Bytes of x per rank. */
  readonly bytes: number;
  /** GPU us per call: allReduceRmsNorm's algorithms by name, `ar_<alg>` the plain all-reduces, `ar_nccl`
   * NCCL's, `nccl_norm` NCCL's all-reduce then the norm kernel. */
  readonly us: Readonly<Record<string, number>>;
}

export interface ArNormBenchResult {
  readonly environment: BenchEnvironment;
  readonly bench: "ar-norm";
  readonly dtype: DType;
  readonly seed: string;
  readonly rows: readonly ArNormRow[];
}

function fail(what: string): never {
  throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", what);
}

/** The staging buffer the benchmark needs: the pull algorithms stage x (bf16). */
export function arNormStagingBytes(tokens: readonly number[], hidden: readonly number[]): number {
  return Math.max(1 << 20, Math.max(...tokens) * Math.max(...hidden) * 2);
}

export async function benchArNorm(o: {
  tokens: readonly number[];
  hidden: readonly number[];
  algorithms?: readonly string[] | undefined;
  /** Run in this group (its staging buffer at least arNormStagingBytes) instead of a new one. */
  group?: ProcessGroup<GpuCollectives>;
}): Promise<ArNormBenchResult | undefined> {
  const dtype: DType = "bf16";
  const group =
    o.group ??
    (await ProcessGroup.world<GpuCollectives>({}, (g) =>
      GpuCollectives.create(g, arNormStagingBytes(o.tokens, o.hidden)),
    ));
  const { device, rank, worldSize: world } = group;
  const c = group.collectives;
  const comm = await group.nccl();
  const stream = Stream.create(device);
  if (rank === 0) await group.store.set("bench/ar-norm/seed", String(freshSeed()));
  const seed = BigInt((await group.store.get("bench/ar-norm/seed")).toString());
  const shapes = o.hidden.flatMap((hidden) => o.tokens.map((tokens) => [tokens, hidden] as const));
  using progress = startProgress({ title: "ar-norm", total: shapes.length, rank });
  progress.log(`seed ${seed}`);
  const fusedNames = AR_NORM_TUNABLE.filter((a) => !o.algorithms || o.algorithms.includes(a));
  const rows: ArNormRow[] = [];
  for (const [tokens, hidden] of shapes) {
    const bytes = tokens * hidden * 2;
    const gen = { device, stream, seed, low: -1, high: 1 };
    const x = Tensor.rand([tokens, hidden], dtype, { ...gen, offset: BigInt(rank) << 40n });
    const weight = Tensor.rand([hidden], dtype, { ...gen, offset: 1n << 39n, low: 0.5, high: 1.5 });
    const bias = Tensor.rand([hidden], dtype, { ...gen, offset: 3n << 38n, low: -0.1, high: 0.1 });
    const residual = Tensor.rand([tokens, hidden], dtype, { ...gen, offset: 5n << 38n });
    const fused = fusedNames.filter(
      (a) => roomFor(a, bytes, tokens, world, c.mailboxSlotBytes, c.capacityBytes, false) === undefined,
    );
    const plain = PLAIN.filter((a) => c.canRun("all-reduce", a, bytes, bytes));
    const names = [...fused, ...plain.map((a) => `ar_${a}`), "ar_nccl", "nccl_norm"];
    const outs = names.map(() => Tensor.empty([tokens, hidden], dtype, { device }));
    const resOuts = names.map(() => Tensor.empty([tokens, hidden], dtype, { device }));
    const runs = names.map((name, i): (() => void) => {
      const out = outs[i]!;
      const residualOut = resOuts[i]!;
      if (name === "ar_nccl") return () => comm.allReduce(x, out, "sum", stream);
      if (name === "nccl_norm")
        return () => {
          comm.allReduce(x, out, "sum", stream);
          rmsNorm(out, { weight, bias, residual, eps: EPS, output: out, residualOut, stream });
        };
      if (name.startsWith("ar_")) {
        const algorithm = name.slice(3) as GpuAllReduceAlgorithm;
        return () => void c.allReduce(x, { algorithm, output: out, stream });
      }
      const algorithm = name as ArNormAlgorithm;
      return () =>
        void c.allReduceRmsNorm(x, {
          weight,
          bias,
          residual,
          eps: EPS,
          output: out,
          residualOut,
          algorithm,
          stream,
        });
    });
    progress.step(`ar-norm ${tokens} x ${hidden}: validating and timing ${names.join(", ")} ...`);
    for (const run of runs) run();
    group.synchronize(stream);
    comm.synchronize(stream);
    validate(names, outs, resOuts, `${tokens} x ${hidden}`, rank, world, dtype);
    const times = await timeTogether(group, stream, runs, { perGraph: perGraphFor(bytes) });
    const us = Object.fromEntries(names.map((n, i) => [n, times[i]!]));
    rows.push({ tokens, hidden, bytes, us });
    progress.log(`  ${tokens} x ${hidden}: ${names.map((n) => `${n} ${us[n]!.toFixed(1)}`).join(", ")} us`);
    for (const t of [x, weight, bias, residual, ...outs, ...resOuts]) t.dispose();
  }
  stream.dispose();
  const result =
    rank === 0
      ? {
          environment: benchEnvironment(device, world, deviceCount()),
          bench: "ar-norm" as const,
          dtype,
          seed: seed.toString(),
          rows,
        }
      : undefined;
  if (!o.group) await group.destroy();
  return result;
}

/** Whether `name` (an allReduceRmsNorm algorithm, `ar_<alg>` or `nccl_norm`) gives the rank-order bits. */
const rankOrder = (name: string): boolean =>
  (AR_NORM_RANK_ORDER as Readonly<Record<string, boolean>>)[name] === true;

/** symmkit's algorithms bit for bit equal (output and residualOut); nccl and NCCL + norm, which sum in
 * NCCL's order, within rounding of them (ncclNormTolerance). */
function validate(
  names: readonly string[],
  outs: readonly Tensor[],
  resOuts: readonly Tensor[],
  shape: string,
  rank: number,
  world: number,
  dtype: DType,
): void {
  const exact = names.flatMap((n, i) => (rankOrder(n) ? [i] : []));
  const first = exact[0];
  if (first === undefined) return;
  const want = outs[first]!.toHost();
  const wantRes = resOuts[first]!.toHost();
  for (const i of exact) {
    const got = outs[i]!.toHost();
    const gotRes = resOuts[i]!.toHost();
    for (let j = 0; j < want.length; j++)
      if (got[j] !== want[j] || gotRes[j] !== wantRes[j])
        fail(
          `ar-norm ${shape}: ${names[i]} and ${names[first]} differ at element ${j} (rank ${rank}); not timing a wrong kernel`,
        );
  }
  const tol = ncclNormTolerance(dtype, world);
  const ref = outs[first]!.toHost({ decode: true });
  const refRes = resOuts[first]!.toHost({ decode: true });
  for (const [i, n] of names.entries()) {
    if (n !== "nccl" && n !== "nccl_norm") continue;
    const rel = relFrobenius(outs[i]!.toHost({ decode: true }), ref);
    const relRes = relFrobenius(resOuts[i]!.toHost({ decode: true }), refRes);
    if (!(rel <= tol && relRes <= tol))
      fail(
        `ar-norm ${shape}: ${n} differs from ${names[first]} by ${rel} (output) and ${relRes} (residualOut), relative Frobenius, more than NCCL's rounding allows (${tol}) (rank ${rank}); not timing a wrong path`,
      );
  }
}

/** auto's rules a benchmark gives: per size the fastest of auto's candidates (the rank-order algorithms)
 * at the largest hidden size measured, runs of one merged. */
export function arNormRulesFrom(result: ArNormBenchResult): TuneRule[] {
  const hidden = Math.max(...result.rows.map((r) => r.hidden));
  const rules: TuneRule[] = [];
  for (const row of result.rows.filter((r) => r.hidden === hidden).sort((a, b) => a.bytes - b.bytes)) {
    const best = Object.entries(row.us)
      .filter(([name]) => (AR_NORM_AUTO as readonly string[]).includes(name))
      .sort((a, b) => a[1] - b[1])[0];
    if (!best) continue;
    const last = rules.at(-1);
    if (last?.algorithm === best[0]) rules[rules.length - 1] = { maxBytes: row.bytes, algorithm: best[0] };
    else rules.push({ maxBytes: row.bytes, algorithm: best[0] });
  }
  return rules;
}

export function formatArNorm(r: ArNormBenchResult): string {
  const names = [...new Set(r.rows.flatMap((x) => Object.keys(x.us)))];
  const fused = names.filter((n) => (AR_NORM_AUTO as readonly string[]).includes(n));
  const plain = names.filter((n) => n.startsWith("ar_") && n !== "ar_nccl");
  const header = [
    "tokens",
    "hidden",
    ...names.map((n) => `${n} us`),
    "best fused",
    "fused/best plain AR",
    "fused/nccl_norm",
  ];
  const rows = r.rows.map((x) => {
    const [bestName, best] = fused
      .filter((n) => x.us[n] !== undefined)
      .map((n) => [n, x.us[n]!] as const)
      .sort((a, b) => a[1] - b[1])[0] ?? ["-", NaN];
    const bestPlain = Math.min(...plain.filter((n) => x.us[n] !== undefined).map((n) => x.us[n]!));
    return [
      String(x.tokens),
      String(x.hidden),
      ...names.map((n) => (x.us[n] === undefined ? "-" : x.us[n].toFixed(1))),
      bestName,
      (best / bestPlain).toFixed(2),
      (best / x.us.nccl_norm!).toFixed(2),
    ];
  });
  return [
    `ar-norm, ${r.dtype}, ${r.environment.worldSize} x ${r.environment.device}`,
    table(header, rows),
  ].join("\n");
}
