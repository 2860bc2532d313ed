// All-reduce + bias + residual + RMSNorm as every backend checks it: shapes, dtypes and options judged
// from the tensors' descriptions, with the same typed errors on CPU and GPU, before anything is written.
// Aliasing is judged by the backend (it knows where tensors live) through checkNormAliasing.
import { InvalidArgumentError } from "../../errors.js";
import type { DType } from "../../runtime/dtype.js";
import { algorithmList, autoCandidates } from "../records.js";
import { checkTensorArg } from "../validate.js";
import { NORM_DTYPES } from "./programs.js";
import { AR_NORM } from "./records.js";

/** allReduceRmsNorm's algorithms on GPUs, auto first (what each does: ./records.ts). */
export const AR_NORM_ALGORITHMS = algorithmList(AR_NORM, "cuda");
export type ArNormAlgorithm = (typeof AR_NORM_ALGORITHMS)[number];
/** Every algorithm but auto: what `symmkit bench ar-norm` times. */
export const AR_NORM_TUNABLE = AR_NORM_ALGORITHMS.filter((a) => a !== "auto");
/** Whether each algorithm gives the rank-order reference's bits at every size and world (see
 * AR_NORM_ALGORITHMS); auto picks only those. */
export const AR_NORM_RANK_ORDER = Object.fromEntries(
  AR_NORM_TUNABLE.map((a) => [a, AR_NORM[a].rankOrder]),
) as Readonly<Record<Exclude<ArNormAlgorithm, "auto">, boolean>>;
/** What auto may pick (tune tables name these): the rank-order algorithms. */
export const AR_NORM_AUTO = autoCandidates(AR_NORM);
/** What callers may name but auto never picks. */
export const AR_NORM_BASELINES = AR_NORM_TUNABLE.filter((a) => !AR_NORM[a].rankOrder);
/** The CPU backend computes the reference: the sequential construction. */
export const CPU_AR_NORM_ALGORITHMS = algorithmList(AR_NORM, "cpu");
export type CpuArNormAlgorithm = (typeof CPU_AR_NORM_ALGORITHMS)[number];

/**
 * How far the nccl algorithm's result may lie from the rank-order reference, as a relative Frobenius
 * difference over the whole output (or residualOut) of `dtype` at `world` ranks. NCCL rounds each of its
 * world - 1 partial sums to x's dtype, each by at most half an ulp (2^-8 of the value in bf16, 2^-11 in
 * f16) where rank order rounds once; the norm divides by each row's rms, so those errors move the output
 * by about as much, relatively. `world` ulps bounds world - 1 such roundings with room (their expected sum
 * is about sqrt(world) half-ulps), and stays far below what a missing or doubled rank's x makes (about
 * 1 / sqrt(world + 1)). An fp8e4m3 output may differ by an ulp of its own (2^-3) wherever the two sums
 * round apart.
 */
export function ncclNormTolerance(dtype: DType, world: number): number {
  if (dtype === "fp8e4m3") return 2 ** -3;
  return world * (dtype === "bf16" ? 2 ** -7 : 2 ** -10);
}

/** Hidden sizes the kernels take: multiples of 8 up to this (a row is one block of 512 threads, 4 groups
 * of 8 elements each). */
export const MAX_NORM_HIDDEN = 16384;

/** Options of allReduceRmsNorm (T: the backend's tensor). */
export interface AllReduceRmsNormOptions<T> {
  /** [hidden], x's dtype: the norm's scale. */
  readonly weight: T;
  /** Added to the mean square before the square root; > 0. */
  readonly eps: number;
  /** [hidden], x's dtype, added to the all-reduced sum (the same on every rank). */
  readonly bias?: T | undefined;
  /** x's shape and dtype, added after the bias (the same on every rank: two-shot adds the owner's). */
  readonly residual?: T | undefined;
  /** The normalised result, x's shape: x's dtype (default, allocated when absent) or fp8e4m3 (then
   * outputScale is required). May be x itself. */
  readonly output?: T | undefined;
  /** Where the pre-norm sum (all-reduce + bias + residual, rounded to x's dtype) goes: the next layer's
   * residual. May be residual itself, or x. Not written when absent. */
  readonly residualOut?: T | undefined;
  /** fp8 output only: the per-tensor scale the next GEMM takes; output = e4m3(y / outputScale),
   * computed as y x (1 / outputScale) in f32 and saturated. */
  readonly outputScale?: number | undefined;
}

interface Described {
  readonly shape: readonly number[];
  readonly dtype: DType;
  readonly numel: number;
}

/** A checked call: rows of `hidden` elements. */
export interface NormProblem {
  readonly rows: number;
  readonly hidden: number;
  readonly dtype: DType;
  /** The output's dtype: x's or fp8e4m3. */
  readonly outDtype: DType;
  /** f32 multiplier before the fp8 conversion; 0 for an output of x's dtype. */
  readonly outScaleInv: number;
  readonly eps: number;
}

/** Checks x and the options; `output` is the output as it will be (given or to be allocated). */
export function checkAllReduceRmsNorm(
  what: string,
  x: Described,
  o: AllReduceRmsNormOptions<Described> | undefined,
): NormProblem {
  checkTensorArg(what, "x", x);
  if (typeof o !== "object" || o === null)
    throw new InvalidArgumentError(`${what}: options with weight and eps are required`);
  checkTensorArg(what, "weight", o.weight);
  for (const name of ["bias", "residual", "output", "residualOut"] as const)
    if (o[name] !== undefined) checkTensorArg(what, name, o[name]);
  if (!NORM_DTYPES.includes(x.dtype))
    throw new InvalidArgumentError(`${what}: x must be ${NORM_DTYPES.join(" or ")}, not ${x.dtype}`);
  const hidden = x.shape.at(-1) ?? 0;
  if (x.shape.length < 1 || hidden % 8 !== 0 || hidden < 8 || hidden > MAX_NORM_HIDDEN)
    throw new InvalidArgumentError(
      `${what}: the last dimension of x (hidden, shape ${JSON.stringify(x.shape)}) must be a multiple of 8 from 8 to ${MAX_NORM_HIDDEN}`,
    );
  if (x.numel === 0) throw new InvalidArgumentError(`${what}: x has no rows`);
  const rows = x.numel / hidden;
  // The kernels add eps as a float32: judge it so.
  const eps32 = typeof o.eps === "number" ? Math.fround(o.eps) : NaN;
  if (!Number.isFinite(eps32) || !(eps32 > 0))
    throw new InvalidArgumentError(
      `${what}: eps must be a number > 0 that float32 holds (about 1.4e-45 to 3.4e38), got ${String(o.eps)}`,
    );
  const like = (name: string, t: Described | undefined, numel: number): void => {
    if (t === undefined) return;
    if (t.dtype !== x.dtype)
      throw new InvalidArgumentError(`${what}: ${name} is ${t.dtype}, x is ${x.dtype}`);
    if (t.numel !== numel)
      throw new InvalidArgumentError(
        `${what}: ${name} must have ${numel} elements, got ${t.numel} (shape ${JSON.stringify(t.shape)})`,
      );
  };
  like("weight", o.weight, hidden);
  like("bias", o.bias, hidden);
  like("residual", o.residual, x.numel);
  like("residualOut", o.residualOut, x.numel);
  let outDtype = x.dtype;
  let outScaleInv = 0;
  if (o.output !== undefined) {
    outDtype = o.output.dtype;
    if (outDtype !== x.dtype && outDtype !== "fp8e4m3")
      throw new InvalidArgumentError(`${what}: output must be ${x.dtype} or fp8e4m3, not ${outDtype}`);
    if (o.output.numel !== x.numel)
      throw new InvalidArgumentError(
        `${what}: output must have ${x.numel} elements, got ${o.output.numel} (shape ${JSON.stringify(o.output.shape)})`,
      );
  }
  if (outDtype === "fp8e4m3") {
    const s = o.outputScale;
    if (typeof s !== "number" || !Number.isFinite(s) || !(s > 0))
      throw new InvalidArgumentError(
        `${what}: an fp8e4m3 output needs outputScale, a finite number > 0, got ${String(s)}`,
      );
    outScaleInv = Math.fround(1 / s);
    if (!(outScaleInv > 0) || !Number.isFinite(outScaleInv))
      throw new InvalidArgumentError(`${what}: outputScale ${s} has no finite float32 reciprocal`);
  } else if (o.outputScale !== undefined) {
    throw new InvalidArgumentError(`${what}: outputScale comes with an fp8e4m3 output only`);
  }
  return { rows, hidden, dtype: x.dtype, outDtype, outScaleInv, eps: o.eps };
}

/**
 * A digest of allReduceRmsNorm's weight and bias, by their bytes (32-bit FNV-1a over the weight, then the
 * bias, or a marker for none): its fingerprint carries it (SHAPES), so ranks whose weight or bias differ,
 * which the contract forbids and which the two-shot algorithms would otherwise mix silently (each rank's
 * rows normalised with their owner's), end in CollectiveMismatchError. 0 means not taken.
 */
export function normOperandsDigest(weight: ArrayBufferView, bias: ArrayBufferView | undefined): number {
  let h = 0x811c9dc5;
  const mix = (a: ArrayBufferView): void => {
    const bytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
    for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i]!, 0x01000193);
  };
  mix(weight);
  if (bias) mix(bias);
  else h = Math.imul(h ^ 0xff, 0x01000193);
  // Never 0 (not taken).
  return h >>> 0 || 1;
}

/**
 * What may share memory: output with x, residualOut with residual or x (each read before it is written,
 * by the thread that writes it). Anything else that overlaps is refused: the kernels would read what
 * they already overwrote.
 */
export function checkNormAliasing<T>(
  what: string,
  x: T,
  o: AllReduceRmsNormOptions<T>,
  output: T,
  overlaps: (a: T, b: T) => boolean,
  same: (a: T, b: T) => boolean,
): void {
  const named: [string, T | undefined][] = [
    ["x", x],
    ["weight", o.weight],
    ["bias", o.bias],
    ["residual", o.residual],
    ["output", output],
    ["residualOut", o.residualOut],
  ];
  const allowed = new Set(["output/x", "residualOut/residual", "residualOut/x"]);
  const readOnly = new Set(["x", "weight", "bias", "residual"]);
  for (let i = 0; i < named.length; i++) {
    for (let j = 0; j < i; j++) {
      const [a, ta] = named[i]!;
      const [b, tb] = named[j]!;
      if (ta === undefined || tb === undefined || (readOnly.has(a) && readOnly.has(b))) continue;
      if (!overlaps(ta, tb)) continue;
      if (allowed.has(`${a}/${b}`) && same(ta, tb)) continue;
      throw new InvalidArgumentError(
        `${what}: ${a} overlaps ${b}; only output = x, residualOut = residual and residualOut = x may share memory, and then exactly`,
      );
    }
  }
}
