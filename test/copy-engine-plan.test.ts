// How the copy-engine all-reduce splits its elements into chunks and pieces (src/ops/copy-engine-plan.ts);
// no GPU needed.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  copyEnginePlan,
  FLAG_WORDS,
  flagIndex,
  MAX_FLAG_WORLD,
  MAX_PIECES,
  pieceRange,
} from "../src/ops/copy-engine-plan.js";

const SIZES = [0, 1, 7, 8, 4097, 1_000_003, 33_554_432, 536_870_912 + 5];

test("pieces cover every element exactly once, in order, on 8-element boundaries, within the staging", () => {
  for (const world of [2, 3, 4, 8]) {
    for (const eb of [2, 4]) {
      for (const n of SIZES) {
        const plan = copyEnginePlan(n, world, eb);
        const what = `n=${n} world=${world} bytes=${eb}`;
        assert.ok(plan.pieces >= 1 && plan.pieces <= MAX_PIECES, what);
        assert.ok(plan.chunk % 8 === 0 && plan.piece % 8 === 0, what);
        assert.ok(plan.stagingBytes <= 2 * (n * eb + 32 * world), `${what}: staging ${plan.stagingBytes}`);
        let next = 0;
        for (let r = 0; r < world; r++) {
          for (let q = 0; q < plan.pieces; q++) {
            const [lo, hi] = pieceRange(plan, n, r, q);
            assert.ok(lo <= hi && hi - lo <= plan.piece, `${what}: piece ${r}/${q}`);
            if (hi === lo) continue;
            assert.equal(lo, next, `${what}: piece ${r}/${q} starts at ${lo}, expected ${next}`);
            assert.equal(lo % 8, 0, what);
            assert.ok(lo >= r * plan.chunk && hi <= (r + 1) * plan.chunk, `${what}: piece outside its chunk`);
            next = hi;
          }
        }
        assert.equal(next, n, `${what}: covered ${next} elements`);
      }
    }
  }
});

test("large chunks split into pieces of at least 4 MiB, at most 16", () => {
  assert.equal(copyEnginePlan(2 ** 29, 4, 2).pieces, 16);
  assert.equal(copyEnginePlan(2 ** 25, 4, 2).pieces, 4);
  assert.equal(copyEnginePlan(2 ** 20, 4, 2).pieces, 1);
});

test("every (region, sender, piece) has its own flag", () => {
  const seen = new Set<number>();
  for (const region of [0, 1] as const)
    for (let from = 0; from < MAX_FLAG_WORLD; from++)
      for (let q = 0; q < MAX_PIECES; q++) seen.add(flagIndex(region, from, q));
  assert.equal(seen.size, FLAG_WORDS);
  assert.ok(Math.max(...seen) < FLAG_WORDS);
});
