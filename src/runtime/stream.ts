// CUDA streams. Streams are non-blocking: they never synchronise implicitly with the legacy default
// stream, so ordering is always explicit (events, stream waits).
import { DisposedError } from "../errors.js";
import { check, CU_STREAM_NON_BLOCKING, CUDA_ERROR_NOT_READY, CUDA_SUCCESS } from "../cuda/driver.js";
import { ptrOrZero, type Ptr } from "../cuda/native.js";
import { Device, driver } from "./device.js";

/** Captures Graph.capture has in progress on this thread (its captures are thread-local): while there are
 * none, no stream of this thread is being captured, so `capturing` (asked by every pooled allocation and
 * free) costs no driver call (1 µs a call on H200 hosts). */
let capturesInProgress = 0;

/** @internal Graph.capture's side: +1 as a capture begins, -1 as it ends. */
export function countCapture(delta: 1 | -1): void {
  capturesInProgress += delta;
}

/** @internal Whether a Graph.capture is in progress on this thread. */
export function captureInProgress(): boolean {
  return capturesInProgress > 0;
}

export class Stream implements Disposable {
  readonly device: Device;
  #handle: Ptr;

  private constructor(device: Device, handle: Ptr) {
    this.device = device;
    this.#handle = handle;
  }

  /** A new stream; `priority` lower is more urgent (CUDA's convention), 0 is the default. */
  static create(device: Device = Device.get(), options: { priority?: number } = {}): Stream {
    device.makeCurrent();
    const s: [Ptr | null] = [null];
    check(
      driver().cuStreamCreateWithPriority(s, CU_STREAM_NON_BLOCKING, options.priority ?? 0),
      "cuStreamCreateWithPriority",
    );
    return new Stream(device, ptrOrZero(s[0]));
  }

  get handle(): Ptr {
    if (this.#handle === 0n) throw new DisposedError("Stream");
    return this.#handle;
  }

  get disposed(): boolean {
    return this.#handle === 0n;
  }

  /** True while work on this stream is being captured into a CUDA graph (Graph.capture, on this thread:
   * while none is in progress, no driver call). */
  get capturing(): boolean {
    if (capturesInProgress === 0) return false;
    const status: [number] = [0];
    check(driver().cuStreamIsCapturing(this.handle, status), "cuStreamIsCapturing");
    return status[0] !== 0;
  }

  synchronize(): void {
    this.device.makeCurrent();
    check(driver().cuStreamSynchronize(this.handle), "cuStreamSynchronize");
  }

  /** True when all work queued so far has finished. */
  query(): boolean {
    const status = driver().cuStreamQuery(this.handle);
    if (status === CUDA_ERROR_NOT_READY) return false;
    check(status, "cuStreamQuery");
    return status === CUDA_SUCCESS;
  }

  /** Later work on this stream waits until `event` (an Event) has completed. */
  waitEvent(event: { readonly handle: Ptr }): void {
    check(driver().cuStreamWaitEvent(this.handle, event.handle, 0), "cuStreamWaitEvent");
  }

  dispose(): void {
    if (this.#handle === 0n) return;
    this.device.makeCurrent();
    check(driver().cuStreamDestroy_v2(this.#handle), "cuStreamDestroy_v2");
    this.#handle = 0n;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

const defaults = new Map<Device, Stream>();

/** The stream symmkit uses on a device when none is given; lives as long as the process. */
export function defaultStream(device: Device = Device.get()): Stream {
  let s = defaults.get(device);
  if (!s) {
    s = Stream.create(device);
    defaults.set(device, s);
  }
  return s;
}
