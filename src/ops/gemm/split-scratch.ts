// Split-K's scratch: f32 partials and one counter per tile, one set per device and stream, shared by every
// GEMM kernel (HopperGemm, DecodeGemm, every variant). Launches on one stream never overlap, whatever
// kernel they run, so they can share a set; launches on different streams may, so each stream gets its
// own. Allocated on the stream's first split launch, inside a capture too (Graph.relaxed: the
// memory is the stream's, not the graph's), and its counters zeroed there and then on a stream of its own,
// since a zeroing on a captured stream would run only with the graph. A stream's set lives as long as the
// process (about 17 MB on 132 SMs): graphs captured on it may still use it.
import type { Ptr } from "../../cuda/native.js";
import type { Device } from "../../runtime/device.js";
import { Graph } from "../../runtime/graph.js";
import { DeviceMemory, memset } from "../../runtime/memory.js";
import { Stream } from "../../runtime/stream.js";

/** f32 partials of the largest one-wave split: one 128 x 256 tile slice (HopperGemm's; DecodeGemm's are
 * at most 128 rows of B by 256 of A, or 192 by 168) per SM. */
const TILE_SLICE_FLOATS = 128 * 256;

const byDevice = new Map<Device, SplitScratch>();

export class SplitScratch {
  readonly #byStream = new Map<Stream, { ws: DeviceMemory; counters: DeviceMemory }>();

  private constructor(readonly device: Device) {}

  /** The device's scratch. */
  static of(device: Device): SplitScratch {
    let s = byDevice.get(device);
    if (!s) byDevice.set(device, (s = new SplitScratch(device)));
    return s;
  }

  /** The stream's partials (smCount tile slices) and counters (smCount tiles; zero, and left zero by
   * every launch), allocated on its first use. */
  on(stream: Stream): { ws: Ptr; counters: Ptr } {
    let sc = this.#byStream.get(stream);
    if (!sc) {
      const sms = this.device.props.smCount;
      const made = Graph.relaxed(() => {
        const ws = DeviceMemory.alloc(sms * TILE_SLICE_FLOATS * 4, this.device);
        let counters: DeviceMemory | undefined;
        try {
          counters = DeviceMemory.alloc(sms * 4, this.device);
          const side = Stream.create(this.device);
          try {
            memset(counters.ptr, 0, 4, sms, side);
            side.synchronize();
          } finally {
            side.dispose();
          }
          return { ws, counters };
        } catch (e) {
          counters?.dispose();
          ws.dispose();
          throw e;
        }
      });
      this.#byStream.set(stream, (sc = made));
    }
    return { ws: sc.ws.ptr, counters: sc.counters.ptr };
  }
}
