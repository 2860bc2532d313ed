// TMA descriptors (CUtensorMap) for 2D row-major tensors, encoded by the driver and handed to kernels
// by value (a 128-byte kernel parameter, read by the kernel as a __grid_constant__).
import { InvalidArgumentError } from "../errors.js";
import { check, TensorMapDataType, TensorMapL2Promotion, TensorMapSwizzle } from "../cuda/driver.js";
import { NativeBlock, type Ptr } from "../cuda/native.js";
import { driver } from "./device.js";

export const TENSOR_MAP_BYTES = 128;

export interface TensorMap2d {
  /** Base address (16-byte aligned). */
  readonly address: Ptr;
  readonly dataType: keyof typeof TensorMapDataType;
  readonly elementBytes: number;
  readonly rows: number;
  /** Elements per row (the contiguous dimension). */
  readonly cols: number;
  /** Bytes between rows (a multiple of 16). */
  readonly rowStrideBytes: number;
  /** Box (the tile one TMA instruction moves): columns and rows. */
  readonly boxCols: number;
  readonly boxRows: number;
  readonly swizzle: keyof typeof TensorMapSwizzle;
}

let scratch: NativeBlock | undefined;
// The driver call's array arguments, reused (it reads them during the call only).
const dims = new BigUint64Array(2);
const strides = new BigUint64Array(1);
const box = new Uint32Array(2);
const elementStrides = new Uint32Array([1, 1]);

/** Encoded maps by their fields: an eager GEMM encodes two or three per call, at several µs each, for the
 * same few tensors over and over. Bounded; the oldest goes first. */
const encoded = new Map<string, Uint8Array>();
const ENCODED_MAX = 512;

/** Encodes a tiled 2D tensor map; out-of-bounds parts of a box read as zeros. A copy of the bytes. */
export function encodeTensorMap2d(m: TensorMap2d): Uint8Array {
  return tensorMap2d(m).slice();
}

/** encodeTensorMap2d without the copy, for symmkit's launchers: the bytes are shared with later calls for
 * the same map (cached), so pass them on and never modify them. */
export function tensorMap2d(m: TensorMap2d): Uint8Array {
  const key = `${m.address}/${m.dataType}/${m.elementBytes}/${m.rows}/${m.cols}/${m.rowStrideBytes}/${m.boxCols}/${m.boxRows}/${m.swizzle}`;
  const known = encoded.get(key);
  if (known) return known;
  if (m.address % 16n !== 0n)
    throw new InvalidArgumentError(
      `TMA needs a 16-byte aligned base address, got 0x${m.address.toString(16)}`,
    );
  if (m.rowStrideBytes % 16 !== 0 || m.rowStrideBytes < m.cols * m.elementBytes) {
    throw new InvalidArgumentError(
      `TMA row stride ${m.rowStrideBytes} bytes must be a multiple of 16 and hold ${m.cols} elements`,
    );
  }
  for (const [what, v, max] of [
    ["rows", m.rows, 2 ** 32],
    ["cols", m.cols, 2 ** 32],
    ["boxRows", m.boxRows, 256],
    ["boxCols", m.boxCols, 256],
  ] as const) {
    if (!Number.isInteger(v) || v < 1 || v > max)
      throw new InvalidArgumentError(`TMA ${what} ${v} must be in [1, ${max}]`);
  }
  // Room for the 64-byte alignment the driver requires of a CUtensorMap.
  scratch ??= new NativeBlock(TENSOR_MAP_BYTES + 64);
  const aligned = (scratch.ptr + 63n) & ~63n;
  const offset = Number(aligned - scratch.ptr);
  dims[0] = BigInt(m.cols);
  dims[1] = BigInt(m.rows);
  strides[0] = BigInt(m.rowStrideBytes);
  box[0] = m.boxCols;
  box[1] = m.boxRows;
  check(
    driver().cuTensorMapEncodeTiled(
      aligned,
      TensorMapDataType[m.dataType],
      2,
      m.address,
      dims,
      strides,
      box,
      elementStrides,
      0,
      TensorMapSwizzle[m.swizzle],
      TensorMapL2Promotion.B256,
      0,
    ),
    "cuTensorMapEncodeTiled",
  );
  const bytes = scratch.u8.slice(offset, offset + TENSOR_MAP_BYTES);
  if (encoded.size >= ENCODED_MAX) encoded.delete(encoded.keys().next().value!);
  encoded.set(key, bytes);
  return bytes;
}
