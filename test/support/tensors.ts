// Tensors for rank programs that run on either backend: made from bytes, read back as bytes, and outputs
// poisoned inside guards and checked. What makes them is a group's `tensors` (Tensor's constructors on
// GPUs, HostTensor's on the CPU backend), or Tensor itself in a section that only GPUs run.
import assert from "node:assert/strict";
import { assertSameBits } from "./agree.js";
import { rawView } from "../../src/cpu/host-tensor.js";
import { dtypeInfo, type DType, type RawArray } from "../../src/runtime/dtype.js";
import type { AnyTensor, Shape } from "../../src/runtime/tensor.js";

/** Elements of poison on each side of a poisoned tensor. */
export const GUARD = 4096;

/** The poison: NaN, or for integers 0xa5 in every byte. */
const POISON: Partial<Record<DType, number | bigint>> = {
  i64: -0x5a5a5a5a5a5a5a5bn,
  i32: -0x5a5a5a5b,
  u32: 0xa5a5a5a5,
  u8: 0xa5,
};
const poisonValue = (dtype: DType): number | bigint => (dtypeInfo(dtype).float ? NaN : POISON[dtype]!);

/** The constructors a program's tensors come from (see above). */
export interface Maker<T extends AnyTensor> {
  full(shape: Shape, value: number | bigint, dtype: DType): T;
  fromHost(data: RawArray, dtype: DType, options: { shape?: Shape }): T;
}

/** A tensor of `dtype` holding `bytes` (whole elements), of `shape` or 1-D. */
export function fromBytes<T extends AnyTensor>(
  make: Maker<T>,
  dtype: DType,
  bytes: Uint8Array,
  shape?: Shape,
): T {
  const raw = rawView(dtype, bytes.buffer, bytes.byteOffset, bytes.byteLength / dtypeInfo(dtype).bytes);
  return make.fromHost(raw, dtype, shape ? { shape } : {});
}

/** Raw elements as the bytes they are (no copy). */
export const asBytes = (raw: RawArray): Uint8Array =>
  new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength);

/** A copy of `t`'s elements, as bytes. */
export const bytesOf = (t: AnyTensor): Uint8Array => asBytes(t.toHost());

export function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** A poisoned tensor of `shape` inside GUARD elements of poison on each side; returns [whole, the tensor]. */
export function poisonedIn<T extends AnyTensor>(make: Maker<T>, dtype: DType, shape: Shape): [T, T] {
  const n = shape.reduce((a, b) => a * b, 1);
  const whole = make.full([n + 2 * GUARD], poisonValue(dtype), dtype);
  // A maker's tensor slices and views as its own kind.
  return [whole, whole.slice(GUARD, GUARD + n).view([...shape]) as T];
}

/** One element of each dtype's poison as each maker writes it, read back once. */
const POISON_BYTES = new WeakMap<Maker<AnyTensor>, Map<DType, Uint8Array>>();
/** `n` elements of the poison `make` writes, as bytes. */
export function poisonOf(make: Maker<AnyTensor>, dtype: DType, n: number): Uint8Array {
  const byDtype = POISON_BYTES.get(make) ?? new Map<DType, Uint8Array>();
  POISON_BYTES.set(make, byDtype);
  let one = byDtype.get(dtype);
  if (one === undefined) {
    const t = make.full([1], poisonValue(dtype), dtype);
    one = bytesOf(t);
    t.dispose();
    byDtype.set(dtype, one);
  }
  const out = new Uint8Array(n * one.length);
  if (n === 0) return out;
  out.set(one);
  // Doubling copies: a 129 MiB output costs milliseconds, not an element at a time.
  for (let have = one.length; have < out.length; have *= 2)
    out.copyWithin(have, 0, Math.min(have, out.length - have));
  return out;
}

/** `whole` (made by poisonedIn with `make`) holds the poison in its guards and `inner` between them: one
 * read of the whole tensor, whose bytes it returns. */
export function expectPoisonedIn(
  make: Maker<AnyTensor>,
  whole: AnyTensor,
  inner: Uint8Array,
  what: string,
  seed: bigint,
): Uint8Array {
  const got = bytesOf(whole);
  const g = GUARD * whole.elementBytes;
  assert.equal(got.length, inner.length + 2 * g, `${what}: size`);
  const guard = poisonOf(make, whole.dtype, GUARD);
  if (
    Buffer.compare(got.subarray(0, g), guard) !== 0 ||
    Buffer.compare(got.subarray(got.length - g), guard) !== 0
  )
    assert.fail(`${what}: guard overwritten (seed ${seed})`);
  assertSameBits(got.subarray(g, g + inner.length), inner, what, seed);
  return got;
}

/** Asserts that `got` is within rounding of `want` (decoded values), for results computed in another
 * order: their relative Frobenius distance under `tol` (2^-6: bf16's). Returns the distance. */
export function assertClose(
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  what: string,
  tol = 2 ** -6,
): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < want.length; i++) {
    num += (got[i]! - want[i]!) ** 2;
    den += want[i]! ** 2;
  }
  const rel = Math.sqrt(num / Math.max(den, 1e-30));
  if (!(rel < tol)) assert.fail(`${what}: relative distance ${rel} from the reference`);
  return rel;
}
