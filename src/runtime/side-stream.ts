// A second stream that forks from a caller's stream and joins it again: work split over the two stays
// ordered with the caller's, and a CUDA graph capture follows the fork's event into the side stream.
import type { Device } from "./device.js";
import { Event } from "./event.js";
import { Stream } from "./stream.js";

export class SideStream implements Disposable {
  readonly stream: Stream;
  readonly #fork: Event;
  readonly #join: Event;

  constructor(device: Device) {
    this.stream = Stream.create(device);
    this.#fork = Event.create(device, { timing: false });
    this.#join = Event.create(device, { timing: false });
  }

  /** The side stream, after everything enqueued on `from` so far. */
  fork(from: Stream): Stream {
    this.#fork.record(from);
    this.stream.waitEvent(this.#fork);
    return this.stream;
  }

  /** `into` waits for everything enqueued on the side stream so far. */
  join(into: Stream): void {
    this.#join.record(this.stream);
    into.waitEvent(this.#join);
  }

  dispose(): void {
    for (const x of [this.stream, this.#fork, this.#join]) x.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
