// matmulAllReduce (GEMM + all-reduce, optionally + RMSNorm) on the CPU backend, the reference the GPU
// kernels are checked against, under the real launcher at world sizes 2 and 3: the GEMM + all-reduce
// program GPUs run too (test/programs/gemm-ar.ts), here with its backend cpu: every algorithm bit for bit
// with the rank-order reference after a decoy call, float64, exact integers, rank order, rmsNorm with bf16
// and fp8 outputs, a straggler, bad inputs.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { runJob } from "./support/cpu-job.js";

const program = path.join(path.dirname(fileURLToPath(import.meta.url)), "programs", "gemm-ar.js");

for (const n of [2, 3]) {
  test(`CPU matmulAllReduce at world size ${n}: rank-order bits, float64, exact, rmsNorm, fp8, bad inputs`, () => {
    const r = runJob(n, program, {}, ["cpu"]);
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /seed \d+ \(replay with SYMMKIT_TEST_SEED=\d+\)/, r.out);
    for (let rank = 0; rank < n; rank++)
      assert.match(r.out, new RegExp(`^.*cpu gemm-ar ok rank ${rank}$`, "m"), `rank ${rank}:\n${r.out}`);
    assert.equal(r.out.match(/cpu gemm-ar ok rank \d+/g)?.length, n, r.out);
  });
}
