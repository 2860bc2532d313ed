// What the GEMM bench scripts (decode-shapes, gemm-split-sweep, gemm-stress) share: GPU 0 and a stream,
// seeded operands of a shape, HopperGemm's split-K store variant on either ring, cuBLASLt, and a graph timer.
import { Device } from "../dist/src/runtime/device.js";
import { Stream } from "../dist/src/runtime/stream.js";
import { Tensor } from "../dist/src/runtime/tensor.js";
import { HopperGemm } from "../dist/src/ops/hopper-gemm.js";
import { CublasLtMatmul } from "../dist/src/ops/cublaslt-matmul.js";
import { graphTimeUs } from "../dist/src/bench/report.js";

export const device = Device.get(0);
export const stream = Stream.create(device);

/** A [m, k], B [n, k] (seeded, uniform) and D [m, n] in bf16; `launch` holds what every launcher takes. */
export function operands(m, n, k) {
  const a = Tensor.rand([m, k], "bf16", { device, seed: 1n, offset: 0 });
  const b = Tensor.rand([n, k], "bf16", { device, seed: 1n, offset: 1n << 40n });
  const d = Tensor.empty([m, n], "bf16", { device });
  return {
    launch: { a: a.ptr, b: b.ptr, d: d.ptr, m, n, k, stream },
    dispose: () => [a, b, d].forEach((x) => x.dispose()),
  };
}

/** HopperGemm's bf16 split-K store variant, on the narrow ring (m <= 64) or the wide one. */
export const splitStoreGemm = (narrow) =>
  new HopperGemm(device, {
    elem: "bf16",
    layoutB: "nk",
    order: "grouped",
    ready: "none",
    epilogue: "store",
    splitK: true,
    narrow,
  });

/** cuBLASLt on `launch`'s operands (B as [n, k]); its handle made on first use (CublasLtMatmul.for keeps it). */
export const cublas = (launch) => CublasLtMatmul.for(device).run({ ...launch, elem: "bf16", layoutB: "nk" });

/** Graph-timed µs of `f`, one decimal. */
export const time = async (f) => (await graphTimeUs(stream, f, { perGraph: 20, replays: 10 })).toFixed(1);
