// allReduceRmsNorm on the CPU backend (the reference the GPU kernels are checked against), under the real
// launcher at world sizes 2 and 3: the all-reduce + RMSNorm program GPUs run too (test/programs/ar-norm.ts),
// here with its backend cpu: the host reference bit for bit and within its float64 bound, in place,
// exactly representable answers, fp8 with saturation, NaN and Inf, a straggler, alternating calls, bad
// inputs.
import { test } from "node:test";
import { assertProgramPasses } from "./support/cpu-job.js";

for (const n of [2, 3])
  test(`CPU allReduceRmsNorm at world size ${n}: reference bits, float64 bound, in place, fp8, NaN, bad inputs`, () =>
    assertProgramPasses("ar-norm", n));
