// The decode GEMM's all-reduce epilogue at world 1 against its plain store epilogue (graph-timed, µs): what
// GEMM + all-reduce's exchange costs a GEMM when there is no peer to wait for (the one partial is pushed to
// this rank's receive buffer, flagged, and summed back into D); for paired tiles, the same tiles unpaired
// beside them. Run from the repo root on a Hopper GPU:
//   node bench/decode-ar.mjs [M,M,...] [N] [K]
import {
  DecodeGemm,
  decodeShape,
  decodeSplitsFor,
  describeDecodeShape,
  soloExchange,
} from "../dist/src/ops/gemm/decode-gemm.js";
import { device, operands, time } from "./gemm-kit.mjs";

const rows = (process.argv[2] ?? "1,32,128,160,192,256").split(",").map(Number);
const [n, k] = [Number(process.argv[3] ?? 8192), Number(process.argv[4] ?? 28672)];
for (const m of rows) {
  const ops = operands(m, n, k);
  const c = ops.launch;
  const chosen = decodeShape(m);
  // matmul()'s slices (GEMM + all-reduce runs the same on the tiles unpaired).
  const resident = new DecodeGemm(device, { elem: "bf16", ...chosen, allReduce: false }).resident();
  const splits = decodeSplitsFor(m, n, k, 2, resident);
  for (const shape of chosen.paired ? [chosen, { ...chosen, paired: false }] : [chosen]) {
    const exchange = soloExchange(device, m, n, shape);
    const plain = new DecodeGemm(device, { elem: "bf16", ...shape, allReduce: false });
    const ar = new DecodeGemm(device, { elem: "bf16", ...shape, allReduce: true });
    const row = [`${m}x${n}x${k} ${describeDecodeShape(shape)}, ${splits} slice(s)`];
    row.push(`store ${await time(() => plain.launch({ ...c, splits }))}`);
    row.push(`all-reduce epilogue ${await time(() => ar.launch({ ...c, splits, exchange }))}`);
    console.log(row.join("  "));
    exchange.dispose();
  }
  ops.dispose();
}
