// symmkit's GEMMs at decode sizes with the split-K count forced, HopperGemm on the wide and the narrow
// ring and the decode GEMM (A and B swapped) at its tile width, beside cuBLASLt (graph-timed, µs): the
// measurements behind splitsFor() and gemmKernelFor() in src/ops/hopper-gemm.ts and decodeSplitsFor()
// and DECODE_MAX_ROWS in src/ops/decode-gemm.ts. Run from the repo root on a Hopper GPU:
//   node bench/gemm-split-sweep.mjs [MxNxK,...]
import { Device } from "../dist/src/runtime/device.js";
import { Stream } from "../dist/src/runtime/stream.js";
import { Tensor } from "../dist/src/runtime/tensor.js";
import { HopperGemm } from "../dist/src/ops/hopper-gemm.js";
import { DecodeGemm, decodeShape } from "../dist/src/ops/decode-gemm.js";
import { CublasLtMatmul } from "../dist/src/ops/cublaslt-matmul.js";
import { graphTimeUs } from "../dist/src/bench/report.js";
import { parseShapes } from "../dist/src/bench/gemm.js";

const shapes = parseShapes(
  process.argv[2] ??
    "1x8192x1024,1x8192x3584,1x8192x14336,32x8192x14336,64x8192x14336,128x8192x14336,256x8192x14336,128x8192x3584,1x2048x14336,16x1024x8192",
);
const device = Device.get(0);
const stream = Stream.create(device);
const gemm = (narrow) =>
  new HopperGemm(device, {
    elem: "bf16",
    layoutB: "nk",
    order: "grouped",
    ready: "none",
    epilogue: "store",
    splitK: true,
    narrow,
  });
const rings = [
  ["wide", gemm(false)],
  ["narrow", gemm(true)],
];
const lt = CublasLtMatmul.for(device);
const time = async (f) => (await graphTimeUs(stream, f, { perGraph: 20, replays: 10 })).toFixed(1);
for (const [m, n, k] of shapes) {
  const a = Tensor.rand([m, k], "bf16", { device, seed: 1n, offset: 0 });
  const b = Tensor.rand([n, k], "bf16", { device, seed: 1n, offset: 1n << 40n });
  const d = Tensor.empty([m, n], "bf16", { device });
  const c = { a: a.ptr, b: b.ptr, d: d.ptr, m, n, k, stream };
  const row = [
    `${m}x${n}x${k}`,
    `cuBLASLt ${await time(() => lt.run({ ...c, elem: "bf16", layoutB: "nk" }))}`,
  ];
  for (const [name, g] of rings)
    for (const splits of [1, 2, 4, 8, 16]) {
      try {
        g.launch({ ...c, splits }); // refused where the shape does not take this count or ring
      } catch {
        continue;
      }
      row.push(`${name}/${splits} ${await time(() => g.launch({ ...c, splits }))}`);
    }
  const shape = decodeShape(m);
  const decoder = new DecodeGemm(device, { elem: "bf16", ...shape, allReduce: false });
  for (const splits of [1, 2, 4, 8, 16]) {
    try {
      decoder.launch({ ...c, splits });
    } catch {
      continue;
    }
    row.push(
      `decode${shape.cols}x${shape.wide ? 128 : 64}/${splits} ${await time(() => decoder.launch({ ...c, splits }))}`,
    );
  }
  console.log(row.join("  "));
  for (const x of [a, b, d]) x.dispose();
}
