// One launch each of the decode GEMM's tiles and of cuBLASLt after each (bf16), for a profiler. Each argument
// is m[xNxK]:cols[:flags] (n x k 8192 x 14336 unless given), flags w (wide) and p (paired) (default: 256 on
// the wide tiles, 192 on 64 x 192). Run from the repo root on a Hopper GPU:
//   ncu --clock-control none -k "regex:decode_gemm|nvjet" --section SpeedOfLight node bench/decode-profile.mjs [m[xNxK]:cols[:wp] ...]
import { DecodeGemm } from "../dist/src/ops/gemm/decode-gemm.js";
import { cublas, device, operands, stream } from "./gemm-kit.mjs";

const specs = process.argv.length > 2 ? process.argv.slice(2) : ["256:128:w", "192:192"];
for (const spec of specs) {
  const [mnk, cols, flags = ""] = spec.split(":");
  const [m, n = 8192, k = 14336] = mnk.split("x").map(Number);
  const ops = operands(m, n, k);
  const shape = { cols: Number(cols), wide: flags.includes("w"), paired: flags.includes("p") };
  new DecodeGemm(device, { elem: "bf16", ...shape, allReduce: false }).launch(ops.launch);
  cublas(ops.launch);
  stream.synchronize();
  ops.dispose();
}
