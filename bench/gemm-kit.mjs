// What the GEMM bench scripts (decode-shapes, gemm-split-sweep, gemm-stress) share: GPU 0 and a stream,
// seeded operands of a shape, HopperGemm's split-K store variant on either ring, cuBLASLt, and a graph timer.
import { Device } from "../dist/src/runtime/device.js";
import { Stream } from "../dist/src/runtime/stream.js";
import { Tensor } from "../dist/src/runtime/tensor.js";
import { HopperGemm } from "../dist/src/ops/gemm/hopper-gemm.js";
import { CublasLtMatmul } from "../dist/src/ops/gemm/cublaslt-matmul.js";
import { graphTimeUs } from "../dist/src/bench/report.js";

export const device = Device.get(0);
export const stream = Stream.create(device);

/** A [m, k], B [n, k] (seeded, uniform, `elem`) and D [m, n] in bf16; `launch` holds what every launcher
 * takes. */
export function operands(m, n, k, elem = "bf16") {
  const a = Tensor.rand([m, k], elem, { device, seed: 1n, offset: 0 });
  const b = Tensor.rand([n, k], elem, { device, seed: 1n, offset: 1n << 40n });
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
export const cublas = (launch, elem = "bf16") =>
  CublasLtMatmul.for(device).run({ ...launch, elem, layoutB: "nk" });

/** Graph-timed µs of `f`, one decimal; `f` runs once eagerly first, so that what it makes on first use (a
 * cuBLASLt handle and workspace, a plan, split-K scratch) is not made inside the capture. */
export async function time(f) {
  f();
  return (await graphTimeUs(stream, f, { perGraph: 20, replays: 10 })).toFixed(1);
}
