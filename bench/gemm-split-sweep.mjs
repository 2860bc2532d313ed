// symmkit's GEMMs at decode sizes with the split-K count forced, HopperGemm on the wide and the narrow
// ring and the decode GEMM (A and B swapped) at its tile width, beside cuBLASLt (graph-timed, µs): the
// measurements behind splitsFor() and gemmKernelFor() in src/ops/gemm/hopper-gemm.ts and decodeSplitsFor()
// and DECODE_MAX_ROWS in src/ops/gemm/decode-gemm.ts. Run from the repo root on a Hopper GPU:
//   node bench/gemm-split-sweep.mjs [MxNxK,...]
import { DecodeGemm, decodeShape } from "../dist/src/ops/gemm/decode-gemm.js";
import { parseShapes } from "../dist/src/bench/gemm.js";
import { cublas, device, operands, splitStoreGemm, time } from "./gemm-kit.mjs";

const shapes = parseShapes(
  process.argv[2] ??
    "1x8192x1024,1x8192x3584,1x8192x14336,32x8192x14336,64x8192x14336,128x8192x14336,256x8192x14336,128x8192x3584,1x2048x14336,16x1024x8192",
);
const rings = [
  ["wide", splitStoreGemm(false)],
  ["narrow", splitStoreGemm(true)],
];
for (const [m, n, k] of shapes) {
  const ops = operands(m, n, k);
  const c = ops.launch;
  const row = [`${m}x${n}x${k}`, `cuBLASLt ${await time(() => cublas(c))}`];
  for (const [name, g] of rings)
    for (const splits of [1, 2, 4, 8, 16]) {
      try {
        g.launch({ ...c, splits }); // refused where the shape does not take this count or ring
      } catch {
        continue;
      }
      row.push(`${name}/${splits} ${await time(() => g.launch({ ...c, splits }))}`);
    }
  const shape = decodeShape(m, n, device.props.smCount);
  const decoder = new DecodeGemm(device, { elem: "bf16", ...shape, allReduce: false });
  for (const splits of [1, 2, 3, 4, 6, 8, 16]) {
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
  ops.dispose();
}
