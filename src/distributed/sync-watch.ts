// The host's half of bounded waits (device/include/symmkit/sync/wait.cuh): the abort flag kernels poll
// and the record a kernel leaves when it gives up, both in host-mapped pinned memory, and the
// translation of a failed synchronisation into SymmTimeoutError naming the peer that never came.
import { writeSync } from "node:fs";
import { inspect } from "node:util";
import { CudaError, InvalidArgumentError, SymmkitError } from "../errors.js";
import type { Ptr } from "../cuda/native.js";
import { libc } from "../cuda/libc.js";
import { setFailureExplainer } from "../cuda/driver.js";
import { currentContext, type Device } from "../runtime/device.js";
import { PinnedMemory } from "../runtime/memory.js";
import { readEnvVar, type Env } from "../settings.js";
import {
  PIPELINE_WAITS,
  RECORD_KINDS,
  REFUSAL_LAYOUT,
  SYNC_WATCH_LAYOUT,
  TIMEOUT_RECORD_LAYOUT,
} from "./device-layouts.js";
import { CollectiveMismatchError, describeFingerprint } from "./fingerprint.js";
import { sleepSync } from "../sleep.js";

export { DEFAULT_SYNC_TIMEOUT_MS } from "../settings.js";

/** SYMMKIT_SYNC_TIMEOUT_MS, or its default (src/settings.ts). */
export function syncTimeoutFromEnv(env: Env = process.env): number {
  return readEnvVar("SYMMKIT_SYNC_TIMEOUT_MS", env);
}

export interface TimeoutRecord {
  /** Why the wait ended: the deadline (or the host's abort), a peer's signal from another call (or from
   * the same call with other shapes), the NCCL watchdog's deadline (`phase` then names the watchdog), or
   * a kernel's wait on itself that outlived its bound (`phase` then names the wait: PIPELINE_WAITS). */
  readonly kind: "gave-up" | "mismatch" | "shape-mismatch" | "nccl-timeout" | "stalled";
  readonly rank: number;
  readonly block: number;
  readonly peer: number;
  /** What the wait was for: a call word (src/distributed/fingerprint.ts), or a kernel's own step. */
  readonly phase: bigint;
  readonly thread: number;
  readonly waitedMs: number;
  /** For a mismatch: the word this rank waited for and the one it found (call words; for a shape
   * mismatch, shape words). For a wait on a flagged line that gave up: the flag it awaited and the
   * line's two flags (the low word's in the low half); 0 for other waits. */
  readonly expected: bigint;
  readonly got: bigint;
}

/** What a wait's phase says: a call word has bit 63 set; any other value is the waiting kernel's own
 * step (a GEMM tile, a ready count). */
function waitingIn(phase: bigint): string {
  return phase >= 1n << 63n ? `in ${describeFingerprint(phase)}` : `at phase ${phase}`;
}

const RECORD_KIND_NAMES = new Map<number, TimeoutRecord["kind"]>([
  [RECORD_KINDS.gaveUp, "gave-up"],
  [RECORD_KINDS.mismatch, "mismatch"],
  [RECORD_KINDS.shapeMismatch, "shape-mismatch"],
  [RECORD_KINDS.ncclTimeout, "nccl-timeout"],
  [RECORD_KINDS.stalled, "stalled"],
]);

/** A call a kernel refused (REFUSAL_LAYOUT): what it says, its meaning up to the op that wrote it. */
export interface Refusal {
  readonly code: number;
  readonly rank: number;
  readonly detail: number;
}

export class SymmTimeoutError extends SymmkitError {
  constructor(
    readonly record: TimeoutRecord,
    readonly timeoutMs: number,
    options: { cause?: unknown; note?: string } = {},
  ) {
    super(
      "SYMMKIT_SYMM_TIMEOUT",
      `rank ${record.rank} (block ${record.block}, thread ${record.thread}) waited ${record.waitedMs.toFixed(0)} ` +
        `ms for rank ${record.peer} ${waitingIn(record.phase)}, which never signalled (timeout ${timeoutMs} ms). ` +
        `Is rank ${record.peer} alive and running the same operations?${polledLine(record)}` +
        `${options.note ? ` ${options.note}` : ""}`,
      { cause: options.cause },
    );
  }
}

/** What a wait on a flagged line (send/recv's and allToAll's ll) found there when it gave up: a line its
 * sender has not written yet holds an earlier flag (or 0); one holding a later flag was overwritten
 * before it was read, which the flow control must never let happen. */
function polledLine(r: TimeoutRecord): string {
  if (r.expected === 0n) return "";
  const mask = 0xffff_ffffn;
  const [lo, hi] = [r.got & mask, r.got >> 32n];
  const later =
    lo > r.expected || hi > r.expected
      ? " A later flag means the line was overwritten before it was read: a bug in symmkit; please report it with this message."
      : "";
  return ` The line it polled awaited flag ${r.expected}; its two words held flags ${lo} and ${hi} (0: never written).${later}`;
}

/** A kernel's wait on itself (a GEMM's pipeline) outlived its bound: a deadlock inside one kernel on one
 * rank, which no peer causes, so a bug in symmkit. `record` says which wait. */
export class KernelStallError extends SymmkitError {
  constructor(
    readonly record: TimeoutRecord,
    options: { cause?: unknown; note?: string } = {},
  ) {
    const phase = Number(record.phase);
    const what = PIPELINE_WAITS[phase >>> 24] ?? `wait ${phase >>> 24} at`;
    super(
      "SYMMKIT_KERNEL_STALL",
      `rank ${record.rank} (block ${record.block}, thread ${record.thread}) stalled ${record.waitedMs.toFixed(0)} ms in ` +
        `${what} ${phase & 0xffffff} (waiting for ${record.expected}) of its GEMM pipeline, a wait no peer ` +
        "holds up: a deadlock inside the kernel, which is a bug in symmkit. Please report it with this message " +
        `and the call's shapes and dtypes.${options.note ? ` ${options.note}` : ""}`,
      { cause: options.cause },
    );
  }
}

/** How long a kernel's record may stand while its stream is still unfinished before pollUntil gives up. */
const RECORD_GRACE_MS = 2000;

let teardownSkipped = false;

/**
 * From now on the process ends without the exit handlers of the libraries it loaded: the CUDA driver's
 * would wait forever for a stream that a trapped kernel never ended (ranks sharing a GPU). The exit code
 * stays, and an uncaught error is still printed. Output still queued for a pipe is lost as it would be by
 * Node's own exit; what native libraries buffered in C's stdio is lost too.
 */
export function exitWithoutTeardown(): void {
  if (teardownSkipped) return;
  teardownSkipped = true;
  const c = libc();
  // Node prints an uncaught error only after the exit event, which _exit ends: print it here, unless the
  // application handles it.
  let fatal: { error: unknown } | undefined;
  process.on("uncaughtExceptionMonitor", (error) => {
    const handled =
      process.listenerCount("uncaughtException") > 0 || process.hasUncaughtExceptionCaptureCallback();
    if (!handled) fatal = { error };
  });
  process.on("exit", (code) => {
    if (fatal) writeSync(2, `${inspect(fatal.error)}\n`);
    c._exit(typeof process.exitCode === "number" ? process.exitCode : code);
  });
}

/** The process's watches not yet disposed: where a failed CUDA call looks for the kernel that caused it. */
const live = new Set<SyncWatch>();

/**
 * What `e` stands for: a CudaError raised after a kernel of this process gave up (a bounded wait, or the NCCL
 * watchdog ending the context) becomes the typed error its record names (SymmTimeoutError, NcclTimeoutError,
 * CollectiveMismatchError, KernelStallError), whichever CUDA call happened to see the failure first; anything else is `e`.
 */
export function explainCudaFailure(e: unknown): unknown {
  for (const watch of live) {
    const explained = watch.explain(e);
    if (explained !== e) return explained;
  }
  return e;
}

setFailureExplainer(explainCudaFailure);

export class SyncWatch implements Disposable {
  readonly timeoutMs: number;
  readonly #mem: PinnedMemory;
  readonly #view: DataView;
  readonly #ncclErrors = new Map<number, (note: string, cause: unknown) => SymmkitError>();
  readonly #refusals = new Map<number, (r: Refusal) => string>();

  /** The context its kernels run in: a failure of another device's context is not theirs to explain. */
  readonly #ctx: Ptr;

  private constructor(mem: PinnedMemory, timeoutMs: number, ctx: Ptr) {
    this.#ctx = ctx;
    this.#mem = mem;
    this.#view = new DataView(mem.buffer);
    this.timeoutMs = timeoutMs;
    live.add(this);
  }

  static create(device: Device, timeoutMs: number = syncTimeoutFromEnv()): SyncWatch {
    return new SyncWatch(
      PinnedMemory.alloc(SYNC_WATCH_LAYOUT.bytes, { mapped: true, device }),
      timeoutMs,
      device.ctx,
    );
  }

  get timeoutNs(): bigint {
    return BigInt(this.timeoutMs) * 1_000_000n;
  }

  /** Device address of the abort flag kernels poll. */
  get abortFlagPtr(): Ptr {
    return this.#mem.devicePtr + BigInt(SYNC_WATCH_LAYOUT.abortFlag);
  }

  /** Device address of the Refusal (REFUSAL_LAYOUT): where a kernel records a call it refused. */
  get refusalPtr(): Ptr {
    return this.#mem.devicePtr + BigInt(SYNC_WATCH_LAYOUT.refusal);
  }

  /** How the refusals of code `code` read (the op that records them says). */
  describeRefusal(code: number, describe: (r: Refusal) => string): void {
    this.#refusals.set(code, describe);
  }

  /** describeRefusal for every code an op's kernel records: `why` by code, from the refusing rank and the
   * record's detail; `op` names the call. */
  describeRefusals(
    op: string,
    why: Readonly<Record<number, (rank: number, detail: number) => string>>,
  ): void {
    for (const [code, say] of Object.entries(why))
      this.describeRefusal(
        Number(code),
        (r) => `${op} was refused on every rank: ${say(r.rank, r.detail)}; nothing was written`,
      );
  }

  /**
   * A call a kernel refused since the last look (every rank refused it alike, nothing was written):
   * InvalidArgumentError saying why, and the record cleared for the next one. The GPU's work must have
   * completed (after a synchronisation).
   */
  throwIfRefused(): void {
    const v = this.#view;
    const o = SYNC_WATCH_LAYOUT.refusal;
    const code = v.getUint32(o + REFUSAL_LAYOUT.code, true);
    if (code === 0) return;
    const r = {
      code,
      rank: v.getUint32(o + REFUSAL_LAYOUT.rank, true),
      detail: v.getUint32(o + REFUSAL_LAYOUT.detail, true),
    };
    v.setUint32(o + REFUSAL_LAYOUT.code, 0, true);
    const describe = this.#refusals.get(code);
    throw new InvalidArgumentError(
      describe
        ? describe(r)
        : `a call was refused on the GPU (code ${code}, rank ${r.rank}, detail ${r.detail}); nothing was written`,
    );
  }

  /** Device address of the TimeoutRecord. */
  get recordPtr(): Ptr {
    return this.#mem.devicePtr + BigInt(SYNC_WATCH_LAYOUT.record);
  }

  /** Asks every bounded wait of this group's kernels to give up (e.g. a peer is known to be dead). */
  abort(): void {
    this.#view.setUint32(SYNC_WATCH_LAYOUT.abortFlag, 1, true);
  }

  record(): TimeoutRecord | undefined {
    const v = this.#view;
    const o = SYNC_WATCH_LAYOUT.record;
    const L = TIMEOUT_RECORD_LAYOUT;
    const flag = v.getUint32(o + L.flag, true);
    if (flag === 0) return undefined;
    return {
      kind: RECORD_KIND_NAMES.get(flag) ?? "gave-up",
      rank: v.getUint32(o + L.rank, true),
      block: v.getUint32(o + L.block, true),
      peer: v.getUint32(o + L.peer, true),
      phase: v.getBigUint64(o + L.phase, true),
      thread: v.getUint32(o + L.thread, true),
      waitedMs: Number(v.getBigUint64(o + L.waitedNs, true)) / 1e6,
      expected: v.getBigUint64(o + L.expected, true),
      got: v.getBigUint64(o + L.got, true),
    };
  }

  /** The typed error a record stands for. */
  #error(r: TimeoutRecord, note: string, cause?: unknown): SymmkitError {
    if (r.kind === "mismatch")
      return new CollectiveMismatchError(r.rank, r.peer, r.expected, r.got, { note, cause });
    if (r.kind === "shape-mismatch")
      return new CollectiveMismatchError(r.rank, r.peer, r.phase, r.phase, {
        shapes: [r.expected, r.got],
        note,
        cause,
      });
    if (r.kind === "stalled") return new KernelStallError(r, { note, cause });
    const nccl = r.kind === "nccl-timeout" ? this.#ncclErrors.get(Number(r.phase)) : undefined;
    return nccl ? nccl(note, cause) : new SymmTimeoutError(r, this.timeoutMs, { note, cause });
  }

  /** An NCCL watchdog's: the error its records (phase `id`) stand for. */
  onRecord(id: number, error: (note: string, cause: unknown) => SymmkitError): void {
    this.#ncclErrors.set(id, error);
  }

  /** Host addresses of the record and the abort flag (for the NCCL watchdog's worker). */
  get recordHostPtr(): Ptr {
    return this.#mem.ptr + BigInt(SYNC_WATCH_LAYOUT.record);
  }

  get abortFlagHostPtr(): Ptr {
    return this.#mem.ptr + BigInt(SYNC_WATCH_LAYOUT.abortFlag);
  }

  /** Runs `f` (a synchronisation); a CudaError caused by a kernel that gave up becomes SymmTimeoutError
   * (or CollectiveMismatchError when a peer's signal came from another call). */
  translate<T>(f: () => T): T {
    try {
      return f();
    } catch (e) {
      throw this.explain(e);
    }
  }

  /** The typed error a CudaError of this watch's context (the current one) stands for when a kernel of this
   * watch's left a record; else `e`. */
  explain(e: unknown): unknown {
    const r = e instanceof CudaError && currentContext() === this.#ctx ? this.record() : undefined;
    return r ? this.#error(r, "The CUDA context is unusable after this.", e) : e;
  }

  /**
   * Polls `done` (a stream's query) until it says the work finished. Where a kernel's record has stood for
   * RECORD_GRACE_MS while the work still runs, throws the error the record stands for: with ranks sharing
   * a GPU, a kernel that gave up and trapped was seen to leave its stream unfinished forever (time-sliced
   * contexts), so cuStreamSynchronize would never return; the process then ends without the driver's
   * teardown (exitWithoutTeardown), which would wait for it too.
   */
  pollUntil(done: () => boolean): void {
    let recordedAt: number | undefined;
    for (let polls = 0; !done(); ++polls) {
      if (recordedAt === undefined) {
        if (this.record() !== undefined) recordedAt = performance.now();
      } else if (performance.now() - recordedAt > RECORD_GRACE_MS) {
        exitWithoutTeardown();
        throw this.#error(
          this.record() as TimeoutRecord,
          `Its kernel gave up ${RECORD_GRACE_MS} ms ago and its stream never finished; the CUDA context is unusable after this.`,
        );
      }
      // Ranks may outnumber cores: after a short spin, give the core away briefly between polls.
      if (polls > 256) sleepSync(0.05);
    }
  }

  /** Throws the error a kernel of this group already recorded, if any: its signals are out of step. */
  throwIfFailed(): void {
    const r = this.record();
    if (r)
      throw this.#error(r, "An earlier call of this group failed so; the group cannot be used any more.");
  }

  dispose(): void {
    live.delete(this);
    this.#mem.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
