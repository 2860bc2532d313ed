// The GPU fault matrix (test/gpu/ranks/fault-matrix.ts) on 2 GPUs or more: every collective algorithm,
// NCCL included, under a straggler below the deadline (eager and in a graph: exact results), a rank that
// skips the call (eager and in a replayed graph: a typed error naming it within the deadline plus 5 s on
// every other rank), and a rank SIGKILLed in the middle of a stream of calls (the launcher stops the job
// naming it; nothing left behind); then the skip and kill cases again, FAULT_REPEATS times each (6).
// FAULT_WORLD sets the world (default: the GPUs, at most 4); ranks beyond the GPUs share them
// (--share-gpus), which checks the same detection and naming on a machine with fewer GPUs.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { TUNABLE_ALGORITHMS, type CollectiveName } from "../../src/ops/coll/registry.js";
import { deviceCount } from "../../src/runtime/device.js";
import { runRanks, skipReason } from "./gpu.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const script = path.join(here, "ranks", "fault-matrix.js");
const gpus = skipReason ? 0 : deviceCount();
const n = Number(process.env.FAULT_WORLD ?? Math.min(gpus, 4));
const skip =
  skipReason || (n < 2 ? `needs a world of 2 or more: ${gpus} GPU(s) here; FAULT_WORLD shares them` : false);
if (skip) console.log(`# GPU fault matrix skipped: ${skip}`);
const LIMIT_MS = 3000;
const ALL = (Object.keys(TUNABLE_ALGORITHMS) as CollectiveName[]).flatMap((col) =>
  TUNABLE_ALGORITHMS[col].map((a) => `${col}/${a}`),
);

const run = (env: Record<string, string>): { status: number | null; out: string } =>
  runRanks(n, script, {
    env: { ...env, SYMMKIT_SYNC_TIMEOUT_MS: String(LIMIT_MS) },
    timeoutMs: 60_000,
    launcherArgs: ["--grace-ms", "2000", ...(n > gpus ? ["--share-gpus"] : [])],
    shown: /matrix|symmkit run:|WRONG|Error/,
  });

const symmkitShm = (): string[] => fs.readdirSync("/dev/shm").filter((f) => f.includes("symmkit"));

function skipCase(kase: string, alg: string): void {
  const r = run({ CASE: kase, ALG: alg });
  assert.equal(r.status, 0, r.out);
  const lines = r.out
    .split("\n")
    .filter((l) => l.includes(`matrix ${kase} ${alg}: `) && !l.includes("skipped"));
  assert.equal(lines.length, n - 1, r.out);
  // NCCL's algorithms too: the fingerprint barrier before the NCCL call is where the others wait.
  const named = `SymmTimeoutError naming [${n - 1}]`;
  for (const l of lines) {
    assert.ok(l.includes(named), l);
    assert.doesNotMatch(l, /TOO LATE|WRONG/);
  }
}

function killCase(alg: string): void {
  const before = symmkitShm();
  const r = run({ CASE: "kill", ALG: alg });
  assert.equal(r.status, 137, r.out);
  assert.match(r.out, new RegExp(`rank ${n - 1} \\(pid \\d+\\) was killed by SIGKILL first`), r.out);
  assert.deepEqual(symmkitShm(), before, "named shared memory left behind");
}

test("every algorithm with a straggler under the deadline, eager and in a graph: exact", { skip }, () => {
  const r = run({ CASE: "straggle" });
  assert.equal(r.status, 0, r.out);
  assert.equal(r.out.match(/matrix straggle all: ok/g)?.length, n, r.out);
});

for (const alg of ALL) {
  for (const kase of ["skip", "graph-skip"]) {
    test(`${alg}: a rank that skips the call (${kase}) is named by every other rank`, { skip }, () =>
      skipCase(kase, alg),
    );
  }
  test(`${alg}: a rank SIGKILLed mid-stream stops the job, named by the launcher`, { skip }, () =>
    killCase(alg),
  );
}

const repeats = Number(process.env.FAULT_REPEATS ?? 6);
test(`repeated: ${repeats} skips (one_shot) and ${repeats} kills (lamport), no hang`, { skip }, () => {
  for (let i = 0; i < repeats; i++) skipCase("skip", "all-reduce/one_shot");
  for (let i = 0; i < repeats; i++) killCase("all-reduce/lamport");
});
