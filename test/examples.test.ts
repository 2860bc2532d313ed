// Every example in examples/ (TypeScript, compiled by `npm run build` into dist/examples/, type-checked
// against the package's own declarations on the way) runs as a user would run it, `symmkit run -n 2`,
// importing "symmkit" through the package's exports, on a machine without a GPU: on the CPU backend, or
// saying in one line that it needs a GPU. A new example needs an entry here.
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
  "mlp.ts": (r) =>
    new RegExp(
      `^rank ${r}: MLP block \\(all-gather \\+ GEMM, GELU, GEMM \\+ reduce-scatter\\) of ${32 * WORLD} tokens, ` +
        `hidden 256, ffn ${128 * WORLD} on ${WORLD} cpu ranks: matches the unsplit block \\(largest difference .+\\)$`,
    ),
  "moe.ts": (r) =>
    new RegExp(
      `^rank ${r}: MoE layer \\(dispatch, 8 expert GEMMs per rank, combine\\) of 32 tokens per rank, top-2 of ` +
        `${8 * WORLD} experts on ${WORLD} cpu ranks: matches the layer computed on one rank \\(largest difference .+\\)$`,
    ),
  "decode.ts": (r) =>
    new RegExp(
      `^rank ${r}: decode step \\(GEMM \\+ all-reduce \\+ residual \\+ RMSNorm\\) of 8 tokens, hidden 512, on ` +
        `${WORLD} cpu ranks: the same bits as GEMM, then allReduceRmsNorm$`,
    ),
  "quickstart.ts": () => /^quickstart: needs an NVIDIA GPU \(.+\); skipped$/,
  "symmetric.ts": (r) =>
    new RegExp(
      `^rank ${r} received \\[${Array.from({ length: WORLD }, (_, p) => 1000 * (p + 1) + r).join(", ")}\\]$`,
    ),
  "collectives.ts": (r) =>
    new RegExp(
      `^rank ${r}: all-reduce \\(two_shot\\) and all-gather of 4096 bf16 values on ${WORLD} cpu ranks match the reference$`,
    ),
};

function run(script: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [cli, "run", "-n", String(WORLD), script], {
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

test("every example has an expected output here, and is TypeScript built into dist/examples", () => {
  const examples = fs.readdirSync(path.join(root, "examples")).filter((f) => /\.[cm]?[jt]s$/.test(f));
  assert.deepEqual(examples.sort(), Object.keys(EXPECTED).sort());
  for (const e of examples) {
    assert.match(e, /\.ts$/, `${e}: examples are TypeScript`);
    assert.ok(
      fs.existsSync(path.join(root, "dist", "examples", e.replace(/\.ts$/, ".js"))),
      `${e} not built`,
    );
  }
});

for (const [example, expected] of Object.entries(EXPECTED)) {
  const js = path.join("dist", "examples", example.replace(/\.ts$/, ".js"));
  test(`symmkit run -n ${WORLD} ${js} (examples/${example}) without a GPU`, { skip: gpu }, async () => {
    const r = await run(js);
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
