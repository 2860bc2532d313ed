// Tensors for rank programs that run on either backend: made from bytes, read back as bytes, and outputs
// poisoned inside guards. What makes them is a group's `tensors` (Tensor's constructors on GPUs,
// HostTensor's on the CPU backend), or Tensor itself in a section that only GPUs run.
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

/** A copy of `t`'s elements, as bytes. */
export function bytesOf(t: AnyTensor): Uint8Array {
  const raw = t.toHost();
  return new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength);
}

/** A poisoned tensor of `shape` inside GUARD elements of poison on each side; returns [whole, the tensor]. */
export function poisonedIn<T extends AnyTensor>(make: Maker<T>, dtype: DType, shape: Shape): [T, T] {
  const n = shape.reduce((a, b) => a * b, 1);
  const whole = make.full([n + 2 * GUARD], dtypeInfo(dtype).float ? NaN : POISON[dtype]!, dtype);
  // A maker's tensor slices and views as its own kind.
  return [whole, whole.slice(GUARD, GUARD + n).view([...shape]) as T];
}
