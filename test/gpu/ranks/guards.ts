// What the GPU rank programs share: outputs they poison and fence (a NaN-filled tensor inside GUARD
// elements of poison on each side, and the check that a kernel wrote nothing past its output), and the
// time each section of a program took, so that a world where a program runs long shows where.
import assert from "node:assert/strict";
import { dtypeInfo, type DType } from "../../../src/runtime/dtype.js";
import { Tensor } from "../../../src/runtime/tensor.js";

export const GUARD = 4096;

/** The poison: NaN, or for integers 0xa5 in every byte. */
const POISON: Partial<Record<DType, number | bigint>> = {
  i64: -0x5a5a5a5a5a5a5a5bn,
  i32: -0x5a5a5a5b,
  u32: 0xa5a5a5a5,
  u8: 0xa5,
};

/** A poisoned tensor of `shape` inside guards; returns [whole, the tensor]. */
export function poisoned(dtype: DType, shape: readonly number[]): [Tensor, Tensor] {
  const n = shape.reduce((a, b) => a * b, 1);
  const whole = Tensor.full([n + 2 * GUARD], dtypeInfo(dtype).float ? NaN : POISON[dtype]!, dtype);
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
