// Shared by the GPU tests: whether a GPU is here (and if not, why), seeds that are fresh each run but
// printed, so that a failure can be replayed with SYMMKIT_TEST_SEED, and running rank programs under the
// launcher with their output shown.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Device, deviceCount } from "../../src/runtime/device.js";
import { freshSeed } from "../../src/runtime/tensor.js";
import { readEnvVar } from "../../src/settings.js";

export function gpuUnavailable(): string | false {
  try {
    if (deviceCount() === 0) return "no GPU: the driver sees none";
    Device.get(0);
    return false;
  } catch (e) {
    return `no GPU: ${(e as Error).message.split("\n")[0]}`;
  }
}

export const skipReason = gpuUnavailable();
if (skipReason) console.log(`# GPU tests skipped: ${skipReason}`);

export function testSeed(): bigint {
  const seed = readEnvVar("SYMMKIT_TEST_SEED") ?? freshSeed();
  console.log(`# seed ${seed} (replay with SYMMKIT_TEST_SEED=${seed})`);
  return seed;
}

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, "..", "..", "src", "cli.js");
/** The rank programs both backends run (test/programs); GPUs pass them `cuda`. */
export const EXCHANGE_PROGRAM = path.join(here, "..", "programs", "exchange.js");
export const COLLECTIVES_PROGRAM = path.join(here, "..", "programs", "collectives.js");
export const MOE_PROGRAM = path.join(here, "..", "programs", "moe.js");
export const GEMM_AR_PROGRAM = path.join(here, "..", "programs", "gemm-ar.js");
export const FUSED_PROGRAM = path.join(here, "..", "programs", "fused.js");
export const AR_NORM_PROGRAM = path.join(here, "..", "programs", "ar-norm.js");

/** Prints a job's output as test diagnostics ("# " lines), only the lines matching `shown` if given. */
export function showOutput(out: string, shown?: RegExp): void {
  const lines = out.split("\n").filter((l) => shown === undefined || shown.test(l));
  console.log(lines.map((l) => `# ${l}`).join("\n"));
}

/**
 * Runs rank program `script` (a path) with `args` under `symmkit run -n n [launcherArgs]` with `env` added,
 * and shows its output: the exit status, all it printed, and how long it took.
 */
export function runRanks(
  n: number,
  script: string,
  o: {
    env?: Record<string, string>;
    timeoutMs: number;
    launcherArgs?: string[];
    args?: readonly string[];
    shown?: RegExp;
  },
): { status: number | null; out: string; ms: number } {
  const t0 = Date.now();
  const command = [...(o.launcherArgs ?? []), script, ...(o.args ?? [])];
  const r = spawnSync(process.execPath, [cli, "run", "-n", String(n), ...command], {
    encoding: "utf8",
    timeout: o.timeoutMs,
    env: { ...process.env, ...o.env },
  });
  const out = `${r.stdout}\n${r.stderr}`;
  showOutput(out, o.shown);
  return { status: r.status, out, ms: Date.now() - t0 };
}
