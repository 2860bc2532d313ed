// CUDA events: ordering between streams and GPU-side timing.
import { DisposedError } from "../errors.js";
import { check, CU_EVENT_DEFAULT, CU_EVENT_DISABLE_TIMING, CUDA_ERROR_NOT_READY } from "../cuda/driver.js";
import { ptrOrZero, type Ptr } from "../cuda/native.js";
import { Device, driver } from "./device.js";
import type { Stream } from "./stream.js";

export class Event implements Disposable {
  readonly device: Device;
  readonly timing: boolean;
  #handle: Ptr;

  private constructor(device: Device, handle: Ptr, timing: boolean) {
    this.device = device;
    this.#handle = handle;
    this.timing = timing;
  }

  /** `timing: false` makes a cheaper event that can only order work. */
  static create(device: Device = Device.get(), options: { timing?: boolean } = {}): Event {
    device.makeCurrent();
    const timing = options.timing ?? true;
    const e: [Ptr | null] = [null];
    check(driver().cuEventCreate(e, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    return new Event(device, ptrOrZero(e[0]), timing);
  }

  get handle(): Ptr {
    if (this.#handle === 0n) throw new DisposedError("Event");
    return this.#handle;
  }

  record(stream: Stream): this {
    check(driver().cuEventRecord(this.handle, stream.handle), "cuEventRecord");
    return this;
  }

  synchronize(): void {
    check(driver().cuEventSynchronize(this.handle), "cuEventSynchronize");
  }

  query(): boolean {
    const status = driver().cuEventQuery(this.handle);
    if (status === CUDA_ERROR_NOT_READY) return false;
    check(status, "cuEventQuery");
    return true;
  }

  /** GPU time in milliseconds from `start` to this event; both must have completed. */
  elapsedMsSince(start: Event): number {
    const ms: [number] = [0];
    check(driver().cuEventElapsedTime_v2(ms, start.handle, this.handle), "cuEventElapsedTime_v2");
    return ms[0];
  }

  dispose(): void {
    if (this.#handle === 0n) return;
    check(driver().cuEventDestroy_v2(this.#handle), "cuEventDestroy_v2");
    this.#handle = 0n;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
