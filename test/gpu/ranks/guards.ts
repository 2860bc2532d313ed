// What the GPU rank programs share: outputs they poison and fence (a NaN-filled tensor inside GUARD
// elements of poison on each side, made as test/support/tensors.ts makes them on either backend, and the
// check that a kernel wrote nothing past its output), and the time each section of a program took, so
// that a world where a program runs long shows where.
import assert from "node:assert/strict";
import type { DType } from "../../../src/runtime/dtype.js";
import { Tensor } from "../../../src/runtime/tensor.js";
import { GUARD, poisonedIn } from "../../support/tensors.js";

/** A poisoned tensor of `shape` inside guards; returns [whole, the tensor]. */
export const poisoned = (dtype: DType, shape: readonly number[]): [Tensor, Tensor] =>
  poisonedIn(Tensor, dtype, shape);

/** The guards around a `poisoned` tensor still hold the poison. */
export function guardsIntact(whole: Tensor, what: string): void {
  const all = whole.toHost();
  const poison = all[0];
  for (let i = 0; i < GUARD; i++)
    if (!Object.is(all[i], poison) || !Object.is(all[all.length - 1 - i], poison))
      assert.fail(`${what}: guard overwritten`);
}

/** lap(name): rank 0 prints the seconds since the last lap (or since the timer was made) and in all. */
export function sectionTimer(rank: number): (name: string) => void {
  const start = performance.now();
  let last = start;
  return (name) => {
    const now = performance.now();
    if (rank === 0)
      console.log(
        `time: ${name} ${((now - last) / 1000).toFixed(1)} s (${((now - start) / 1000).toFixed(1)} s in all)`,
      );
    last = now;
  };
}
