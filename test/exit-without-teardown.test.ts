// exitWithoutTeardown (src/distributed/sync-watch.ts): once a context is known stuck, the process ends through
// libc's _exit from its exit event, so the exit handlers after it never run, while the exit code and what
// was written to stdout and stderr stay.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const syncWatch = path.join(path.dirname(fileURLToPath(import.meta.url)), "../src/distributed/sync-watch.js");

function child(body: string): { status: number | null; stdout: string; stderr: string } {
  const script = `import { exitWithoutTeardown } from ${JSON.stringify(syncWatch)};\n${body}`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    encoding: "utf8",
    maxBuffer: 1 << 24,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test("the exit code and a megabyte written before it stay; exit handlers registered after it never run", () => {
  const r = child(`
    exitWithoutTeardown();
    exitWithoutTeardown();
    process.on("exit", () => console.log("a later exit handler ran"));
    process.stdout.write("x".repeat(1 << 20) + "\\n");
    process.exitCode = 3;
  `);
  assert.equal(r.status, 3, r.stderr);
  assert.equal(r.stdout, "x".repeat(1 << 20) + "\n");
});

test("an uncaught error still prints and ends the process with code 1", () => {
  const r = child(`
    exitWithoutTeardown();
    process.on("exit", () => console.log("a later exit handler ran"));
    throw new Error("the group failed");
  `);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /the group failed/);
  assert.doesNotMatch(r.stdout, /later exit handler/);
});
