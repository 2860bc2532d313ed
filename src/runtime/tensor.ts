// Tensor: a contiguous device buffer with a shape and a dtype. Views (view, slice) share the memory of
// the tensor they come from; only the tensor that allocated the memory frees it, and using a view after
// that raises DisposedError instead of touching freed memory.
import crypto from "node:crypto";
import { DisposedError, InvalidArgumentError } from "../errors.js";
import type { Ptr } from "../cuda/native.js";
import { Device } from "./device.js";
import { decodeToF32, dtypeInfo, encode, rawArray, type DType, type RawArray } from "./dtype.js";
import {
  copyDeviceToDevice,
  copyDeviceToHost,
  copyHostToDevice,
  copyPeer,
  DeviceMemory,
  memset,
} from "./memory.js";
import { defaultStream, type Stream } from "./stream.js";
import type { Kernel, ParamType } from "./kernel.js";
import {
  FILL_PARAMS,
  FILL_U64,
  normalExpr,
  RAND_INT_PARAMS,
  RAND_PARAMS,
  randIntExpr,
  tensorKernels,
  uniformExpr,
} from "./tensor-kernels.js";

export type Shape = readonly number[];

export interface TensorOptions {
  readonly device?: Device;
  /** The stream the tensor is made on: its memory comes from the device's pool in this stream's order
   * (DeviceMemory.pooled), and its initialisation is ordered on it. Default: a plain allocation, and the
   * initialisation on the device's default stream. */
  readonly stream?: Stream;
}

export interface RandomOptions extends TensorOptions {
  /** Same seed and offset -> same values, on any launch shape. Default: a fresh random seed. */
  readonly seed?: bigint | number;
  /** Philox counter offset: distinct offsets give independent streams under one seed. */
  readonly offset?: bigint | number;
}

export interface UniformOptions extends RandomOptions {
  /** Floats: [low, high), default [0, 1). Integers: [low, high), default the dtype's range up to 2^32 values. */
  readonly low?: number;
  readonly high?: number;
}

export interface NormalOptions extends RandomOptions {
  readonly mean?: number;
  readonly std?: number;
}

export function numelOf(shape: Shape): number {
  if (!Array.isArray(shape))
    throw new InvalidArgumentError(`shape must be an array of sizes, got ${String(shape)}`);
  let n = 1;
  for (const s of shape as number[]) {
    if (!Number.isSafeInteger(s) || s < 0)
      throw new InvalidArgumentError(`shape ${JSON.stringify(shape)}: sizes must be non-negative integers`);
    n *= s;
  }
  if (!Number.isSafeInteger(n))
    throw new InvalidArgumentError(`shape ${JSON.stringify(shape)} has too many elements`);
  return n;
}

/** Checks that `to` has as many elements as `from` (a view of the same memory). */
export function checkView(from: Shape, numel: number, to: Shape): void {
  if (numelOf(to) !== numel) {
    throw new InvalidArgumentError(
      `view: ${JSON.stringify(from)} has ${numel} elements, ${JSON.stringify(to)} ${numelOf(to)}`,
    );
  }
}

/** Rows [start, end) along the first dimension: their element offset and shape. */
export function sliceRows(
  shape: Shape,
  numel: number,
  start: number,
  end: number,
): { elementOffset: number; shape: number[] } {
  const rows = shape[0];
  if (rows === undefined) throw new InvalidArgumentError("slice: a 0-d tensor has no rows");
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end > rows || start > end) {
    throw new InvalidArgumentError(`slice(${start}, ${end}) out of range for ${rows} rows`);
  }
  const rowElems = rows === 0 ? 0 : numel / rows;
  return { elementOffset: start * rowElems, shape: [end - start, ...shape.slice(1)] };
}

/** A seed for callers that give none: unpredictable, so two runs do not silently share data. */
export function freshSeed(): bigint {
  return crypto.randomBytes(8).readBigUInt64LE();
}

const INT_DEFAULT_RANGE: Partial<Record<DType, [number, number]>> = {
  u8: [0, 256],
  i32: [-(2 ** 31), 2 ** 31],
  u32: [0, 2 ** 32],
  i64: [0, 2 ** 32],
};

export class Tensor implements Disposable {
  readonly shape: Shape;
  readonly dtype: DType;
  readonly numel: number;
  readonly #mem: DeviceMemory;
  readonly #byteOffset: number;
  readonly #owner: boolean;
  #disposed = false;

  private constructor(mem: DeviceMemory, byteOffset: number, shape: Shape, dtype: DType, owner: boolean) {
    this.#mem = mem;
    this.#byteOffset = byteOffset;
    this.shape = Object.freeze([...shape]);
    this.dtype = dtype;
    this.numel = numelOf(shape);
    this.#owner = owner;
  }

  /** Uninitialised memory: pooled in `stream`'s order if a stream is given (see TensorOptions). */
  static empty(shape: Shape, dtype: DType, options: TensorOptions = {}): Tensor {
    const bytes = numelOf(shape) * dtypeInfo(dtype).bytes;
    const { stream } = options;
    if (stream && options.device && stream.device !== options.device)
      throw new InvalidArgumentError(
        `empty: the stream is on cuda:${stream.device.ordinal}, the tensor's device is cuda:${options.device.ordinal}`,
      );
    const memory = stream
      ? DeviceMemory.pooled(bytes, stream)
      : DeviceMemory.alloc(bytes, options.device ?? Device.get());
    return new Tensor(memory, 0, shape, dtype, true);
  }

  /** A tensor over `memory` from `byteOffset`, which it does not own: disposing it frees nothing. */
  static fromMemory(memory: DeviceMemory, shape: Shape, dtype: DType, byteOffset = 0): Tensor {
    const bytes = numelOf(shape) * dtypeInfo(dtype).bytes;
    if (!Number.isSafeInteger(byteOffset) || byteOffset < 0 || byteOffset + bytes > memory.bytes) {
      throw new InvalidArgumentError(
        `fromMemory: ${bytes} bytes at offset ${byteOffset} do not fit in ${memory.bytes}`,
      );
    }
    return new Tensor(memory, byteOffset, shape, dtype, false);
  }

  static zeros(shape: Shape, dtype: DType, options: TensorOptions = {}): Tensor {
    return Tensor.full(shape, 0, dtype, options);
  }

  static full(shape: Shape, value: number | bigint, dtype: DType, options: TensorOptions = {}): Tensor {
    const t = Tensor.empty(shape, dtype, options);
    try {
      t.fill(value, options.stream);
    } catch (e) {
      t.dispose();
      throw e;
    }
    return t;
  }

  /** Uniform values (see UniformOptions), generated on the device by Philox. */
  static rand(shape: Shape, dtype: DType, options: UniformOptions = {}): Tensor {
    return Tensor.#generate(shape, dtype, options, (t, launch) => {
      const k = tensorKernels(t.device);
      if (dtypeInfo(dtype).float) {
        const lo = options.low ?? 0;
        const hi = options.high ?? 1;
        if (!(hi > lo)) throw new InvalidArgumentError(`rand: high (${hi}) must exceed low (${lo})`);
        launch.run(k.kernel(uniformExpr(dtype), RAND_PARAMS), lo, hi);
        return;
      }
      const [dlo, dhi] = INT_DEFAULT_RANGE[dtype]!;
      const lo = options.low ?? dlo;
      const hi = options.high ?? dhi;
      if (!Number.isSafeInteger(lo) || !Number.isSafeInteger(hi) || hi <= lo || hi - lo > 2 ** 32) {
        throw new InvalidArgumentError(
          `rand ${dtype}: [low, high) must be integers with 1 to 2^32 values, got [${lo}, ${hi})`,
        );
      }
      launch.run(k.kernel(randIntExpr(dtype), RAND_INT_PARAMS), lo, hi - lo);
    });
  }

  /** Normal values (Box-Muller over Philox), for float dtypes. */
  static randn(shape: Shape, dtype: DType, options: NormalOptions = {}): Tensor {
    if (!dtypeInfo(dtype).float) throw new InvalidArgumentError(`randn needs a float dtype, got ${dtype}`);
    return Tensor.#generate(shape, dtype, options, (t, launch) => {
      launch.run(
        tensorKernels(t.device).kernel(normalExpr(dtype), RAND_PARAMS),
        options.mean ?? 0,
        options.std ?? 1,
      );
    });
  }

  /** Allocates, then fills through `body`, which calls launch.run(kernel, a, b) for kernel(t, n, seed, offset, a, b). */
  static #generate(
    shape: Shape,
    dtype: DType,
    options: RandomOptions,
    body: (
      t: Tensor,
      launch: {
        run<P extends typeof RAND_PARAMS | typeof RAND_INT_PARAMS>(k: Kernel<P>, a: number, b: number): void;
      },
    ) => void,
  ): Tensor {
    const seed = BigInt(options.seed ?? freshSeed());
    const offset = BigInt(options.offset ?? 0);
    for (const [name, v] of [
      ["seed", seed],
      ["offset", offset],
    ] as const) {
      if (v < 0n || v >= 1n << 64n) throw new InvalidArgumentError(`${name} must be in [0, 2^64), got ${v}`);
    }
    const t = Tensor.empty(shape, dtype, options);
    const stream = options.stream ?? defaultStream(t.device);
    try {
      body(t, {
        run: (k, a, b) => {
          if (t.numel === 0) return;
          const cfg = { grid: t.#grid(Math.ceil(t.numel / 4)), block: 256, stream };
          (k as Kernel<readonly ParamType[]>).launch(cfg, t, t.numel, seed, offset, a, b);
        },
      });
    } catch (e) {
      t.dispose();
      throw e;
    }
    return t;
  }

  /**
   * A tensor holding `data`: raw elements of the dtype (e.g. Uint16Array bit patterns for bf16) when
   * `data` is that dtype's raw array type, otherwise values encoded as the dtype stores them.
   */
  static fromHost(
    data: RawArray | readonly number[] | readonly bigint[] | Float64Array,
    dtype: DType,
    options: TensorOptions & { shape?: Shape } = {},
  ): Tensor {
    const raw = isRawFor(dtype, data) ? data : encode(dtype, data);
    const shape = options.shape ?? [raw.length];
    if (numelOf(shape) !== raw.length) {
      throw new InvalidArgumentError(
        `fromHost: shape ${JSON.stringify(shape)} holds ${numelOf(shape)} elements, data has ${raw.length}`,
      );
    }
    const t = Tensor.empty(shape, dtype, options);
    copyHostToDevice(t.ptr, raw, options.stream ?? defaultStream(t.device));
    return t;
  }

  get device(): Device {
    return this.#mem.device;
  }

  get ptr(): Ptr {
    if (this.#disposed || !this.#mem.alive)
      throw new DisposedError(`Tensor ${JSON.stringify(this.shape)} ${this.dtype}`);
    return this.#mem.ptr + BigInt(this.#byteOffset);
  }

  get elementBytes(): number {
    return dtypeInfo(this.dtype).bytes;
  }

  get nbytes(): number {
    return this.numel * this.elementBytes;
  }

  /** The raw elements (bit patterns for bf16/f16/fp8); with decode, every dtype as float32 values. */
  toHost(options?: { stream?: Stream; decode?: false }): RawArray;
  toHost(options: { stream?: Stream; decode: true }): Float32Array;
  toHost(options: { stream?: Stream; decode?: boolean } = {}): RawArray | Float32Array {
    const raw = rawArray(this.dtype, this.numel);
    copyDeviceToHost(raw, this.ptr, options.stream ?? defaultStream(this.device));
    return options.decode ? decodeToF32(this.dtype, raw) : raw;
  }

  /** Sets every element to `value`, encoded as the dtype stores it. */
  fill(value: number | bigint, stream: Stream = defaultStream(this.device)): void {
    const raw = encode(this.dtype, [value] as ArrayLike<number>);
    const bytes = this.elementBytes;
    if (bytes === 8) {
      if (this.numel === 0) return;
      const bits = new BigUint64Array(raw.buffer)[0]!;
      const k = tensorKernels(this.device).kernel(FILL_U64, FILL_PARAMS);
      k.launch({ grid: this.#grid(this.numel), block: 256, stream }, this, this.numel, bits);
      return;
    }
    const bits =
      bytes === 4
        ? new Uint32Array(raw.buffer)[0]!
        : bytes === 2
          ? new Uint16Array(raw.buffer)[0]!
          : new Uint8Array(raw.buffer)[0]!;
    memset(this.ptr, bits, bytes as 1 | 2 | 4, this.numel, stream);
  }

  /** Copies `src` (same dtype and element count, any device) into this tensor. */
  copyFrom(src: Tensor, stream: Stream = defaultStream(this.device)): void {
    if (src.dtype !== this.dtype || src.numel !== this.numel) {
      throw new InvalidArgumentError(`copyFrom: ${src.numel} ${src.dtype} into ${this.numel} ${this.dtype}`);
    }
    if (src.device === this.device) copyDeviceToDevice(this.ptr, src.ptr, this.nbytes, stream);
    else copyPeer(this.ptr, this.device, src.ptr, src.device, this.nbytes, stream);
  }

  /** The same memory with another shape of the same element count. */
  view(shape: Shape): Tensor {
    checkView(this.shape, this.numel, shape);
    void this.ptr;
    return new Tensor(this.#mem, this.#byteOffset, shape, this.dtype, false);
  }

  /** Rows [start, end) along the first dimension: a contiguous range of the same memory. */
  slice(start: number, end: number = this.shape[0] ?? 0): Tensor {
    const s = sliceRows(this.shape, this.numel, start, end);
    void this.ptr;
    return new Tensor(
      this.#mem,
      this.#byteOffset + s.elementOffset * this.elementBytes,
      s.shape,
      this.dtype,
      false,
    );
  }

  /** Work on `stream` uses this tensor, made on another stream: its free waits for that work too (see
   * DeviceMemory.recordStream; a tensor made without a stream needs none of this). */
  recordStream(stream: Stream): void {
    this.#mem.recordStream(stream);
  }

  /** Frees the memory if this tensor allocated it (views only detach). */
  dispose(): void {
    if (this.#disposed) return;
    if (this.#owner) this.#mem.dispose(); // may refuse (inside a capture): the tensor stays alive then
    this.#disposed = true;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  toString(): string {
    return `Tensor(${JSON.stringify(this.shape)}, ${this.dtype}, cuda:${this.device.ordinal})`;
  }

  #grid(elements: number): number {
    return Math.max(1, Math.min(Math.ceil(elements / 256), this.device.props.smCount * 8));
  }
}

function isRawFor(dtype: DType, data: unknown): data is RawArray {
  return data instanceof rawArray(dtype, 0).constructor;
}
