// The CPU backend's signals rest on Atomics being atomic across processes on memory koffi maps (not a
// SharedArrayBuffer): two processes race a million increments each and must lose none.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { SharedRegion } from "../src/cpu/shared-memory.js";

test("Atomics on a shared memfd region are atomic across processes", async () => {
  const n = 1_000_000;
  const { region, fd } = SharedRegion.create(4096, "symmkit-test");
  const a = new Int32Array(region.buffer);
  const here = path.dirname(fileURLToPath(import.meta.url));
  const child = spawn(process.execPath, [path.join(here, "fixtures", "atomics-peer.js"), String(n)], {
    stdio: ["ignore", "inherit", "inherit", fd],
  });
  const exited = new Promise((r) => child.once("exit", r)); // listen now: the child may finish first
  Atomics.add(a, 2, 1);
  while (Atomics.load(a, 2) < 2);
  for (let i = 0; i < n; i++) {
    Atomics.add(a, 0, 1);
    for (;;) {
      const v = Atomics.load(a, 1);
      if (Atomics.compareExchange(a, 1, v, v + 1) === v) break;
    }
  }
  await exited;
  assert.equal(Atomics.load(a, 0), 2 * n, "add");
  assert.equal(Atomics.load(a, 1), 2 * n, "compare-exchange");
  region.close();
});
