// exitWithoutTeardown (src/distributed/sync-watch.ts): once a context is known stuck, the process ends through
// libc's _exit from its exit event, so the exit handlers after it never run, while the exit code stays and an
// uncaught error is printed once (Node prints it only after the exit event), unless the application handles it.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const syncWatch = path.join(path.dirname(fileURLToPath(import.meta.url)), "../src/distributed/sync-watch.js");

function child(body: string): { status: number | null; stdout: string; stderr: string } {
  const script = `import { exitWithoutTeardown } from ${JSON.stringify(syncWatch)};\n${body}`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const LATER = `process.on("exit", () => console.log("a later exit handler ran"));`;

test("the exit code stays, set by process.exitCode or by an earlier exit handler; later handlers never run", () => {
  let r = child(
    `exitWithoutTeardown(); exitWithoutTeardown(); ${LATER} console.log("before"); process.exitCode = 3;`,
  );
  assert.equal(r.status, 3, r.stderr);
  assert.equal(r.stdout, "before\n");
  r = child(`process.on("exit", () => { process.exitCode = 2; }); exitWithoutTeardown(); ${LATER}`);
  assert.equal(r.status, 2, r.stderr);
  assert.equal(r.stdout, "");
});

test("an uncaught error is printed once and ends the process with code 1, a thrown undefined too", () => {
  let r = child(`exitWithoutTeardown(); ${LATER} throw new Error("the group failed");`);
  assert.equal(r.status, 1);
  assert.equal(r.stderr.match(/the group failed/g)?.length, 1, r.stderr);
  assert.equal(r.stdout, "");
  r = child(`exitWithoutTeardown(); Promise.reject(new Error("a rejected call"));`);
  assert.equal(r.status, 1);
  assert.equal(r.stderr.match(/a rejected call/g)?.length, 1, r.stderr);
  r = child(`exitWithoutTeardown(); throw undefined;`);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /undefined/);
});

test("an error the application handles is not printed as uncaught", () => {
  const r = child(`
    exitWithoutTeardown();
    process.on("uncaughtException", (e) => { console.log("handled", e.message); process.exitCode = 4; });
    throw new Error("the group failed");
  `);
  assert.equal(r.status, 4, r.stderr);
  assert.equal(r.stdout, "handled the group failed\n");
  assert.equal(r.stderr, "");
});
