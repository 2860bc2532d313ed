// Every FFI declaration must parse: koffi checks a prototype only when it is bound, and CI has none of
// the NVIDIA libraries to bind against.
import assert from "node:assert/strict";
import { test } from "node:test";
import { koffi } from "../src/cuda/native.js";
import { DRIVER_DECLARATIONS } from "../src/cuda/driver.js";
import { NVRTC_DECLARATIONS } from "../src/cuda/nvrtc.js";
import { NCCL_DECLARATIONS } from "../src/cuda/nccl.js";
import { CUBLASLT_DECLARATIONS } from "../src/cuda/cublaslt.js";
import { NVML_DECLARATIONS } from "../src/cuda/nvml.js";

const tables = {
  DRIVER_DECLARATIONS,
  NVRTC_DECLARATIONS,
  NCCL_DECLARATIONS,
  CUBLASLT_DECLARATIONS,
  NVML_DECLARATIONS,
};

for (const [table, decls] of Object.entries(tables)) {
  test(`${table}: every prototype parses and is named after its key`, () => {
    for (const [name, proto] of Object.entries(decls)) {
      const type = koffi.proto(proto.replace(new RegExp(`\\b${name}\\(`), `${table}_${name}(`));
      assert.equal(type.proto?.name, `${table}_${name}`, proto);
    }
  });
}

test("versioned driver symbols are bound by their real names (cuda.h 13.0)", () => {
  for (const name of [
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuStreamDestroy_v2",
    "cuEventElapsedTime_v2",
    "cuDevicePrimaryCtxRelease_v2",
    "cuStreamBeginCapture_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuDeviceTotalMem_v2",
    "cuMemGetInfo_v2",
  ]) {
    assert.ok(name in DRIVER_DECLARATIONS, name);
  }
  for (const unversioned of ["cuMemAlloc", "cuMemFree", "cuStreamDestroy", "cuEventElapsedTime"]) {
    assert.ok(!(unversioned in DRIVER_DECLARATIONS), unversioned);
  }
});
