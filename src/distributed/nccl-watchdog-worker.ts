// The NCCL watchdog's worker thread (see nccl-watchdog.ts): follows the operations' completion events;
// past the deadline without progress it records, asks the store which ranks are stalled too, writes its
// verdict, then fails the CUDA context (fail_context on a stream of its own), which stops the NCCL
// kernel and makes every wait on the context fail. It binds the three driver functions it needs itself
// (the main thread's bindings stay there) and touches only the shared block and the group's mapped
// TimeoutRecord.
import { workerData } from "node:worker_threads";
import koffi from "koffi";
import { RECORD_KINDS, TIMEOUT_RECORD_LAYOUT as L } from "./device-layouts.js";
import {
  advanceTail,
  CONTROL,
  NAMING,
  UNNAMED,
  VERDICT,
  VERDICT_GRACE_MS,
  WATCHED_OPS,
  WATCHING,
  type WatchdogConfig,
} from "./nccl-watchdog-protocol.js";
import { StoreClient } from "./store/client.js";

const CUDA_SUCCESS = 0;
const CUDA_ERROR_NOT_READY = 600;

const config = workerData as WatchdogConfig;
const control = new Int32Array(config.control);
const events = new BigInt64Array(config.events);
const times = new Float64Array(config.times);
const cuda = koffi.load(config.libcuda);
const cuCtxSetCurrent = cuda.func("int cuCtxSetCurrent(void *ctx)");
const cuEventQuery = cuda.func("int cuEventQuery(void *event)");
const cuLaunchKernel = cuda.func(
  "int cuLaunchKernel(void *f, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz, uint32_t shared, void *stream, void *params, void *extra)",
);

/** Polls often enough that the deadline is met within a few percent, at most every 5 ms. */
const POLL_MS = Math.min(100, Math.max(5, Math.floor(config.timeoutMs / 50)));
let lastProgress = Date.now();
let lastTail = 0;
/** A completed event (a failed query means the context already failed: nothing is left to wait for). */
const done = (slot: number): boolean => (cuEventQuery(events[slot]!) as number) !== CUDA_ERROR_NOT_READY;

function poll(): void {
  if (Atomics.load(control, CONTROL.state) !== WATCHING) return;
  const tail = advanceTail(control, done);
  if (tail !== lastTail) [lastTail, lastProgress] = [tail, Date.now()];
  if (tail < Atomics.load(control, CONTROL.head)) {
    const waited = Date.now() - Math.max(lastProgress, times[tail % WATCHED_OPS]!);
    if (waited > config.timeoutMs) return void fire(waited);
  }
  setTimeout(poll, POLL_MS);
}

async function fire(waitedMs: number): Promise<void> {
  // The host may be destroying the communicator right now: only one of us acts.
  if (Atomics.compareExchange(control, CONTROL.state, WATCHING, NAMING) !== WATCHING) return;
  const record = new DataView(koffi.view(config.recordHost, L.bytes));
  // A record already there (a symmkit kernel gave up first) is kept: it came first.
  if (record.getUint32(L.flag, true) === 0) {
    record.setUint32(L.rank, config.rank, true);
    record.setUint32(L.block, 0, true);
    record.setUint32(L.peer, config.ranks.length, true);
    record.setBigUint64(L.phase, BigInt(config.id), true);
    record.setUint32(L.thread, 0, true);
    record.setBigUint64(L.waitedNs, BigInt(Math.round(waitedMs * 1e6)), true);
    record.setUint32(L.flag, RECORD_KINDS.ncclTimeout, true);
  }
  const stalled = await stalledRanks();
  config.ranks.forEach((r, i) => {
    Atomics.store(control, CONTROL.culprits + i, stalled === undefined || stalled.has(r) ? 0 : 1);
  });
  Atomics.store(control, CONTROL.state, stalled === undefined ? UNNAMED : VERDICT);
  Atomics.notify(control, CONTROL.state);
  // symmkit's own waits give up too, then the context is ended.
  new DataView(koffi.view(config.abortHost, 4)).setUint32(0, 1, true);
  if (cuCtxSetCurrent(config.ctx) === CUDA_SUCCESS)
    cuLaunchKernel(config.failFunction, 1, 1, 1, 1, 1, 1, 0, config.failStream, null, null);
}

/** The group's ranks that say, within the grace, that their NCCL work is stalled too (this one first). */
async function stalledRanks(): Promise<Set<number> | undefined> {
  if (config.store === undefined) return undefined;
  let client: StoreClient | undefined;
  try {
    client = await StoreClient.connect(config.store, { timeoutMs: VERDICT_GRACE_MS });
    await client.set(`${config.storeKeyPrefix}/${config.rank}`, "1");
    const stalled = new Set<number>([config.rank]);
    const deadline = Date.now() + VERDICT_GRACE_MS;
    while (stalled.size < config.ranks.length && Date.now() < deadline) {
      for (const r of config.ranks)
        if (!stalled.has(r) && (await client.tryGet(`${config.storeKeyPrefix}/${r}`))) stalled.add(r);
      await new Promise((res) => setTimeout(res, 50));
    }
    return stalled;
  } catch {
    return undefined;
  } finally {
    client?.close();
  }
}

if (cuCtxSetCurrent(config.ctx) === CUDA_SUCCESS) poll();
