// `symmkit run -n N -- symmkit tune`: measures every algorithm of every collective on this machine (the
// benchmarks of bench/collectives.ts: validated, graph-timed, NCCL in the same run, for reference) and
// writes the table `algorithm: "auto"` picks from (src/ops/tune-table.ts): per size, the fastest of auto's
// candidates (for an op that sums over ranks, the algorithms that give the rank-order bits, never NCCL's
// sums) that a group with the default mailbox can run.
import fs from "node:fs";
import path from "node:path";
import { DEFAULT_MAILBOX_SLOT_BYTES } from "../ops/gpu-group.js";
import { TUNE_KNOWN } from "../ops/tune-known.js";
import { mailboxBytesPerPeer } from "../ops/coll/registry.js";
import {
  checkTuneTable,
  TUNED_COLLECTIVES,
  tuneFileName,
  userTuneDir,
  type FusedRule,
  type FusedRules,
  type TunedCollective,
  type TunedFused,
  type TuneRule,
  type TuneTable,
} from "../ops/tune-table.js";
import { arNormRulesFrom, arNormStagingBytes, benchArNorm, type ArNormBenchResult } from "./ar-norm.js";
import type { LtElem } from "../ops/gemm/cublaslt-matmul.js";
import { benchFused, fusedStagingBytes, type FusedBenchResult } from "./fused.js";
import { startProgress } from "./progress.js";
import type { GemmShape } from "./gemm.js";
import type { DType } from "../runtime/dtype.js";
import {
  benchAllGather,
  benchAllReduce,
  benchGroup,
  benchReduceScatter,
  type CollectiveBenchResult,
} from "./collectives.js";

/** The rules a benchmark's rows give: per size the fastest usable algorithm, runs of one merged. */
export function rulesFrom(
  result: CollectiveBenchResult,
  usable: (collective: TunedCollective, algorithm: string, bytes: number) => boolean,
): TuneRule[] {
  const world = result.environment.worldSize;
  const rules: TuneRule[] = [];
  for (const row of result.rows) {
    // Rows count all-gather and reduce-scatter bytes over all ranks; tables count them per rank.
    const bytes = result.collective === "all-reduce" ? row.bytes : row.bytes / world;
    const best = Object.entries(row.us)
      .filter(([name]) => !name.endsWith("_plain") && usable(result.collective, name, bytes))
      .sort((a, b) => a[1] - b[1])[0];
    if (!best) continue;
    const last = rules.at(-1);
    if (last?.algorithm === best[0]) rules[rules.length - 1] = { maxBytes: bytes, algorithm: best[0] };
    else rules.push({ maxBytes: bytes, algorithm: best[0] });
  }
  return rules;
}

/** What `symmkit tune` may write a rule for at `world` ranks: auto's candidates (TUNE_KNOWN: for the
 * reductions, the rank-order algorithms) that fit the default mailbox slot at that size. */
export function tuneUsable(world: number) {
  return (collective: TunedCollective, algorithm: string, bytes: number): boolean =>
    TUNE_KNOWN[collective].includes(algorithm) &&
    mailboxBytesPerPeer(collective, algorithm, bytes, world) <= DEFAULT_MAILBOX_SLOT_BYTES;
}

/** The fused matmuls' rules a benchmark's rows give: per m the fastest of the fused constructions, the
 * sequential path and NCCL + cuBLASLt (not the floors), among `allowed` when given, runs of one merged. */
export function fusedRulesFrom(result: FusedBenchResult, allowed?: readonly string[]): FusedRule[] {
  const rules: FusedRule[] = [];
  for (const row of [...result.rows].sort((a, b) => a.m - b.m)) {
    const best = Object.entries(row.us)
      .filter(([name]) => !name.endsWith("_alone") && (!allowed || allowed.includes(name)))
      .sort((a, b) => a[1] - b[1])[0];
    if (!best) continue;
    const last = rules.at(-1);
    if (last?.algorithm === best[0]) rules[rules.length - 1] = { maxRows: row.m, algorithm: best[0] };
    else rules.push({ maxRows: row.m, algorithm: best[0] });
  }
  return rules;
}

/** The fused matmuls' problems `symmkit tune` measures: m from 256 to 8192 rows at n = k = 8192. */
export const FUSED_TUNE_SHAPES: readonly GemmShape[] = [256, 512, 1024, 2048, 4096, 8192].map(
  (m) => [m, 8192, 8192] as const,
);

/** GEMM + all-reduce's problems `symmkit tune` measures: decode sizes of a 70B row-parallel layer (k in
 * all; those whose k the world divides). */
export const GEMM_AR_TUNE_SHAPES: readonly GemmShape[] = [1, 8, 32, 64, 128, 256, 512].map(
  (m) => [m, 8192, 28672] as const,
);

/** allReduceRmsNorm's sizes `symmkit tune` measures: 1 to 4096 tokens at hidden 8192. */
export const AR_NORM_TUNE_TOKENS: readonly number[] = [
  1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096,
];
const AR_NORM_TUNE_HIDDEN = [8192];

export interface TuneResult {
  readonly table: TuneTable;
  readonly file: string;
  readonly results: readonly CollectiveBenchResult[];
  readonly fused: readonly FusedBenchResult[];
  readonly arNorm: ArNormBenchResult | undefined;
}

/** Collective: every rank measures; rank 0 writes the table into `dir` (default the user's tune dir). */
export async function tune(options: {
  sizes: readonly number[];
  dtype: DType;
  dir?: string | undefined;
}): Promise<TuneResult | undefined> {
  const elem: LtElem = "bf16";
  // The world is known only once the group exists: stage for the largest (8 ranks) GEMM + all-reduce.
  const fusedStaging = Math.max(
    fusedStagingBytes("gemm-rs", FUSED_TUNE_SHAPES, 1, elem),
    fusedStagingBytes("gemm-ar", GEMM_AR_TUNE_SHAPES, 8, elem),
  );
  const staging = Math.max(fusedStaging, arNormStagingBytes(AR_NORM_TUNE_TOKENS, AR_NORM_TUNE_HIDDEN));
  // The collectives' largest need: the copy-engine all-reduce's and reduce-scatter's, about world x size.
  const largest = Math.max(...options.sizes, 1 << 20);
  const group = await benchGroup(largest, (world) => Math.max((world + 1) * largest, staging));
  const world = group.worldSize;
  const o = { sizes: options.sizes, dtype: options.dtype, group };
  const shapes = FUSED_TUNE_SHAPES.filter(([m]) => m % world === 0);
  const arShapes = GEMM_AR_TUNE_SHAPES.filter(([, , k]) => k % world === 0);
  // One bar for the whole run: the five benchmarks below advance it (each prints its own lines without
  // a terminal). Held for its dispose at the end of the run.
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  using _bar = startProgress({
    title: "tune",
    total: 3 * options.sizes.length + 2 * shapes.length + arShapes.length + AR_NORM_TUNE_TOKENS.length,
    rank: group.rank,
    echoSteps: false,
  });
  const results = [await benchAllReduce(o), await benchAllGather(o), await benchReduceScatter(o)];
  const fusedResults = [
    await benchFused({ bench: "ag-gemm", shapes, elem, group }),
    await benchFused({ bench: "gemm-rs", shapes, elem, group }),
    ...(arShapes.length ? [await benchFused({ bench: "gemm-ar", shapes: arShapes, elem, group })] : []),
  ];
  const arNorm = await benchArNorm({ tokens: AR_NORM_TUNE_TOKENS, hidden: AR_NORM_TUNE_HIDDEN, group });
  const device = group.device.props.name;
  await group.destroy();
  if (results.some((r) => r === undefined) || fusedResults.some((r) => r === undefined) || !arNorm)
    return undefined;
  const [ag, rs, ar] = fusedResults as FusedBenchResult[];
  const measured = results as CollectiveBenchResult[];
  const usable = tuneUsable(world);
  const rules = Object.fromEntries(
    TUNED_COLLECTIVES.map((c, i) => [c, rulesFrom(measured[i]!, usable)]),
  ) as Record<TunedCollective, TuneRule[]>;
  const env = measured[0]!.environment;
  const fusedRules = (op: TunedFused, r: FusedBenchResult) => fusedRulesFrom(r, TUNE_KNOWN[op]);
  const fused: FusedRules = {
    gitRevision: env.gitRevision,
    date: env.date,
    "all-gather-matmul": fusedRules("all-gather-matmul", ag!),
    "matmul-reduce-scatter": fusedRules("matmul-reduce-scatter", rs!),
    ...(ar ? { "matmul-all-reduce": fusedRules("matmul-all-reduce", ar) } : {}),
  };
  const file = path.join(options.dir ?? userTuneDir(), tuneFileName(device, world));
  const table = checkTuneTable(
    {
      device,
      worldSize: world,
      dtype: options.dtype,
      gitRevision: env.gitRevision,
      date: env.date,
      rules,
      fused,
      arNorm: { gitRevision: env.gitRevision, date: env.date, rules: arNormRulesFrom(arNorm) },
    },
    TUNE_KNOWN,
    file,
  );
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(table, null, 2)}\n`);
  return { table, file, results: measured, fused: fusedResults as FusedBenchResult[], arNorm };
}

export function formatTune(r: TuneResult): string {
  const lines = [`tune table for ${r.table.worldSize} x ${r.table.device}: ${r.file}`];
  for (const c of TUNED_COLLECTIVES) {
    const rules = r.table.rules[c].map((x) => `<=${x.maxBytes}: ${x.algorithm}`).join(", ");
    lines.push(`  ${c}: ${rules} (and above: the last)`);
  }
  for (const [op, rules] of Object.entries(r.table.fused ?? {})) {
    if (!Array.isArray(rules)) continue;
    lines.push(`  ${op}: ${rules.map((x: FusedRule) => `<=${x.maxRows} rows: ${x.algorithm}`).join(", ")}`);
  }
  const norm = r.table.arNorm?.rules.map((x) => `<=${x.maxBytes}: ${x.algorithm}`).join(", ");
  if (norm) lines.push(`  all-reduce-rms-norm: ${norm} (and above: the last)`);
  return lines.join("\n");
}
