import assert from "node:assert/strict";
import { test } from "node:test";
import {
  f32ToBf16Bits,
  decodeBF16,
  decodeE4M3,
  decodeE5M2,
  decodeF16,
  decodeToF32,
  encode,
  encodeBF16,
  encodeE4M3,
  encodeE5M2,
  encodeF16,
} from "../src/runtime/dtype.js";
import { InvalidArgumentError } from "../src/errors.js";

const hex = (b: number): string => `0x${b.toString(16)}`;

test("f16 known bit patterns", () => {
  const cases: [number, number][] = [
    [0, 0x0000],
    [-0, 0x8000],
    [1, 0x3c00],
    [-2, 0xc000],
    [65504, 0x7bff], // largest finite
    [65520, 0x7c00], // halfway to the next binade: rounds to even, i.e. Inf
    [65519, 0x7bff],
    [Infinity, 0x7c00],
    [-Infinity, 0xfc00],
    [2 ** -14, 0x0400], // smallest normal
    [2 ** -24, 0x0001], // smallest subnormal
    [2 ** -25, 0x0000], // tie between 0 and the smallest subnormal: even is 0
    [3 * 2 ** -26, 0x0001],
    [1 + 2 ** -11, 0x3c00], // tie: stays at the even mantissa
    [1 + 3 * 2 ** -11, 0x3c02], // tie: rounds up to the even mantissa
    [0.1, 0x2e66],
  ];
  for (const [x, bits] of cases) assert.equal(hex(encodeF16(x)), hex(bits), `encodeF16(${x})`);
  assert.ok(Number.isNaN(decodeF16(encodeF16(NaN))));
  for (const [bits, v] of [
    [0x7bff, 65504],
    [0x0001, 2 ** -24],
    [0x3c02, 1 + 2 ** -9],
    [0xc000, -2],
  ] as const) {
    assert.equal(decodeF16(bits), v, `decodeF16(${hex(bits)})`);
  }
});

test("bf16 known bit patterns, rounding to nearest even", () => {
  const cases: [number, number][] = [
    [1, 0x3f80],
    [-1, 0xbf80],
    [3.140625, 0x4049],
    [1 + 2 ** -8, 0x3f80], // tie -> even
    [1 + 3 * 2 ** -8, 0x3f82], // tie -> even (up)
    [1 + 2 ** -8 + 2 ** -20, 0x3f81], // above the tie
    [3.3895313892515355e38, 0x7f7f], // largest finite bf16
    [3.4e38, 0x7f80], // rounds past the largest finite: Inf
    [2 ** -133, 0x0001], // smallest subnormal
    [Infinity, 0x7f80],
    [-0, 0x8000],
  ];
  for (const [x, bits] of cases) assert.equal(hex(encodeBF16(x)), hex(bits), `encodeBF16(${x})`);
  assert.equal(decodeBF16(0x4049), 3.140625);
  assert.equal(decodeBF16(0x0001), 2 ** -133);
  assert.ok(Number.isNaN(decodeBF16(0x7fc0)));
});

test("fp8 e4m3: OCP E4M3FN, saturating like CUDA's __nv_fp8_e4m3", () => {
  const cases: [number, number][] = [
    [0, 0x00],
    [1, 0x38],
    [-1, 0xb8],
    [448, 0x7e], // largest finite
    [464, 0x7e], // tie between 448 and the (NaN) next code: even is 448
    [500, 0x7e], // overflow saturates
    [Infinity, 0x7e],
    [-1e9, 0xfe],
    [2 ** -6, 0x08], // smallest normal
    [2 ** -9, 0x01], // smallest subnormal
    [2 ** -10, 0x00], // tie with zero: even
    [0.3, 0x2a], // 1.2 * 2^-2 -> mantissa 1.6/8 rounds to 2/8: 0.3125
  ];
  for (const [x, bits] of cases) assert.equal(hex(encodeE4M3(x)), hex(bits), `encodeE4M3(${x})`);
  assert.equal(hex(encodeE4M3(500, false)), "0x7f", "without saturation, overflow is NaN");
  assert.equal(encodeE4M3(NaN), 0x7f);
  assert.ok(Number.isNaN(decodeE4M3(0x7f)) && Number.isNaN(decodeE4M3(0xff)));
  assert.equal(decodeE4M3(0x7e), 448);
  assert.equal(decodeE4M3(0x01), 2 ** -9);
});

test("fp8 e5m2: IEEE-like with Inf, saturating by default", () => {
  const cases: [number, number][] = [
    [1, 0x3c],
    [57344, 0x7b], // largest finite
    [1e6, 0x7b],
    [2 ** -16, 0x01], // smallest subnormal
    [-2, 0xc0],
  ];
  for (const [x, bits] of cases) assert.equal(hex(encodeE5M2(x)), hex(bits), `encodeE5M2(${x})`);
  assert.equal(hex(encodeE5M2(1e6, false)), "0x7c", "without saturation, overflow is Inf");
  assert.equal(decodeE5M2(0x7c), Infinity);
  assert.ok(Number.isNaN(decodeE5M2(0x7e)));
});

test("every narrow-float code decodes and re-encodes to itself", () => {
  for (const [bitsMax, enc, dec] of [
    [0xffff, encodeF16, decodeF16],
    [0xffff, encodeBF16, decodeBF16],
    [0xff, (x: number) => encodeE4M3(x, false), decodeE4M3],
    [0xff, (x: number) => encodeE5M2(x, false), decodeE5M2],
  ] as const) {
    for (let b = 0; b <= bitsMax; b++) {
      const v = dec(b);
      if (Number.isNaN(v)) continue;
      assert.equal(enc(v), b, `code ${hex(b)} (${v})`);
    }
  }
});

test("encode/decodeToF32 round trips and integer checks", () => {
  const bf = encode("bf16", [1.5, -2, 0.1]);
  assert.ok(bf instanceof Uint16Array);
  assert.deepEqual([...decodeToF32("bf16", bf)], [1.5, -2, decodeBF16(encodeBF16(0.1))]);
  assert.deepEqual([...encode("i64", [1, -3])], [1n, -3n]);
  assert.deepEqual([...encode("u8", [0, 255])], [0, 255]);
  assert.throws(() => encode("u8", [256]), InvalidArgumentError);
  assert.throws(() => encode("i32", [1.5]), InvalidArgumentError);
  assert.throws(() => encode("u32", [-1]), InvalidArgumentError);
});

test("the fast float32 -> bf16 path agrees with the exact encoder on every kind of float32", () => {
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  const specials = [
    0, 0x80000000, 0x7f800000, 0xff800000, 0x7f7fffff, 0x00000001, 0x3f808000, 0x3f818000, 0x3f807fff,
  ];
  const bits = [...specials, ...Array.from({ length: 200_000 }, (_, i) => Math.imul(i, 0x9e3779b1) >>> 0)];
  for (const b of bits) {
    u[0] = b;
    const x = f[0]!;
    if (Number.isNaN(x)) {
      assert.ok(Number.isNaN(decodeBF16(f32ToBf16Bits(x))));
      continue;
    }
    assert.equal(f32ToBf16Bits(x), encodeBF16(x), `bits 0x${b.toString(16)}`);
  }
});
