// The reduction rule every backend follows: element by element, accumulate in float32 in rank order
// 0, 1, ..., world - 1, then round once to the dtype. Every rank computes the same operations in the same
// order, so every rank gets bitwise the same result, on CPU and GPU alike.
import { decodeToF32, f32ToBf16Bits, f32ToF16Bits, type DType, type RawArray } from "../../runtime/dtype.js";
import type { ReduceOp } from "../validate.js";

/** fmaxf/fminf: a NaN operand loses to a number. */
const fmax = (a: number, b: number): number => (Number.isNaN(a) ? b : Number.isNaN(b) ? a : Math.max(a, b));
const fmin = (a: number, b: number): number => (Number.isNaN(a) ? b : Number.isNaN(b) ? a : Math.min(a, b));

/** Float32 values of raw elements: a copy for the narrow floats, the array itself for f32. */
export function asF32(dtype: DType, raw: RawArray): Float32Array {
  return dtype === "f32" ? (raw as Float32Array) : decodeToF32(dtype, raw);
}

/**
 * out[outAt + i] = op over ranks r of inputs[r][at + i], for i in [0, count): f32 accumulation in rank
 * order, rounded to `dtype`. `inputs` are the ranks' raw elements (index: rank).
 */
export function reduceInto(
  dtype: DType,
  op: ReduceOp,
  inputs: readonly RawArray[],
  at: number,
  out: RawArray,
  outAt: number,
  count: number,
): void {
  const values = inputs.map((raw) => asF32(dtype, raw.subarray(at, at + count)));
  const combine = op === "sum" ? (a: number, b: number) => Math.fround(a + b) : op === "max" ? fmax : fmin;
  const store = storeRounded(dtype, out);
  for (let i = 0; i < count; i++) {
    let acc = values[0]![i]!;
    for (let r = 1; r < values.length; r++) acc = combine(acc, values[r]![i]!);
    store(outAt + i, acc);
  }
}

/** Writes a float32 value into raw elements of `dtype`, rounded to nearest even. */
function storeRounded(dtype: DType, out: RawArray): (i: number, v: number) => void {
  if (dtype === "f32") return (i, v) => void ((out as Float32Array)[i] = v);
  if (dtype === "bf16") return (i, v) => void ((out as Uint16Array)[i] = f32ToBf16Bits(v));
  return (i, v) => void ((out as Uint16Array)[i] = f32ToF16Bits(v));
}
