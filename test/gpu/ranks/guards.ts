// Outputs the GPU rank programs poison and fence: a NaN-filled tensor inside GUARD elements of poison
// on each side, and the check that a kernel wrote nothing past its output.
import assert from "node:assert/strict";
import type { DType } from "../../../src/runtime/dtype.js";
import { Tensor } from "../../../src/runtime/tensor.js";

export const GUARD = 4096;

/** A NaN-poisoned tensor of `shape` inside guards; returns [whole, the tensor]. */
export function poisoned(dtype: DType, shape: readonly number[]): [Tensor, Tensor] {
  const n = shape.reduce((a, b) => a * b, 1);
  const whole = Tensor.full([n + 2 * GUARD], NaN, dtype);
  return [whole, whole.slice(GUARD, GUARD + n).view([...shape])];
}

/** The guards around a `poisoned` tensor still hold the poison. */
export function guardsIntact(whole: Tensor, what: string): void {
  const all = whole.toHost();
  const poison = all[0];
  for (let i = 0; i < GUARD; i++)
    if (!Object.is(all[i], poison) || !Object.is(all[all.length - 1 - i], poison))
      assert.fail(`${what}: guard overwritten`);
}
