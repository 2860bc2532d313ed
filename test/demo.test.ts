// The README's main job: `symmkit demo` on a machine without a GPU launches its CPU ranks, checks every
// collective against its reference and prints the table; any wrong result would make it exit non-zero.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { detectBackend } from "../src/init.js";

const cli = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "src", "cli.js");
const gpu =
  detectBackend().backend === "cuda" ? "this machine has a GPU: the GPU demo runs in test/gpu" : false;

test("symmkit demo without a GPU: every collective matches its reference", { skip: gpu }, () => {
  const r = spawnSync(process.execPath, [cli, "demo"], { encoding: "utf8", timeout: 120_000 });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /no GPU .*4 CPU ranks/);
  assert.match(r.stdout, /all-reduce +one_shot +4096/);
  assert.match(r.stdout, /reduce-scatter +pull +1048576/);
  assert.match(r.stdout, /MLP block on the CPU reference: [\d.]+ ms, within/);
  assert.match(r.stdout, /demo: every result matched its reference/);
});
