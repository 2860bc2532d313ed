// MoE dispatch and combine on the CPU backend (the reference the GPU kernels are checked against), under
// the real launcher at world sizes 2 and 3: every rank's layout and combined tokens computed independently
// and checked bit for bit, maxRows, exact and float32-rounded combine, bad inputs refused on every rank.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, "..", "src", "cli.js");

for (const n of [2, 3]) {
  test(`CPU MoE dispatch and combine at world size ${n}: layout, maxRows, combine bits, bad inputs`, () => {
    const r = spawnSync(
      process.execPath,
      [cli, "run", "-n", String(n), "--grace-ms", "1000", path.join(here, "fixtures", "cpu-moe-rank.js")],
      { encoding: "utf8", timeout: 60_000 },
    );
    const out = `${r.stdout}\n${r.stderr}`;
    assert.equal(r.status, 0, out);
    for (let rank = 0; rank < n; rank++)
      assert.match(out, new RegExp(`^.*cpu moe ok rank ${rank}$`, "m"), `rank ${rank}:\n${out}`);
    assert.equal(out.match(/cpu moe ok rank \d+/g)?.length, n, out);
  });
}
