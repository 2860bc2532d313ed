// matmul()'s plan against the decode GEMM's other tiles, the Hopper GEMM and cuBLASLt, timed side by side
// (every replay round runs each graph once in turn, so that the power cap's clock swings reach them all
// alike; µs, and cuBLASLt's time over each): the measurements behind decodeShape(), decodePlan() and
// DECODE_MAX_ROWS in src/ops/gemm/decode-gemm.ts and symmkitGemmPlan() in src/ops/gemm/matmul.ts. Per
// shape: the plan, the one-consumer and the wide tile of its rows of A (in 1 to 3 slices), the wide tiles
// past 192 rows, unpaired and paired (two tile-rows of 128, or of 104 at 193-208 rows, one tile-row of m
// rounded up to 8 and the plan's tile also in 2 to 4 slices), the tall tiles at 193-208 rows (two tile-rows
// of 104 by 192 rows of B, in 1 to 3 slices), and the Hopper GEMM in 1 and 2 slices; fastest first. With
// `cold`, every GEMM reads a copy of B that L2 does not hold (bench gemm --weights cold). Run from the repo
// root on a Hopper GPU:
//   node bench/decode-shapes.mjs [E-MxNxK,...] [cold]     (E: b for bf16, f for fp8e4m3)
import {
  describePlan,
  launchSymmkitGemm,
  symmkitGemmPlan,
  TILE_GEMM_PLAN,
} from "../dist/src/ops/gemm/matmul.js";
import { DECODE_COLS, ONE_ROW_WIDE_COLS } from "../dist/src/ops/gemm/decode-gemm.js";
import { graphTimeManyUs } from "../dist/src/bench/report.js";
import { cublas, device, operands, stream } from "./gemm-kit.mjs";

const ONE_CONSUMER_COLS = [8, 16, 32, 64, 128, 160, 192];
const shapes = (process.argv[2] ?? "b-128x8192x14336,b-128x28672x4096,b-256x8192x14336,b-256x28672x4096")
  .split(",")
  .map((s) => {
    const [e, mnk] = s.split("-");
    const [m, n, k] = mnk.split("x").map(Number);
    return { elem: e === "f" ? "fp8e4m3" : "bf16", m, n, k, layoutB: "nk" };
  });
const cold = process.argv[3] === "cold";
const decode = (cols, wide, paired, splits = 1) => ({ kernel: "decode", cols, wide, paired, splits });
const tall = (splits) => ({ ...decode(104, true, false, splits), tall: true });
for (const p of shapes) {
  const ops = operands(p.m, p.n, p.k, p.elem, cold);
  const c = ops.launch;
  const chosen = symmkitGemmPlan(device, p);
  const candidates = [chosen, TILE_GEMM_PLAN, { kernel: "hopper", splits: 2, splitK: true, narrow: false }];
  const cols = ONE_CONSUMER_COLS.find((x) => x >= p.m);
  // The tile of m rounded up to 8 rows of A, where the decode GEMM has that width.
  const exact = DECODE_COLS.find((x) => x === Math.ceil(p.m / 8) * 8 && x !== cols && x <= 192);
  if (cols !== undefined)
    for (const wide of [false, true])
      for (const c of exact === undefined ? [cols] : [cols, exact])
        candidates.push(...[1, 2, 3].map((s) => decode(c, wide, false, s)));
  else {
    for (const wideCols of [
      ...(p.m <= 208 ? [104] : []),
      128,
      160,
      192,
      ...ONE_ROW_WIDE_COLS.filter((c) => c >= p.m),
      256,
      chosen.cols ?? 128,
    ])
      // Pairs of 200 or more rows cover 400 or more: past m wherever the decode GEMM takes the problem.
      candidates.push(
        decode(wideCols, true, false),
        ...(wideCols <= 192 ? [decode(wideCols, true, true)] : []),
      );
    // In slices: two tile-rows of 128, one tile-row of m rounded up to 8, the plan's.
    for (const wideCols of new Set([128, ONE_ROW_WIDE_COLS.find((c) => c >= p.m), chosen.cols ?? 128]))
      if (wideCols !== undefined) candidates.push(...[2, 3, 4].map((s) => decode(wideCols, true, false, s)));
    if (p.m <= 208) candidates.push(...[1, 2, 3].map(tall));
  }
  // Each plan once, and only those the launcher takes (slices past one wave are refused).
  const plans = candidates.filter((plan, i) => {
    if (candidates.findIndex((q) => describePlan(q) === describePlan(plan)) !== i) return false;
    try {
      launchSymmkitGemm(device, p, c, stream, plan);
      return true;
    } catch {
      return false;
    }
  });
  const forLt = ops.cycle();
  const runs = [
    () => cublas(forLt(), p.elem),
    ...plans.map((plan) => {
      const next = ops.cycle();
      return () => launchSymmkitGemm(device, p, next(), stream, plan);
    }),
  ];
  runs[0]();
  const perGraph = Math.max(
    3,
    ops.copies,
    Math.min(100, Math.ceil(3e-3 / ((2 * p.m * p.n * p.k) / 400e12 + 5e-6))),
  );
  const [lt, ...us] = await graphTimeManyUs(stream, runs, { perGraph, replays: 30 });
  const row = plans
    .map((plan, i) => ({ what: `${plan === chosen ? "* " : ""}${describePlan(plan)}`, us: us[i] }))
    .sort((x, y) => x.us - y.us)
    .map((r) => `${r.what} ${r.us.toFixed(1)} (${(lt / r.us).toFixed(2)})`);
  console.log(
    `${p.elem} ${p.m}x${p.n}x${p.k}${cold ? " cold" : ""}  cuBLASLt ${lt.toFixed(1)}  |  ${row.join("  |  ")}`,
  );
  ops.dispose();
}
