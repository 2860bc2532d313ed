// The NCCL watchdog: NCCL's waits bounded like symmkit's own (PyTorch's watchdog is the model; its
// deadline here is the group's sync timeout). NCCL kernels wait for a dead peer forever, and the host
// thread waiting on them is blocked in the driver where no timer of its own can run, so the watching is
// done by a worker thread (nccl-watchdog-worker.ts):
// - After every NCCL operation of the communicator an event is recorded (no GPU work, about a
//   microsecond of host time); for a CUDA graph that captured NCCL work, after each replay (the
//   capture's launch hook), since events recorded during a capture are not replayed.
// - The worker queries the oldest outstanding event; when none completed for the deadline, it writes a
//   TimeoutRecord (kind nccl-timeout), asks the store which ranks of the group are stalled too (those
//   that are not are dead, or somewhere else), raises the group's abort flag and fails the CUDA context
//   (sync/fail_context.cuh on a stream of its own). That stops the NCCL kernel and makes every host
//   wait on the context fail rather than hang; SyncWatch.translate() turns the failure into
//   NcclTimeoutError naming those ranks. (ncclCommAbort would let the waits return garbage, and it
//   blocks while a graph holds the communicator's work.)
import { SymmkitError } from "../errors.js";
import { check, CU_EVENT_DISABLE_TIMING, CUDA_ERROR_NOT_READY, driverLibraryPath } from "../cuda/driver.js";
import { ptrOrZero, type Ptr } from "../cuda/native.js";
import { driver, type Device } from "../runtime/device.js";
import { Graph, type CaptureScope } from "../runtime/graph.js";
import { sharedModule } from "../runtime/module.js";
import { Stream } from "../runtime/stream.js";
import { Worker } from "node:worker_threads";
import type { ScopedStore } from "./scoped-store.js";
import type { SyncWatch } from "./sync-watch.js";
import { FAIL_CONTEXT } from "./sync-kernels.js";
import {
  advanceTail,
  CONTROL,
  NAMING,
  STOPPED,
  UNNAMED,
  VERDICT,
  VERDICT_GRACE_MS,
  WATCHED_OPS,
  WATCHING,
  type WatchdogConfig,
} from "./nccl-watchdog-protocol.js";
import { sleepSync } from "../sleep.js";

/** NCCL work of a group made no progress within the deadline; the watchdog ended the CUDA context. */
export class NcclTimeoutError extends SymmkitError {
  constructor(
    readonly rank: number,
    readonly group: string,
    /** Global ranks that did not report being stalled in NCCL: dead, or not in this operation. */
    readonly culprits: readonly number[] | undefined,
    readonly timeoutMs: number,
    options: { note?: string; cause?: unknown } = {},
  ) {
    const who =
      culprits === undefined
        ? "the store could not be asked which ranks are stalled"
        : culprits.length === 0
          ? "every rank of the group is stalled in NCCL (check that they make the same NCCL calls in the same order)"
          : `rank${culprits.length > 1 ? "s" : ""} ${culprits.join(", ")} did not arrive: dead, or not in this NCCL call`;
    super(
      "SYMMKIT_NCCL_TIMEOUT",
      `rank ${rank}: NCCL work of group ${group} made no progress for ${timeoutMs} ms; ${who}. The ` +
        `watchdog ended the CUDA context, which is unusable after this (raise SYMMKIT_SYNC_TIMEOUT_MS if ` +
        `the work is legitimately that long).${options.note ? ` ${options.note}` : ""}`,
      { cause: options.cause },
    );
  }
}

let nextId = 1;

export class NcclWatchdog {
  readonly #control: Int32Array;
  readonly #events: BigInt64Array;
  readonly #times: Float64Array;
  readonly #failStream: Stream;
  readonly #worker: Worker;
  readonly #rank: number;
  readonly #ranks: readonly number[];
  readonly #group: string;
  readonly #timeoutMs: number;
  readonly #hooked = new WeakSet<CaptureScope>();
  readonly #onCapture: (scope: CaptureScope) => void;
  readonly #done = (slot: number): boolean =>
    driver().cuEventQuery(this.#events[slot]!) !== CUDA_ERROR_NOT_READY;
  #stopped = false;

  private constructor(
    config: WatchdogConfig,
    failStream: Stream,
    watch: SyncWatch,
    group: string,
    onCapture: (scope: CaptureScope) => void,
  ) {
    this.#control = new Int32Array(config.control);
    this.#events = new BigInt64Array(config.events);
    this.#times = new Float64Array(config.times);
    this.#failStream = failStream;
    this.#rank = config.rank;
    this.#ranks = config.ranks;
    this.#group = group;
    this.#timeoutMs = config.timeoutMs;
    this.#onCapture = onCapture;
    this.#worker = new Worker(new URL("./nccl-watchdog-worker.js", import.meta.url), { workerData: config });
    // The worker never keeps the process alive.
    this.#worker.unref();
    watch.onRecord(config.id, (note, cause) => this.#error(note, cause));
  }

  /** Starts watching the NCCL work of group `group` (its members: `ranks`, global). */
  static start(o: {
    device: Device;
    watch: SyncWatch;
    store: ScopedStore;
    storeAddress: WatchdogConfig["store"];
    group: string;
    rank: number;
    ranks: readonly number[];
    onCapture: (scope: CaptureScope) => void;
  }): NcclWatchdog {
    const eventsSab = new SharedArrayBuffer(8 * WATCHED_OPS);
    const events = new BigInt64Array(eventsSab);
    o.device.makeCurrent();
    for (let i = 0; i < WATCHED_OPS; i++) {
      const e: [Ptr | null] = [null];
      check(driver().cuEventCreate(e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      events[i] = ptrOrZero(e[0]);
    }
    const failStream = Stream.create(o.device);
    const config: WatchdogConfig = {
      control: new SharedArrayBuffer(4 * (CONTROL.culprits + o.ranks.length)),
      events: eventsSab,
      times: new SharedArrayBuffer(8 * WATCHED_OPS),
      libcuda: driverLibraryPath(),
      ctx: o.device.ctx,
      failFunction: sharedModule(FAIL_CONTEXT, o.device).kernel("symmkit::fail_context", []).handle,
      failStream: failStream.handle,
      recordHost: o.watch.recordHostPtr,
      abortHost: o.watch.abortFlagHostPtr,
      timeoutMs: o.watch.timeoutMs,
      id: nextId++,
      rank: o.ranks[o.rank]!,
      ranks: o.ranks,
      storeKeyPrefix: o.store.key("nccl-stall"),
      store: o.storeAddress,
    };
    return new NcclWatchdog(config, failStream, o.watch, o.group, o.onCapture);
  }

  /** The worker fired: the context is being failed. */
  get fired(): boolean {
    const s = Atomics.load(this.#control, CONTROL.state);
    return s === NAMING || s === VERDICT || s === UNNAMED;
  }

  /** Takes the communicator back from the worker before destroying it: false when the worker fired. */
  claim(): boolean {
    const s = Atomics.compareExchange(this.#control, CONTROL.state, WATCHING, STOPPED);
    return s === WATCHING || s === STOPPED;
  }

  /** Throws the watchdog's error (after it fired). */
  throwError(): never {
    throw this.#error("The communicator's work was stopped by the watchdog.", undefined);
  }

  /**
   * After an NCCL operation (or an NCCL group) on `stream`: its completion event. Inside a capture, the
   * graph's replays get one each instead.
   */
  afterOp(stream: Stream): void {
    const scope = Graph.activeCapture(stream);
    if (scope === undefined) return this.#track(stream);
    if (!this.#hooked.has(scope)) {
      this.#hooked.add(scope);
      scope.onLaunch((s) => this.#track(s));
      this.#onCapture(scope);
    }
  }

  /** Records the next event of the ring on `stream`, once the ring has room. */
  #track(stream: Stream): void {
    const c = this.#control;
    const head = Atomics.load(c, CONTROL.head);
    // The oldest of WATCHED_OPS operations is still running: wait for it (the worker fires at the
    // deadline, and then nothing more is tracked).
    while (head - advanceTail(c, this.#done) >= WATCHED_OPS) {
      if (this.fired) this.throwError();
      sleepSync(0.05);
    }
    const slot = head % WATCHED_OPS;
    check(driver().cuEventRecord(this.#events[slot]!, stream.handle), "cuEventRecord");
    this.#times[slot] = Date.now();
    Atomics.store(c, CONTROL.head, head + 1);
  }

  /** True once every tracked operation is done, or the watchdog fired; false after `ms`. */
  settle(ms: number): boolean {
    const deadline = Date.now() + ms;
    const c = this.#control;
    while (advanceTail(c, this.#done) < Atomics.load(c, CONTROL.head) && !this.fired) {
      if (Date.now() > deadline) return false;
      sleepSync(1);
    }
    return true;
  }

  /** The error the worker's record stands for, once its verdict is in. */
  #error(note: string, cause: unknown): NcclTimeoutError {
    const c = this.#control;
    const deadline = Date.now() + VERDICT_GRACE_MS + 2000;
    while (Atomics.load(c, CONTROL.state) === NAMING && Date.now() < deadline)
      Atomics.wait(c, CONTROL.state, NAMING, 50);
    const culprits =
      Atomics.load(c, CONTROL.state) === VERDICT
        ? this.#ranks.filter((_, i) => Atomics.load(c, CONTROL.culprits + i) === 1)
        : undefined;
    return new NcclTimeoutError(this.#rank, this.#group, culprits, this.#timeoutMs, { note, cause });
  }

  /** Stops the worker and frees the events (none may be pending: settle first, or the context is
   * gone). */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.claim();
    await this.#worker.terminate();
    if (this.fired) return; // the context is gone: nothing of it can be freed
    const d = driver();
    for (const e of this.#events) d.cuEventDestroy_v2(e);
    this.#failStream.dispose();
  }
}
