// Argument checks shared by every backend's collectives, so that the same bad input gets the same typed
// error (InvalidArgumentError, code SYMMKIT_INVALID_ARGUMENT) on CPU and GPU, before anything is written.
import { InvalidArgumentError } from "../errors.js";
import type { DType } from "../runtime/dtype.js";
import type { Shape } from "../runtime/tensor.js";

export interface TensorInfo {
  readonly shape: Shape;
  readonly dtype: DType;
  readonly numel: number;
  readonly nbytes: number;
}

/** What the shape checks read of a tensor of any backend. */
export type Described = Pick<TensorInfo, "shape" | "dtype" | "numel">;

export const REDUCE_OPS = ["sum", "max", "min"] as const;
export type ReduceOp = (typeof REDUCE_OPS)[number];

/** Dtypes the reductions support: accumulated in f32, rounded once to the dtype. */
export const REDUCE_DTYPES: readonly DType[] = ["f32", "f16", "bf16"];

/** `t` is a tensor (a plain, host or symmetric one), not null, undefined or a number. */
export function checkTensorArg(what: string, name: string, t: unknown): void {
  if (typeof t !== "object" || t === null || !("dtype" in t || "tensor" in t)) {
    throw new InvalidArgumentError(
      `${what}: ${name} must be a tensor, got ${t === null ? "null" : typeof t === "object" ? "an object" : typeof t}`,
    );
  }
}

export function checkReduction(what: string, op: string, dtype: DType): asserts op is ReduceOp {
  if (!(REDUCE_OPS as readonly string[]).includes(op)) {
    throw new InvalidArgumentError(`${what}: op ${op} is not one of ${REDUCE_OPS.join(", ")}`);
  }
  if (!REDUCE_DTYPES.includes(dtype)) {
    throw new InvalidArgumentError(`${what}: reductions support ${REDUCE_DTYPES.join(", ")}, not ${dtype}`);
  }
}

export function checkAlgorithm<A extends string>(
  what: string,
  algorithm: string,
  allowed: readonly A[],
): asserts algorithm is A {
  if (!(allowed as readonly string[]).includes(algorithm)) {
    throw new InvalidArgumentError(`${what}: algorithm ${algorithm} is not one of ${allowed.join(", ")}`);
  }
}

export function checkSameDtype(what: string, a: TensorInfo, b: TensorInfo): void {
  if (a.dtype !== b.dtype)
    throw new InvalidArgumentError(`${what}: input is ${a.dtype} but output is ${b.dtype}`);
}

export function checkNumel(what: string, name: string, t: TensorInfo, expected: number): void {
  if (t.numel !== expected) {
    throw new InvalidArgumentError(
      `${what}: ${name} must have ${expected} elements, got ${t.numel} (shape ${JSON.stringify(t.shape)})`,
    );
  }
}

export function checkDivisible(what: string, t: TensorInfo, world: number): void {
  if (t.numel % world !== 0) {
    throw new InvalidArgumentError(`${what}: ${t.numel} elements do not split evenly over ${world} ranks`);
  }
}

export function checkCapacity(
  what: string,
  bytes: number,
  capacity: number,
  remedy = "pass a symmetric tensor, or a larger stagingBytes to init()",
): void {
  if (bytes > capacity) {
    throw new InvalidArgumentError(
      `${what}: ${bytes} bytes exceed the ${capacity}-byte symmetric staging buffer; ${remedy}`,
    );
  }
}

export function checkPeer(what: string, peer: number, world: number, self: number): void {
  if (!Number.isInteger(peer) || peer < 0 || peer >= world || peer === self) {
    throw new InvalidArgumentError(`${what}: peer ${peer} must be another rank in [0, ${world})`);
  }
}
