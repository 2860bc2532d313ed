// One rank of the GEMM + all-reduce check (test/gpu/distributed.test.ts): matmulAllReduce on GPUs.
//   fused and sequential: bit for bit equal to the deterministic reference (symmkit's GEMM per rank, split-K
//     as matmul() splits it, the partials summed in f32 in rank order, rounded once), on every rank; with
//     rmsNorm, bit for bit the host norm (src/ops/norm/rms-norm.ts) of that sum, bf16 and fp8 outputs,
//     residualOut;
//   nccl_cublaslt: within bf16 rounding of it;
//   bf16 and fp8 with scales, B as [n, k] and [k, n], m from 1 (a decode step) to 300, K long enough for
//   split-K (up to 8 slices) and not; outputs poisoned
//   with guards; a CUDA graph replayed with the inputs changed in between; a rank delayed 50 ms; bad
//   input a typed error with nothing written. Seeded, the seed printed. Shapes are the whole problem on
//   every rank, so they hold at any world size. Every checked call of the main loop follows a call of the
//   same shape on other operands (a decoy), so that a receive slot read before this call's partial landed
//   holds another call's values and the check fails.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { assertSameBits, sharedSeed } from "../../support/agree.js";
import { init } from "../../../src/init.js";
import { InvalidArgumentError } from "../../../src/errors.js";
import { reduceInto } from "../../../src/ops/coll/reduce.js";
import { matmul } from "../../../src/ops/gemm/matmul.js";
import { rmsNormRows } from "../../../src/ops/norm/rms-norm.js";
import type { MatmulAllReduceAlgorithm } from "../../../src/ops/fused/checks.js";
import { decodeToF32, rawArray, type DType, type RawArray } from "../../../src/runtime/dtype.js";
import { Graph } from "../../../src/runtime/graph.js";
import { defaultStream } from "../../../src/runtime/stream.js";
import { Tensor } from "../../../src/runtime/tensor.js";
import { guardsIntact, poisoned, sectionTimer } from "./guards.js";

const group = await init({ backend: "cuda", stagingBytes: 32 << 20 });
const c = group.collectives;
const { rank, worldSize: world, device } = group;
const stream = defaultStream(device);
const seed = await sharedSeed(group.store, rank);
const lap = sectionTimer(rank);
const ALGORITHMS: MatmulAllReduceAlgorithm[] = ["fused", "sequential", "nccl_cublaslt", "auto"];

type Layout = "nk" | "kn";
interface Combo {
  readonly dtype: "bf16" | "fp8e4m3";
  readonly layout: Layout;
}
const COMBOS: Combo[] = [
  { dtype: "bf16", layout: "nk" },
  { dtype: "bf16", layout: "kn" },
  { dtype: "fp8e4m3", layout: "nk" },
];
const scaleA = Tensor.fromHost([0.5], "f32");
const scaleB = Tensor.fromHost([1.5], "f32");
const scalesFor = (dtype: DType) => (dtype === "fp8e4m3" ? { scaleA, scaleB } : {});
const EPS = 1e-5;
/** A decoy's operands: the case's salt plus this (no case's own salt comes near). */
const DECOY = 100_000;

const operand = (dtype: DType, shape: number[], r: number, salt: number, low = -1, high = 1): Tensor =>
  Tensor.rand(shape, dtype, {
    seed,
    offset: BigInt(salt) * (1n << 36n) + BigInt(r) * (1n << 30n),
    low,
    high,
  });

/** Within bf16 rounding of `want`, for results computed in another order. */
function close(got: RawArray, want: RawArray, what: string): void {
  const g = decodeToF32("bf16", got);
  const w = decodeToF32("bf16", want);
  let num = 0;
  let den = 0;
  for (let i = 0; i < w.length; i++) {
    num += (g[i]! - w[i]!) ** 2;
    den += w[i]! ** 2;
  }
  const rel = Math.sqrt(num / Math.max(den, 1e-30));
  if (!(rel < 2 ** -6)) assert.fail(`${what}: relative difference ${rel} from the reference (seed ${seed})`);
}

interface Case {
  readonly what: string;
  readonly combo: Combo;
  readonly m: number;
  readonly n: number;
  readonly a: Tensor;
  readonly b: Tensor;
  /** This rank's operands of the same shape, other values. */
  readonly decoy: readonly [Tensor, Tensor];
  /** The rank-order sum of symmkit's partials, bf16. */
  readonly sum: RawArray;
}

function makeCase(combo: Combo, m: number, n: number, k: number, salt: number): Case {
  const { dtype, layout } = combo;
  const bShape = layout === "nk" ? [n, k] : [k, n];
  const partials: RawArray[] = [];
  let mine: [Tensor, Tensor] | undefined;
  for (let r = 0; r < world; r++) {
    const a = operand(dtype, [m, k], r, salt);
    const b = operand(dtype, bShape, r, salt + 1);
    const p = matmul(a, b, { layoutB: layout, ...scalesFor(dtype) });
    partials.push(p.toHost());
    p.dispose();
    if (r === rank) mine = [a, b];
    else for (const t of [a, b]) t.dispose();
  }
  const sum = rawArray("bf16", m * n);
  reduceInto("bf16", "sum", partials, 0, sum, 0, m * n);
  return {
    what: `matmulAllReduce ${dtype} B ${layout} ${m}x${n}x${k}`,
    combo,
    m,
    n,
    a: mine![0],
    b: mine![1],
    decoy: [operand(dtype, [m, k], rank, salt + DECOY), operand(dtype, bShape, rank, salt + 1 + DECOY)],
    sum,
  };
}

const disposeCase = (x: Case): void => [x.a, x.b, ...x.decoy].forEach((t) => t.dispose());

interface Norm {
  readonly weight: Tensor;
  readonly bias: Tensor;
  readonly residual: Tensor;
}

function norm(n: number, m: number, salt: number): Norm {
  return {
    weight: operand("bf16", [n], 0, salt, 0.5, 1.5),
    bias: operand("bf16", [n], 0, salt + 1, -0.5, 0.5),
    residual: operand("bf16", [m, n], 0, salt + 2),
  };
}

/** The host norm of a case's sum: output (bf16 or fp8) and residualOut. */
function normWant(x: Case, nm: Norm, outputScale?: number): [RawArray, RawArray] {
  const outDtype = outputScale === undefined ? "bf16" : "fp8e4m3";
  const out = rawArray(outDtype, x.m * x.n);
  const res = rawArray("bf16", x.m * x.n);
  rmsNormRows(
    {
      rows: x.m,
      hidden: x.n,
      dtype: "bf16",
      outDtype,
      outScaleInv: outputScale === undefined ? 0 : Math.fround(1 / outputScale),
      eps: EPS,
    },
    x.sum,
    { weight: nm.weight.toHost(), bias: nm.bias.toHost(), residual: nm.residual.toHost() },
    out,
    res,
  );
  return [out, res];
}

// Every combo and shape, every algorithm, with and without the norm.
let salt = 10;
for (const combo of COMBOS)
  for (const [m, n, k] of [
    [1, 256, 512],
    [7, 1040, 784],
    [128, 512, 1024],
    [300, 784, 512],
    [5, 2048, 4096],
    [33, 1040, 3072],
    [150, 1040, 1024], // decode tiles of 160 rows of A
    [180, 520, 2048], // decode tiles of 192 rows of A
    [200, 1040, 1024], // wide decode tiles: two consumers, a flag each
    [2, 16384, 256], // 256 decode tiles, more than SMs: a persistent grid exchanging tile after tile
  ] as [number, number, number][]) {
    const x = makeCase(combo, m, n, k, (salt += 3));
    const nm = norm(n, m, (salt += 3));
    const [wantOut, wantRes] = normWant(x, nm);
    const [wantFp8] = normWant(x, nm, 0.25);
    const decoyOut = Tensor.empty([m, n], "bf16");
    for (const algorithm of ALGORITHMS) {
      const opts = { algorithm, layoutB: combo.layout, ...scalesFor(combo.dtype) };
      const decoy = (): unknown => c.matmulAllReduce(x.decoy[0], x.decoy[1], { ...opts, out: decoyOut });
      const [whole, out] = poisoned("bf16", [m, n]);
      decoy();
      c.matmulAllReduce(x.a, x.b, { ...opts, out });
      const what = `${x.what} ${algorithm}`;
      if (algorithm === "nccl_cublaslt") close(out.toHost(), x.sum, what);
      else assertSameBits(out.toHost(), x.sum, what, seed);
      guardsIntact(whole, what);
      // With the norm: out the norm's output, residualOut the pre-norm sum.
      const [wholeN, outN] = poisoned("bf16", [m, n]);
      const [wholeR, resOut] = poisoned("bf16", [m, n]);
      decoy();
      c.matmulAllReduce(x.a, x.b, {
        ...opts,
        out: outN,
        rmsNorm: { weight: nm.weight, bias: nm.bias, residual: nm.residual, residualOut: resOut, eps: EPS },
      });
      if (algorithm === "nccl_cublaslt") close(outN.toHost(), wantOut, `${what} rmsNorm`);
      else {
        assertSameBits(outN.toHost(), wantOut, `${what} rmsNorm`, seed);
        assertSameBits(resOut.toHost(), wantRes, `${what} rmsNorm residualOut`, seed);
      }
      guardsIntact(wholeN, `${what} rmsNorm`);
      guardsIntact(wholeR, `${what} rmsNorm residualOut`);
      if (algorithm !== "nccl_cublaslt") {
        decoy();
        const fp8 = c.matmulAllReduce(x.a, x.b, {
          ...opts,
          rmsNorm: { weight: nm.weight, bias: nm.bias, residual: nm.residual, eps: EPS, outputScale: 0.25 },
        });
        assert.equal(fp8.dtype, "fp8e4m3", `${what} fp8 output dtype`);
        assertSameBits(fp8.toHost(), wantFp8, `${what} rmsNorm fp8`, seed);
        fp8.dispose();
      }
      for (const t of [whole, wholeN, wholeR]) t.dispose();
    }
    for (const t of [decoyOut, nm.weight, nm.bias, nm.residual]) t.dispose();
    disposeCase(x);
  }
if (rank === 0)
  console.log(
    "matmulAllReduce: fused and sequential bit for bit with the rank-order reference, with and without the norm, each after a decoy call; nccl_cublaslt within rounding",
  );
lap("every combo, shape and algorithm");

// A CUDA graph of every algorithm, replayed with the inputs changed in between (each has run on this
// stream before, as split-K needs).
{
  const [m, n, k] = [16, 512, 4096]; // 8 slices of K
  const a = Tensor.empty([m, k], "bf16");
  const b = Tensor.empty([n, k], "bf16");
  const outs = ALGORITHMS.map(() => Tensor.empty([m, n], "bf16"));
  const graph = Graph.capture(stream, () =>
    ALGORITHMS.forEach((algorithm, i) => c.matmulAllReduce(a, b, { algorithm, out: outs[i]!, stream })),
  );
  for (let replay = 0; replay < 5; replay++) {
    const x = makeCase({ dtype: "bf16", layout: "nk" }, m, n, k, 1000 + 7 * replay);
    a.copyFrom(x.a);
    b.copyFrom(x.b);
    graph.launch();
    stream.synchronize();
    ALGORITHMS.forEach((algorithm, i) => {
      const what = `graph replay ${replay} ${algorithm}`;
      if (algorithm === "nccl_cublaslt") close(outs[i]!.toHost(), x.sum, what);
      else assertSameBits(outs[i]!.toHost(), x.sum, what, seed);
    });
    disposeCase(x);
  }
  graph.dispose();
  if (rank === 0) console.log("graph replays with changed inputs: exact");
}
lap("graph replays");

// A straggler, then calls alternating shapes and algorithms.
if (rank === world - 1) await sleep(50);
for (let i = 0; i < 30; i++) {
  const x = makeCase(COMBOS[i % 3]!, [1, 5, 64][i % 3]!, 256, 512, 5000 + 5 * i);
  const algorithm = ALGORITHMS[Math.floor(i / 3) % ALGORITHMS.length]!;
  const out = c.matmulAllReduce(x.a, x.b, {
    algorithm,
    layoutB: x.combo.layout,
    ...scalesFor(x.combo.dtype),
  });
  if (algorithm === "nccl_cublaslt") close(out.toHost(), x.sum, `call ${i}`);
  else assertSameBits(out.toHost(), x.sum, `call ${i} ${algorithm}`, seed);
  out.dispose();
  disposeCase(x);
}
if (rank === 0) console.log("straggler and 30 alternating calls: exact");
lap("straggler, alternating calls");

// Bad input: typed errors, nothing written.
{
  const a = Tensor.zeros([4, 64], "bf16");
  const b = Tensor.zeros([256, 64], "bf16");
  const [whole, out] = poisoned("bf16", [4, 256]);
  const before = out.toHost();
  const weight = Tensor.zeros([256], "bf16");
  const shared = Tensor.zeros([4 * 256], "bf16");
  const isTyped = (e: unknown): boolean =>
    e instanceof InvalidArgumentError && e.code === "SYMMKIT_INVALID_ARGUMENT";
  const bad: [string, () => unknown][] = [
    ["k mismatch", () => c.matmulAllReduce(a, Tensor.zeros([256, 32], "bf16"), { out })],
    ["out shape", () => c.matmulAllReduce(a, b, { out: Tensor.zeros([4, 128], "bf16") })],
    ["out dtype", () => c.matmulAllReduce(a, b, { out: Tensor.zeros([4, 256], "f32") })],
    [
      "out overlaps a",
      () => c.matmulAllReduce(shared.slice(0, 256).view([4, 64]), b, { out: shared.view([4, 256]) }),
    ],
    ["algorithm", () => c.matmulAllReduce(a, b, { out, algorithm: "pipelined" as "sequential" })],
    ["fused eps", () => c.matmulAllReduce(a, b, { out, algorithm: "fused", rmsNorm: { weight, eps: -1 } })],
    ["eps", () => c.matmulAllReduce(a, b, { out, rmsNorm: { weight, eps: 0 } })],
    [
      "weight length",
      () => c.matmulAllReduce(a, b, { out, rmsNorm: { weight: Tensor.zeros([128], "bf16"), eps: EPS } }),
    ],
    [
      "n not a multiple of 16 bytes",
      () =>
        c.matmulAllReduce(a, Tensor.zeros([20, 64], "bf16"), {
          rmsNorm: { weight: Tensor.zeros([20], "bf16"), eps: EPS },
        }),
    ],
    [
      // NCCL's sum needs a home of the partial's dtype before the fp8 norm: refused before the GEMM.
      "nccl_cublaslt fp8 without residualOut",
      () =>
        c.matmulAllReduce(a, b, {
          algorithm: "nccl_cublaslt",
          rmsNorm: { weight, eps: EPS, outputScale: 0.25 },
        }),
    ],
    [
      "residualOut overlaps a",
      () =>
        c.matmulAllReduce(shared.slice(0, 256).view([4, 64]), b, {
          out,
          rmsNorm: { weight, eps: EPS, residualOut: shared.view([4, 256]) },
        }),
    ],
  ];
  // world x 4096 x 8192 x 2 bytes of receive buffer: more than the 32 MiB staging buffer from world 2.
  if (world > 1)
    bad.push([
      "fused beyond the staging buffer",
      () =>
        c.matmulAllReduce(Tensor.zeros([4096, 64], "bf16"), Tensor.zeros([8192, 64], "bf16"), {
          algorithm: "fused",
        }),
    ]);
  for (const [what, call] of bad) {
    assert.throws(call, isTyped, what);
    assertSameBits(out.toHost(), before, `${what}: nothing written`, seed);
  }
  guardsIntact(whole, "bad inputs");
}
lap("bad input");
c.barrier();
stream.synchronize();
console.log(`gpu gemm-ar ok rank ${rank}`);
await group.destroy();
