import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const cli = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "src", "cli.js");
const run = (...args: string[]) =>
  spawnSync(process.execPath, [cli, ...args], { encoding: "utf8", timeout: 60000 });

test("help and unknown commands", () => {
  const help = run("help");
  assert.equal(help.status, 0);
  assert.match(help.stdout, /commands:[\s\S]*doctor/);
  const bad = run("frobnicate");
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /unknown command frobnicate/);
});

test("doctor says what is missing, and exits non-zero without a GPU", () => {
  const r = run("doctor");
  const json = JSON.parse(run("doctor", "--json").stdout) as {
    driver: { ok: boolean };
    gpus: { ok: boolean };
  };
  if (json.driver.ok && json.gpus.ok) {
    assert.equal(r.status, 0, r.stdout);
    return;
  }
  assert.equal(r.status, 1);
  assert.match(r.stdout, /MISSING: /);
  assert.match(r.stdout, /cannot run here/);
  if (!json.driver.ok) assert.match(r.stdout, /Set SYMMKIT_LIBCUDA/);
});
