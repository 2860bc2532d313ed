// The GPU soak (test/gpu/ranks/soak.ts) on 2 GPUs or more: 100 000 mixed collective calls (SOAK_CALLS
// changes it), outputs checked, GPU memory and open descriptors flat.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { deviceCount } from "../../src/runtime/device.js";
import { runRanks, skipReason } from "./gpu.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const gpus = skipReason ? 0 : deviceCount();
const skip = skipReason || (gpus < 2 ? `needs 2 or more GPUs, this machine has ${gpus}` : false);
if (skip) console.log(`# GPU soak skipped: ${skip}`);

test("soak: mixed collective calls, checked, memory and descriptors flat", { skip }, () => {
  const n = Math.min(gpus, 4);
  const r = runRanks(n, path.join(here, "ranks", "soak.js"), { timeoutMs: 570_000 });
  const out = r.out;
  assert.equal(r.status, 0, out);
  assert.equal(out.match(/soak ok/g)?.length, n, out);
});
