// The decode GEMM's tile shapes against each other, matmul()'s plan and cuBLASLt (graph-timed, µs): the
// measurements behind decodeShape() and DECODE_MAX_ROWS in src/ops/gemm/decode-gemm.ts. Per m: the
// one-consumer tiles of 128, 160 and 192 rows of A, the wide tiles (128 x 128), and the three narrowest
// paired wide tiles whose pair of tile-rows covers m. Run from the repo root on a Hopper GPU:
//   node bench/decode-shapes.mjs [M,M,...] [N] [K] [bf16|fp8e4m3]
import { DecodeGemm, describeDecodeShape } from "../dist/src/ops/gemm/decode-gemm.js";
import { describePlan, launchSymmkitGemm, symmkitGemmPlan } from "../dist/src/ops/gemm/matmul.js";
import { cublas, device, operands, stream, time } from "./gemm-kit.mjs";

const rows = (process.argv[2] ?? "129,136,144,160,176,192,208,224,240,256").split(",").map(Number);
const [n, k] = [Number(process.argv[3] ?? 8192), Number(process.argv[4] ?? 14336)];
const elem = process.argv[5] ?? "bf16";
const PAIRED_COLS = [64, 80, 96, 112, 128, 160, 192];
for (const m of rows) {
  const ops = operands(m, n, k, elem);
  const c = ops.launch;
  const problem = { elem, m, n, k, layoutB: "nk" };
  const plan = symmkitGemmPlan(device, problem);
  const row = [
    `${m}x${n}x${k} ${elem}`,
    `cuBLASLt ${await time(() => cublas(c, elem))}`,
    `matmul (${describePlan(plan)}) ${await time(() => launchSymmkitGemm(device, problem, c, stream, plan))}`,
  ];
  const shapes = [
    ...[128, 160, 192].map((cols) => ({ cols, wide: false, paired: false })),
    { cols: 128, wide: true, paired: false },
    ...PAIRED_COLS.filter((cols) => 2 * cols >= m)
      .slice(0, 3)
      .map((cols) => ({ cols, wide: true, paired: true })),
  ];
  for (const s of shapes) {
    const g = new DecodeGemm(device, { elem, ...s, allReduce: false });
    const { registers, localBytes } = g.kernel.attributes();
    const use = `${registers} regs${localBytes ? `, ${localBytes} B local` : ""}`;
    row.push(`${describeDecodeShape(s)} ${await time(() => g.launch(c))} (${use})`);
  }
  console.log(row.join("  "));
  ops.dispose();
}
