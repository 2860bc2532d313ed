// HostTensor: the CPU backend's tensor, with Tensor's interface and dtypes. Its elements live in host
// memory (an ArrayBuffer, or a shared region mapped into every rank for symmetric tensors). Random fills
// give exactly the values the GPU gives for the same seed (src/runtime/random.ts).
import { constants as bufferConstants } from "node:buffer";
import { DisposedError, InvalidArgumentError, OutOfMemoryError } from "../errors.js";
import { dtypeInfo, encode, rawArray, type DType, type RawArray, type RawArrayOf } from "../runtime/dtype.js";
import { hostNormal, hostRandInt, hostUniform } from "../runtime/random.js";
import {
  checkHostData,
  checkView,
  formatBytes,
  hostResult,
  INT_DEFAULT_RANGE,
  numelOf,
  randomKey,
  sliceRows,
  tensorBytes,
  type AnyTensor,
  type DisposedLabel,
  type HostNormalOptions,
  type HostUniformOptions,
  type Shape,
  type ToHostCall,
  type ToHostOptions,
} from "../runtime/tensor.js";

/** A typed view of `count` elements of `dtype` at `byteOffset` of `buffer`. */
export function rawView<D extends DType>(
  dtype: D,
  buffer: ArrayBufferLike,
  byteOffset: number,
  count: number,
): RawArrayOf<D> {
  const ctor = rawArray(dtype, 0).constructor as new (
    b: ArrayBufferLike,
    o: number,
    n: number,
  ) => RawArrayOf<D>;
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

export class HostTensor<D extends DType = DType> implements AnyTensor<D> {
  readonly device = "cpu" as const;
  readonly shape: Shape;
  readonly dtype: D;
  readonly numel: number;
  readonly #buffer: ArrayBufferLike;
  readonly #byteOffset: number;
  readonly #alive: () => boolean;
  /** What this memory is to the user when it is not a tensor they made (a group's collectives' memory). */
  readonly #label: DisposedLabel | undefined;
  #disposed = false;

  private constructor(
    buffer: ArrayBufferLike,
    byteOffset: number,
    shape: Shape,
    dtype: D,
    alive: () => boolean,
    label: DisposedLabel | undefined,
  ) {
    this.shape = Object.freeze([...shape]);
    this.dtype = dtype;
    this.numel = numelOf(shape);
    this.#buffer = buffer;
    this.#byteOffset = byteOffset;
    this.#alive = alive;
    this.#label = label;
    if (byteOffset % dtypeInfo(dtype).bytes !== 0 || byteOffset + this.nbytes > buffer.byteLength) {
      throw new InvalidArgumentError(
        `HostTensor: ${this.nbytes} bytes at ${byteOffset} do not fit in ${buffer.byteLength}`,
      );
    }
  }

  static empty<D extends DType>(shape: Shape, dtype: D): HostTensor<D> {
    const bytes = tensorBytes("HostTensor.empty", shape, dtype);
    let buffer: ArrayBuffer;
    try {
      buffer = new ArrayBuffer(bytes);
    } catch (e) {
      // V8 throws RangeError past its largest buffer, or when the memory cannot be had.
      if (!(e instanceof RangeError)) throw e;
      const max = bufferConstants.MAX_LENGTH;
      throw new OutOfMemoryError(
        `HostTensor.empty: ${JSON.stringify(shape)} ${dtype} needs ${formatBytes(bytes)}, ` +
          (bytes > max
            ? `more than the largest host buffer Node allows (${formatBytes(max)})`
            : "more than this process could allocate") +
          ": make a smaller tensor, or split it",
        { cause: e },
      );
    }
    return new HostTensor(buffer, 0, shape, dtype, () => true, undefined);
  }

  /** A tensor over memory owned elsewhere (a shared region); `alive` says whether it still exists,
   * `label` what the memory is to the user, named when it is used after it is gone. */
  static over<D extends DType>(
    buffer: ArrayBufferLike,
    byteOffset: number,
    shape: Shape,
    dtype: D,
    alive: () => boolean,
    label?: DisposedLabel,
  ): HostTensor<D> {
    return new HostTensor(buffer, byteOffset, shape, dtype, alive, label);
  }

  static zeros<D extends DType>(shape: Shape, dtype: D): HostTensor<D> {
    return HostTensor.empty(shape, dtype);
  }

  static full<D extends DType>(shape: Shape, value: number | bigint, dtype: D): HostTensor<D> {
    const t = HostTensor.empty(shape, dtype);
    t.fill(value);
    return t;
  }

  static rand<D extends DType>(shape: Shape, dtype: D, options: HostUniformOptions = {}): HostTensor<D> {
    const n = numelOf(shape);
    const { seed, offset } = randomKey("rand", options);
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

  static randn<D extends DType>(shape: Shape, dtype: D, options: HostNormalOptions = {}): HostTensor<D> {
    if (!dtypeInfo(dtype).float) throw new InvalidArgumentError(`randn needs a float dtype, got ${dtype}`);
    const { seed, offset } = randomKey("randn", options);
    const values = hostNormal(numelOf(shape), seed, offset, options.mean ?? 0, options.std ?? 1);
    return HostTensor.fromHost(encode(dtype, values), dtype, { shape });
  }

  /** A tensor holding `data`: raw elements of the dtype when `data` is that dtype's raw array type
   * (Uint16Array bit patterns for bf16), otherwise values encoded as the dtype stores them. */
  static fromHost<D extends DType>(
    data: RawArray | readonly number[] | readonly bigint[] | Float64Array,
    dtype: D,
    options: { shape?: Shape } = {},
  ): HostTensor<D> {
    checkHostData("HostTensor.fromHost", data, dtype);
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
  get raw(): RawArrayOf<D> {
    if (this.#disposed || !this.#alive())
      throw this.#label
        ? new DisposedError(this.#label.what, this.#label.todo)
        : new DisposedError(`HostTensor ${JSON.stringify(this.shape)} ${this.dtype}`);
    return rawView(this.dtype, this.#buffer, this.#byteOffset, this.numel);
  }

  /** A copy of the raw elements, typed by the dtype; with `dtype`, checked to be that one and typed by
   * it; with decode, every dtype as float32 values (see ToHostOptions; `stream` is for GPU tensors). */
  toHost<E extends D>(options: ToHostOptions & { readonly dtype: E; readonly decode?: false }): RawArrayOf<E>;
  toHost(options?: ToHostOptions & { readonly decode?: false }): RawArrayOf<D>;
  toHost(options: ToHostOptions & { readonly decode: true; readonly dtype?: D }): Float32Array;
  toHost(options: ToHostCall = {}): RawArray | Float32Array {
    // decode makes a new array; the raw elements are copied (the view would alias the tensor).
    return hostResult(this, options, () => (options.decode ? this.raw : this.raw.slice()));
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

  view(shape: Shape): HostTensor<D> {
    checkView(this.shape, this.numel, shape);
    void this.raw;
    return new HostTensor(this.#buffer, this.#byteOffset, shape, this.dtype, this.#alive, this.#label);
  }

  slice(start: number, end: number = this.shape[0] ?? 0): HostTensor<D> {
    const s = sliceRows(this.shape, this.numel, start, end);
    void this.raw;
    return new HostTensor(
      this.#buffer,
      this.#byteOffset + s.elementOffset * this.elementBytes,
      s.shape,
      this.dtype,
      this.#alive,
      this.#label,
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
