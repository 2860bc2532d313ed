// MoE dispatch and combine on the CPU backend (the reference the GPU kernels are checked against), under
// the real launcher at world sizes 2 and 3: the MoE program GPUs run too (test/programs/moe.ts), here with
// its backend cpu: every rank's layout and combined tokens computed independently and checked bit for bit,
// maxRows, into, exact and float32-rounded combine, group-judged refusals on every rank, bad inputs.
import { test } from "node:test";
import { assertProgramPasses } from "./support/cpu-job.js";

for (const n of [2, 3])
  test(`CPU MoE dispatch and combine at world size ${n}: layout, maxRows, combine bits, bad inputs`, () =>
    assertProgramPasses("moe", n));
