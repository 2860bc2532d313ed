// sendRecv, send/recv, allToAll and allToAllV on the CPU backend, under the real launcher at world sizes 2
// to 5 (even and odd, and past 3, where shapes sized for small worlds stop splitting): the exchange
// program GPUs run too (test/programs/exchange.ts), here with its backend cpu: every dtype, uneven sizes,
// count matrices with zeros, poisoned outputs checked byte for byte, group-judged errors thrown by every
// rank alike, local bad inputs.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { runJob } from "./support/cpu-job.js";

const program = path.join(path.dirname(fileURLToPath(import.meta.url)), "programs", "exchange.js");

for (const n of [2, 3, 4, 5]) {
  test(`CPU sendRecv, allToAll, allToAllV at world size ${n}: exact data, group-judged and local errors`, () => {
    const r = runJob(n, program, {}, ["cpu"]);
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /seed \d+ \(replay with SYMMKIT_TEST_SEED=\d+\)/, r.out);
    for (let rank = 0; rank < n; rank++)
      assert.match(r.out, new RegExp(`^.*cpu exchange ok rank ${rank}$`, "m"), `rank ${rank}:\n${r.out}`);
    assert.equal(r.out.match(/cpu exchange ok rank \d+/g)?.length, n, r.out);
  });
}
