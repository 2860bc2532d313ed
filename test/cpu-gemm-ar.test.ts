// matmulAllReduce (GEMM + all-reduce, optionally + RMSNorm) on the CPU backend, the reference the GPU
// kernels are checked against, under the real launcher at world sizes 2 and 3.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, "..", "src", "cli.js");

for (const n of [2, 3]) {
  test(`CPU matmulAllReduce at world size ${n}: rank-order bits, float64, exact, rmsNorm, fp8, bad inputs`, () => {
    const r = spawnSync(
      process.execPath,
      [cli, "run", "-n", String(n), "--grace-ms", "1000", path.join(here, "fixtures", "cpu-gemm-ar-rank.js")],
      { encoding: "utf8", timeout: 120_000 },
    );
    const out = `${r.stdout}\n${r.stderr}`;
    assert.equal(r.status, 0, out);
    for (let rank = 0; rank < n; rank++)
      assert.match(out, new RegExp(`^.*cpu gemm-ar ok rank ${rank}$`, "m"), `rank ${rank}:\n${out}`);
    assert.equal(out.match(/cpu gemm-ar ok rank \d+/g)?.length, n, out);
  });
}
