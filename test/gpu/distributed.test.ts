// The distributed runtime on several GPUs of one host: runs the rank programs of test/gpu/ranks, and the
// collectives, fused-matmul, GEMM + all-reduce, all-reduce + RMSNorm, exchange and MoE programs both
// backends run (test/programs), under
// `symmkit run` at every world size this machine allows (2, 3 and 4 GPUs).
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { deviceCount } from "../../src/runtime/device.js";
import {
  AR_NORM_PROGRAM,
  COLLECTIVES_PROGRAM,
  EXCHANGE_PROGRAM,
  FUSED_PROGRAM,
  GEMM_AR_PROGRAM,
  MOE_PROGRAM,
  runRanks,
  skipReason,
} from "./gpu.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const gpus = skipReason ? 0 : deviceCount();
const multi = skipReason || (gpus < 2 ? `needs 2 or more GPUs, this machine has ${gpus}` : false);
if (multi) console.log(`# distributed GPU tests skipped: ${multi}`);

const run = (
  n: number,
  script: string,
  env: Record<string, string> = {},
): { status: number | null; out: string } =>
  runRanks(n, path.join(here, "ranks", script), { env, timeoutMs: 300_000 });

for (const n of [2, 3, 4]) {
  const skip = multi || (n > gpus ? `world size ${n} needs ${n} GPUs, this machine has ${gpus}` : false);
  test(`symmetric memory, barriers, NCCL and allocation cycles at world size ${n}`, { skip }, () => {
    const r = run(n, "symmetric.js");
    assert.equal(r.status, 0);
    assert.equal(r.out.match(/all symmetric checks passed/g)?.length, n);
  });
}

for (const n of [2, 3, 4]) {
  const skip = multi || (n > gpus ? `world size ${n} needs ${n} GPUs, this machine has ${gpus}` : false);
  test(
    `symmkit's GPU collectives at world size ${n}: reference, NCCL, graphs, repeated calls, bad inputs`,
    { skip },
    () => {
      const r = runRanks(n, COLLECTIVES_PROGRAM, { args: ["cuda"], timeoutMs: 300_000 });
      assert.equal(r.status, 0);
      assert.equal(r.out.match(/cuda collectives ok/g)?.length, n);
    },
  );
}

for (const n of [2, 3, 4]) {
  const skip = multi || (n > gpus ? `world size ${n} needs ${n} GPUs, this machine has ${gpus}` : false);
  test(`every collective algorithm at powers of two up to 1 GiB, world size ${n}: exact`, { skip }, () => {
    const r = run(n, "collectives-large.js");
    assert.equal(r.status, 0);
    assert.equal(r.out.match(/large collectives ok/g)?.length, n);
  });
}

for (const n of [2, 3, 4]) {
  const skip = multi || (n > gpus ? `world size ${n} needs ${n} GPUs, this machine has ${gpus}` : false);
  test(
    `fused all-gather + GEMM and GEMM + reduce-scatter at world size ${n}: references, graphs, stragglers, bad inputs`,
    { skip },
    () => {
      const r = runRanks(n, FUSED_PROGRAM, { args: ["cuda"], timeoutMs: 300_000 });
      assert.equal(r.status, 0);
      assert.equal(r.out.match(/cuda fused ok/g)?.length, n);
    },
  );
}

for (const n of [2, 3, 4]) {
  const skip = multi || (n > gpus ? `world size ${n} needs ${n} GPUs, this machine has ${gpus}` : false);
  test(
    `all-reduce + bias + residual + RMSNorm at world size ${n}: every algorithm bit for bit with the reference, in place, fp8, graphs, stragglers, NaN, bad inputs`,
    { skip },
    () => {
      const r = runRanks(n, AR_NORM_PROGRAM, { args: ["cuda"], timeoutMs: 300_000 });
      assert.equal(r.status, 0);
      assert.equal(r.out.match(/cuda ar-norm ok/g)?.length, n);
    },
  );
}

for (const n of [2, 3, 4]) {
  const skip = multi || (n > gpus ? `world size ${n} needs ${n} GPUs, this machine has ${gpus}` : false);
  test(
    `GEMM + all-reduce at world size ${n}: the rank-order reference, with the norm, fp8, graphs, stragglers, bad inputs`,
    { skip },
    () => {
      const r = runRanks(n, GEMM_AR_PROGRAM, { args: ["cuda"], timeoutMs: 300_000 });
      assert.equal(r.status, 0);
      assert.equal(r.out.match(/cuda gemm-ar ok/g)?.length, n);
    },
  );
}

for (const n of [2, 3, 4]) {
  const skip = multi || (n > gpus ? `world size ${n} needs ${n} GPUs, this machine has ${gpus}` : false);
  test(
    `send, recv, sendRecv, allToAll and allToAllV at world size ${n}: exact, every dtype, uneven counts, graphs, stragglers, bad inputs`,
    { skip },
    () => {
      const r = runRanks(n, EXCHANGE_PROGRAM, { args: ["cuda"], timeoutMs: 300_000 });
      assert.equal(r.status, 0);
      assert.equal(r.out.match(/cuda exchange ok/g)?.length, n);
    },
  );
}

for (const n of [2, 3, 4]) {
  const skip = multi || (n > gpus ? `world size ${n} needs ${n} GPUs, this machine has ${gpus}` : false);
  test(
    `MoE dispatch and combine at world size ${n}: bit for bit with the host reference, fp8, graphs, stragglers, group-judged errors`,
    { skip },
    () => {
      const r = runRanks(n, MOE_PROGRAM, { args: ["cuda"], timeoutMs: 300_000 });
      assert.equal(r.status, 0);
      assert.equal(r.out.match(/cuda moe ok/g)?.length, n);
    },
  );
}

const FUSED_OPS = {
  rs: "GEMM + reduce-scatter",
  ar: "GEMM + all-reduce (through the mailbox)",
  "ar-staging": "GEMM + all-reduce (through the staging buffer)",
  ag: "all-gather + GEMM",
};
for (const [op, name] of Object.entries(FUSED_OPS)) {
  test(
    `a rank missing from a fused ${name} makes the others fail with SymmTimeoutError naming it`,
    { skip: multi },
    () => {
      const n = Math.min(gpus, 4);
      const r = run(n, "fused-timeout.js", { SYMMKIT_SYNC_TIMEOUT_MS: "3000", FUSED_OP: op });
      assert.equal(r.status, 0);
      assert.equal(r.out.match(new RegExp(`timeout naming rank ${n - 1} after`, "g"))?.length, n - 1);
    },
  );
}

test(
  "a rank that skips a barrier makes the others fail with SymmTimeoutError naming it",
  { skip: multi },
  () => {
    const n = Math.min(gpus, 4);
    const r = run(n, "timeout.js", { SYMMKIT_SYNC_TIMEOUT_MS: "3000" });
    assert.equal(r.status, 0);
    assert.equal(r.out.match(new RegExp(`timeout naming rank ${n - 1} after`, "g"))?.length, n - 1);
  },
);
