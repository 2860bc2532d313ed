// Typed kernel launches. Each Kernel owns one native block holding the argument values and the
// kernelParams pointer array that points into them; a launch writes the values in place and calls
// cuLaunchKernel with no per-call allocation on the native side. The driver copies the arguments during
// the call (also under stream capture), so the block is free for the next launch when the call returns.
import { InvalidArgumentError } from "../errors.js";
import {
  check,
  CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
  CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
  FuncAttribute,
} from "../cuda/driver.js";
import { NativeBlock, type Ptr } from "../cuda/native.js";
import { driver, type Device } from "./device.js";
import { defaultStream, type Stream } from "./stream.js";

/** A kernel parameter: scalars by C type, or a by-value blob (e.g. a 128-byte CUtensorMap). */
export type ParamType =
  "ptr" | "i32" | "u32" | "i64" | "u64" | "f32" | "f64" | { readonly bytes: number; readonly align?: number };

/** A by-value parameter that writes itself into a blob parameter of its size (a CallTag, say), so that
 * passing one allocates nothing. */
export interface ParamStruct {
  readonly paramBytes: number;
  writeParam(view: DataView, offset: number): void;
}

/** Anything with a device address: a Tensor, DeviceMemory, or a raw address. */
export type Pointerish = Ptr | { readonly ptr: Ptr };

export type ArgFor<P extends ParamType> = P extends "ptr"
  ? Pointerish
  : P extends "i32" | "u32" | "f32" | "f64"
    ? number
    : P extends "i64" | "u64"
      ? bigint | number
      : Uint8Array | ParamStruct;

export type ArgsFor<Ps extends readonly ParamType[]> = { [K in keyof Ps]: ArgFor<Ps[K]> };

export type Dim3 = number | readonly [number, number?, number?];

export interface LaunchConfig {
  readonly grid: Dim3;
  readonly block: Dim3;
  /** Dynamic shared memory per block; above 48 KiB the kernel's limit is raised on first use. */
  readonly sharedBytes?: number;
  readonly stream?: Stream;
  /** Thread-block cluster shape (Hopper), launched through cuLaunchKernelEx. */
  readonly cluster?: Dim3;
  /** Programmatic dependent launch (Hopper): the kernel may start while the kernel before it on the stream
   * still runs, once that one executes griddepcontrol.launch_dependents; it must execute
   * griddepcontrol.wait before it depends on anything that kernel does. */
  readonly programmatic?: boolean;
}

interface Slot {
  readonly offset: number;
  readonly write: (view: DataView, u8: Uint8Array, offset: number, value: unknown, index: number) => void;
}

function sizeAlign(p: ParamType): [number, number] {
  if (typeof p === "object") return [p.bytes, p.align ?? 8];
  return p === "i32" || p === "u32" || p === "f32" ? [4, 4] : [8, 8];
}

const fail = (i: number, want: string, got: unknown): never => {
  throw new InvalidArgumentError(
    `kernel argument ${i}: expected ${want}, got ${typeof got === "bigint" ? `${got}n` : String(got)}`,
  );
};

function writerFor(p: ParamType): Slot["write"] {
  switch (p) {
    case "ptr":
      return (v, _u, o, x, i) => {
        const a =
          typeof x === "bigint" ? x : typeof x === "object" && x !== null && "ptr" in x ? x.ptr : undefined;
        if (typeof a !== "bigint") fail(i, "a device pointer (bigint or {ptr})", x);
        v.setBigUint64(o, a as bigint, true);
      };
    case "i32":
      return (v, _u, o, x, i) => {
        if (typeof x !== "number" || (x | 0) !== x) fail(i, "an i32", x);
        v.setInt32(o, x as number, true);
      };
    case "u32":
      return (v, _u, o, x, i) => {
        if (typeof x !== "number" || x >>> 0 !== x) fail(i, "a u32", x);
        v.setUint32(o, x as number, true);
      };
    case "i64":
      return (v, _u, o, x, i) => {
        if (typeof x === "number" && Number.isSafeInteger(x)) v.setBigInt64(o, BigInt(x), true);
        else if (typeof x === "bigint" && BigInt.asIntN(64, x) === x) v.setBigInt64(o, x, true);
        else fail(i, "an i64", x);
      };
    case "u64":
      return (v, _u, o, x, i) => {
        // A number goes in as two 32-bit halves: no BigInt allocated on the launch path.
        if (typeof x === "number" && Number.isSafeInteger(x) && x >= 0) {
          v.setUint32(o, x >>> 0, true);
          v.setUint32(o + 4, Math.floor(x / 0x1_0000_0000), true);
        } else if (typeof x === "bigint" && BigInt.asUintN(64, x) === x) v.setBigUint64(o, x, true);
        else fail(i, "a u64", x);
      };
    case "f32":
      return (v, _u, o, x, i) => {
        if (typeof x !== "number") fail(i, "a number", x);
        v.setFloat32(o, x as number, true);
      };
    case "f64":
      return (v, _u, o, x, i) => {
        if (typeof x !== "number") fail(i, "a number", x);
        v.setFloat64(o, x as number, true);
      };
    default: {
      const bytes = p.bytes;
      return (v, u, o, x, i) => {
        if (x instanceof Uint8Array && x.length === bytes) u.set(x, o);
        else if (
          typeof x === "object" &&
          x !== null &&
          "writeParam" in x &&
          (x as ParamStruct).paramBytes === bytes
        )
          (x as ParamStruct).writeParam(v, o);
        else fail(i, `a Uint8Array or ParamStruct of ${bytes} bytes`, x);
      };
    }
  }
}

/** Lays out argument values after the pointer array; returns the slots and the block size. */
export function layoutParams(params: readonly ParamType[]): { slots: Slot[]; bytes: number } {
  let offset = 8 * params.length;
  const slots: Slot[] = [];
  for (const p of params) {
    const [size, align] = sizeAlign(p);
    if (
      !Number.isInteger(size) ||
      size <= 0 ||
      !Number.isInteger(align) ||
      align <= 0 ||
      (align & (align - 1)) !== 0
    ) {
      throw new InvalidArgumentError(
        `kernel parameter ${JSON.stringify(p)}: size must be positive, alignment a power of two`,
      );
    }
    offset = Math.ceil(offset / align) * align;
    slots.push({ offset, write: writerFor(p) });
    offset += size;
  }
  return { slots, bytes: Math.max(8, offset) };
}

const dimOk = (c: unknown): boolean =>
  typeof c === "number" && Number.isInteger(c) && c >= 1 && c <= 0x7fffffff;

/** Writes a Dim3 as three u32 at `offset`. No destructuring or iteration: a process's first launches run
 * in V8's interpreter, where those cost microseconds each. */
function writeDim3(v: DataView, offset: number, d: Dim3, what: string): void {
  const one = typeof d === "number";
  const x = one ? d : d[0];
  const y = one ? 1 : (d[1] ?? 1);
  const z = one ? 1 : (d[2] ?? 1);
  if (!dimOk(x) || !dimOk(y) || !dimOk(z))
    throw new InvalidArgumentError(`${what} ${JSON.stringify(d)}: dimensions must be positive integers`);
  v.setUint32(offset, x, true);
  v.setUint32(offset + 4, y, true);
  v.setUint32(offset + 8, z, true);
}

// CUlaunchConfig (56 bytes) followed by up to two CUlaunchAttributes (72 bytes each: the id, then the
// value at offset 8): cuda.h 13.0 layouts.
const CONFIG_BYTES = 56;
const ATTR_BYTES = 72;
const MAX_ATTRS = 2;

export interface KernelAttributes {
  readonly registers: number;
  /** Local memory per thread: non-zero means spills or stack arrays. */
  readonly localBytes: number;
  readonly staticSharedBytes: number;
  readonly maxThreadsPerBlock: number;
}

/**
 * Packs launch arguments into native memory: the kernelParams pointer array (one pointer per parameter)
 * followed by the values it points to, each at its natural alignment.
 */
export class ArgPacker<Ps extends readonly ParamType[] = readonly ParamType[]> {
  readonly params: Ps;
  readonly #block: NativeBlock;
  readonly #slots: Slot[];

  constructor(params: Ps) {
    this.params = params;
    const { slots, bytes } = layoutParams(params);
    this.#slots = slots;
    this.#block = new NativeBlock(bytes);
    slots.forEach((s, i) => this.#block.view.setBigUint64(8 * i, this.#block.ptr + BigInt(s.offset), true));
  }

  /** Writes `args` in place; returns the kernelParams address. */
  pack(args: readonly unknown[], what: string): Ptr {
    const slots = this.#slots;
    if (args.length !== slots.length) {
      throw new InvalidArgumentError(`${what} takes ${slots.length} arguments, got ${args.length}`);
    }
    const { view, u8 } = this.#block;
    for (let i = 0; i < slots.length; i++) slots[i]!.write(view, u8, slots[i]!.offset, args[i], i);
    return this.#block.ptr;
  }

  /** The packed block as bytes (for tests and debugging). */
  get bytes(): Uint8Array {
    return this.#block.u8;
  }

  free(): void {
    this.#block.free();
  }
}

/**
 * A kernel with a typed parameter list. Every launch goes through cuLaunchKernelEx with a CUlaunchConfig
 * this object keeps in native memory and fills in place: four FFI arguments instead of cuLaunchKernel's
 * eleven, which is most of the host cost of a launch (docs/perf-notes.md).
 */
export class Kernel<Ps extends readonly ParamType[] = readonly ParamType[]> {
  readonly name: string;
  readonly device: Device;
  readonly params: Ps;
  /** The CUfunction. */
  readonly handle: Ptr;
  readonly #args: ArgPacker<Ps>;
  readonly #config: NativeBlock;
  #dynamicSharedLimit = 48 * 1024;
  #defaultStream: Stream | undefined;

  /** Made by Module.kernel(); `fn` is the CUfunction. */
  constructor(device: Device, fn: Ptr, name: string, params: Ps) {
    this.device = device;
    this.handle = fn;
    this.name = name;
    this.params = params;
    this.#args = new ArgPacker(params);
    this.#config = new NativeBlock(CONFIG_BYTES + MAX_ATTRS * ATTR_BYTES);
    this.#config.view.setBigUint64(40, this.#config.ptr + BigInt(CONFIG_BYTES), true);
  }

  launch(config: LaunchConfig, ...args: ArgsFor<Ps>): void {
    const params = this.#args.pack(args, this.name);
    this.#writeConfig(config);
    this.device.makeCurrent();
    const status = driver().cuLaunchKernelEx(this.#config.ptr, this.handle, params, 0n);
    if (status !== 0) check(status, `cuLaunchKernelEx(${this.name})`);
  }

  /** How many clusters of `config.cluster` CTAs can be resident at once, launched with `config`
   * (cuOccupancyMaxActiveClusters): the most a persistent grid of clusters may hold. */
  maxActiveClusters(config: LaunchConfig): number {
    this.#writeConfig(config);
    this.device.makeCurrent();
    const n: [number] = [0];
    check(
      driver().cuOccupancyMaxActiveClusters(n, this.handle, this.#config.ptr),
      `cuOccupancyMaxActiveClusters(${this.name})`,
    );
    return n[0];
  }

  /** Fills the native CUlaunchConfig from `config`. */
  #writeConfig(config: LaunchConfig): void {
    const v = this.#config.view;
    writeDim3(v, 0, config.grid, "grid");
    writeDim3(v, 12, config.block, "block");
    const shared = config.sharedBytes ?? 0;
    if (!Number.isInteger(shared) || shared < 0)
      throw new InvalidArgumentError(`sharedBytes ${shared} is not a size`);
    if (shared > this.#dynamicSharedLimit) this.#raiseSharedLimit(shared);
    v.setUint32(24, shared, true);
    const stream = config.stream ?? (this.#defaultStream ??= defaultStream(this.device));
    v.setBigUint64(32, stream.handle, true);
    let attrs = 0;
    if (config.cluster !== undefined) {
      const at = CONFIG_BYTES + ATTR_BYTES * attrs++;
      v.setUint32(at, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, true);
      writeDim3(v, at + 8, config.cluster, "cluster");
    }
    if (config.programmatic) {
      const at = CONFIG_BYTES + ATTR_BYTES * attrs++;
      v.setUint32(at, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, true);
      v.setUint32(at + 8, 1, true);
    }
    v.setUint32(48, attrs, true);
  }

  #raiseSharedLimit(bytes: number): void {
    const max = this.device.props.sharedBytesPerBlockOptin - this.attributes().staticSharedBytes;
    if (!Number.isInteger(bytes) || bytes > max) {
      throw new InvalidArgumentError(
        `${this.name}: ${bytes} bytes of dynamic shared memory requested; this device allows at most ${max} for this kernel`,
      );
    }
    this.device.makeCurrent();
    check(
      driver().cuFuncSetAttribute(this.handle, FuncAttribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
      `cuFuncSetAttribute(${this.name}, MAX_DYNAMIC_SHARED_SIZE_BYTES)`,
    );
    this.#dynamicSharedLimit = bytes;
  }

  attributes(): KernelAttributes {
    const get = (a: keyof typeof FuncAttribute): number => {
      const v: [number] = [0];
      check(driver().cuFuncGetAttribute(v, FuncAttribute[a], this.handle), `cuFuncGetAttribute(${a})`);
      return v[0];
    };
    return {
      registers: get("NUM_REGS"),
      localBytes: get("LOCAL_SIZE_BYTES"),
      staticSharedBytes: get("SHARED_SIZE_BYTES"),
      maxThreadsPerBlock: get("MAX_THREADS_PER_BLOCK"),
    };
  }

  /** Frees the argument block; the CUfunction belongs to its Module. */
  release(): void {
    this.#args.free();
    this.#config.free();
  }
}
