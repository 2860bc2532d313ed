// Ranks sharing one GPU (symmkit run --share-gpus) on a machine with a single GPU: the cross-rank kernels
// (fused matmuls, all-reduce + RMSNorm, send/recv and all-to-all, MoE) checked at world 2 and 3, and a
// missing rank still a typed error naming it. The ranks' kernels take turns on the GPU (time-sliced), so
// every wait for a peer lasts until the peer's turn: slow, but each peer write still crosses processes
// through the same mapped memory and the same flags. A machine with 2 or more GPUs runs these on separate
// GPUs instead (distributed.test.ts), where the kernels also run at the same time.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { deviceCount } from "../../src/runtime/device.js";
import {
  AR_NORM_PROGRAM,
  EXCHANGE_PROGRAM,
  FUSED_PROGRAM,
  GEMM_AR_PROGRAM,
  MOE_PROGRAM,
  runRanks,
  skipReason,
} from "./gpu.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const gpus = skipReason ? 0 : deviceCount();
const skip =
  skipReason ||
  (gpus > 1 ? `${gpus} GPUs: distributed.test.ts runs these ranks on GPUs of their own` : false);
if (skip) console.log(`# shared-GPU tests skipped: ${skip}`);

const run = (
  n: number,
  script: string,
  o: { env?: Record<string, string>; args?: readonly string[] } = {},
): { status: number | null; out: string } =>
  runRanks(n, script, { ...o, timeoutMs: 400_000, launcherArgs: ["--share-gpus"] });
const rankProgram = (script: string): string => path.join(here, "ranks", script);

/** Each program: its path and arguments, what each rank prints once it passes, the world sizes. */
const PROGRAMS = [
  [GEMM_AR_PROGRAM, ["cuda"], "cuda gemm-ar ok", [2, 3]],
  [FUSED_PROGRAM, ["cuda"], "cuda fused ok", [2]],
  [MOE_PROGRAM, ["cuda"], "cuda moe ok", [2, 3]],
  [EXCHANGE_PROGRAM, ["cuda"], "cuda exchange ok", [2]],
  [AR_NORM_PROGRAM, ["cuda"], "cuda ar-norm ok", [2]],
] as const;

for (const [script, args, ok, worlds] of PROGRAMS)
  for (const n of worlds)
    test(
      `${path.basename(script)} with ${n} ranks on one GPU: every check of the rank program`,
      { skip },
      () => {
        const r = run(n, script, { args });
        assert.equal(r.status, 0);
        assert.equal(r.out.match(new RegExp(ok, "g"))?.length, n);
      },
    );

for (const op of ["rs", "ar", "ar-staging", "ag"])
  test(
    `fused ${op} with 2 ranks on one GPU: the rank that never runs it is named by a timeout`,
    { skip },
    () => {
      const r = run(2, rankProgram("fused-timeout.js"), {
        env: { SYMMKIT_SYNC_TIMEOUT_MS: "3000", FUSED_OP: op },
      });
      assert.equal(r.status, 0);
      assert.equal(r.out.match(/timeout naming rank 1 after/g)?.length, 1);
    },
  );

test("benchmarks refuse ranks that share a GPU", { skip }, () => {
  const cli = path.join(here, "..", "..", "src", "cli.js");
  const r = runRanks(2, "barrier", {
    timeoutMs: 120_000,
    launcherArgs: ["--share-gpus", "--", process.execPath, cli, "bench"],
  });
  assert.notEqual(r.status, 0);
  assert.match(r.out, /SYMMKIT_UNSUPPORTED/);
  assert.match(r.out, /started with symmkit run --share-gpus.*one rank per GPU/);
});
