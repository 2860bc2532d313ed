// The fused matmuls on the CPU backend (the reference the GPU kernels are checked against), under the real
// launcher at world sizes 2 and 3: the fused-matmul program GPUs run too (test/programs/fused.ts), here
// with its backend cpu: allGatherMatmul and matmulReduceScatter with every algorithm, the backend's GEMM
// and a float64 product, decoys, poisoned outputs, bitwise agreement, a straggler, alternating calls, bad
// inputs.
import { test } from "node:test";
import { assertProgramPasses } from "./support/cpu-job.js";

for (const n of [2, 3])
  test(`CPU allGatherMatmul and matmulReduceScatter at world size ${n}: float64 reference, bad inputs`, () =>
    assertProgramPasses("fused", n));
