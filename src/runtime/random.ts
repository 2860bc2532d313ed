// Host copy of device/include/symmkit/core/random.cuh and the random fills of tensor_kernels.cuh:
// the same Philox4x32-10 words and the same element mapping, so host and device agree on every value of
// rand and randint bit for bit (randn uses libm on both sides and agrees to a few ulp).
import { InvalidArgumentError } from "../errors.js";

const M0 = 0xd2511f53;
const M1 = 0xcd9e8d57;
const W0 = 0x9e3779b9;
const W1 = 0xbb67ae85;

/** High 32 bits of the 64-bit product of two u32 (exact: each partial product fits in a double). */
function mulhi32(a: number, b: number): number {
  const t = (a >>> 16) * b;
  const u = (a & 0xffff) * b;
  return Math.floor((t + Math.floor(u / 65536)) / 65536) >>> 0;
}

export type Words4 = [number, number, number, number];

export function philox4x32_10(ctr: Words4, k0: number, k1: number): Words4 {
  let [x, y, z, w] = ctr;
  for (let round = 0; round < 10; round++) {
    const hi0 = mulhi32(M0, x);
    const lo0 = Math.imul(M0, x) >>> 0;
    const hi1 = mulhi32(M1, z);
    const lo1 = Math.imul(M1, z) >>> 0;
    [x, y, z, w] = [(hi1 ^ y ^ k0) >>> 0, lo1, (hi0 ^ w ^ k1) >>> 0, lo0];
    k0 = (k0 + W0) >>> 0;
    k1 = (k1 + W1) >>> 0;
  }
  return [x, y, z, w];
}

const TWO32 = 2 ** 32;

function splitU64(v: bigint | number, what: string): [number, number] {
  const b = BigInt(v);
  if (b < 0n || b >= 1n << 64n) throw new InvalidArgumentError(`${what} must be in [0, 2^64), got ${b}`);
  return [Number(b & 0xffffffffn), Number(b >> 32n)];
}

/**
 * Calls f(g, words) for every group g of 4 elements covering [0, n), as the device does: element i is
 * word i % 4 of group i / 4. The last group's words are whole even when n is not a multiple of 4.
 */
function forEachGroup(
  n: number,
  seed: bigint | number,
  offset: bigint | number,
  f: (g: number, words: Words4) => void,
): void {
  const [s0, s1] = splitU64(seed, "seed");
  const [o0, o1] = splitU64(offset, "offset");
  for (let g = 0; g * 4 < n; g++)
    f(g, philox4x32_10([(g % TWO32) >>> 0, Math.floor(g / TWO32) >>> 0, o0, o1], s0, s1));
}

function forEachWord(
  n: number,
  seed: bigint | number,
  offset: bigint | number,
  f: (i: number, w: number) => void,
): void {
  forEachGroup(n, seed, offset, (g, r) => {
    for (let j = 0; j < 4 && g * 4 + j < n; j++) f(g * 4 + j, r[j]!);
  });
}

/** Uniform floats in [lo, hi), as float32 values: lo + (hi - lo) * u, each step rounded to float. */
export function hostUniform(
  n: number,
  seed: bigint | number,
  offset: bigint | number,
  lo = 0,
  hi = 1,
): Float32Array {
  const out = new Float32Array(n);
  const flo = Math.fround(lo);
  const range = Math.fround(Math.fround(hi) - flo);
  forEachWord(n, seed, offset, (i, w) => {
    out[i] = Math.fround(flo + Math.fround(range * (w >>> 8) * 2 ** -24));
  });
  return out;
}

/** Normal floats (Box-Muller on word pairs), as the device computes them up to libm rounding. */
export function hostNormal(
  n: number,
  seed: bigint | number,
  offset: bigint | number,
  mean = 0,
  std = 1,
): Float32Array {
  const out = new Float32Array(n);
  forEachGroup(n, seed, offset, (g, r) => {
    for (let p = 0; p < 2; p++) {
      const u1 = Math.fround(((r[2 * p]! >>> 8) + 1) * 2 ** -24);
      const u2 = Math.fround((r[2 * p + 1]! >>> 8) * 2 ** -24);
      const radius = Math.sqrt(-2 * Math.log(u1));
      const pair = [radius * Math.cos(2 * Math.PI * u2), radius * Math.sin(2 * Math.PI * u2)];
      for (let q = 0; q < 2; q++) {
        const i = g * 4 + 2 * p + q;
        if (i < n) out[i] = Math.fround(mean + std * pair[q]!);
      }
    }
  });
  return out;
}

/** Integers lo + floor(word * range / 2^32), range in [1, 2^32]. */
export function hostRandInt(
  n: number,
  seed: bigint | number,
  offset: bigint | number,
  lo: number,
  range: number,
): number[] {
  if (!Number.isInteger(range) || range < 1 || range > TWO32) {
    throw new InvalidArgumentError(`integer range ${range} must be in [1, 2^32]`);
  }
  const out = new Array<number>(n);
  forEachWord(n, seed, offset, (i, w) => {
    out[i] = lo + Number((BigInt(w) * BigInt(range)) >> 32n);
  });
  return out;
}
