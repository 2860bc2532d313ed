// What the NCCL watchdog (nccl-watchdog.ts, main thread) and its worker (nccl-watchdog-worker.ts) share:
// the layout of their shared control block and the worker's configuration. No imports, so that the
// worker loads nothing of the main thread's bindings.

/** Operations the watchdog can have in flight; the host waits for the oldest beyond that. */
export const WATCHED_OPS = 1024;
/** How long the worker waits for the other ranks to say they are stalled too before naming the rest. */
export const VERDICT_GRACE_MS = 3000;

/** The control block's Int32 slots. */
export const CONTROL = {
  /** Operations enqueued (host). */
  head: 0,
  /** Operations seen complete (worker). */
  tail: 1,
  /** WATCHING, FIRED (aborted, naming), VERDICT (culprits written), UNNAMED (aborted, the store could
   * not be asked), WORKER_FAILED (stopped without firing: the context failed first) or HOST_ABORTED.
   * Whoever moves it from WATCHING (or WORKER_FAILED) to aborted owns the one ncclCommAbort. */
  state: 2,
  /** The host asks the worker to stop. */
  stop: 3,
  /** Then one slot per group rank: 1 where that rank did not say it was stalled. */
  culprits: 4,
} as const;
export const WATCHING = 0;
export const FIRED = 1;
export const VERDICT = 2;
export const WORKER_FAILED = 3;
export const UNNAMED = 4;
/** The host aborted or destroyed the communicator itself: the worker must not touch it. */
export const HOST_ABORTED = 5;

/** What the worker gets: numbers, strings and shared buffers only. */
export interface WatchdogConfig {
  readonly control: SharedArrayBuffer;
  /** WATCHED_OPS CUevent handles (BigInt64) and the Date.now() each was recorded at (Float64). */
  readonly events: SharedArrayBuffer;
  readonly times: SharedArrayBuffer;
  readonly libcuda: string;
  readonly libnccl: string;
  readonly ctx: bigint;
  readonly comm: bigint;
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
