// The NCCL watchdog: NCCL's waits bounded like symmkit's own (PyTorch's watchdog is the model; its
// deadline here is the group's sync timeout). NCCL kernels wait for a dead peer forever, and the host
// thread waiting on them is blocked in the driver where no timer of its own can run, so the watching is
// done by a worker thread (nccl-watchdog-worker.ts):
// - After every NCCL operation of the communicator, a guard kernel (sync/nccl_guard.cuh) is enqueued,
//   and an event recorded: per call when eager; per replay for a CUDA graph that captured NCCL work
//   (the capture's launch hook), since a graph's events are not replayed.
// - The worker queries the oldest outstanding event; when none completed for the deadline, it writes a
//   TimeoutRecord (kind nccl-timeout), raises the group's abort flag and calls ncclCommAbort, so NCCL's
//   kernels return, the guard behind them finds the flag and traps, and every host wait on that work
//   fails instead of hanging. It then asks the store which ranks of the group are stalled too: those
//   that are not (dead, or somewhere else) are named by NcclTimeoutError, which SyncWatch.translate()
//   throws once the worker's verdict is in (at most VERDICT_GRACE_MS later).
import { Worker } from "node:worker_threads";
import { SymmkitError } from "../errors.js";
import { check, driverLibraryPath, CU_EVENT_DISABLE_TIMING } from "../cuda/driver.js";
import { ncclLibraryPath } from "../cuda/nccl.js";
import { ptrOrZero, type Ptr } from "../cuda/native.js";
import { driver, type Device } from "../runtime/device.js";
import { Graph, type CaptureScope } from "../runtime/graph.js";
import { sharedModule } from "../runtime/module.js";
import { NCCL_GUARD } from "./sync-kernels.js";
import type { Kernel } from "../runtime/kernel.js";
import type { Stream } from "../runtime/stream.js";
import type { ScopedStore } from "./scoped-store.js";
import type { SyncWatch } from "./sync-watch.js";
import {
  CONTROL,
  FIRED,
  HOST_ABORTED,
  UNNAMED,
  VERDICT,
  VERDICT_GRACE_MS,
  WATCHED_OPS,
  WATCHING,
  WORKER_FAILED,
  type WatchdogConfig,
} from "./nccl-watchdog-protocol.js";

const GUARD_PARAMS = ["ptr", "ptr", "u32", "u32"] as const;

/** NCCL work of a group made no progress within the deadline; the communicator was aborted. */
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
        `communicator was aborted and the CUDA context is unusable after this (raise SYMMKIT_SYNC_TIMEOUT_MS ` +
        `if the work is legitimately that long).${options.note ? ` ${options.note}` : ""}`,
      { cause: options.cause },
    );
  }
}

let nextId = 1;

export class NcclWatchdog {
  readonly #control: Int32Array;
  readonly #events: BigInt64Array;
  readonly #times: Float64Array;
  readonly #worker: Worker;
  readonly #guard: Kernel<typeof GUARD_PARAMS>;
  readonly #watch: SyncWatch;
  readonly #rank: number;
  readonly #ranks: readonly number[];
  readonly #group: string;
  readonly #timeoutMs: number;
  readonly #hooked = new WeakSet<CaptureScope>();
  readonly #onCapture: (scope: CaptureScope) => void;
  #stopped = false;

  private constructor(
    config: WatchdogConfig,
    device: Device,
    watch: SyncWatch,
    group: string,
    events: BigInt64Array,
    onCapture: (scope: CaptureScope) => void,
  ) {
    this.#onCapture = onCapture;
    this.#control = new Int32Array(config.control);
    this.#events = events;
    this.#times = new Float64Array(config.times);
    this.#watch = watch;
    this.#rank = config.rank;
    this.#ranks = config.ranks;
    this.#group = group;
    this.#timeoutMs = config.timeoutMs;
    this.#guard = sharedModule(NCCL_GUARD, device).kernel("symmkit::nccl_guard", GUARD_PARAMS);
    this.#worker = new Worker(new URL("./nccl-watchdog-worker.js", import.meta.url), { workerData: config });
    // The worker never keeps the process alive, and its own failure is reported, not thrown here.
    this.#worker.unref();
    this.#worker.on("error", () =>
      Atomics.compareExchange(this.#control, CONTROL.state, WATCHING, WORKER_FAILED),
    );
    watch.onRecord(config.id, (note, cause) => this.#error(note, cause));
  }

  /** Starts watching communicator `comm` of group `group` (its members: `ranks`, global). */
  static start(o: {
    comm: Ptr;
    device: Device;
    watch: SyncWatch;
    store: ScopedStore;
    storeAddress: WatchdogConfig["store"];
    group: string;
    rank: number;
    ranks: readonly number[];
    onCapture: (scope: CaptureScope) => void;
  }): NcclWatchdog {
    const control = new SharedArrayBuffer(4 * (CONTROL.culprits + o.ranks.length));
    const eventsSab = new SharedArrayBuffer(8 * WATCHED_OPS);
    const events = new BigInt64Array(eventsSab);
    o.device.makeCurrent();
    for (let i = 0; i < WATCHED_OPS; i++) {
      const e: [Ptr | null] = [null];
      check(driver().cuEventCreate(e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      events[i] = ptrOrZero(e[0]);
    }
    const config: WatchdogConfig = {
      control,
      events: eventsSab,
      times: new SharedArrayBuffer(8 * WATCHED_OPS),
      libcuda: driverLibraryPath(),
      libnccl: ncclLibraryPath(),
      ctx: o.device.ctx,
      comm: o.comm,
      recordHost: o.watch.recordHostPtr,
      abortHost: o.watch.abortFlagHostPtr,
      timeoutMs: o.watch.timeoutMs,
      id: nextId++,
      rank: o.ranks[o.rank]!,
      ranks: o.ranks,
      storeKeyPrefix: o.store.key("nccl-stall"),
      store: o.storeAddress,
    };
    return new NcclWatchdog(config, o.device, o.watch, o.group, events, o.onCapture);
  }

  /** The worker aborted the communicator. */
  get fired(): boolean {
    const s = Atomics.load(this.#control, CONTROL.state);
    return s === FIRED || s === VERDICT || s === UNNAMED;
  }

  /** Takes over the communicator's abort from the worker: true when this thread may call ncclCommAbort
   * (or ncclCommDestroy); false when the worker already aborted it. */
  claimAbort(): boolean {
    for (const from of [WATCHING, WORKER_FAILED]) {
      if (Atomics.compareExchange(this.#control, CONTROL.state, from, HOST_ABORTED) === from) return true;
    }
    return Atomics.load(this.#control, CONTROL.state) === HOST_ABORTED;
  }

  /** Throws the watchdog's error (after it fired). */
  throwError(): never {
    throw this.#error("The communicator was aborted by the watchdog.", undefined);
  }

  /**
   * After an NCCL operation (or an NCCL group) on `stream`: the guard kernel, and an event for the
   * worker; inside a capture, the event goes with each replay instead.
   */
  afterOp(stream: Stream): void {
    this.#guard.launch(
      { grid: 1, block: 1, stream },
      this.#watch.abortFlagPtr,
      this.#watch.recordPtr,
      this.#rank,
      this.#ranks.length,
    );
    const scope = Graph.activeCapture(stream);
    if (scope === undefined) this.#track(stream);
    else if (!this.#hooked.has(scope)) {
      this.#hooked.add(scope);
      scope.onLaunch((s) => this.#track(s));
      this.#onCapture(scope);
    }
  }

  /** Records the next event of the ring on `stream`. */
  #track(stream: Stream): void {
    const c = this.#control;
    const head = Atomics.load(c, CONTROL.head);
    // The ring is full: the oldest operation is still running. The worker fires at the deadline.
    while (head - Atomics.load(c, CONTROL.tail) >= WATCHED_OPS && !this.fired) {
      Atomics.wait(c, CONTROL.tail, Atomics.load(c, CONTROL.tail), 1);
    }
    const slot = head % WATCHED_OPS;
    check(driver().cuEventRecord(this.#events[slot]!, stream.handle), "cuEventRecord");
    this.#times[slot] = Date.now();
    Atomics.store(c, CONTROL.head, head + 1);
  }

  /** True once every tracked operation completed (or the watchdog fired), waiting at most `ms`. */
  settle(ms: number): boolean {
    const deadline = Date.now() + ms;
    const c = this.#control;
    while (Atomics.load(c, CONTROL.tail) < Atomics.load(c, CONTROL.head) && !this.fired) {
      if (Date.now() > deadline) return false;
      Atomics.wait(c, CONTROL.tail, Atomics.load(c, CONTROL.tail), 5);
    }
    return true;
  }

  /** The error the worker's record stands for, once its verdict is in (waits up to the grace). */
  #error(note: string, cause: unknown): NcclTimeoutError {
    const c = this.#control;
    const deadline = Date.now() + VERDICT_GRACE_MS + 2000;
    while (Atomics.load(c, CONTROL.state) === FIRED && Date.now() < deadline)
      Atomics.wait(c, CONTROL.state, FIRED, 50);
    const culprits =
      Atomics.load(c, CONTROL.state) === VERDICT
        ? this.#ranks.filter((_, i) => Atomics.load(c, CONTROL.culprits + i) === 1)
        : undefined;
    return new NcclTimeoutError(this.#rank, this.#group, culprits, this.#timeoutMs, { note, cause });
  }

  /** Stops the worker and frees the events (none may be in flight: settle first). */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    Atomics.store(this.#control, CONTROL.stop, 1);
    await this.#worker.terminate();
    const d = driver();
    for (const e of this.#events) if (e !== 0n) d.cuEventDestroy_v2(e);
  }
}
