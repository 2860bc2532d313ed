// What the GEMM tests share: outputs with guard bytes around them, poisoned before the run, and inputs of
// small integers, whose products and sums are exact in f32 in any order (so every kernel, slice count and
// tile shape must give the same bits).
import assert from "node:assert/strict";
import type { Device } from "../../src/runtime/device.js";
import { DeviceMemory, memset } from "../../src/runtime/memory.js";
import { Tensor } from "../../src/runtime/tensor.js";

const GUARD = 4096;
const GUARD_BYTE = 0x5a;

/** An output tensor with guard bytes on both sides, poisoned with NaN (0xffff) before the run. */
export class Guarded {
  readonly mem: DeviceMemory;
  readonly t: Tensor;
  constructor(shape: [number, number], dtype: "bf16" | "f32", device: Device) {
    const bytes = shape[0] * shape[1] * (dtype === "bf16" ? 2 : 4);
    this.mem = DeviceMemory.alloc(bytes + 2 * GUARD, device);
    memset(this.mem.ptr, GUARD_BYTE, 1, this.mem.bytes);
    memset(this.mem.ptr + BigInt(GUARD), 0xff, 1, bytes);
    this.t = Tensor.fromMemory(this.mem, shape, dtype, GUARD);
  }
  check(what: string): void {
    const all = Tensor.fromMemory(this.mem, [this.mem.bytes], "u8").toHost();
    const tail = this.mem.bytes - GUARD;
    for (let i = 0; i < GUARD; i++) {
      assert.equal(all[i], GUARD_BYTE, `${what}: guard byte ${i} before the output was overwritten`);
      assert.equal(all[tail + i], GUARD_BYTE, `${what}: guard byte ${i} after the output was overwritten`);
    }
  }
  values(): Float32Array {
    return this.t.toHost({ decode: true });
  }
  dispose(): void {
    this.mem.dispose();
  }
}

/** `count` integers in [-2, 2] from (seed, salt). */
export function exactInts(count: number, seed: bigint, salt: number): number[] {
  let x = (seed ^ BigInt(salt * 0x9e3779b9)) & 0xffffffffn;
  return Array.from({ length: count }, () => {
    x = (x * 1103515245n + 12345n) & 0x7fffffffn;
    return (Number(x >> 16n) % 5) - 2;
  });
}
