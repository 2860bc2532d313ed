// Every example in examples/ runs as a user would run it (`symmkit run -n 2 examples/x.mjs`, importing
// "symmkit" through the package's own exports) on a machine without a GPU: on the CPU backend, or saying
// in one line that it needs a GPU. A new example needs an entry here.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { detectBackend } from "../src/init.js";

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const cli = path.join(root, "dist", "src", "cli.js");
const WORLD = 2;
const gpu =
  detectBackend().backend === "cuda" ? "this machine has a GPU: the examples would run on it" : false;

/** What each rank prints without a GPU (rank r of WORLD). */
const EXPECTED: Record<string, (r: number) => RegExp> = {
  "quickstart.mjs": () => /^quickstart: needs an NVIDIA GPU \(.+\); skipped$/,
  "symmetric.mjs": (r) =>
    new RegExp(
      `^rank ${r} received \\[${Array.from({ length: WORLD }, (_, p) => 1000 * (p + 1) + r).join(", ")}\\]$`,
    ),
  "moe.mjs": (r) =>
    new RegExp(
      `^rank ${r}: MoE dispatch -> 4 experts per rank -> combine of 8 tokens \\(top-2 of ${4 * WORLD}\\) on ${WORLD} cpu ranks matches the reference$`,
    ),
  "collectives.mjs": (r) =>
    new RegExp(
      `^rank ${r}: all-reduce \\(two_shot\\) and all-gather of 4096 bf16 values on ${WORLD} cpu ranks match the reference$`,
    ),
};

function run(example: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [cli, "run", "-n", String(WORLD), path.join("examples", example)], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 60_000,
    });
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    p.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    p.on("error", reject);
    p.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

test("every example has an expected output here", () => {
  const examples = fs.readdirSync(path.join(root, "examples")).filter((f) => /\.[cm]?[jt]s$/.test(f));
  assert.deepEqual(examples.sort(), Object.keys(EXPECTED).sort());
});

for (const [example, expected] of Object.entries(EXPECTED)) {
  test(`symmkit run -n ${WORLD} examples/${example} without a GPU`, { skip: gpu }, async () => {
    const r = await run(example);
    const what = `exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;
    assert.equal(r.code, 0, what);
    assert.equal(r.stderr, "", what);
    // The launcher prefixes each line with its rank; ranks print in any order.
    const lines = r.stdout.trimEnd().split("\n");
    assert.equal(lines.length, WORLD, `one line per rank\n${what}`);
    for (let rank = 0; rank < WORLD; rank++) {
      const prefix = `[rank ${rank}] `;
      const line = lines.find((l) => l.startsWith(prefix));
      assert.ok(line, `nothing from rank ${rank}\n${what}`);
      assert.match(line.slice(prefix.length), expected(rank), what);
    }
  });
}
