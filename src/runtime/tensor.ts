// Tensor: a contiguous device buffer with a shape and a dtype. Views (view, slice) share the memory of
// the tensor they come from; only the tensor that allocated the memory frees it, and using a view after
// that raises DisposedError instead of touching freed memory.
import crypto from "node:crypto";
import { CudaError, DisposedError, InvalidArgumentError, OutOfMemoryError } from "../errors.js";
import type { Ptr } from "../cuda/native.js";
import { Device } from "./device.js";
import {
  DTYPES,
  decodeToF32,
  dtypeInfo,
  encode,
  rawArray,
  type DType,
  type RawArray,
  type RawArrayOf,
} from "./dtype.js";
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

/** A random fill's seed and Philox offset, checked: bigints or integers in [0, 2^64). */
export function randomKey(what: string, options: RandomOptions): { seed: bigint; offset: bigint } {
  const word = (name: string, v: unknown): bigint => {
    if (typeof v === "bigint" ? v >= 0n && v < 1n << 64n : Number.isSafeInteger(v) && (v as number) >= 0)
      return BigInt(v as bigint | number);
    throw new InvalidArgumentError(
      `${what}: ${name} ${typeof v === "string" ? JSON.stringify(v) : String(v)} must be a bigint or an ` +
        `integer in [0, 2^64), e.g. { ${name}: 42n }`,
    );
  };
  return {
    seed: options.seed === undefined ? freshSeed() : word("seed", options.seed),
    offset: word("offset", options.offset ?? 0),
  };
}

/** What fromHost takes, checked before anything is allocated: a known dtype, and an array or typed array. */
export function checkHostData(
  what: string,
  data: unknown,
  dtype: unknown,
): asserts data is RawArray | readonly number[] | readonly bigint[] | Float64Array {
  if (dtype === undefined)
    throw new InvalidArgumentError(
      `${what}: no dtype: name it after the data, e.g. ${what}([1, 2, 3], "f32") (one of ` +
        `${Object.keys(DTYPES).join(", ")})`,
    );
  dtypeInfo(dtype as DType);
  if (!Array.isArray(data) && !(ArrayBuffer.isView(data) && !(data instanceof DataView)))
    throw new InvalidArgumentError(
      `${what}: data must be an array of numbers (or bigints) or a typed array, got ` +
        `${data === null ? "null" : typeof data}`,
    );
}

/** Bytes of a new tensor, or a typed error when they could never be allocated. */
export function tensorBytes(what: string, shape: Shape, dtype: DType): number {
  const bytes = numelOf(shape) * dtypeInfo(dtype).bytes;
  if (!Number.isSafeInteger(bytes))
    throw new InvalidArgumentError(`${what}: ${JSON.stringify(shape)} ${dtype} has too many bytes`);
  return bytes;
}

/** "4 TiB": a size for messages. */
export function formatBytes(bytes: number): string {
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (bytes >= 1024 && i < units.length - 1 && bytes % 1024 === 0) {
    bytes /= 1024;
    i++;
  }
  return `${bytes} ${units[i]}`;
}

/** What every backend's tensor offers: a program that runs on either backend holds its tensors as this
 * (Tensor on GPUs, HostTensor on the CPU backend). `D` is the dtype, where the program knows it. */
export interface AnyTensor<D extends DType = DType> extends Disposable {
  readonly shape: Shape;
  readonly dtype: D;
  readonly numel: number;
  readonly nbytes: number;
  readonly elementBytes: number;
  /** The GPU holding the elements, or "cpu". */
  readonly device: Device | "cpu";
  toHost<E extends D>(options: ToHostOptions & { readonly dtype: E; readonly decode?: false }): RawArrayOf<E>;
  toHost(options?: ToHostOptions & { readonly decode?: false }): RawArrayOf<D>;
  toHost(options: ToHostOptions & { readonly decode: true; readonly dtype?: D }): Float32Array;
  fill(value: number | bigint): void;
  view(shape: Shape): AnyTensor<D>;
  slice(start: number, end?: number): AnyTensor<D>;
  dispose(): void;
}

/** What memory symmkit made is to the user (the memory of a group's collectives), and what to do once it
 * is gone: a DisposedError says this instead of naming the internal tensor. */
export interface DisposedLabel {
  readonly what: string;
  readonly todo: string;
}

/** toHost's options besides `decode` and `dtype` (which its overloads type): the stream the copy is
 * ordered on (GPU tensors; default: the device's default stream; a host tensor has nothing to wait for). */
export interface ToHostOptions {
  readonly stream?: Stream;
}

/** What toHost's implementations take: `decode` (float32 values of every dtype) and `dtype` (the dtype
 * the caller expects, checked: InvalidArgumentError if the tensor holds another). */
export type ToHostCall = ToHostOptions & { readonly decode?: boolean; readonly dtype?: DType };

/** The tensor constructors of a group's backend (`group.tensors`): Tensor's on GPUs, HostTensor's on the
 * CPU backend, with the options both take. */
export interface TensorFactory {
  empty<D extends DType>(shape: Shape, dtype: D): AnyTensor<D>;
  zeros<D extends DType>(shape: Shape, dtype: D): AnyTensor<D>;
  full<D extends DType>(shape: Shape, value: number | bigint, dtype: D): AnyTensor<D>;
  rand<D extends DType>(shape: Shape, dtype: D, options?: HostUniformOptions): AnyTensor<D>;
  randn<D extends DType>(shape: Shape, dtype: D, options?: HostNormalOptions): AnyTensor<D>;
  fromHost<D extends DType>(
    data: RawArray | readonly number[] | readonly bigint[] | Float64Array,
    dtype: D,
    options?: { shape?: Shape },
  ): AnyTensor<D>;
}

/** The random options of both backends (no device or stream). */
export type HostUniformOptions = Omit<UniformOptions, keyof TensorOptions>;
export type HostNormalOptions = Omit<NormalOptions, keyof TensorOptions>;

/** toHost's checks and result, shared by both backends: the raw elements, or with `decode`, float32. */
export function hostResult(
  t: { readonly dtype: DType },
  options: ToHostCall,
  raw: () => RawArray,
): RawArray | Float32Array {
  if (options.dtype !== undefined && options.dtype !== t.dtype)
    throw new InvalidArgumentError(
      `toHost: the tensor holds ${t.dtype}, not ${String(options.dtype)}: ask for ${t.dtype}, or for ` +
        "{ decode: true } (float32 values of any dtype)",
    );
  const r = raw();
  return options.decode ? decodeToF32(t.dtype, r) : r;
}

/** rand's default [low, high) for the integer dtypes (both backends). */
export const INT_DEFAULT_RANGE: Partial<Record<DType, [number, number]>> = {
  u8: [0, 256],
  i32: [-(2 ** 31), 2 ** 31],
  u32: [0, 2 ** 32],
  i64: [0, 2 ** 32],
};

export class Tensor<D extends DType = DType> implements AnyTensor<D> {
  readonly shape: Shape;
  readonly dtype: D;
  readonly numel: number;
  readonly #mem: DeviceMemory;
  readonly #byteOffset: number;
  /** The device address, made once (a BigInt sum per call was most of what reading it cost). */
  readonly #ptr: Ptr;
  readonly #owner: boolean;
  /** What this memory is to the user when it is not a tensor they made (a group's collectives' memory). */
  readonly #label: DisposedLabel | undefined;
  #disposed = false;

  private constructor(
    mem: DeviceMemory,
    byteOffset: number,
    shape: Shape,
    dtype: D,
    owner: boolean,
    label: DisposedLabel | undefined,
  ) {
    this.#mem = mem;
    this.#byteOffset = byteOffset;
    this.#ptr = mem.alive ? mem.ptr + BigInt(byteOffset) : 0n;
    // Another tensor's shape (an op's fresh output takes its input's) is frozen already: shared, not copied.
    this.shape = Object.isFrozen(shape) ? shape : Object.freeze([...shape]);
    this.dtype = dtype;
    this.numel = numelOf(shape);
    this.#owner = owner;
    this.#label = label;
  }

  /** Uninitialised memory: pooled in `stream`'s order if a stream is given (see TensorOptions). */
  static empty<D extends DType>(shape: Shape, dtype: D, options: TensorOptions = {}): Tensor<D> {
    const bytes = tensorBytes("Tensor.empty", shape, dtype);
    const { stream } = options;
    if (stream && options.device && stream.device !== options.device)
      throw new InvalidArgumentError(
        `empty: the stream is on cuda:${stream.device.ordinal}, the tensor's device is cuda:${options.device.ordinal}`,
      );
    const device = stream?.device ?? options.device ?? Device.get();
    let memory: DeviceMemory;
    try {
      memory = stream ? DeviceMemory.pooled(bytes, stream) : DeviceMemory.alloc(bytes, device);
    } catch (e) {
      if (!(e instanceof CudaError && e.errorName === "CUDA_ERROR_OUT_OF_MEMORY")) throw e;
      throw new OutOfMemoryError(
        `Tensor.empty: ${JSON.stringify(shape)} ${dtype} needs ${formatBytes(bytes)}, more than ` +
          `cuda:${device.ordinal} has free: dispose tensors no longer needed, or make a smaller one`,
        { cause: e },
      );
    }
    return new Tensor(memory, 0, shape, dtype, true, undefined);
  }

  /** A tensor over `memory` from `byteOffset`, which it does not own: disposing it frees nothing.
   * `label`: what the memory is to the user, named when it is used after being freed. */
  static fromMemory<D extends DType>(
    memory: DeviceMemory,
    shape: Shape,
    dtype: D,
    byteOffset = 0,
    label?: DisposedLabel,
  ): Tensor<D> {
    const bytes = tensorBytes("fromMemory", shape, dtype);
    if (!Number.isSafeInteger(byteOffset) || byteOffset < 0 || byteOffset + bytes > memory.bytes) {
      throw new InvalidArgumentError(
        `fromMemory: ${bytes} bytes at offset ${byteOffset} do not fit in ${memory.bytes}`,
      );
    }
    return new Tensor(memory, byteOffset, shape, dtype, false, label);
  }

  static zeros<D extends DType>(shape: Shape, dtype: D, options: TensorOptions = {}): Tensor<D> {
    return Tensor.full(shape, 0, dtype, options);
  }

  static full<D extends DType>(
    shape: Shape,
    value: number | bigint,
    dtype: D,
    options: TensorOptions = {},
  ): Tensor<D> {
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
  static rand<D extends DType>(shape: Shape, dtype: D, options: UniformOptions = {}): Tensor<D> {
    return Tensor.#generate("rand", shape, dtype, options, (t, launch) => {
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
  static randn<D extends DType>(shape: Shape, dtype: D, options: NormalOptions = {}): Tensor<D> {
    if (!dtypeInfo(dtype).float) throw new InvalidArgumentError(`randn needs a float dtype, got ${dtype}`);
    return Tensor.#generate("randn", shape, dtype, options, (t, launch) => {
      launch.run(
        tensorKernels(t.device).kernel(normalExpr(dtype), RAND_PARAMS),
        options.mean ?? 0,
        options.std ?? 1,
      );
    });
  }

  /** Allocates, then fills through `body`, which calls launch.run(kernel, a, b) for kernel(t, n, seed, offset, a, b). */
  static #generate<D extends DType>(
    what: string,
    shape: Shape,
    dtype: D,
    options: RandomOptions,
    body: (
      t: Tensor<D>,
      launch: {
        run<P extends typeof RAND_PARAMS | typeof RAND_INT_PARAMS>(k: Kernel<P>, a: number, b: number): void;
      },
    ) => void,
  ): Tensor<D> {
    const { seed, offset } = randomKey(what, options);
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
  static fromHost<D extends DType>(
    data: RawArray | readonly number[] | readonly bigint[] | Float64Array,
    dtype: D,
    options: TensorOptions & { shape?: Shape } = {},
  ): Tensor<D> {
    checkHostData("Tensor.fromHost", data, dtype);
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
      throw this.#label
        ? new DisposedError(this.#label.what, this.#label.todo)
        : new DisposedError(`Tensor ${JSON.stringify(this.shape)} ${this.dtype}`);
    return this.#ptr;
  }

  get elementBytes(): number {
    return dtypeInfo(this.dtype).bytes;
  }

  get nbytes(): number {
    return this.numel * this.elementBytes;
  }

  /** The raw elements (bit patterns for bf16/f16/fp8), typed by the dtype; with `dtype`, checked to be that
   * one and typed by it; with decode, every dtype as float32 values (see ToHostOptions). */
  toHost<E extends D>(options: ToHostOptions & { readonly dtype: E; readonly decode?: false }): RawArrayOf<E>;
  toHost(options?: ToHostOptions & { readonly decode?: false }): RawArrayOf<D>;
  toHost(options: ToHostOptions & { readonly decode: true; readonly dtype?: D }): Float32Array;
  toHost(options: ToHostCall = {}): RawArray | Float32Array {
    return hostResult(this, options, () => {
      const raw = rawArray(this.dtype, this.numel);
      copyDeviceToHost(raw, this.ptr, options.stream ?? defaultStream(this.device));
      return raw;
    });
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
  view(shape: Shape): Tensor<D> {
    checkView(this.shape, this.numel, shape);
    void this.ptr;
    return new Tensor(this.#mem, this.#byteOffset, shape, this.dtype, false, this.#label);
  }

  /** Rows [start, end) along the first dimension: a contiguous range of the same memory. */
  slice(start: number, end: number = this.shape[0] ?? 0): Tensor<D> {
    const s = sliceRows(this.shape, this.numel, start, end);
    void this.ptr;
    return new Tensor(
      this.#mem,
      this.#byteOffset + s.elementOffset * this.elementBytes,
      s.shape,
      this.dtype,
      false,
      this.#label,
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
