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

/** Encodes a tiled 2D tensor map; out-of-bounds parts of a box read as zeros. */
export function encodeTensorMap2d(m: TensorMap2d): Uint8Array {
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
  check(
    driver().cuTensorMapEncodeTiled(
      aligned,
      TensorMapDataType[m.dataType],
      2,
      m.address,
      new BigUint64Array([BigInt(m.cols), BigInt(m.rows)]),
      new BigUint64Array([BigInt(m.rowStrideBytes)]),
      new Uint32Array([m.boxCols, m.boxRows]),
      new Uint32Array([1, 1]),
      0,
      TensorMapSwizzle[m.swizzle],
      TensorMapL2Promotion.B256,
      0,
    ),
    "cuTensorMapEncodeTiled",
  );
  return scratch.u8.slice(offset, offset + TENSOR_MAP_BYTES);
}
