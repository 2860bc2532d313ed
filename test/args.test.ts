import assert from "node:assert/strict";
import { test } from "node:test";
import { koffi } from "../src/cuda/native.js";
import { ArgPacker, layoutParams } from "../src/runtime/kernel.js";
import { InvalidArgumentError } from "../src/errors.js";
import { CALL_TAG_LAYOUT, CALL_TAG_PARAM } from "../src/distributed/device-layouts.js";
import { fingerprint } from "../src/distributed/fingerprint.js";
import "../src/ops/call-kinds.js"; // the operations' kinds, which fingerprints name

test("parameters are laid out after the pointer array at natural alignment", () => {
  const { slots, bytes } = layoutParams(["i32", "ptr", "f32", { bytes: 128, align: 64 }, "u64"]);
  assert.deepEqual(
    slots.map((s) => s.offset),
    [40, 48, 56, 64, 192],
  );
  assert.equal(bytes, 200);
  assert.throws(() => layoutParams([{ bytes: 16, align: 3 }]), InvalidArgumentError);
});

test("packed values and the kernelParams pointers that point at them", () => {
  const packer = new ArgPacker(["ptr", "i32", "u32", "i64", "u64", "f32", "f64", { bytes: 4 }] as const);
  const tensorLike = { ptr: 0x7f00_1234_5678n };
  const base = packer.pack(
    [tensorLike, -5, 0xffffffff, -(2n ** 40n), 2n ** 63n, 1.5, Math.PI, new Uint8Array([9, 8, 7, 6])],
    "k",
  );
  const v = new DataView(packer.bytes.buffer, packer.bytes.byteOffset);
  const at = (i: number): number => Number(v.getBigUint64(8 * i, true) - base);
  assert.equal(v.getBigUint64(at(0), true), 0x7f00_1234_5678n);
  assert.equal(v.getInt32(at(1), true), -5);
  assert.equal(v.getUint32(at(2), true), 0xffffffff);
  assert.equal(v.getBigInt64(at(3), true), -(2n ** 40n));
  assert.equal(v.getBigUint64(at(4), true), 2n ** 63n);
  assert.equal(v.getFloat32(at(5), true), 1.5);
  assert.equal(v.getFloat64(at(6), true), Math.PI);
  assert.deepEqual([...packer.bytes.subarray(at(7), at(7) + 4)], [9, 8, 7, 6]);
  // The pointers are real addresses of the packed values.
  assert.equal(koffi.decode.int32(base + BigInt(at(1))), -5);
  // A u64 given as a number (written as two halves) reads back whole, up to 2^53 - 1.
  for (const n of [0, 1, 0xffffffff, 2 ** 32, 2 ** 32 + 7, Number.MAX_SAFE_INTEGER]) {
    packer.pack([tensorLike, 0, 0, 0n, n, 0, 0, new Uint8Array(4)], "k");
    assert.equal(v.getBigUint64(at(4), true), BigInt(n));
  }
  packer.free();
});

test("a by-value struct that writes itself (a CallTag) fills its blob parameter in place", () => {
  const packer = new ArgPacker(["u32", CALL_TAG_PARAM] as const);
  const tag = fingerprint(3, {
    kind: "matmul-all-reduce/fused",
    dtype: "bf16",
    count: 2 ** 36 + 5,
    dims: [8192, 14336],
  });
  const base = packer.pack([7, tag], "k");
  const v = new DataView(packer.bytes.buffer, packer.bytes.byteOffset);
  const at = Number(v.getBigUint64(8, true) - base);
  assert.equal(v.getBigUint64(at + CALL_TAG_LAYOUT.word, true), tag.word);
  assert.equal(v.getBigUint64(at + CALL_TAG_LAYOUT.shape, true), tag.shape);
  packer.free();
});

test("wrong arguments are refused with the argument's position", () => {
  const packer = new ArgPacker(["ptr", "i32", "u64", { bytes: 8 }] as const);
  const ok: unknown[] = [1n, 1, 1, new Uint8Array(8)];
  const bad: [number, unknown, RegExp][] = [
    [0, 5, /argument 0: expected a device pointer/],
    [1, 2 ** 31, /argument 1: expected an i32/],
    [1, 1.5, /argument 1: expected an i32/],
    [2, -1, /argument 2: expected a u64/],
    [2, 2n ** 64n, /argument 2: expected a u64/],
    [3, new Uint8Array(7), /argument 3: expected a Uint8Array or ParamStruct of 8 bytes/],
    [
      3,
      { paramBytes: 16, writeParam: () => undefined },
      /argument 3: expected a Uint8Array or ParamStruct of 8 bytes/,
    ],
  ];
  for (const [i, value, msg] of bad) {
    const args = [...ok];
    args[i] = value;
    assert.throws(
      () => packer.pack(args, "k"),
      (e: unknown) => e instanceof InvalidArgumentError && msg.test(e.message),
    );
  }
  assert.throws(() => packer.pack([1n], "k"), /k takes 4 arguments, got 1/);
  packer.free();
});
