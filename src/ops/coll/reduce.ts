// The reduction rule every backend follows: element by element, accumulate in float32 in rank order
// 0, 1, ..., world - 1, then round once to the dtype. Every rank computes the same operations in the same
// order, so every rank gets bitwise the same result, on CPU and GPU alike.
import {
  decodeInto,
  f32ToBf16Bits,
  f32ToF16Bits,
  valuesOfCodes,
  type DType,
  type RawArray,
} from "../../runtime/dtype.js";
import type { ReduceOp } from "../validate.js";

/** fmaxf/fminf: a NaN operand loses to a number. */
const fmax = (a: number, b: number): number => (Number.isNaN(a) ? b : Number.isNaN(b) ? a : Math.max(a, b));
const fmin = (a: number, b: number): number => (Number.isNaN(a) ? b : Number.isNaN(b) ? a : Math.min(a, b));

/**
 * out[outAt + i] = op over ranks r of inputs[r][at + i], for i in [0, count): f32 accumulation in rank
 * order, rounded to `dtype`. `inputs` are the ranks' raw elements (index: rank); `out` may be one of them
 * at the same elements. One pass per rank over a float32 accumulator (a Float32Array store rounds as
 * Math.fround does), then one rounding pass.
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
  const acc = decodeInto(dtype, inputs[0]!.subarray(at, at + count), new Float32Array(count));
  // A sum adds each narrow code's value straight from the table; max and min decode into scratch.
  const codes = valuesOfCodes(dtype);
  let scratch: Float32Array | undefined;
  for (let r = 1; r < inputs.length; r++) {
    const raw = inputs[r]!.subarray(at, at + count);
    if (op === "sum" && codes) {
      const bits = raw as Uint16Array;
      for (let i = 0; i < count; i++) acc[i]! += codes[bits[i]!]!;
      continue;
    }
    const v = codes ? decodeInto(dtype, raw, (scratch ??= new Float32Array(count))) : (raw as Float32Array);
    if (op === "sum") for (let i = 0; i < count; i++) acc[i]! += v[i]!;
    else if (op === "max") for (let i = 0; i < count; i++) acc[i] = fmax(acc[i]!, v[i]!);
    else for (let i = 0; i < count; i++) acc[i] = fmin(acc[i]!, v[i]!);
  }
  if (dtype === "f32") (out as Float32Array).set(acc, outAt);
  else {
    const round = dtype === "bf16" ? f32ToBf16Bits : f32ToF16Bits;
    for (let i = 0; i < count; i++) (out as Uint16Array)[outAt + i] = round(acc[i]!);
  }
}
