// The CPU backend under the real launcher at world sizes 2, 3 and 4: the collectives program GPUs run too
// (test/programs/collectives.ts), here with its backend cpu: every algorithm, dtype and op against a
// reference, bitwise agreement, repeated calls, bad inputs; a rank that never arrives, a rank killed
// mid-collective; nothing left behind.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { assertNothingLeft, runJob as run } from "./support/cpu-job.js";

const program = path.join(path.dirname(fileURLToPath(import.meta.url)), "programs", "collectives.js");

for (const n of [2, 3, 4]) {
  test(`CPU collectives at world size ${n}: reference, bitwise agreement, repeated calls, bad inputs`, () => {
    const r = run(n, program, {}, ["cpu"]);
    assert.equal(r.status, 0, r.out);
    assert.equal(r.out.match(/cpu collectives ok/g)?.length, n, r.out);
    assertNothingLeft(r.out);
  });
}

test("32 CPU ranks on one host: every rank's descriptors reach every other (no queue deadlock)", () => {
  const r = run(32, "many-ranks.js");
  assert.equal(r.status, 0, r.out);
  assert.equal(r.out.match(/many ranks ok/g)?.length, 32, r.out);
  assertNothingLeft(r.out);
});

test("a rank that never arrives makes the others fail with SymmTimeoutError naming it", () => {
  const r = run(3, "cpu-fault-rank.js", { FAULT: "skip", SYMMKIT_SYNC_TIMEOUT_MS: "1000" });
  assert.equal(r.status, 0, r.out);
  assert.equal(r.out.match(/timeout naming rank 2/g)?.length, 2, r.out);
});

test("a rank killed mid-collective: the launcher stops the job and reports it; nothing is left behind", () => {
  const r = run(3, "cpu-fault-rank.js", { FAULT: "kill" });
  assert.equal(r.status, 137, r.out);
  assert.match(r.out, /rank 1 \(pid \d+\) was killed by SIGKILL first/);
  assertNothingLeft(r.out);
});
