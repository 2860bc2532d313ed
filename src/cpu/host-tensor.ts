// HostTensor: the CPU backend's tensor, with Tensor's interface and dtypes. Its elements live in host
// memory (an ArrayBuffer, or a shared region mapped into every rank for symmetric tensors). Random fills
// give exactly the values the GPU gives for the same seed (src/runtime/random.ts).
import { DisposedError, InvalidArgumentError } from "../errors.js";
import { decodeToF32, dtypeInfo, encode, rawArray, type DType, type RawArray } from "../runtime/dtype.js";
import { hostNormal, hostRandInt, hostUniform } from "../runtime/random.js";
import {
  checkView,
  freshSeed,
  numelOf,
  sliceRows,
  type NormalOptions,
  type Shape,
  type UniformOptions,
} from "../runtime/tensor.js";

const INT_DEFAULT_RANGE: Partial<Record<DType, [number, number]>> = {
  u8: [0, 256],
  i32: [-(2 ** 31), 2 ** 31],
  u32: [0, 2 ** 32],
  i64: [0, 2 ** 32],
};

/** A typed view of `count` elements of `dtype` at `byteOffset` of `buffer`. */
export function rawView(dtype: DType, buffer: ArrayBufferLike, byteOffset: number, count: number): RawArray {
  const ctor = rawArray(dtype, 0).constructor as new (b: ArrayBufferLike, o: number, n: number) => RawArray;
  return new ctor(buffer, byteOffset, count);
}

/** Whether two host tensors share bytes. */
export function hostOverlaps(a: HostTensor, b: HostTensor): boolean {
  const x = a.raw;
  const y = b.raw;
  return (
    x.buffer === y.buffer &&
    x.byteOffset < y.byteOffset + y.byteLength &&
    y.byteOffset < x.byteOffset + x.byteLength
  );
}

/** Whether two host tensors are the same memory exactly. */
export function sameHostSpan(a: HostTensor, b: HostTensor): boolean {
  return a.raw.buffer === b.raw.buffer && a.raw.byteOffset === b.raw.byteOffset && a.nbytes === b.nbytes;
}

export class HostTensor implements Disposable {
  readonly device = "cpu" as const;
  readonly shape: Shape;
  readonly dtype: DType;
  readonly numel: number;
  readonly #buffer: ArrayBufferLike;
  readonly #byteOffset: number;
  readonly #alive: () => boolean;
  #disposed = false;

  private constructor(
    buffer: ArrayBufferLike,
    byteOffset: number,
    shape: Shape,
    dtype: DType,
    alive: () => boolean,
  ) {
    this.shape = Object.freeze([...shape]);
    this.dtype = dtype;
    this.numel = numelOf(shape);
    this.#buffer = buffer;
    this.#byteOffset = byteOffset;
    this.#alive = alive;
    if (byteOffset % dtypeInfo(dtype).bytes !== 0 || byteOffset + this.nbytes > buffer.byteLength) {
      throw new InvalidArgumentError(
        `HostTensor: ${this.nbytes} bytes at ${byteOffset} do not fit in ${buffer.byteLength}`,
      );
    }
  }

  static empty(shape: Shape, dtype: DType): HostTensor {
    return new HostTensor(
      new ArrayBuffer(numelOf(shape) * dtypeInfo(dtype).bytes),
      0,
      shape,
      dtype,
      () => true,
    );
  }

  /** A tensor over memory owned elsewhere (a shared region); `alive` says whether it still exists. */
  static over(
    buffer: ArrayBufferLike,
    byteOffset: number,
    shape: Shape,
    dtype: DType,
    alive: () => boolean,
  ): HostTensor {
    return new HostTensor(buffer, byteOffset, shape, dtype, alive);
  }

  static zeros(shape: Shape, dtype: DType): HostTensor {
    return HostTensor.empty(shape, dtype);
  }

  static full(shape: Shape, value: number | bigint, dtype: DType): HostTensor {
    const t = HostTensor.empty(shape, dtype);
    t.fill(value);
    return t;
  }

  static rand(shape: Shape, dtype: DType, options: UniformOptions = {}): HostTensor {
    const n = numelOf(shape);
    const seed = BigInt(options.seed ?? freshSeed());
    const offset = BigInt(options.offset ?? 0);
    if (dtypeInfo(dtype).float) {
      const lo = options.low ?? 0;
      const hi = options.high ?? 1;
      if (!(hi > lo)) throw new InvalidArgumentError(`rand: high (${hi}) must exceed low (${lo})`);
      return HostTensor.fromHost(encode(dtype, hostUniform(n, seed, offset, lo, hi)), dtype, { shape });
    }
    const [dlo, dhi] = INT_DEFAULT_RANGE[dtype]!;
    const lo = options.low ?? dlo;
    const hi = options.high ?? dhi;
    if (!Number.isSafeInteger(lo) || !Number.isSafeInteger(hi) || hi <= lo || hi - lo > 2 ** 32) {
      throw new InvalidArgumentError(
        `rand ${dtype}: [low, high) must be integers with 1 to 2^32 values, got [${lo}, ${hi})`,
      );
    }
    return HostTensor.fromHost(encode(dtype, hostRandInt(n, seed, offset, lo, hi - lo)), dtype, { shape });
  }

  static randn(shape: Shape, dtype: DType, options: NormalOptions = {}): HostTensor {
    if (!dtypeInfo(dtype).float) throw new InvalidArgumentError(`randn needs a float dtype, got ${dtype}`);
    const n = numelOf(shape);
    const values = hostNormal(
      n,
      BigInt(options.seed ?? freshSeed()),
      BigInt(options.offset ?? 0),
      options.mean ?? 0,
      options.std ?? 1,
    );
    return HostTensor.fromHost(encode(dtype, values), dtype, { shape });
  }

  static fromHost(
    data: RawArray | readonly number[] | readonly bigint[] | Float64Array,
    dtype: DType,
    options: { shape?: Shape } = {},
  ): HostTensor {
    const raw = data instanceof rawArray(dtype, 0).constructor ? (data as RawArray) : encode(dtype, data);
    const shape = options.shape ?? [raw.length];
    if (numelOf(shape) !== raw.length) {
      throw new InvalidArgumentError(
        `fromHost: shape ${JSON.stringify(shape)} holds ${numelOf(shape)} elements, data has ${raw.length}`,
      );
    }
    const t = HostTensor.empty(shape, dtype);
    (t.raw as Uint8Array).set(raw as Uint8Array);
    return t;
  }

  get elementBytes(): number {
    return dtypeInfo(this.dtype).bytes;
  }

  get nbytes(): number {
    return this.numel * this.elementBytes;
  }

  /** The elements in place (bit patterns for the narrow floats); writes go to the tensor. */
  get raw(): RawArray {
    if (this.#disposed || !this.#alive())
      throw new DisposedError(`HostTensor ${JSON.stringify(this.shape)} ${this.dtype}`);
    return rawView(this.dtype, this.#buffer, this.#byteOffset, this.numel);
  }

  /** A copy of the raw elements; with decode, every dtype as float32 values. */
  toHost(options?: { decode?: false }): RawArray;
  toHost(options: { decode: true }): Float32Array;
  toHost(options: { decode?: boolean } = {}): RawArray | Float32Array {
    const raw = this.raw;
    return options.decode ? decodeToF32(this.dtype, raw) : raw.slice();
  }

  fill(value: number | bigint): void {
    const bits = encode(this.dtype, [value] as ArrayLike<number>);
    // Same-typed arrays: the element's bit pattern (a number, or a bigint for i64) fills the view.
    (this.raw as unknown as { fill(v: number | bigint): void }).fill(bits[0]!);
  }

  copyFrom(src: HostTensor): void {
    if (src.dtype !== this.dtype || src.numel !== this.numel) {
      throw new InvalidArgumentError(`copyFrom: ${src.numel} ${src.dtype} into ${this.numel} ${this.dtype}`);
    }
    (this.raw as Uint8Array).set(src.raw as Uint8Array);
  }

  view(shape: Shape): HostTensor {
    checkView(this.shape, this.numel, shape);
    void this.raw;
    return new HostTensor(this.#buffer, this.#byteOffset, shape, this.dtype, this.#alive);
  }

  slice(start: number, end: number = this.shape[0] ?? 0): HostTensor {
    const s = sliceRows(this.shape, this.numel, start, end);
    void this.raw;
    return new HostTensor(
      this.#buffer,
      this.#byteOffset + s.elementOffset * this.elementBytes,
      s.shape,
      this.dtype,
      this.#alive,
    );
  }

  dispose(): void {
    this.#disposed = true;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  toString(): string {
    return `HostTensor(${JSON.stringify(this.shape)}, ${this.dtype}, cpu)`;
  }
}
