// One launch each of the decode GEMM's wide tiles (m = 256) and 64 x 192 tiles (m = 192) and of cuBLASLt
// after each, at n = 8192, k = 14336, for a profiler. Run from the repo root on a Hopper GPU:
//   ncu --clock-control none -k "regex:decode_gemm|nvjet" --section SpeedOfLight node bench/decode-profile.mjs
import { DecodeGemm } from "../dist/src/ops/gemm/decode-gemm.js";
import { cublas, device, operands, stream } from "./gemm-kit.mjs";

for (const [m, shape] of [
  [256, { cols: 128, wide: true }],
  [192, { cols: 192, wide: false }],
]) {
  const ops = operands(m, 8192, 14336);
  new DecodeGemm(device, { elem: "bf16", ...shape, allReduce: false }).launch(ops.launch);
  cublas(ops.launch);
  stream.synchronize();
  ops.dispose();
}
