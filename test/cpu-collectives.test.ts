// The CPU backend under the real launcher at world sizes 2, 3 and 4: every collective against a
// reference, a rank that never arrives, a rank killed mid-collective; nothing left behind.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, "..", "src", "cli.js");
/** This job's socket directory must be gone, and no shared memory may have a name in /dev/shm. */
function assertNothingLeft(out: string): void {
  const dir = /job directory (\S+)/.exec(out)?.[1] ?? "";
  assert.ok(dir.startsWith(os.tmpdir()), `the job did not say where its directory was:\n${out}`);
  assert.equal(fs.existsSync(dir), false, `${dir} left behind`);
  assert.deepEqual(
    fs.readdirSync("/dev/shm").filter((f) => f.includes("symmkit")),
    [],
    "named shared memory left behind",
  );
}

function run(
  n: number,
  script: string,
  env: Record<string, string> = {},
): { status: number | null; out: string } {
  const r = spawnSync(
    process.execPath,
    [cli, "run", "-n", String(n), "--grace-ms", "1000", path.join(here, "fixtures", script)],
    {
      encoding: "utf8",
      timeout: 120_000,
      env: { ...process.env, ...env },
    },
  );
  return { status: r.status, out: `${r.stdout}\n${r.stderr}` };
}

for (const n of [2, 3, 4]) {
  test(`CPU collectives at world size ${n}: reference, bitwise agreement, repeated calls, bad inputs`, () => {
    const r = run(n, "cpu-collectives-rank.js");
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
