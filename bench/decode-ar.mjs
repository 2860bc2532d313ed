// The decode GEMM's all-reduce epilogue at world 1 against its plain store epilogue (graph-timed, µs): what
// GEMM + all-reduce's exchange costs a GEMM when there is no peer to wait for (the one partial is pushed to
// this rank's receive buffer, flagged, and summed back into D). Run from the repo root on a Hopper GPU:
//   node bench/decode-ar.mjs [M,M,...] [N] [K]
import { DecodeGemm, decodeFlagCount, decodeShape, decodeSplitsFor } from "../dist/src/ops/decode-gemm.js";
import { Tensor } from "../dist/src/runtime/tensor.js";
import { device, operands, time } from "./gemm-kit.mjs";

const rows = (process.argv[2] ?? "1,32,128,160,192,256").split(",").map(Number);
const [n, k] = [Number(process.argv[3] ?? 8192), Number(process.argv[4] ?? 28672)];
for (const m of rows) {
  const ops = operands(m, n, k);
  const c = ops.launch;
  const shape = decodeShape(m);
  const splits = decodeSplitsFor(m, n, k, 2, device.props.smCount);
  const recv = Tensor.empty([m, n], "bf16", { device });
  const flags = Tensor.zeros([decodeFlagCount(m, n, 1)], "u32", { device });
  const epoch = Tensor.zeros([2], "u32", { device });
  const exchange = {
    rank: 0,
    world: 1,
    shardRows: m,
    recv: [recv.ptr],
    flags: [flags.ptr],
    epoch: epoch.ptr,
  };
  const plain = new DecodeGemm(device, { elem: "bf16", ...shape, allReduce: false });
  const ar = new DecodeGemm(device, { elem: "bf16", ...shape, allReduce: true });
  const row = [`${m}x${n}x${k} ${shape.cols}${shape.wide ? " wide" : ""}, ${splits} slice(s)`];
  row.push(`store ${await time(() => plain.launch({ ...c, splits }))}`);
  row.push(`all-reduce epilogue ${await time(() => ar.launch({ ...c, splits, exchange }))}`);
  console.log(row.join("  "));
  for (const t of [recv, flags, epoch]) t.dispose();
  ops.dispose();
}
