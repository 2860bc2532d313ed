import assert from "node:assert/strict";
import { test } from "node:test";
import {
  f32ToBf16Bits,
  f32ToE4M3Bits,
  f32ToF16Bits,
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

/** A narrow format for the reference below: its encoder, decoder, largest finite code and what overflow
 * gives (saturating: the largest finite value; otherwise Inf's code). */
interface Format {
  readonly name: string;
  readonly encode: (x: number) => number;
  readonly fromF32?: (x: number) => number;
  readonly decode: (b: number) => number;
  readonly maxCode: number;
  readonly signBit: number;
  readonly overflowCode: number;
  readonly saturate: boolean;
}
const FORMATS: readonly Format[] = [
  {
    name: "bf16",
    encode: encodeBF16,
    fromF32: f32ToBf16Bits,
    decode: decodeBF16,
    maxCode: 0x7f7f,
    signBit: 0x8000,
    overflowCode: 0x7f80,
    saturate: false,
  },
  {
    name: "f16",
    encode: encodeF16,
    fromF32: f32ToF16Bits,
    decode: decodeF16,
    maxCode: 0x7bff,
    signBit: 0x8000,
    overflowCode: 0x7c00,
    saturate: false,
  },
  {
    name: "e4m3",
    encode: (x) => encodeE4M3(x),
    fromF32: f32ToE4M3Bits,
    decode: decodeE4M3,
    maxCode: 0x7e,
    signBit: 0x80,
    overflowCode: 0x7e,
    saturate: true,
  },
  {
    name: "e4m3 unsaturated",
    encode: (x) => encodeE4M3(x, false),
    decode: decodeE4M3,
    maxCode: 0x7e,
    signBit: 0x80,
    overflowCode: 0x7f,
    saturate: false,
  },
];

/** The code of the value nearest x (ties to the even code), by binary search over the decoded codes
 * (positive codes grow with their values): independent of the encoders' arithmetic. Midpoints of
 * neighbouring codes are exact doubles, so each comparison is exact. */
function nearest(fmt: Format, x: number): number {
  const sign = x < 0 || Object.is(x, -0) ? fmt.signBit : 0;
  const a = Math.abs(x);
  const max = fmt.decode(fmt.maxCode);
  if (a > max) {
    // Past the largest finite value: it, up to the tie with where the next code's value would be (one
    // step on), where the even code wins.
    const tie = max + (max - fmt.decode(fmt.maxCode - 1)) / 2;
    if (fmt.saturate || a < tie || (a === tie && fmt.maxCode % 2 === 0)) return sign | fmt.maxCode;
    return sign | fmt.overflowCode;
  }
  let lo = 0;
  let hi = fmt.maxCode; // decode(lo) <= a <= decode(hi)
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (fmt.decode(mid) <= a) lo = mid;
    else hi = mid;
  }
  const m = (fmt.decode(lo) + fmt.decode(hi)) / 2;
  const code = a < m ? lo : a > m ? hi : lo % 2 === 0 ? lo : hi;
  return sign | code;
}

test("the narrow encoders round every kind of double to the nearest code, ties to even, as an exhaustive search does", () => {
  let seed = 12345;
  const rand = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  for (const fmt of FORMATS) {
    const xs: number[] = [0, -0, Infinity, -Infinity, Number.MAX_VALUE, Number.MIN_VALUE, 2 ** -150, 3.4e38];
    // Each tie between neighbouring codes, and the doubles just beside it: their float32 rounding is the
    // tie itself (the double-rounding trap of going through float32).
    for (let c = 0; c < fmt.maxCode; c++) {
      const m = (fmt.decode(c) + fmt.decode(c + 1)) / 2;
      xs.push(m, m * (1 + 2 ** -40), m * (1 - 2 ** -40), -m * (1 + 2 ** -45));
    }
    // Random doubles over the format's range, and over float32's and past it; random float32 bit patterns.
    for (let i = 0; i < 20_000; i++) {
      xs.push((rand() < 0.5 ? -1 : 1) * 2 ** (rand() * 60 - 30) * (1 + rand()));
      xs.push((rand() < 0.5 ? -1 : 1) * 2 ** (rand() * 300 - 160) * (1 + rand()));
      u[0] = (rand() * 2 ** 32) >>> 0;
      if (!Number.isNaN(f[0]!)) xs.push(f[0]!);
    }
    for (const x of xs) {
      const want = nearest(fmt, x);
      assert.equal(hex(fmt.encode(x)), hex(want), `${fmt.name} of ${x}`);
      if (fmt.fromF32 && Math.fround(x) === x)
        assert.equal(hex(fmt.fromF32(x)), hex(want), `${fmt.name} of float32 ${x}`);
    }
    if (fmt.fromF32) assert.ok(Number.isNaN(fmt.decode(fmt.fromF32(NaN))), `${fmt.name}: NaN stays NaN`);
  }
});
