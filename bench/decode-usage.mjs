// Registers and local memory (spills) of every decode GEMM variant matmul() and GEMM + all-reduce may run,
// and the CTAs of each resident at once. Run from the repo root on a Hopper GPU:
//   node bench/decode-usage.mjs
import { DECODE_VARIANTS, DecodeGemm } from "../dist/src/ops/gemm/decode-gemm.js";
import { device } from "./gemm-kit.mjs";

for (const v of DECODE_VARIANTS) {
  const g = new DecodeGemm(device, v);
  const { registers, localBytes } = g.kernel.attributes();
  console.log(
    `${g.kernel.name}: ${registers} registers, ${localBytes} B local, ${g.resident()} CTAs resident`,
  );
}
