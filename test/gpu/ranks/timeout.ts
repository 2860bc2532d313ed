// One rank of the timeout check: the last rank skips a barrier every other rank enters. The others must
// fail with SymmTimeoutError naming it, within the deadline plus 5 s. Run with SYMMKIT_SYNC_TIMEOUT_MS.
import { exitFlushed } from "../../../src/exit.js";
import { initCuda as init } from "../../../src/distributed/process-group.js";
import { SYNC_KERNELS } from "../../../src/distributed/sync-kernels.js";
import { SYMM_VIEW_PARAM } from "../../../src/distributed/device-layouts.js";
import { timeoutOutcome } from "../../support/timeout-outcome.js";
import { sharedModule } from "../../../src/runtime/module.js";

const group = await init();
const { rank, worldSize: world, device } = group;
const skipper = world - 1;
const sym = await group.symmetric.empty([256], "u32");
const kernel = sharedModule(SYNC_KERNELS, device).kernel("symmkit::barrier_unless", [SYMM_VIEW_PARAM, "u32"]);
const limit = group.watch.timeoutMs;
const t0 = Date.now();
kernel.launch({ grid: 4, block: 32 }, sym.deviceView(), skipper);
const outcome = timeoutOutcome(() => group.synchronize(), { rank, skipper, limitMs: limit, startMs: t0 });
console.log(outcome);
await group.store.barrier("done"); // the store still works after a rank's CUDA context is gone
await exitFlushed(outcome.startsWith("timeout") || outcome === "skipped" ? 0 : 1);
