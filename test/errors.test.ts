import assert from "node:assert/strict";
import { test } from "node:test";
import {
  CudaError,
  DisposedError,
  InvalidArgumentError,
  LibraryNotFoundError,
  NvrtcError,
  SymmkitError,
} from "../src/errors.js";
import { HostTensor } from "../src/cpu/host-tensor.js";
import { init } from "../src/init.js";

test("errors carry stable codes, their class name and a message that says what to do", () => {
  const c = new CudaError("cuMemAlloc_v2", 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory");
  assert.equal(c.code, "SYMMKIT_CUDA_ERROR");
  assert.equal(c.name, "CudaError");
  assert.equal(c.errorName, "CUDA_ERROR_OUT_OF_MEMORY");
  assert.equal(c.message, "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory");
  assert.ok(c instanceof SymmkitError && c instanceof Error);

  const n = new NvrtcError(
    "nvrtcCompileProgram(x.cu, sm_90a)",
    6,
    "NVRTC_ERROR_COMPILATION",
    "x.cu(3): error: boom",
  );
  assert.equal(n.code, "SYMMKIT_NVRTC_ERROR");
  assert.match(n.message, /NVRTC_ERROR_COMPILATION \(6\)\nx\.cu\(3\): error: boom/);

  const l = new LibraryNotFoundError("libnccl", "SYMMKIT_LIBNCCL", [
    "/a (toolkit): no such directory",
    "libnccl.so.2 (system loader): nope",
  ]);
  assert.equal(l.code, "SYMMKIT_LIBRARY_NOT_FOUND");
  assert.match(l.message, /Set SYMMKIT_LIBNCCL .*\n {2}\/a \(toolkit\)/);

  assert.equal(new InvalidArgumentError("x").code, "SYMMKIT_INVALID_ARGUMENT");
  assert.match(new DisposedError("Tensor").message, /already disposed/);
});

test("CPU backend: a disposed symmetric tensor's data is a DisposedError, never a crash", async () => {
  const group = await init({ backend: "cpu", stagingBytes: 4096 });
  try {
    const s = await group.symmetric.empty([1 << 16], "f32");
    const t = s.tensor;
    const kept = t.raw as Float32Array; // a view JavaScript cannot take back
    const slice = t.slice(0, 8);
    kept.fill(3);
    await s.dispose();
    const disposed = (e: unknown): boolean => e instanceof DisposedError && e.code === "SYMMKIT_DISPOSED";
    assert.throws(() => t.raw, disposed);
    assert.throws(() => t.toHost(), disposed);
    assert.throws(() => slice.raw, disposed);
    assert.throws(() => t.view([2, 1 << 15]), disposed);
    assert.throws(() => s.peer(0), disposed);
    // The memory is gone, its address still readable: zeros, and writes land nowhere else.
    assert.equal(kept[0], 0);
    kept[kept.length - 1] = 1;
  } finally {
    await group.destroy();
  }
});

test("CPU backend: null or undefined for a collective's tensor is an InvalidArgumentError", async () => {
  const group = await init({ backend: "cpu", stagingBytes: 4096 });
  try {
    const c = group.collectives;
    const x = HostTensor.zeros([4], "f32");
    const calls: [string, () => unknown][] = [];
    for (const bad of [null, undefined] as unknown as HostTensor[]) {
      calls.push(
        ["allReduce", () => c.allReduce(bad)],
        ["allGather", () => c.allGather(bad, x)],
        ["allGather", () => c.allGather(x, bad)],
        ["reduceScatter", () => c.reduceScatter(bad, x)],
        ["reduceScatter", () => c.reduceScatter(x, bad)],
      );
    }
    for (const [what, call] of calls) {
      assert.throws(
        call,
        (e: unknown) =>
          e instanceof InvalidArgumentError &&
          new RegExp(`^${what}: \\w+ must be a tensor, got`).test(e.message),
        what,
      );
    }
  } finally {
    await group.destroy();
  }
});
