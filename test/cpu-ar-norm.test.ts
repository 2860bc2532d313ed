// allReduceRmsNorm on the CPU backend (the reference the GPU kernels are checked against), under the real
// launcher at world sizes 2 and 3: the all-reduce + RMSNorm program GPUs run too (test/programs/ar-norm.ts),
// here with its backend cpu: the host reference bit for bit and within its float64 bound, in place,
// exactly representable answers, fp8 with saturation, NaN and Inf, a straggler, alternating calls, bad
// inputs.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { runJob } from "./support/cpu-job.js";

const program = path.join(path.dirname(fileURLToPath(import.meta.url)), "programs", "ar-norm.js");

for (const n of [2, 3]) {
  test(`CPU allReduceRmsNorm at world size ${n}: reference bits, float64 bound, in place, fp8, NaN, bad inputs`, () => {
    const r = runJob(n, program, {}, ["cpu"]);
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /seed \d+ \(replay with SYMMKIT_TEST_SEED=\d+\)/, r.out);
    for (let rank = 0; rank < n; rank++)
      assert.match(r.out, new RegExp(`^.*cpu ar-norm ok rank ${rank}$`, "m"), `rank ${rank}:\n${r.out}`);
    assert.equal(r.out.match(/cpu ar-norm ok rank \d+/g)?.length, n, r.out);
  });
}
