// matmulAllReduce (GEMM + all-reduce, optionally + RMSNorm) on the CPU backend, the reference the GPU
// kernels are checked against, under the real launcher at world sizes 2 and 3: the GEMM + all-reduce
// program GPUs run too (test/programs/gemm-ar.ts), here with its backend cpu: every algorithm bit for bit
// with the rank-order reference after a decoy call, float64, exact integers, rank order, rmsNorm with bf16
// and fp8 outputs, a straggler, bad inputs.
import { test } from "node:test";
import { assertProgramPasses } from "./support/cpu-job.js";

for (const n of [2, 3])
  test(`CPU matmulAllReduce at world size ${n}: rank-order bits, float64, exact, rmsNorm, fp8, bad inputs`, () =>
    assertProgramPasses("gemm-ar", n));
