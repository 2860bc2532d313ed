// The host's half of bounded waits (device/include/symmkit/sync/wait.cuh): the abort flag kernels poll
// and the record a kernel leaves when it gives up, both in host-mapped pinned memory, and the
// translation of a failed synchronisation into SymmTimeoutError naming the peer that never came.
import { CudaError, SymmkitError } from "../errors.js";
import type { Ptr } from "../cuda/native.js";
import type { Device } from "../runtime/device.js";
import { PinnedMemory } from "../runtime/memory.js";

/** Byte layout of the watch block: abort flag at 0, TimeoutRecord (32 bytes) at 16. */
const ABORT_OFFSET = 0;
const RECORD_OFFSET = 16;
const BLOCK_BYTES = 64;

export const DEFAULT_SYNC_TIMEOUT_MS = 30_000;

export function syncTimeoutFromEnv(env: Readonly<Record<string, string | undefined>> = process.env): number {
  const v = env.SYMMKIT_SYNC_TIMEOUT_MS;
  if (v === undefined) return DEFAULT_SYNC_TIMEOUT_MS;
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) {
    throw new SymmkitError(
      "SYMMKIT_ENVIRONMENT",
      `SYMMKIT_SYNC_TIMEOUT_MS must be a positive integer, got ${v}`,
    );
  }
  return n;
}

export interface TimeoutRecord {
  readonly rank: number;
  readonly block: number;
  readonly peer: number;
  readonly phase: number;
  readonly thread: number;
  readonly waitedMs: number;
}

export class SymmTimeoutError extends SymmkitError {
  constructor(
    readonly record: TimeoutRecord,
    readonly timeoutMs: number,
    options: { cause?: unknown; note?: string } = {},
  ) {
    super(
      "SYMMKIT_SYMM_TIMEOUT",
      `rank ${record.rank} (block ${record.block}, thread ${record.thread}, phase ${record.phase}) waited ` +
        `${record.waitedMs.toFixed(0)} ms for rank ${record.peer}, which never signalled (timeout ${timeoutMs} ms). ` +
        `Is rank ${record.peer} alive and running the same operations?${options.note ? ` ${options.note}` : ""}`,
      { cause: options.cause },
    );
  }
}

export class SyncWatch implements Disposable {
  readonly timeoutMs: number;
  readonly #mem: PinnedMemory;
  readonly #view: DataView;

  private constructor(mem: PinnedMemory, timeoutMs: number) {
    this.#mem = mem;
    this.#view = new DataView(mem.buffer);
    this.timeoutMs = timeoutMs;
  }

  static create(device: Device, timeoutMs: number = syncTimeoutFromEnv()): SyncWatch {
    return new SyncWatch(PinnedMemory.alloc(BLOCK_BYTES, { mapped: true, device }), timeoutMs);
  }

  get timeoutNs(): bigint {
    return BigInt(this.timeoutMs) * 1_000_000n;
  }

  /** Device address of the abort flag kernels poll. */
  get abortFlagPtr(): Ptr {
    return this.#mem.devicePtr + BigInt(ABORT_OFFSET);
  }

  /** Device address of the TimeoutRecord. */
  get recordPtr(): Ptr {
    return this.#mem.devicePtr + BigInt(RECORD_OFFSET);
  }

  /** Asks every bounded wait of this group's kernels to give up (e.g. a peer is known to be dead). */
  abort(): void {
    this.#view.setUint32(ABORT_OFFSET, 1, true);
  }

  record(): TimeoutRecord | undefined {
    const v = this.#view;
    const o = RECORD_OFFSET;
    if (v.getUint32(o, true) === 0) return undefined;
    return {
      rank: v.getUint32(o + 4, true),
      block: v.getUint32(o + 8, true),
      peer: v.getUint32(o + 12, true),
      phase: v.getUint32(o + 16, true),
      thread: v.getUint32(o + 20, true),
      waitedMs: Number(v.getBigUint64(o + 24, true)) / 1e6,
    };
  }

  /** Runs `f` (a synchronisation); a CudaError caused by a kernel that gave up becomes SymmTimeoutError. */
  translate<T>(f: () => T): T {
    try {
      return f();
    } catch (e) {
      const r = e instanceof CudaError ? this.record() : undefined;
      if (r)
        throw new SymmTimeoutError(r, this.timeoutMs, {
          cause: e,
          note: "The CUDA context is unusable after this.",
        });
      throw e;
    }
  }

  dispose(): void {
    this.#mem.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
