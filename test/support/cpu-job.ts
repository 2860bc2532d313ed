// Runs a rank fixture under the real launcher (symmkit run) and checks what a job must leave behind:
// nothing. Shared by the CPU backend's job tests.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, "..", "..", "src", "cli.js");
const fixtures = path.join(here, "..", "fixtures");

/** `symmkit run -n n script ...args` (`script` a file of test/fixtures, or a path) with `env` added; its
 * exit status and all it printed. */
export function runJob(
  n: number,
  script: string,
  env: Record<string, string> = {},
  args: readonly string[] = [],
): { status: number | null; out: string; ms: number } {
  const start = performance.now();
  const r = spawnSync(
    process.execPath,
    [cli, "run", "-n", String(n), "--grace-ms", "1000", path.resolve(fixtures, script), ...args],
    {
      encoding: "utf8",
      timeout: 120_000,
      env: { ...process.env, ...env },
    },
  );
  return { status: r.status, out: `${r.stdout}\n${r.stderr}`, ms: performance.now() - start };
}

/** The job's socket directory (a rank printed "job directory DIR") is gone, and nothing of symmkit's is
 * in /dev/shm. */
export function assertNothingLeft(out: string): void {
  const dir = /job directory (\S+)/.exec(out)?.[1] ?? "";
  assert.ok(dir.startsWith(os.tmpdir()), `the job did not say where its directory was:\n${out}`);
  assert.equal(fs.existsSync(dir), false, `${dir} left behind`);
  assert.deepEqual(
    fs.readdirSync("/dev/shm").filter((f) => f.includes("symmkit")),
    [],
    "named shared memory left behind",
  );
}

/** Runs test/programs/NAME.js (a program both backends run) on the CPU backend at world `n`: it exits 0,
 * prints its seed, and every rank prints "cpu NAME ok rank R" once. */
export function assertProgramPasses(name: string, n: number): void {
  const r = runJob(n, path.join(here, "..", "programs", `${name}.js`), {}, ["cpu"]);
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /seed \d+ \(replay with SYMMKIT_TEST_SEED=\d+\)/, r.out);
  for (let rank = 0; rank < n; rank++)
    assert.match(r.out, new RegExp(`^.*cpu ${name} ok rank ${rank}$`, "m"), `rank ${rank}:\n${r.out}`);
  assert.equal(r.out.match(new RegExp(`cpu ${name} ok rank \\d+`, "g"))?.length, n, r.out);
}
