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
