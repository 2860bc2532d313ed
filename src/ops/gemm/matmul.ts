// matmul(a, b): D[m, n] = A[m, k] * B, bf16 or fp8 e4m3 inputs, f32 accumulation, bf16 output, on
// symmkit's Hopper GEMMs or on cuBLASLt. Every check runs before anything is launched or written.
import { InvalidArgumentError } from "../../errors.js";
import type { Ptr } from "../../cuda/native.js";
import type { Device } from "../../runtime/device.js";
import { defaultStream, type Stream } from "../../runtime/stream.js";
import { Tensor } from "../../runtime/tensor.js";
import { dtypeInfo, type DType } from "../../runtime/dtype.js";
import { CublasLtMatmul, type BLayout, type LtElem } from "./cublaslt-matmul.js";
import { gemmKernelFor, gemmTiles, HopperGemm, splitsFor } from "./hopper-gemm.js";
import { GEMM_TILE_M, type GemmVariant } from "./programs.js";
import {
  decodeFits,
  DecodeGemm,
  decodePlan,
  decodeTiles,
  decodeVariant,
  describeDecodeShape,
  type DecodeShape,
} from "./decode-gemm.js";

export const MATMUL_IMPLS = ["symmkit", "cublaslt"] as const;
export type MatmulImpl = (typeof MATMUL_IMPLS)[number];
export type { BLayout };

export interface MatmulOptions {
  /** Default "symmkit". */
  readonly impl?: MatmulImpl;
  /** How B is stored: "nk" (default) row-major [n, k], as nn.Linear keeps weights; "kn" row-major [k, n]. */
  readonly layoutB?: BLayout;
  /** bf16 [m, n]; allocated when absent. Must not overlap a or b. */
  readonly out?: Tensor;
  /** fp8 only: per-tensor scales, f32 tensors of one element on the same device (default 1). */
  readonly scaleA?: Tensor;
  readonly scaleB?: Tensor;
  readonly stream?: Stream;
}

/** The shape and addresses matmul launches with, after every check. */
export interface MatmulProblem {
  readonly elem: LtElem;
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly layoutB: BLayout;
}

export interface Span {
  readonly ptr: Ptr;
  readonly nbytes: number;
  readonly shape: readonly number[];
  readonly dtype: DType;
}

function isElem(d: DType): d is LtElem {
  return d === "bf16" || d === "fp8e4m3";
}

export function overlaps(x: Span, y: Span): boolean {
  return x.ptr < y.ptr + BigInt(y.nbytes) && y.ptr < x.ptr + BigInt(x.nbytes);
}

/** Whether two spans are the same memory exactly (same start, same length). */
export function sameSpan(x: Span, y: Span): boolean {
  return x.ptr === y.ptr && x.nbytes === y.nbytes;
}

interface Shaped {
  readonly shape: readonly number[];
  readonly dtype: DType;
}

/**
 * The problem `a` x `b` (B as `layoutB`) poses, from shapes and dtypes alone, with the same typed errors
 * on every backend (`what` names the operation): bf16 or fp8 e4m3 operands of one dtype, 2-D, matching
 * k, rows of 16 bytes (a, b, and the bf16 output), fp8 with B as [n, k]. Scales must be one f32 and are
 * for fp8 only.
 */
export function matmulShapes(
  what: string,
  a: Shaped,
  b: Shaped,
  options: { readonly layoutB?: string; readonly scaleA?: Shaped; readonly scaleB?: Shaped },
): MatmulProblem {
  const fail = (msg: string): never => {
    throw new InvalidArgumentError(`${what}: ${msg}`);
  };
  const layoutB = options.layoutB ?? "nk";
  if (layoutB !== "nk" && layoutB !== "kn") fail(`layoutB ${String(layoutB)} is not "nk" or "kn"`);
  if (a.shape.length !== 2 || b.shape.length !== 2)
    fail(`a and b must be 2-D, got ${JSON.stringify(a.shape)} and ${JSON.stringify(b.shape)}`);
  if (!isElem(a.dtype)) fail(`a is ${a.dtype}; matmul takes bf16 or fp8e4m3`);
  if (b.dtype !== a.dtype) fail(`a is ${a.dtype} but b is ${b.dtype}`);
  const elem = a.dtype as LtElem;
  const [m, k] = a.shape as [number, number];
  const [n, kb] = (layoutB === "nk" ? b.shape : [b.shape[1], b.shape[0]]) as [number, number];
  if (kb !== k) {
    fail(
      `a is [${m}, ${k}] but b (layout ${layoutB}) is ${JSON.stringify(b.shape)}: the k dimensions differ`,
    );
  }
  if (m < 1 || n < 1 || k < 1) fail(`empty problem ${m}x${n}x${k}`);
  const es = dtypeInfo(elem).bytes;
  if ((k * es) % 16 !== 0) fail(`k = ${k}: rows of a must be a multiple of 16 bytes`);
  if ((n * 2) % 16 !== 0 || (layoutB === "kn" && (n * es) % 16 !== 0))
    fail(`n = ${n}: rows of b and of the output must be a multiple of 16 bytes`);
  for (const [name, s] of [
    ["scaleA", options.scaleA],
    ["scaleB", options.scaleB],
  ] as const) {
    if (!s) continue;
    if (elem !== "fp8e4m3") fail(`${name} applies to fp8 inputs only`);
    if (s.dtype !== "f32" || s.shape.reduce((x, y) => x * y, 1) !== 1)
      fail(`${name} must be one f32, got ${s.dtype} ${JSON.stringify(s.shape)}`);
  }
  // Hopper's fp8 MMA (and cuBLASLt's fp8 kernels) read both operands K-major.
  if (elem === "fp8e4m3" && layoutB === "kn") fail('fp8 needs B as [n, k] (layoutB "nk")');
  return { elem, m, n, k, layoutB: layoutB as BLayout };
}

/** `t` is a bf16 [rows, cols] output, else a typed error. */
export function checkOutput(
  what: string,
  name: string,
  t: Shaped,
  rows: number,
  cols: number,
  dtype: DType,
): void {
  if (t.dtype !== dtype) throw new InvalidArgumentError(`${what}: ${name} must be ${dtype}, got ${t.dtype}`);
  if (t.shape.length !== 2 || t.shape[0] !== rows || t.shape[1] !== cols)
    throw new InvalidArgumentError(
      `${what}: ${name} must be [${rows}, ${cols}], got ${JSON.stringify(t.shape)}`,
    );
}

/** Checks shapes, dtypes, layouts and alignment; needs no GPU (the tensors are described, not touched). */
export function checkMatmul(
  a: Span,
  b: Span,
  out: Span | undefined,
  options: Pick<MatmulOptions, "impl" | "layoutB"> & { readonly scaleA?: Span; readonly scaleB?: Span },
  what = "matmul",
): MatmulProblem {
  const fail = (msg: string): never => {
    throw new InvalidArgumentError(`${what}: ${msg}`);
  };
  const impl = options.impl ?? "symmkit";
  if (!(MATMUL_IMPLS as readonly string[]).includes(impl))
    fail(`impl ${impl} is not one of ${MATMUL_IMPLS.join(", ")}`);
  const p = matmulShapes(what, a, b, options);
  for (const [name, t] of [
    ["a", a],
    ["b", b],
    ["out", out],
  ] as const) {
    if (t && t.ptr % 16n !== 0n) fail(`${name} must start on a 16-byte boundary`);
  }
  if (out) {
    checkOutput(what, "out", out, p.m, p.n, "bf16");
    if (overlaps(out, a) || overlaps(out, b)) fail("out overlaps an input");
  }
  for (const [name, s] of [
    ["scaleA", options.scaleA],
    ["scaleB", options.scaleB],
  ] as const) {
    if (s && s.nbytes !== 4) fail(`${name} must be one f32, got ${s.dtype} ${JSON.stringify(s.shape)}`);
  }
  return p;
}

/** The operands of a GEMM launch (either implementation): addresses, shape, optional fp8 scales. */
export function gemmOperands(
  p: { readonly m: number; readonly n: number; readonly k: number },
  a: Tensor,
  b: Tensor,
  d: Tensor,
  scales: { readonly scaleA?: Tensor | undefined; readonly scaleB?: Tensor | undefined },
) {
  return {
    a: a.ptr,
    b: b.ptr,
    d: d.ptr,
    m: p.m,
    n: p.n,
    k: p.k,
    ...(scales.scaleA ? { scaleA: scales.scaleA.ptr } : {}),
    ...(scales.scaleB ? { scaleB: scales.scaleB.ptr } : {}),
  };
}

const gemms = new Map<string, HopperGemm>();
const decoders = new Map<string, DecodeGemm>();

/** The plain decode GEMM of `shape` on `device`, made on first use. */
function decoderFor(device: Device, elem: MatmulProblem["elem"], shape: DecodeShape): DecodeGemm {
  const key = `${device.ordinal}/${elem}/${describeDecodeShape(shape)}`;
  let g = decoders.get(key);
  if (!g) {
    decoders.set(key, (g = new DecodeGemm(device, decodeVariant(shape, elem, false))));
  }
  return g;
}

/** Which of symmkit's GEMM kernels runs a problem, and in how many slices of K. */
export type SymmkitGemmPlan =
  | ({ readonly kernel: "decode"; readonly splits: number } & DecodeShape)
  | {
      readonly kernel: "hopper";
      readonly splits: number;
      readonly splitK: boolean;
      readonly narrow: boolean;
    };

/** matmul()'s choice: the decode GEMM (A and B swapped) for few rows of A where it takes the problem
 * (decodeFits; level with cuBLASLt at m <= 128, where the 128 x 256 tiles lose 10-35%), else the Hopper
 * GEMM, split-K where the problem has few tiles. Where even the decode GEMM's wide tiles take more than one
 * wave and the Hopper GEMM's tile-rows of 128 span no more rows of A than the decode tiles do (m = 65-128,
 * 225-256 and 369-384; at n = 28672 4-10% faster on an H200 at m = 100, 124, 128, 256 and 384, timed side
 * by side; 2% slower at m = 64, which keeps the decode GEMM), the Hopper GEMM: each of its CTAs reads A
 * once for 256 rows of B. At m = 193-224 the decode GEMM's one tile-row of m rounded up to 8 spans fewer,
 * and at 321-368 its two tile-rows of half of m rounded up to 8 (3% faster at 340, 1% slower at 360). */
export function symmkitGemmPlan(device: Device, p: MatmulProblem): SymmkitGemmPlan {
  return gemmPlanFor(p, device.props.smCount);
}

/** symmkitGemmPlan on a GPU of `sms` SMs. */
export function gemmPlanFor(p: MatmulProblem, sms: number): SymmkitGemmPlan {
  const es = dtypeInfo(p.elem).bytes;
  if (decodeFits(p.m, p.n, p.layoutB)) {
    const plan = decodePlan(p.m, p.n, p.k, es, sms);
    const { tilesM, tilesN } = decodeTiles(p.m, p.n, plan);
    // Rows of A each kernel's tiles span (the MMA's width, whatever part of it holds rows of A).
    const hopperRows = gemmTiles(p.m, p.n).tilesM * GEMM_TILE_M;
    if (!(tilesM * tilesN > sms && hopperRows <= tilesM * plan.cols)) return { kernel: "decode", ...plan };
  }
  const splits = splitsFor(p.m, p.n, p.k, es, sms);
  return { kernel: "hopper", splits, ...gemmKernelFor(p.m, splits) };
}

/** A plan in words, for benchmarks: "decode, 8-row tiles, 4 slices", "hopper, narrow ring, 2 slices". */
export function describePlan(plan: SymmkitGemmPlan): string {
  const slices = `${plan.splits} slice${plan.splits > 1 ? "s" : ""}`;
  if (plan.kernel === "decode") return `decode, ${describeDecodeShape(plan)} tiles, ${slices}`;
  return `hopper${plan.narrow ? ", narrow ring" : ""}, ${slices}`;
}

/**
 * The Hopper GEMM unsplit, one CTA per 128 x 256 tile over the whole of K: the arithmetic of the fused
 * all-gather + GEMM and GEMM + reduce-scatter at every shape, so their sequential constructions run it
 * too. matmul() gives the same bits wherever its plan is this one (no decode GEMM, no split-K).
 */
export const TILE_GEMM_PLAN: SymmkitGemmPlan = { kernel: "hopper", splits: 1, splitK: false, narrow: false };

/** symmkit's GEMM of `p` as matmul() runs it (symmkitGemmPlan), or as `plan` says. */
export function launchSymmkitGemm(
  device: Device,
  p: MatmulProblem,
  operands: ReturnType<typeof gemmOperands>,
  stream?: Stream,
  plan: SymmkitGemmPlan = symmkitGemmPlan(device, p),
): void {
  const common = { ...operands, splits: plan.splits, ...(stream ? { stream } : {}) };
  if (plan.kernel === "decode") {
    decoderFor(device, p.elem, plan).launch(common);
    return;
  }
  const key = `${device.ordinal}/${p.elem}/${p.layoutB}/${plan.splitK}/${plan.narrow}`;
  let g = gemms.get(key);
  if (!g) {
    const variant: GemmVariant = {
      elem: p.elem,
      layoutB: p.layoutB,
      order: "grouped",
      ready: "none",
      epilogue: "store",
      splitK: plan.splitK,
      narrow: plan.narrow,
    };
    gemms.set(key, (g = new HopperGemm(device, variant)));
  }
  g.launch(common);
}

export function matmul(a: Tensor, b: Tensor, options: MatmulOptions = {}): Tensor {
  return runMatmul(a, b, options, undefined);
}

/** matmul() on the tile GEMM (TILE_GEMM_PLAN) at every shape: the fused matmuls' GEMM bits, for their tests. */
export function tileMatmul(a: Tensor, b: Tensor, options: Omit<MatmulOptions, "impl"> = {}): Tensor {
  return runMatmul(a, b, options, TILE_GEMM_PLAN);
}

function runMatmul(a: Tensor, b: Tensor, options: MatmulOptions, plan: SymmkitGemmPlan | undefined): Tensor {
  const device = a.device;
  for (const [name, t] of [
    ["b", b],
    ["out", options.out],
    ["scaleA", options.scaleA],
    ["scaleB", options.scaleB],
  ] as const) {
    if (t && t.device !== device)
      throw new InvalidArgumentError(
        `matmul: ${name} is on device ${t.device.ordinal}, a on ${device.ordinal}`,
      );
  }
  const p = checkMatmul(a, b, options.out, options);
  const out =
    options.out ??
    Tensor.empty([p.m, p.n], "bf16", { device, stream: options.stream ?? defaultStream(device) });
  const operands = gemmOperands(p, a, b, out, options);
  if ((options.impl ?? "symmkit") === "symmkit")
    launchSymmkitGemm(device, p, operands, options.stream, plan ?? symmkitGemmPlan(device, p));
  else
    CublasLtMatmul.for(device).run({
      ...operands,
      elem: p.elem,
      layoutB: p.layoutB,
      ...(options.stream ? { stream: options.stream } : {}),
    });
  return out;
}
