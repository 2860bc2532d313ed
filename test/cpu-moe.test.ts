// MoE dispatch and combine on the CPU backend (the reference the GPU kernels are checked against), under
// the real launcher at world sizes 2 and 3: the MoE program GPUs run too (test/programs/moe.ts), here with
// its backend cpu: every rank's layout and combined tokens computed independently and checked bit for bit,
// maxRows, into, exact and float32-rounded combine, group-judged refusals on every rank, bad inputs.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { runJob } from "./support/cpu-job.js";

const program = path.join(path.dirname(fileURLToPath(import.meta.url)), "programs", "moe.js");

for (const n of [2, 3]) {
  test(`CPU MoE dispatch and combine at world size ${n}: layout, maxRows, combine bits, bad inputs`, () => {
    const r = runJob(n, program, {}, ["cpu"]);
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /seed \d+ \(replay with SYMMKIT_TEST_SEED=\d+\)/, r.out);
    for (let rank = 0; rank < n; rank++)
      assert.match(r.out, new RegExp(`^.*cpu moe ok rank ${rank}$`, "m"), `rank ${rank}:\n${r.out}`);
    assert.equal(r.out.match(/cpu moe ok rank \d+/g)?.length, n, r.out);
  });
}
