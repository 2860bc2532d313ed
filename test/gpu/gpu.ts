// Shared by the GPU tests: whether a GPU is here (and if not, why), and seeds that are fresh each run
// but printed, so that a failure can be replayed with SYMMKIT_TEST_SEED.
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
