// The tensor-parallel matmuls with their communication fused in, as every backend checks them: shapes,
// dtypes and layouts judged from the tensors' descriptions, with the same typed errors on CPU and GPU,
// before anything is written. The backends add what only they can judge (devices, alignment, overlap,
// workspace).
import { InvalidArgumentError } from "../../errors.js";
import type { DType } from "../../runtime/dtype.js";
import { checkOutput, matmulShapes, type BLayout, type MatmulProblem } from "../gemm/matmul.js";
import { checkAllReduceRmsNorm, type AllReduceRmsNormOptions, type NormProblem } from "../norm/checks.js";
import { algorithmList } from "../records.js";
import type { FusedRule, TunedFused } from "../tune-table.js";
import { ALL_GATHER_MATMUL, MATMUL_ALL_REDUCE, MATMUL_REDUCE_SCATTER, type FusedRecord } from "./records.js";

/** The fused matmuls' algorithms on GPUs, auto first (what each does: ./records.ts). GEMM + all-reduce's
 * fused and sequential run the same split-K GEMM and give the same bits: its bf16 output summed in f32 in
 * rank order, rounded once; auto takes the tune table's rule (`symmkit tune` measures decode sizes), else
 * sequential. */
export const ALL_GATHER_MATMUL_ALGORITHMS = algorithmList(ALL_GATHER_MATMUL, "cuda");
export type AllGatherMatmulAlgorithm = (typeof ALL_GATHER_MATMUL_ALGORITHMS)[number];
export const MATMUL_REDUCE_SCATTER_ALGORITHMS = algorithmList(MATMUL_REDUCE_SCATTER, "cuda");
export type MatmulReduceScatterAlgorithm = (typeof MATMUL_REDUCE_SCATTER_ALGORITHMS)[number];
export const MATMUL_ALL_REDUCE_ALGORITHMS = algorithmList(MATMUL_ALL_REDUCE, "cuda");
export type MatmulAllReduceAlgorithm = (typeof MATMUL_ALL_REDUCE_ALGORITHMS)[number];

/** Every algorithm but auto, by fused matmul (tune tables may name those auto picks: src/ops/tune-known.ts). */
export const FUSED_TUNABLE = {
  "all-gather-matmul": ALL_GATHER_MATMUL_ALGORITHMS.filter((a) => a !== "auto"),
  "matmul-reduce-scatter": MATMUL_REDUCE_SCATTER_ALGORITHMS.filter((a) => a !== "auto"),
  "matmul-all-reduce": MATMUL_ALL_REDUCE_ALGORITHMS.filter((a) => a !== "auto"),
};
/** The records by fused matmul, as tune tables name them. */
export const FUSED_RECORDS = {
  "all-gather-matmul": ALL_GATHER_MATMUL,
  "matmul-reduce-scatter": MATMUL_REDUCE_SCATTER,
  "matmul-all-reduce": MATMUL_ALL_REDUCE,
} as const;

/** auto's built-in rule of one fused matmul, from its records' bounds, ascending (pickFusedRule). */
const rulesOf = (records: Readonly<Record<string, FusedRecord>>): FusedRule[] =>
  Object.entries(records)
    .flatMap(([algorithm, r]) => (r.autoMaxRows === undefined ? [] : [{ maxRows: r.autoMaxRows, algorithm }]))
    .sort((a, b) => a.maxRows - b.maxRows);
/** What auto picks where no tune table has fused rules (./records.ts says why). */
export const BUILT_IN_FUSED_RULES: Readonly<Record<TunedFused, readonly FusedRule[]>> = {
  "all-gather-matmul": rulesOf(ALL_GATHER_MATMUL),
  "matmul-reduce-scatter": rulesOf(MATMUL_REDUCE_SCATTER),
  "matmul-all-reduce": rulesOf(MATMUL_ALL_REDUCE),
};

/** The CPU backend computes the reference only: the sequential construction (the same for all three). */
export const CPU_FUSED_MATMUL_ALGORITHMS = algorithmList(MATMUL_REDUCE_SCATTER, "cpu");
export type CpuFusedMatmulAlgorithm = (typeof CPU_FUSED_MATMUL_ALGORITHMS)[number];

interface Described {
  readonly shape: readonly number[];
  readonly dtype: DType;
}

/** Options both backends take (T: the backend's tensor). */
export interface FusedMatmulOptions<T> {
  /** How b is stored: "nk" (default) row-major [n, k], as nn.Linear keeps weights; "kn" row-major [k, n]. */
  readonly layoutB?: BLayout;
  /** fp8 only: per-tensor scales, one f32 each; scaleA must be the same on every rank. */
  readonly scaleA?: T;
  readonly scaleB?: T;
  /** The bf16 result; allocated when absent. Must not overlap an input. */
  readonly out?: T;
}

/** matmulAllReduce's norm: allReduceRmsNorm's options but its output, which is `out`. */
export type MatmulRmsNormOptions<T> = Omit<AllReduceRmsNormOptions<T>, "output">;

export interface MatmulAllReduceOptions<T> extends FusedMatmulOptions<T> {
  /** Normalise the sum (+ bias + residual) by rows: out is then the norm's output (bf16, or fp8e4m3
   * with outputScale). */
  readonly rmsNorm?: MatmulRmsNormOptions<T> | undefined;
}

export interface AllGatherMatmulOptions<T> extends FusedMatmulOptions<T> {
  /** Where the gathered A ([world x rows of aShard, k]) goes; allocated when absent. */
  readonly gathered?: T;
}

/** The gathered problem of all-gather + GEMM, with the shard's rows. */
export interface FusedProblem extends MatmulProblem {
  readonly shardRows: number;
}

/**
 * all-gather + GEMM: aShard [shardRows, k] on each rank, b [n, k] (or [k, n]); D = gather(aShard) x b^T
 * is [world x shardRows, n].
 */
export function checkAllGatherMatmul(
  what: string,
  world: number,
  aShard: Described,
  b: Described,
  o: AllGatherMatmulOptions<Described>,
): FusedProblem {
  const p = matmulShapes(what, aShard, b, o);
  const m = p.m * world;
  if (o.out) checkOutput(what, "out", o.out, m, p.n, "bf16");
  if (o.gathered) checkOutput(what, "gathered", o.gathered, m, p.k, p.elem);
  return { ...p, m, shardRows: p.m };
}

/**
 * GEMM + reduce-scatter: a [m, k] (this rank's slice of the contraction), b [n, k] (or [k, n]); the
 * result is rank r's rows [r x m / world, (r + 1) x m / world) of the sum over ranks, [m / world, n].
 */
export function checkMatmulReduceScatter(
  what: string,
  world: number,
  a: Described,
  b: Described,
  o: FusedMatmulOptions<Described>,
): FusedProblem {
  const p = matmulShapes(what, a, b, o);
  if (p.m % world !== 0)
    throw new InvalidArgumentError(
      `${what}: m = ${p.m} rows of a do not split evenly over ${world} ranks; pad m to a multiple of ${world}`,
    );
  const shardRows = p.m / world;
  if (o.out) checkOutput(what, "out", o.out, shardRows, p.n, "bf16");
  return { ...p, shardRows };
}

/**
 * GEMM + all-reduce: a [m, k] (this rank's slice of the contraction), b [n, k] (or [k, n]); out [m, n] is
 * the sum over ranks on every rank (bf16), or with `rmsNorm` its norm (checked as allReduceRmsNorm's x,
 * the bf16 partial, with out as its output). Returns the problem and the norm's, if any.
 */
export function checkMatmulAllReduce(
  what: string,
  a: Described,
  b: Described,
  o: MatmulAllReduceOptions<Described & { readonly numel: number }>,
): { readonly p: FusedProblem; readonly norm: NormProblem | undefined } {
  const p = matmulShapes(what, a, b, o);
  const fp: FusedProblem = { ...p, shardRows: p.m };
  if (o.rmsNorm === undefined) {
    if (o.out) checkOutput(what, "out", o.out, p.m, p.n, "bf16");
    return { p: fp, norm: undefined };
  }
  if (o.out && (o.out.shape.length !== 2 || o.out.shape[0] !== p.m || o.out.shape[1] !== p.n))
    throw new InvalidArgumentError(
      `${what}: out must be [${p.m}, ${p.n}], got ${JSON.stringify(o.out.shape)}`,
    );
  const partial = { shape: [p.m, p.n], dtype: "bf16" as const, numel: p.m * p.n };
  // Without out, the output to be allocated: fp8e4m3 with an outputScale, else bf16.
  const output = o.out ?? { ...partial, dtype: o.rmsNorm.outputScale !== undefined ? "fp8e4m3" : "bf16" };
  const norm = checkAllReduceRmsNorm(`${what} (rmsNorm)`, partial, { ...o.rmsNorm, output });
  return { p: fp, norm };
}
