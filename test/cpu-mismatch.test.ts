// Ranks out of step on the CPU backend: each field of a call's fingerprint in turn differs on one rank;
// every rank must end with CollectiveMismatchError naming a peer and the field, refuse its next call,
// and the job must still end cleanly with nothing left behind.
import assert from "node:assert/strict";
import { test } from "node:test";
import { assertNothingLeft, runJob } from "./support/cpu-job.js";

const FIELD: Record<string, RegExp> = {
  size: /element count/,
  dtype: /dtype/,
  op: /reduction/,
  algorithm: /operation or algorithm/,
  auto: /operation or algorithm/,
  collective: /operation or algorithm/,
  root: /element count or root\/peer/,
  skip: /operation or algorithm/,
};

for (const [how, field] of Object.entries(FIELD)) {
  test(`ranks out of step (${how}): CollectiveMismatchError on every rank, next call refused`, () => {
    const world = 3;
    const r = runJob(world, "cpu-mismatch-rank.js", { MISMATCH: how, SYMMKIT_SYNC_TIMEOUT_MS: "20000" });
    assert.equal(r.status, 0, r.out);
    const lines = r.out.split("\n").filter((l) => l.includes(`mismatch ${how}:`));
    assert.equal(lines.length, world, r.out);
    for (const l of lines) assert.match(l, field, l);
    // Found at the signal, not by the 20 s deadline.
    for (const l of lines) assert.ok(Number(/after ([\d.]+) ms/.exec(l)![1]) < 5000, l);
    assert.equal(r.out.match(/next call refused: SYMMKIT_COLLECTIVE_MISMATCH/g)?.length, world, r.out);
    assert.doesNotMatch(r.out, /WRONG|NO MISMATCH|NEXT CALL RAN/);
    assertNothingLeft(r.out);
  });
}
