// An NCCL communicator over a process group: the baseline every benchmark compares against and the
// engine between hosts. Operations are enqueued on symmkit streams with symmkit tensors. Waiting for them
// is bounded: a group's communicator has a watchdog (nccl-watchdog.ts) that aborts it when its work makes
// no progress for the group's sync timeout, so that any wait on that work fails with NcclTimeoutError
// instead of hanging on a dead peer; synchronize() also polls NCCL's asynchronous error.
import { InvalidArgumentError } from "../errors.js";
import { CUDA_ERROR_NOT_READY, check as cudaCheck } from "../cuda/driver.js";
import { NativeBlock, ptrOrZero, type Ptr } from "../cuda/native.js";
import {
  check,
  nccl,
  NCCL_API_MAGIC,
  NCCL_CONFIG_BYTES,
  NCCL_CONFIG_UNDEF_INT,
  NCCL_CONFIG_VERSION,
  NCCL_SUCCESS,
  NcclDataType,
  NcclError,
  NcclRedOp,
} from "../cuda/nccl.js";
import { driver, type Device } from "../runtime/device.js";
import type { DType } from "../runtime/dtype.js";
import { defaultStream, type Stream } from "../runtime/stream.js";
import type { Tensor } from "../runtime/tensor.js";
import type { ScopedStore } from "./scoped-store.js";
import type { CaptureScope } from "../runtime/graph.js";
import { NcclWatchdog } from "./nccl-watchdog.js";
import { VERDICT_GRACE_MS } from "./nccl-watchdog-protocol.js";
import type { SyncWatch } from "./sync-watch.js";
import { sleepSync } from "../sleep.js";

/** What a group gives its communicator so that its waits are bounded. */
export interface NcclWatchOptions {
  readonly watch: SyncWatch;
  /** The group's name and its members' global ranks (for the error naming who did not arrive). */
  readonly group: string;
  readonly ranks: readonly number[];
  readonly storeAddress: { readonly host: string; readonly port: number; readonly token: string } | undefined;
  /** Told of each capture its operations are recorded into. */
  readonly onCapture: (scope: CaptureScope) => void;
}

export type ReduceOp = keyof typeof NcclRedOp;

/** What a point-to-point call moves: a tensor, or any span of device memory as elements of a dtype. */
export type NcclSpan = Pick<Tensor, "ptr" | "numel" | "dtype">;

function ncclType(d: DType): number {
  const t = (NcclDataType as Partial<Record<string, number>>)[d];
  if (t === undefined) throw new InvalidArgumentError(`NCCL has no type for ${d}`);
  return t;
}

export class NcclComm {
  readonly rank: number;
  readonly size: number;
  readonly device: Device;
  #comm: Ptr;
  readonly #watchdog: NcclWatchdog | undefined;
  /** Inside group(): the streams its operations went on (guarded once it ends). */
  #grouped: Set<Stream> | undefined;

  private constructor(comm: Ptr, rank: number, size: number, device: Device, watchdog?: NcclWatchdog) {
    this.#comm = comm;
    this.rank = rank;
    this.size = size;
    this.device = device;
    this.#watchdog = watchdog;
  }

  /** Collective over the group: rank 0 makes the unique id, the store carries it, all init together. */
  static async create(
    store: ScopedStore,
    rank: number,
    size: number,
    device: Device,
    name: string,
    watch?: NcclWatchOptions,
  ): Promise<NcclComm> {
    const api = nccl();
    const key = `nccl/${name}/id`;
    let id: Uint8Array;
    if (rank === 0) {
      const out: [{ internal: Uint8Array } | null] = [null];
      check(api.ncclGetUniqueId(out), "ncclGetUniqueId");
      id = new Uint8Array(out[0]!.internal);
      await store.set(key, id);
    } else {
      id = new Uint8Array(await store.get(key));
    }
    const config = new NativeBlock(NCCL_CONFIG_BYTES);
    const v = config.view;
    v.setBigUint64(0, BigInt(NCCL_CONFIG_BYTES), true);
    v.setUint32(8, NCCL_API_MAGIC, true);
    v.setUint32(12, NCCL_CONFIG_VERSION, true);
    for (const off of [16, 20, 24, 28, 40]) v.setInt32(off, NCCL_CONFIG_UNDEF_INT, true); // blocking .. maxCTAs, splitShare
    v.setInt32(16, 1, true); // blocking: init returns when the communicator is ready
    device.makeCurrent();
    const comm: [Ptr | null] = [null];
    try {
      check(
        api.ncclCommInitRankConfig(comm, size, { internal: id }, rank, config.ptr),
        "ncclCommInitRankConfig",
      );
    } finally {
      config.free();
    }
    const handle = ptrOrZero(comm[0]);
    const watchdog =
      watch && size > 1
        ? NcclWatchdog.start({
            device,
            watch: watch.watch,
            store,
            storeAddress: watch.storeAddress,
            group: watch.group,
            rank,
            ranks: watch.ranks,
            onCapture: watch.onCapture,
          })
        : undefined;
    return new NcclComm(handle, rank, size, device, watchdog);
  }

  get handle(): Ptr {
    // The watchdog aborted it: its error, which names who did not arrive.
    if (this.#watchdog?.fired) this.#watchdog.throwError();
    if (this.#comm === 0n) throw new NcclError("NcclComm", 5, "communicator was destroyed or aborted");
    return this.#comm;
  }

  allReduce(
    send: Tensor,
    recv: Tensor,
    op: ReduceOp = "sum",
    stream: Stream = defaultStream(this.device),
  ): void {
    this.#same(send, recv, send.numel, "allReduce");
    this.#call(
      nccl().ncclAllReduce(
        send.ptr,
        recv.ptr,
        send.numel,
        ncclType(send.dtype),
        NcclRedOp[op],
        this.handle,
        stream.handle,
      ),
      "ncclAllReduce",
      stream,
    );
  }

  allGather(send: Tensor, recv: Tensor, stream: Stream = defaultStream(this.device)): void {
    this.#same(send, recv, send.numel * this.size, "allGather");
    this.#call(
      nccl().ncclAllGather(send.ptr, recv.ptr, send.numel, ncclType(send.dtype), this.handle, stream.handle),
      "ncclAllGather",
      stream,
    );
  }

  reduceScatter(
    send: Tensor,
    recv: Tensor,
    op: ReduceOp = "sum",
    stream: Stream = defaultStream(this.device),
  ): void {
    this.#same(recv, send, recv.numel * this.size, "reduceScatter");
    this.#call(
      nccl().ncclReduceScatter(
        send.ptr,
        recv.ptr,
        recv.numel,
        ncclType(send.dtype),
        NcclRedOp[op],
        this.handle,
        stream.handle,
      ),
      "ncclReduceScatter",
      stream,
    );
  }

  broadcast(send: Tensor, recv: Tensor, root: number, stream: Stream = defaultStream(this.device)): void {
    this.#same(send, recv, send.numel, "broadcast");
    this.#call(
      nccl().ncclBroadcast(
        send.ptr,
        recv.ptr,
        send.numel,
        ncclType(send.dtype),
        root,
        this.handle,
        stream.handle,
      ),
      "ncclBroadcast",
      stream,
    );
  }

  send(t: NcclSpan, peer: number, stream: Stream = defaultStream(this.device)): void {
    this.#call(
      nccl().ncclSend(t.ptr, t.numel, ncclType(t.dtype), peer, this.handle, stream.handle),
      "ncclSend",
      stream,
    );
  }

  recv(t: NcclSpan, peer: number, stream: Stream = defaultStream(this.device)): void {
    this.#call(
      nccl().ncclRecv(t.ptr, t.numel, ncclType(t.dtype), peer, this.handle, stream.handle),
      "ncclRecv",
      stream,
    );
  }

  /** Runs `f`'s operations as one NCCL group (e.g. matched sends and receives). */
  group(f: () => void): void {
    check(nccl().ncclGroupStart(), "ncclGroupStart");
    const streams = new Set<Stream>();
    this.#grouped = streams;
    try {
      f();
    } finally {
      this.#grouped = undefined;
      this.#call(nccl().ncclGroupEnd(), "ncclGroupEnd");
    }
    // NCCL enqueues a group's kernels at its end: the guards go behind them.
    for (const s of streams) this.#watchdog?.afterOp(s);
  }

  /**
   * Waits for `stream`, polling NCCL's asynchronous error. An error, or the deadline, aborts the
   * communicator (so its kernels stop) and throws.
   */
  synchronize(stream: Stream = defaultStream(this.device), timeoutMs = 300_000): void {
    const deadline = Date.now() + timeoutMs;
    const d = driver();
    this.device.makeCurrent();
    for (let spins = 0; ; spins++) {
      const status = d.cuStreamQuery(stream.handle);
      if (status !== CUDA_ERROR_NOT_READY) return cudaCheck(status, "cuStreamQuery");
      this.#checkAsync();
      if (Date.now() > deadline) {
        this.abort();
        throw new NcclError(
          "synchronize",
          8,
          `NCCL work did not finish within ${timeoutMs} ms; the communicator was aborted`,
        );
      }
      if (spins > 100) sleepSync(1);
    }
  }

  #checkAsync(): void {
    const err: [number] = [0];
    check(nccl().ncclCommGetAsyncError(this.handle, err), "ncclCommGetAsyncError");
    if (err[0] !== NCCL_SUCCESS) {
      const detail = nccl().ncclGetErrorString(err[0]);
      this.abort();
      throw new NcclError("asynchronous NCCL error", err[0], `${detail}; the communicator was aborted`);
    }
  }

  #same(a: Tensor, b: Tensor, bNumel: number, what: string): void {
    if (a.dtype !== b.dtype)
      throw new InvalidArgumentError(`${what}: dtypes differ (${a.dtype}, ${b.dtype})`);
    if (b.numel !== bNumel)
      throw new InvalidArgumentError(`${what}: expected ${bNumel} elements, got ${b.numel}`);
    if (a.device !== this.device || b.device !== this.device) {
      throw new InvalidArgumentError(
        `${what}: tensors must be on ${this.device.props.name} (cuda:${this.device.ordinal})`,
      );
    }
  }

  #call(status: number, what: string, stream?: Stream): void {
    if (status !== NCCL_SUCCESS) check(status, what, this.handle);
    if (stream === undefined) return;
    if (this.#grouped) this.#grouped.add(stream);
    else this.#watchdog?.afterOp(stream);
  }

  /** Stops the communicator's work at once (peer failure or timeout); it cannot be used afterwards. */
  abort(): void {
    if (this.#comm === 0n) return;
    const c = this.#comm;
    this.#comm = 0n;
    // Once the watchdog fired, the context is being failed: nothing more is done with the communicator.
    if (this.#watchdog === undefined || this.#watchdog.claim()) nccl().ncclCommAbort(c);
    void this.#watchdog?.stop();
  }

  /**
   * Frees the communicator once its work is done. Work that never finishes (a peer died) makes the
   * watchdog fire at its deadline and fail the context; the communicator is then left to the process's
   * end, so destroy never hangs. NCCL waits for graphs that captured its work: the group releases
   * those first.
   */
  async destroy(timeoutMs = 30_000): Promise<void> {
    const w = this.#watchdog;
    const c = this.#comm;
    this.#comm = 0n;
    if (c === 0n) return void (await w?.stop());
    const done = w === undefined || (w.settle(timeoutMs + VERDICT_GRACE_MS + 1000) && w.claim());
    await w?.stop();
    if (done) check(nccl().ncclCommDestroy(c), "ncclCommDestroy");
  }
}
