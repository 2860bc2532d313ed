// The decode GEMM's tile shapes against each other and cuBLASLt at m = 129 to 256 (graph-timed, µs): the
// measurements behind decodeShape() and DECODE_MAX_ROWS in src/ops/decode-gemm.ts. Run from the repo root
// on a Hopper GPU:
//   node bench/decode-shapes.mjs [M,M,...] [N] [K]
import { Device } from "../dist/src/runtime/device.js";
import { Stream } from "../dist/src/runtime/stream.js";
import { Tensor } from "../dist/src/runtime/tensor.js";
import { DecodeGemm } from "../dist/src/ops/decode-gemm.js";
import { CublasLtMatmul } from "../dist/src/ops/cublaslt-matmul.js";
import { graphTimeUs } from "../dist/src/bench/report.js";

const rows = (process.argv[2] ?? "136,160,192,208,224,240,256").split(",").map(Number);
const [n, k] = [Number(process.argv[3] ?? 8192), Number(process.argv[4] ?? 14336)];
const device = Device.get(0);
const stream = Stream.create(device);
const lt = CublasLtMatmul.for(device);
const shapes = [
  { cols: 64, wide: false },
  { cols: 128, wide: false },
  { cols: 64, wide: true },
  { cols: 128, wide: true },
];
const time = async (f) => (await graphTimeUs(stream, f, { perGraph: 20, replays: 10 })).toFixed(1);
for (const m of rows) {
  const a = Tensor.rand([m, k], "bf16", { device, seed: 1n, offset: 0 });
  const b = Tensor.rand([n, k], "bf16", { device, seed: 1n, offset: 1n << 40n });
  const d = Tensor.empty([m, n], "bf16", { device });
  const c = { a: a.ptr, b: b.ptr, d: d.ptr, m, n, k, stream };
  const row = [
    `${m}x${n}x${k}`,
    `cuBLASLt ${await time(() => lt.run({ ...c, elem: "bf16", layoutB: "nk" }))}`,
  ];
  for (const s of shapes) {
    const g = new DecodeGemm(device, { elem: "bf16", ...s, allReduce: false });
    row.push(`${s.cols}x${s.wide ? 128 : 64} ${await time(() => g.launch(c))}`);
  }
  console.log(row.join("  "));
  for (const x of [a, b, d]) x.dispose();
}
