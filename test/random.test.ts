import assert from "node:assert/strict";
import { test } from "node:test";
import { hostNormal, hostRandInt, hostUniform, philox4x32_10 } from "../src/runtime/random.js";

const hex = (w: number[]): string => w.map((x) => x.toString(16).padStart(8, "0")).join(" ");

test("Philox4x32-10 matches the Random123 known-answer vectors", () => {
  assert.equal(hex(philox4x32_10([0, 0, 0, 0], 0, 0)), "6627e8d5 e169c58d bc57ac4c 9b00dbd8");
  assert.equal(
    hex(philox4x32_10([0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff], 0xffffffff, 0xffffffff)),
    "408f276d 41c83b0e a20bc7c6 6d5451fd",
  );
  assert.equal(
    hex(philox4x32_10([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], 0xa4093822, 0x299f31d0)),
    "d16cfe09 94fdcceb 5001e420 24126ea1",
  );
});

test("uniform values: deterministic per (seed, offset), in range, prefix-stable", () => {
  const seed = 0x1234_5678_9abcn;
  const a = hostUniform(1001, seed, 0, -3, 5);
  assert.deepEqual(a, hostUniform(1001, seed, 0, -3, 5));
  assert.deepEqual(a.subarray(0, 10), hostUniform(10, seed, 0, -3, 5), "element i does not depend on n");
  assert.notDeepEqual(a, hostUniform(1001, seed + 1n, 0, -3, 5));
  assert.notDeepEqual(a, hostUniform(1001, seed, 1, -3, 5));
  assert.ok(a.every((v) => v >= -3 && v < 5));
  const mean = a.reduce((s, v) => s + v, 0) / a.length;
  assert.ok(Math.abs(mean - 1) < 0.3, `mean ${mean}`);
});

test("normal values have the requested moments", () => {
  const v = hostNormal(40000, 7, 0, 2, 0.5);
  const mean = v.reduce((s, x) => s + x, 0) / v.length;
  const sd = Math.sqrt(v.reduce((s, x) => s + (x - mean) ** 2, 0) / v.length);
  assert.ok(Math.abs(mean - 2) < 0.02, `mean ${mean}`);
  assert.ok(Math.abs(sd - 0.5) < 0.02, `sd ${sd}`);
});

test("random integers cover [lo, lo + range) and nothing else", () => {
  const v = hostRandInt(5000, 99, 0, -3, 7);
  assert.deepEqual(
    [...new Set(v)].sort((a, b) => a - b),
    [-3, -2, -1, 0, 1, 2, 3],
  );
  assert.throws(() => hostRandInt(1, 0, 0, 0, 0));
  assert.throws(() => hostUniform(1, -1n, 0));
});
