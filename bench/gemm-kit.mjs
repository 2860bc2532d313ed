// What the GEMM bench scripts (decode-shapes, gemm-split-sweep, gemm-stress) share: GPU 0 and a stream,
// seeded operands of a shape (B hot or cold), HopperGemm's split-K store variant on either ring, cuBLASLt, and a graph timer.
import { Device } from "../dist/src/runtime/device.js";
import { Stream } from "../dist/src/runtime/stream.js";
import { Tensor } from "../dist/src/runtime/tensor.js";
import { HopperGemm } from "../dist/src/ops/gemm/hopper-gemm.js";
import { CublasLtMatmul } from "../dist/src/ops/gemm/cublaslt-matmul.js";
import { graphTimeUs } from "../dist/src/bench/report.js";
import { coldCopies, cycledCopies } from "../dist/src/bench/gemm.js";

export const device = Device.get(0);
export const stream = Stream.create(device);

/** A [m, k], B [n, k] (seeded, uniform, `elem`) and D [m, n] in bf16; `launch` holds what every launcher
 * takes. With `cold`, B has equal copies adding up to 3x L2 (bench gemm --weights cold): each `cycle()`
 * gives a function whose launches go through them in turn, so that B is read from memory, as a model's
 * layers read their weights; without, its launches all read the one B. */
export function operands(m, n, k, elem = "bf16", cold = false) {
  const a = Tensor.rand([m, k], elem, { device, seed: 1n, offset: 0 });
  const copies = cold ? coldCopies(n * k * (elem === "bf16" ? 2 : 1), device.props.l2Bytes) : 1;
  const bs = cycledCopies(() => Tensor.rand([n, k], elem, { device, seed: 1n, offset: 1n << 40n }), copies);
  const d = Tensor.empty([m, n], "bf16", { device });
  const launch = { a: a.ptr, b: bs.all[0].ptr, d: d.ptr, m, n, k, stream };
  return {
    launch,
    copies,
    cycle: () => {
      const next = bs.cycle();
      return () => ({ ...launch, b: next() });
    },
    dispose: () => [a, ...bs.all, d].forEach((x) => x.dispose()),
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
