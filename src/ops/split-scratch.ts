// Split-K's scratch: f32 partials and one counter per tile, per stream. Launches on one stream never
// overlap, so each stream's split launches can share one set; launches on different streams may, so
// each stream gets its own. Allocated on a stream's first split launch, which therefore cannot be
// inside a capture.
import { UnsupportedError } from "../errors.js";
import type { Ptr } from "../cuda/native.js";
import type { Device } from "../runtime/device.js";
import { Graph } from "../runtime/graph.js";
import { DeviceMemory, memset } from "../runtime/memory.js";
import type { Stream } from "../runtime/stream.js";

export class SplitScratch {
  readonly #byStream = new Map<Stream, { ws: DeviceMemory; counters: DeviceMemory }>();

  /** `wsBytes` of partials and `counters` u32 counters (zero, and left zero by every launch). */
  constructor(
    readonly device: Device,
    readonly wsBytes: number,
    readonly counters: number,
  ) {}

  /** The stream's partials and counters, allocated on its first use. */
  for(stream: Stream): { ws: Ptr; counters: Ptr } {
    let sc = this.#byStream.get(stream);
    if (!sc) {
      if (Graph.activeCapture(stream))
        throw new UnsupportedError(
          "gemm: split-K allocates its scratch on a stream's first split launch, which cannot happen while the stream is captured; make one call on this stream before capturing",
        );
      sc = {
        ws: DeviceMemory.alloc(this.wsBytes, this.device),
        counters: DeviceMemory.alloc(this.counters * 4, this.device),
      };
      memset(sc.counters.ptr, 0, 4, this.counters, stream);
      this.#byStream.set(stream, sc);
    }
    return { ws: sc.ws.ptr, counters: sc.counters.ptr };
  }
}
