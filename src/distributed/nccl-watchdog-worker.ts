// The NCCL watchdog's worker thread (see nccl-watchdog.ts): polls the oldest outstanding event; past the
// deadline without progress it records, raises the abort flag, aborts the communicator, then asks the
// store which ranks are stalled too and writes its verdict. It binds the two functions it needs itself
// (the main thread's bindings stay there) and touches only the shared block and the group's mapped
// TimeoutRecord.
import { parentPort, workerData } from "node:worker_threads";
import koffi from "koffi";
import { RECORD_KINDS, TIMEOUT_RECORD_LAYOUT as L } from "./device-layouts.js";
import {
  CONTROL,
  FIRED,
  UNNAMED,
  VERDICT,
  VERDICT_GRACE_MS,
  WATCHED_OPS,
  WATCHING,
  WORKER_FAILED,
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
const ncclCommAbort = koffi.load(config.libnccl).func("int ncclCommAbort(void *comm)");

/** Polls often enough that the deadline is met within a few percent, never more than 10 times a second. */
const POLL_MS = Math.min(100, Math.max(5, Math.floor(config.timeoutMs / 50)));
let lastProgress = Date.now();
let contextSet = false;

function poll(): void {
  if (Atomics.load(control, CONTROL.stop) === 1) return;
  if (!contextSet) {
    if (cuCtxSetCurrent(config.ctx) !== CUDA_SUCCESS) return fail();
    contextSet = true;
  }
  let tail = Atomics.load(control, CONTROL.tail);
  const head = Atomics.load(control, CONTROL.head);
  while (tail < head) {
    const status = cuEventQuery(events[tail % WATCHED_OPS]!) as number;
    if (status === CUDA_ERROR_NOT_READY) break;
    // Another error means the context already failed (a symmkit kernel trapped): its own record says
    // why; nothing is left to watch.
    if (status !== CUDA_SUCCESS) return fail();
    tail++;
    lastProgress = Date.now();
    Atomics.store(control, CONTROL.tail, tail);
    Atomics.notify(control, CONTROL.tail);
  }
  if (tail < head) {
    const since = Math.max(lastProgress, times[tail % WATCHED_OPS]!);
    const waited = Date.now() - since;
    if (waited > config.timeoutMs) return void fire(waited);
  }
  setTimeout(poll, POLL_MS);
}

function fail(): void {
  Atomics.compareExchange(control, CONTROL.state, WATCHING, WORKER_FAILED);
  Atomics.notify(control, CONTROL.state);
}

async function fire(waitedMs: number): Promise<void> {
  // The host may be destroying or aborting the communicator right now: only one of us aborts it.
  if (Atomics.compareExchange(control, CONTROL.state, WATCHING, FIRED) !== WATCHING) return;
  Atomics.notify(control, CONTROL.state);
  const record = new DataView(koffi.view(config.recordHost, L.bytes));
  // A record already there (a symmkit kernel gave up first) is kept: it came first.
  if (record.getUint32(L.flag, true) === 0) {
    record.setUint32(L.rank, config.rank, true);
    record.setUint32(L.block, 0, true);
    record.setUint32(L.peer, config.ranks.length, true);
    record.setUint32(L.phase, config.id, true);
    record.setUint32(L.thread, 0, true);
    record.setBigUint64(L.waitedNs, BigInt(Math.round(waitedMs * 1e6)), true);
    record.setUint32(L.flag, RECORD_KINDS.ncclTimeout, true);
  }
  new DataView(koffi.view(config.abortHost, 4)).setUint32(0, 1, true);
  ncclCommAbort(config.comm);
  const stalled = await stalledRanks();
  config.ranks.forEach((r, i) => {
    Atomics.store(control, CONTROL.culprits + i, stalled === undefined || stalled.has(r) ? 0 : 1);
  });
  Atomics.store(control, CONTROL.state, stalled === undefined ? UNNAMED : VERDICT);
  Atomics.notify(control, CONTROL.state);
  parentPort?.close();
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

poll();
