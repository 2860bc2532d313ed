// The decode GEMM's all-reduce epilogue at world 1 against its plain store epilogue (graph-timed side by
// side, µs): what GEMM + all-reduce's exchange costs a GEMM when there is no peer to wait for (the one
// partial is pushed to this rank's receive buffer, flagged, and summed back into D), on decodePlan's tiles
// and slices (where matmul() runs the Hopper GEMM instead, on the decode tiles it would otherwise run). Run
// from the repo root on a Hopper GPU:
//   node bench/decode-ar.mjs [M,M,...] [N] [K]
import {
  DecodeGemm,
  decodePlan,
  describeDecodeShape,
  soloExchange,
} from "../dist/src/ops/gemm/decode-gemm.js";
import { graphTimeManyUs } from "../dist/src/bench/report.js";
import { device, operands, stream } from "./gemm-kit.mjs";

const rows = (process.argv[2] ?? "1,32,128,160,192,256").split(",").map(Number);
const [n, k] = [Number(process.argv[3] ?? 8192), Number(process.argv[4] ?? 28672)];
const sms = device.props.smCount;
for (const m of rows) {
  const ops = operands(m, n, k);
  const c = ops.launch;
  const { splits, ...shape } = decodePlan(m, n, k, 2, sms);
  const exchange = soloExchange(device, m, n, shape);
  const plain = new DecodeGemm(device, { elem: "bf16", ...shape, allReduce: false });
  const ar = new DecodeGemm(device, { elem: "bf16", ...shape, allReduce: true });
  const runs = [
    () => plain.launch({ ...c, splits, stream }),
    () => ar.launch({ ...c, splits, exchange, stream }),
  ];
  for (const run of runs) run();
  const [store, reduce] = await graphTimeManyUs(stream, runs, { perGraph: 20, replays: 20 });
  console.log(
    `${m}x${n}x${k} ${describeDecodeShape(shape)}, ${splits} slice(s)  store ${store.toFixed(1)}  all-reduce epilogue ${reduce.toFixed(1)}`,
  );
  exchange.dispose();
  ops.dispose();
}
