// Ranks out of step on the CPU backend: each field of a call's fingerprint in turn differs on one rank;
// every rank must end with CollectiveMismatchError naming a peer and the field, refuse its next call,
// and the job must still end cleanly with nothing left behind. Then calls refused on one rank only, one
// op of each family: the refused call takes its turn, so every rank ends in a typed error naming another
// rank and none returns another call's data; and calls refused alike everywhere leave the group usable.
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
  root: /^root: ours [01], theirs [01]$/,
  skip: /operation or algorithm/,
  collision: /element count: ours (4096|3603) elements, theirs (4096|3603) elements/,
  hidden: /^hidden size: ours (64|32), theirs (64|32)(; weight and bias digest: ours \d+, theirs \d+)?$/,
  weight: /^weight and bias digest: ours \d+, theirs \d+$/,
  bias: /^weight and bias digest: ours \d+, theirs \d+$/,
  gatherK: /^k: ours (32|16), theirs (32|16)$/,
  scatterN: /^n: ours (8|16), theirs (8|16)$/,
  topk: /^topk: ours [12], theirs [12]$/,
  reduceN: /^n: ours (8|16), theirs (8|16)$/,
  gatherSize: /element count: ours (1024|1028) elements, theirs (1024|1028) elements/,
  scatterSize: /element count: ours (3072|3084) elements, theirs (3072|3084) elements/,
  allToAllSize: /element count: ours (3072|3084) elements, theirs (3072|3084) elements/,
  rowSize: /element count: ours (8|12) elements, theirs (8|12) elements/,
  sendSize: /element count: ours (1024|1028) elements, theirs (1024|1028) elements/,
};
/** Cases between a pair: run at world 2. */
const PAIRS = new Set(["sendSize"]);

for (const [how, field] of Object.entries(FIELD)) {
  test(`ranks out of step (${how}): CollectiveMismatchError on every rank, next call refused`, () => {
    const world = PAIRS.has(how) ? 2 : 3;
    const r = runJob(world, "cpu-mismatch-rank.js", { MISMATCH: how, SYMMKIT_SYNC_TIMEOUT_MS: "20000" });
    assert.equal(r.status, 0, r.out);
    const lines = r.out.split("\n").filter((l) => l.includes(`mismatch ${how}:`));
    assert.equal(lines.length, world, r.out);
    for (const l of lines) assert.match(l.slice(l.indexOf(" ms: ") + 5), field, l);
    // Found at the signal, not by the 20 s deadline.
    for (const l of lines) assert.ok(Number(/after ([\d.]+) ms/.exec(l)![1]) < 5000, l);
    assert.equal(r.out.match(/next call refused: SYMMKIT_COLLECTIVE_MISMATCH/g)?.length, world, r.out);
    assert.doesNotMatch(r.out, /WRONG|NO MISMATCH|NEXT CALL RAN/);
    assertNothingLeft(r.out);
  });
}

/** Each line the ranks print: "refusal OP: rank R: <first call> | <second call> | <barrier>". */
function refusalLines(op: string, world: number): string[] {
  // A rank that waits for one that moved on ends by the deadline: short, so that the test is too.
  const r = runJob(world, "cpu-mismatch-rank.js", { REFUSE: op, SYMMKIT_SYNC_TIMEOUT_MS: "2000" });
  assert.equal(r.status, 0, r.out);
  assert.doesNotMatch(r.out, /WRONG/);
  const lines = r.out.split("\n").filter((l) => l.includes(`refusal ${op}: rank`));
  assert.equal(lines.length, world, r.out);
  assertNothingLeft(r.out);
  return lines;
}

const REFUSED = /refused SYMMKIT_INVALID_ARGUMENT \(turn spent\)/;

// Point-to-point between ranks 0 and 1; the collectives on 3 ranks, so that two go ahead together.
const ONE_RANK: Record<string, number> = {
  allReduce: 3,
  reduceScatter: 3,
  allGather: 3,
  allToAll: 3,
  allToAllV: 3,
  allReduceRmsNorm: 3,
  matmulReduceScatter: 3,
  dispatch: 3,
  send: 2,
  recv: 2,
  sendRecv: 2,
};

for (const [op, world] of Object.entries(ONE_RANK)) {
  test(`${op} refused on rank 0 only: every rank ends in a typed error naming another, no wrong data`, () => {
    const lines = refusalLines(op, world);
    const rank0 = lines.find((l) => l.includes(": rank 0: "))!;
    assert.match(rank0.split(": rank 0: ")[1]!.split(" | ")[0]!, REFUSED, rank0);
    for (const l of lines) assert.match(l, /(mismatch|timeout) names rank \d/, l);
    // A group call's numbers differ by the refused call's turn, and nothing else.
    if (world === 3)
      assert.ok(
        lines.some((l) => /call number/.test(l)),
        lines.join("\n"),
      );
  });
}

test("calls refused alike on every rank leave the group in step: the next calls are exact", () => {
  const world = 3;
  for (const l of refusalLines("everywhere", world)) {
    const [allReduce, sendRecv, ...next] = l.split(/: rank \d: /)[1]!.split(" | ");
    assert.match(allReduce!, REFUSED, l);
    // Rank 2 has no pair in the exchange.
    if (!l.includes(": rank 2: ")) assert.match(sendRecv!, REFUSED, l);
    assert.deepEqual(next, ["ok", "ok", "ok"], l);
  }
});
