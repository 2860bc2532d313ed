// The README's main job: `symmkit demo` on a machine without a GPU launches its CPU ranks, checks every
// collective against its reference and prints the table; any wrong result would make it exit non-zero.
// The README's sample output must have the shape of what it prints: the same lines in the same order.
import assert from "node:assert/strict";
import { spawnSync, type SpawnSyncReturns } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { detectBackend } from "../src/init.js";

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const cli = path.join(root, "dist", "src", "cli.js");
const gpu =
  detectBackend().backend === "cuda" ? "this machine has a GPU: the GPU demo runs in test/gpu" : false;

let ran: SpawnSyncReturns<string> | undefined;
/** One run of the demo, shared by the tests below. */
const demo = (): SpawnSyncReturns<string> =>
  (ran ??= spawnSync(process.execPath, [cli, "demo"], { encoding: "utf8", timeout: 120_000 }));

/** A line's shape: every number a `#`, runs of spaces one, and the no-GPU reason (machine's own) dropped. */
const shape = (line: string): string =>
  line
    .replace(/^(symmkit demo: no GPU) \(.*\);/, "$1 (...);")
    .replace(/\d+(\.\d+)?(e[-+]?\d+)?/g, "#")
    .replace(/\s+/g, " ")
    .trim();

test("symmkit demo without a GPU: every collective matches its reference", { skip: gpu }, () => {
  const r = demo();
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /no GPU .*4 CPU ranks/);
  assert.match(r.stdout, /all-reduce +one_shot +4096/);
  assert.match(r.stdout, /reduce-scatter +pull +1048576/);
  assert.match(r.stdout, /MLP block on the CPU reference: [\d.]+ ms, within/);
  assert.match(r.stdout, /demo: every result matched its reference/);
});

test("the README's sample output has the demo's lines, in order", { skip: gpu }, () => {
  const readme = fs.readFileSync(path.join(root, "README.md"), "utf8");
  const block = /<!-- demo-output:begin -->\n```text\n([\s\S]*?)```\n<!-- demo-output:end -->/.exec(readme);
  assert.ok(block?.[1], "README.md has no ```text block between <!-- demo-output:begin/end --> markers");
  const r = demo();
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  const lines = (text: string): string[] => text.trimEnd().split("\n").map(shape);
  assert.deepEqual(
    lines(block[1]),
    lines(r.stdout),
    "README.md's demo output (numbers aside) is not what the demo prints",
  );
});
