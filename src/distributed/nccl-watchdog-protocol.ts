// What the NCCL watchdog (nccl-watchdog.ts, main thread) and its worker (nccl-watchdog-worker.ts) share:
// the layout of their shared control block and the worker's configuration. No imports, so that the
// worker loads nothing of the main thread's bindings.

/** Operations the watchdog can have in flight; beyond that the host waits for the oldest. */
export const WATCHED_OPS = 1024;
/** How long the worker waits for the other ranks to say they are stalled too before naming the rest. */
export const VERDICT_GRACE_MS = 3000;

/** The control block's Int32 slots. */
export const CONTROL = {
  /** Operations enqueued (host); operation i's completion event is slot i % WATCHED_OPS. */
  head: 0,
  /** Operations seen done (advanced by either thread, by compare-and-swap). */
  tail: 1,
  /** WATCHING, NAMING (fired: asking the store), VERDICT (culprits written), UNNAMED (the store could
   * not be asked) or STOPPED (the host is done with the communicator). Whoever moves it from WATCHING
   * decides: the worker fails the context, or the host destroys the communicator. */
  state: 2,
  /** Then one slot per group rank: 1 where that rank did not say it was stalled. */
  culprits: 3,
} as const;
export const WATCHING = 0;
export const NAMING = 1;
export const VERDICT = 2;
export const UNNAMED = 3;
export const STOPPED = 4;

/** What the worker gets: numbers, strings and shared buffers only. */
export interface WatchdogConfig {
  readonly control: SharedArrayBuffer;
  /** WATCHED_OPS CUevent handles (BigInt64), recorded after each operation (or replay), and the
   * Date.now() each was recorded at (Float64). */
  readonly events: SharedArrayBuffer;
  readonly times: SharedArrayBuffer;
  readonly libcuda: string;
  readonly ctx: bigint;
  /** fail_context's CUfunction and the stream it goes on. */
  readonly failFunction: bigint;
  readonly failStream: bigint;
  /** Host addresses of the group's TimeoutRecord and abort flag (SyncWatch's mapped block). */
  readonly recordHost: bigint;
  readonly abortHost: bigint;
  readonly timeoutMs: number;
  /** The record's `phase` field: which watchdog wrote it. */
  readonly id: number;
  /** This rank's global rank, and the group's members' (global ranks). */
  readonly rank: number;
  readonly ranks: readonly number[];
  /** Where the ranks say they are stalled: `${prefix}/${globalRank}`. */
  readonly storeKeyPrefix: string;
  readonly store: { readonly host: string; readonly port: number; readonly token: string } | undefined;
}

/** Advances the tail past every operation whose event completed (`done(slot)`); returns the new tail.
 * Both threads call it (the host when the ring is full): the compare-and-swap keeps one tail. */
export function advanceTail(control: Int32Array, done: (slot: number) => boolean): number {
  for (;;) {
    const tail = Atomics.load(control, CONTROL.tail);
    if (tail >= Atomics.load(control, CONTROL.head) || !done(tail % WATCHED_OPS)) return tail;
    Atomics.compareExchange(control, CONTROL.tail, tail, tail + 1);
  }
}
