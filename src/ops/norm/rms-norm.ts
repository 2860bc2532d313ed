// The norm of allReduceRmsNorm on the host, operation for operation as the kernels compute it
// (device/include/symmkit/fused/ar_rms_norm.cuh: float32, every operation rounded, the sum of squares in
// the block's fixed tree), so that the CPU backend and the tests get the GPU's bits.
import {
  decodeInto,
  decodeToF32,
  f32ToBf16Bits,
  f32ToE4M3Bits,
  f32ToF16Bits,
  type DType,
  type RawArray,
} from "../../runtime/dtype.js";
import type { NormProblem } from "./checks.js";

/** The kernels' block: NORM_THREADS threads, each holding up to 4 groups of 8 elements of a row. */
export const NORM_THREADS = 512;
const f = Math.fround;

/** Raw elements of a norm dtype (bf16, f16) from float32 values, rounded to nearest even. */
function roundTo(dtype: DType): (v: number) => number {
  return dtype === "bf16" ? f32ToBf16Bits : f32ToF16Bits;
}

/** The sum of squares of one row of hr (float32 values), in the kernels' order. */
function sumOfSquares(h: Float32Array, at: number, hidden: number, lanes: Float32Array): number {
  const groups = hidden / 8;
  for (let t = 0; t < NORM_THREADS; t++) {
    let acc = 0;
    for (let g = t; g < groups; g += NORM_THREADS)
      for (let k = 0; k < 8; k++) {
        const v = h[at + 8 * g + k]!;
        acc = f(acc + f(v * v));
      }
    lanes[t] = acc;
  }
  // Each warp's xor-butterfly leaves its sum in every lane; then the 16 warp sums, likewise.
  const warps = new Float32Array(16);
  const lane = new Float32Array(32);
  for (let w = 0; w < 16; w++) {
    lane.set(lanes.subarray(32 * w, 32 * w + 32));
    butterfly(lane, 16);
    warps[w] = lane[0]!;
  }
  butterfly(warps, 8);
  return warps[0]!;
}

/** v[l] = v[l] + v[l ^ o] for o = from, from / 2, ..., 1, all lanes at once. */
function butterfly(v: Float32Array, from: number): void {
  const next = new Float32Array(v.length);
  for (let o = from; o > 0; o >>= 1) {
    for (let l = 0; l < v.length; l++) next[l] = f(v[l]! + v[l ^ o]!);
    v.set(next);
  }
}

/** What the norm reads besides the all-reduced sum: raw elements of the problem's dtype. */
export interface NormInputs {
  readonly weight: RawArray;
  readonly bias?: RawArray | undefined;
  readonly residual?: RawArray | undefined;
}

/**
 * From `sum` (the all-reduce's result, raw elements of p.dtype): residualOut = round((sum + bias) +
 * residual) and output = its RMSNorm times weight, rounded to p.outDtype (fp8: times outScaleInv,
 * saturated). Either output may be the same array as an input read at the same index. Row by row, in
 * row-sized scratch (a whole problem's float32 copies cost more in fresh pages than in arithmetic).
 */
export function rmsNormRows(
  p: NormProblem,
  sum: RawArray,
  inputs: NormInputs,
  output: RawArray,
  residualOut: RawArray | undefined,
): void {
  const { rows, hidden, dtype } = p;
  const round = roundTo(dtype);
  const bias = inputs.bias && decodeToF32(dtype, inputs.bias);
  const weight = decodeToF32(dtype, inputs.weight);
  const a = new Float32Array(hidden);
  const residual = inputs.residual && new Float32Array(hidden);
  const hBits = new Uint16Array(hidden);
  const h = new Float32Array(hidden);
  const lanes = new Float32Array(NORM_THREADS);
  const fp8 = p.outDtype === "fp8e4m3";
  const out = output as Uint16Array | Uint8Array;
  for (let r = 0; r < rows; r++) {
    const at = r * hidden;
    // Every read of the row comes before any write of it (an output may alias an input).
    decodeInto(dtype, sum.subarray(at, at + hidden), a);
    if (residual) decodeInto(dtype, inputs.residual.subarray(at, at + hidden), residual);
    for (let c = 0; c < hidden; c++) {
      let v = a[c]!;
      if (bias) v = f(v + bias[c]!);
      if (residual) v = f(v + residual[c]!);
      hBits[c] = round(v);
    }
    decodeInto(dtype, hBits, h);
    if (residualOut) (residualOut as Uint16Array).set(hBits, at);
    const sq = sumOfSquares(h, 0, hidden, lanes);
    const rstd = f(1 / f(Math.sqrt(f(f(sq / hidden) + f(p.eps)))));
    for (let c = 0; c < hidden; c++) {
      const y = f(f(h[c]! * rstd) * weight[c]!);
      out[at + c] = fp8 ? f32ToE4M3Bits(f(y * p.outScaleInv)) : round(y);
    }
  }
}
