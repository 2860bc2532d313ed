// The fused matmuls on the CPU backend (the reference the GPU kernels are checked against), under the real
// launcher at world sizes 2 and 3: the fused-matmul program GPUs run too (test/programs/fused.ts), here
// with its backend cpu: allGatherMatmul and matmulReduceScatter with every algorithm, the backend's GEMM
// and a float64 product, decoys, poisoned outputs, bitwise agreement, a straggler, alternating calls, bad
// inputs.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { runJob } from "./support/cpu-job.js";

const program = path.join(path.dirname(fileURLToPath(import.meta.url)), "programs", "fused.js");

for (const n of [2, 3]) {
  test(`CPU allGatherMatmul and matmulReduceScatter at world size ${n}: float64 reference, bad inputs`, () => {
    const r = runJob(n, program, {}, ["cpu"]);
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /seed \d+ \(replay with SYMMKIT_TEST_SEED=\d+\)/, r.out);
    for (let rank = 0; rank < n; rank++)
      assert.match(r.out, new RegExp(`^.*cpu fused ok rank ${rank}$`, "m"), `rank ${rank}:\n${r.out}`);
    assert.equal(r.out.match(/cpu fused ok rank \d+/g)?.length, n, r.out);
  });
}
