// Element types and the host-side conversions between them and float. Narrow floats are encoded with
// round-to-nearest-even of the JS number (a double) itself: through its float32 rounding's bits, with a
// guard that hands the one case where that would round twice to the exact routine (see viaF32); fp8
// follows CUDA's __nv_fp8_* constructors (saturate to the largest finite value).
import { InvalidArgumentError } from "../errors.js";

export type DType = "f32" | "f16" | "bf16" | "fp8e4m3" | "fp8e5m2" | "i32" | "u32" | "u8" | "i64";

export interface DTypeInfo {
  readonly name: DType;
  readonly bytes: number;
  readonly float: boolean;
  /** The C++ type device code uses for it (device/include/symmkit/core/types.cuh). */
  readonly cType: string;
}

export const DTYPES: Readonly<Record<DType, DTypeInfo>> = {
  f32: { name: "f32", bytes: 4, float: true, cType: "float" },
  f16: { name: "f16", bytes: 2, float: true, cType: "__half" },
  bf16: { name: "bf16", bytes: 2, float: true, cType: "__nv_bfloat16" },
  fp8e4m3: { name: "fp8e4m3", bytes: 1, float: true, cType: "symmkit::fp8e4m3" },
  fp8e5m2: { name: "fp8e5m2", bytes: 1, float: true, cType: "symmkit::fp8e5m2" },
  i32: { name: "i32", bytes: 4, float: false, cType: "symmkit::i32" },
  u32: { name: "u32", bytes: 4, float: false, cType: "symmkit::u32" },
  u8: { name: "u8", bytes: 1, float: false, cType: "symmkit::u8" },
  i64: { name: "i64", bytes: 8, float: false, cType: "symmkit::i64" },
};

export function dtypeInfo(d: DType): DTypeInfo {
  const info = (DTYPES as Partial<Record<string, DTypeInfo>>)[d];
  if (!info)
    throw new InvalidArgumentError(`unknown dtype ${String(d)}; one of ${Object.keys(DTYPES).join(", ")}`);
  return info;
}

/** A binary floating-point format narrower than double. */
interface MiniFloat {
  readonly expBits: number;
  readonly manBits: number;
  /** IEEE-style: all-ones exponent is Inf/NaN. E4M3 ("fn") has no Inf and only S.1111.111 is NaN. */
  readonly ieee: boolean;
  readonly nanBits: number;
}

const F16: MiniFloat = { expBits: 5, manBits: 10, ieee: true, nanBits: 0x7e00 };
const BF16: MiniFloat = { expBits: 8, manBits: 7, ieee: true, nanBits: 0x7fc0 };
const E4M3: MiniFloat = { expBits: 4, manBits: 3, ieee: false, nanBits: 0x7f };
const E5M2: MiniFloat = { expBits: 5, manBits: 2, ieee: true, nanBits: 0x7e };

const f64 = new Float64Array(1);
const f64u = new Uint32Array(f64.buffer);

/** floor(log2(a)) for finite a > 0, exactly (from the double's exponent bits). */
function exponentOf(a: number): number {
  f64[0] = a;
  const e = (f64u[1]! >>> 20) & 0x7ff;
  if (e !== 0) return e - 1023;
  return Math.floor(Math.log2(a)); // double subnormal: far below every narrow format's range
}

function roundHalfEven(q: number): number {
  const f = Math.floor(q);
  const d = q - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/**
 * Encodes `x` into `fmt` with round-to-nearest-even. Overflow gives Inf for IEEE formats; with `saturate`
 * (the default for fp8, as CUDA's constructors) it gives the largest finite value instead.
 */
function encodeMini(x: number, fmt: MiniFloat, saturate: boolean): number {
  const signBit = 1 << (fmt.expBits + fmt.manBits);
  const sign = x < 0 || Object.is(x, -0) ? signBit : 0;
  if (Number.isNaN(x)) return fmt.nanBits;
  const bias = (1 << (fmt.expBits - 1)) - 1;
  const expMaxField = (1 << fmt.expBits) - 1;
  const manMax = (1 << fmt.manBits) - 1;
  // Largest finite encoding: IEEE formats stop one exponent short of all-ones; E4M3 uses all-ones
  // exponent too, except the all-ones mantissa (NaN).
  const maxFinite = fmt.ieee
    ? ((expMaxField - 1) << fmt.manBits) | manMax
    : (expMaxField << fmt.manBits) | (manMax - 1);
  const overflow = saturate
    ? sign | maxFinite
    : fmt.ieee
      ? sign | (expMaxField << fmt.manBits)
      : fmt.nanBits | sign;
  const a = Math.abs(x);
  if (a === Infinity) return overflow;
  if (a === 0) return sign;
  let e = Math.max(exponentOf(a), 1 - bias);
  let r = roundHalfEven(a * 2 ** (fmt.manBits - e)); // exact scaling by a power of two
  if (r === 2 ** (fmt.manBits + 1)) {
    r /= 2;
    e += 1;
  }
  if (r < 2 ** fmt.manBits) return sign | r; // subnormal (or zero after rounding)
  const field = e + bias;
  const bits = (field << fmt.manBits) | (r - 2 ** fmt.manBits);
  if (field > expMaxField || bits > maxFinite) return overflow;
  return sign | bits;
}

function decodeMini(bits: number, fmt: MiniFloat): number {
  const bias = (1 << (fmt.expBits - 1)) - 1;
  const expMaxField = (1 << fmt.expBits) - 1;
  const manMax = (1 << fmt.manBits) - 1;
  const sign = bits & (1 << (fmt.expBits + fmt.manBits)) ? -1 : 1;
  const field = (bits >> fmt.manBits) & expMaxField;
  const man = bits & manMax;
  if (fmt.ieee && field === expMaxField) return man === 0 ? sign * Infinity : NaN;
  if (!fmt.ieee && field === expMaxField && man === manMax) return NaN;
  if (field === 0) return sign * man * 2 ** (1 - bias - fmt.manBits);
  return sign * (man + 2 ** fmt.manBits) * 2 ** (field - bias - fmt.manBits);
}

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** bf16 bits of float32 bits `b` (not a NaN), rounded to nearest even. */
const bf16OfF32 = (b: number): number => ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;

/** How a narrow format rounds from float32 bits (not a NaN), to nearest even. */
interface FromF32 {
  /** The format's bits (its sign is the top one). */
  readonly width: number;
  /** Magnitude bits from which a value rounds past the largest finite one, and the code it gets then
   * (Inf, or the largest finite value where the format saturates). */
  readonly overflowAt: number;
  readonly overflowCode: number;
  /** Magnitude bits of the smallest normal value. */
  readonly normalAt: number;
  /** Mantissa bits dropped (23 - the format's), and (127 - its bias) << its mantissa bits. */
  readonly drop: number;
  readonly rebias: number;
  /** 1 / its smallest subnormal: a subnormal's code is the value in those units. */
  readonly subnormalScale: number;
}
const F16_FROM_F32: FromF32 = {
  width: 16,
  overflowAt: 0x477ff000, // 65520, the tie between the largest finite value and 2^16: even is Inf
  overflowCode: 0x7c00,
  normalAt: 0x38800000,
  drop: 13,
  rebias: 112 << 10,
  subnormalScale: 2 ** 24,
};
const E4M3_FROM_F32: FromF32 = {
  width: 8,
  overflowAt: 0x43e00000, // 448 and past it: saturated
  overflowCode: 0x7e,
  normalAt: 0x3c800000,
  drop: 20,
  rebias: 120 << 3,
  subnormalScale: 2 ** 9,
};

function roundFromF32(b: number, f: FromF32): number {
  const sign = (b >>> (32 - f.width)) & (1 << (f.width - 1));
  const a = b & 0x7fffffff;
  if (a >= f.overflowAt) return sign | f.overflowCode;
  // Normal: drop the low mantissa bits (a carry moves into the exponent), rebias.
  if (a >= f.normalAt)
    return sign | (((a + (1 << (f.drop - 1)) - 1 + ((a >>> f.drop) & 1)) >>> f.drop) - f.rebias);
  // Subnormal (the count of units may round up to the smallest normal's code).
  u32Scratch[0] = a;
  return sign | roundHalfEven(f32Scratch[0]! * f.subnormalScale);
}
const f16OfF32 = (b: number): number => roundFromF32(b, F16_FROM_F32);
const e4m3OfF32 = (b: number): number => roundFromF32(b, E4M3_FROM_F32);

/**
 * `ofF32` (rounding float32 bits to nearest even) applied to the double `x` (not a NaN) without double
 * rounding: through x's float32 rounding fr, exact unless fr is a tie of the narrow format that x is not
 * (then fr's neighbour toward x rounds elsewhere, and the exact encoder decides). Every narrow format's
 * ties are float32 values, so x and fr lie on the same side of every other one.
 */
function viaF32(x: number, ofF32: (b: number) => number, exact: (x: number) => number): number {
  f32Scratch[0] = x;
  const fr = f32Scratch[0];
  const b = u32Scratch[0]!;
  const code = ofF32(b);
  if (fr === x) return code;
  // One float32 step toward x: magnitude up if x is farther from zero.
  const toward = Math.abs(x) > Math.abs(fr) ? b + 1 : b - 1;
  return ofF32(toward >>> 0) === code ? code : exact(x);
}

const exactF16 = (x: number): number => encodeMini(x, F16, false);
const exactBF16 = (x: number): number => encodeMini(x, BF16, false);
const exactE4M3 = (x: number): number => encodeMini(x, E4M3, true);

export const encodeF16 = (x: number): number => (x !== x ? F16.nanBits : viaF32(x, f16OfF32, exactF16));
export const encodeBF16 = (x: number): number => (x !== x ? BF16.nanBits : viaF32(x, bf16OfF32, exactBF16));
export const encodeE4M3 = (x: number, saturate = true): number =>
  x !== x ? E4M3.nanBits : saturate ? viaF32(x, e4m3OfF32, exactE4M3) : encodeMini(x, E4M3, false);
export const encodeE5M2 = (x: number, saturate = true): number => encodeMini(x, E5M2, saturate);
export const decodeF16 = (b: number): number => decodeMini(b, F16);
export const decodeBF16 = (b: number): number => decodeMini(b, BF16);
export const decodeE4M3 = (b: number): number => decodeMini(b, E4M3);
export const decodeE5M2 = (b: number): number => decodeMini(b, E5M2);

// The fast paths for values already float32 (Math.fround's): no double rounding to guard against.

/** bf16 bits of a float32 value, rounded to nearest even (a NaN keeps its sign, quiet; x must be a float32
 * value, as below). */
export function f32ToBf16Bits(x: number): number {
  f32Scratch[0] = x;
  const b = u32Scratch[0]!;
  if ((b & 0x7fffffff) > 0x7f800000) return 0x7fc0 | ((b >>> 16) & 0x8000);
  return bf16OfF32(b);
}

/** f16 bits of a float32 value, as encodeF16 (x must be one: a double that is not rounds twice). */
export function f32ToF16Bits(x: number): number {
  if (x !== x) return F16.nanBits;
  f32Scratch[0] = x;
  return f16OfF32(u32Scratch[0]!);
}

/** E4M3 bits of a float32 value, as encodeE4M3 (saturated; x must be a float32 value, as above). */
export function f32ToE4M3Bits(x: number): number {
  if (x !== x) return E4M3.nanBits;
  f32Scratch[0] = x;
  return e4m3OfF32(u32Scratch[0]!);
}

type FloatCodec = { readonly encode: (x: number) => number; readonly decode: (b: number) => number };

const CODECS: Partial<Record<DType, FloatCodec>> = {
  f16: { encode: encodeF16, decode: decodeF16 },
  bf16: { encode: encodeBF16, decode: decodeBF16 },
  fp8e4m3: { encode: (x) => encodeE4M3(x), decode: decodeE4M3 },
  fp8e5m2: { encode: (x) => encodeE5M2(x), decode: decodeE5M2 },
};

/** The typed array that holds each dtype's raw elements (bit patterns for the narrow floats). */
export interface RawArrays {
  f32: Float32Array;
  f16: Uint16Array;
  bf16: Uint16Array;
  fp8e4m3: Uint8Array;
  fp8e5m2: Uint8Array;
  i32: Int32Array;
  u32: Uint32Array;
  u8: Uint8Array;
  i64: BigInt64Array;
}

/** The typed array of dtype `D`'s raw elements; for `DType` itself, any of them. */
export type RawArrayOf<D extends DType> = RawArrays[D];

/** The typed array that holds a dtype's raw elements (bit patterns for the narrow floats). */
export type RawArray = RawArrayOf<DType>;

export function rawArray<D extends DType>(d: D, n: number): RawArrayOf<D> {
  return makeRawArray(d, n) as RawArrayOf<D>;
}

function makeRawArray(d: DType, n: number): RawArray {
  switch (d) {
    case "f32":
      return new Float32Array(n);
    case "f16":
    case "bf16":
      return new Uint16Array(n);
    case "fp8e4m3":
    case "fp8e5m2":
    case "u8":
      return new Uint8Array(n);
    case "i32":
      return new Int32Array(n);
    case "u32":
      return new Uint32Array(n);
    case "i64":
      return new BigInt64Array(n);
  }
}

function encodeInto16(
  out: Uint16Array,
  values: ArrayLike<number> | ArrayLike<bigint>,
  enc: (x: number) => number,
): void {
  for (let i = 0; i < out.length; i++) out[i] = enc(Number(values[i]));
}

/** Values as the dtype stores them: narrow floats rounded to nearest even, integers checked. */
export function encode<D extends DType>(d: D, values: ArrayLike<number> | ArrayLike<bigint>): RawArrayOf<D> {
  return encodeRaw(d, values) as RawArrayOf<D>;
}

function encodeRaw(d: DType, values: ArrayLike<number> | ArrayLike<bigint>): RawArray {
  const n = values.length;
  const out = rawArray(d, n);
  const codec = CODECS[d];
  if (codec) {
    // Each loop stores to one array kind (V8 then emits plain stores; measured 2x faster than one loop
    // storing to both).
    if (out instanceof Uint16Array) encodeInto16(out, values, codec.encode);
    else for (let i = 0; i < n; i++) (out as Uint8Array)[i] = codec.encode(Number(values[i]));
    return out;
  }
  if (d === "i64") {
    for (let i = 0; i < n; i++) (out as BigInt64Array)[i] = BigInt(values[i]!);
    return out;
  }
  if (d === "f32") {
    // A typed array of numbers converts in one native step (round to nearest even, as Math.fround).
    if (values instanceof Float64Array || values instanceof Float32Array) (out as Float32Array).set(values);
    else (out as Float32Array).set(Array.from(values as ArrayLike<number>, Number));
    return out;
  }
  const [lo, hi] = d === "i32" ? [-(2 ** 31), 2 ** 31 - 1] : d === "u32" ? [0, 2 ** 32 - 1] : [0, 255];
  for (let i = 0; i < n; i++) {
    const v = Number(values[i]);
    if (!Number.isInteger(v) || v < lo || v > hi) {
      throw new InvalidArgumentError(`element ${i} (${v}) is not a ${d}: integers in [${lo}, ${hi}]`);
    }
    (out as Int32Array)[i] = v;
  }
  return out;
}

/** Raw elements decoded to float32 (narrow floats exactly; every value of them is a float32). */
export function decodeToF32(d: DType, raw: RawArray): Float32Array {
  return decodeInto(d, raw, new Float32Array(raw.length));
}

/** decodeToF32 into `out` (at least raw's length), which it returns: scratch reused across calls saves
 * the fresh pages a new array costs. */
export function decodeInto(d: DType, raw: RawArray, out: Float32Array): Float32Array {
  const table = valuesOfCodes(d);
  if (table) for (let i = 0; i < raw.length; i++) out[i] = table[raw[i] as number]!;
  else if (raw instanceof Float32Array) out.set(raw);
  else for (let i = 0; i < raw.length; i++) out[i] = Number(raw[i]);
  return out;
}

const tables = new Map<DType, Float32Array>();

/** A narrow float's value of every code (its index), made once; undefined for the other dtypes. */
export function valuesOfCodes(d: DType): Float32Array | undefined {
  const codec = CODECS[d];
  if (!codec) return undefined;
  let t = tables.get(d);
  if (!t) {
    t = new Float32Array(dtypeInfo(d).bytes === 2 ? 65536 : 256);
    for (let b = 0; b < t.length; b++) t[b] = codec.decode(b);
    tables.set(d, t);
  }
  return t;
}
