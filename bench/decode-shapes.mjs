// The decode GEMM's tile shapes against each other and cuBLASLt at m = 129 to 256 (graph-timed, µs): the
// measurements behind decodeShape() and DECODE_MAX_ROWS in src/ops/gemm/decode-gemm.ts. Run from the repo root
// on a Hopper GPU:
//   node bench/decode-shapes.mjs [M,M,...] [N] [K] [bf16|fp8e4m3]
import { DecodeGemm } from "../dist/src/ops/gemm/decode-gemm.js";
import { cublas, device, operands, time } from "./gemm-kit.mjs";

const rows = (process.argv[2] ?? "129,136,144,160,176,192,208,224,240,256").split(",").map(Number);
const [n, k] = [Number(process.argv[3] ?? 8192), Number(process.argv[4] ?? 14336)];
const elem = process.argv[5] ?? "bf16";
const shapes = [
  { cols: 128, wide: false },
  { cols: 160, wide: false },
  { cols: 192, wide: false },
  { cols: 128, wide: true },
];
for (const m of rows) {
  const ops = operands(m, n, k, elem);
  const c = ops.launch;
  const row = [`${m}x${n}x${k} ${elem}`, `cuBLASLt ${await time(() => cublas(c, elem))}`];
  for (const s of shapes) {
    const g = new DecodeGemm(device, { elem, ...s, allReduce: false });
    row.push(`${s.cols}x${s.wide ? 128 : 64} ${await time(() => g.launch(c))}`);
  }
  console.log(row.join("  "));
  ops.dispose();
}
