// Split-K's scratch: f32 partials and one counter per tile, one set per device and stream, shared by every
// GEMM kernel (HopperGemm, DecodeGemm, every variant). Launches on one stream never overlap, whatever
// kernel they run, so they can share a set; launches on different streams may, so each stream gets its
// own. Allocated on the stream's first split launch, which therefore cannot be inside a capture: sharing
// the set means any earlier split launch on the stream suffices.
import { UnsupportedError } from "../../errors.js";
import type { Ptr } from "../../cuda/native.js";
import type { Device } from "../../runtime/device.js";
import { Graph } from "../../runtime/graph.js";
import { DeviceMemory, memset } from "../../runtime/memory.js";
import type { Stream } from "../../runtime/stream.js";

/** f32 partials of the largest one-wave split: one 128 x 256 tile slice (HopperGemm's; DecodeGemm's are
 * at most 128 x 192) per SM. */
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
      if (Graph.activeCapture(stream))
        throw new UnsupportedError(
          "gemm: split-K allocates its scratch on a stream's first split launch, which cannot happen while the stream is captured; run one symmkit GEMM call that splits K (a matmul with few rows) on this stream before capturing",
        );
      const sms = this.device.props.smCount;
      sc = {
        ws: DeviceMemory.alloc(sms * TILE_SLICE_FLOATS * 4, this.device),
        counters: DeviceMemory.alloc(sms * 4, this.device),
      };
      memset(sc.counters.ptr, 0, 4, sms, stream);
      this.#byStream.set(stream, sc);
    }
    return { ws: sc.ws.ptr, counters: sc.counters.ptr };
  }
}
