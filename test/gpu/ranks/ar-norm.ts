// One rank of the all-reduce + RMSNorm check (test/gpu/distributed.test.ts): allReduceRmsNorm on GPUs.
//   Every algorithm bit for bit equal to the host reference (src/ops/rms-norm.ts on the rank-order sum,
//   the same operations in the same order; on 2 ranks NCCL's sum is the same too), and the reference
//   within rounding of a float64 computation; bf16 and f16; rows 1, 7, 128, 4097; hidden 1024, 4096,
//   8192, 8200; with and without bias and residual; outputs poisoned inside guards; in place (output =
//   x, residualOut = residual); a symmetric x; an fp8 output with a scale; a CUDA graph replayed with
//   the inputs changed in between; a rank 50 ms late; 120 calls alternating sizes and algorithms; NaN and
//   Inf propagating row by row; bad input a typed error with nothing written. Seeded, the seed printed.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { assertSameBits, sharedSeed } from "../../support/agree.js";
import { init } from "../../../src/init.js";
import { InvalidArgumentError } from "../../../src/errors.js";
import { HostTensor } from "../../../src/cpu/host-tensor.js";
import { reduceInto } from "../../../src/ops/reduce.js";
import { checkAllReduceRmsNorm, type ArNormAlgorithm } from "../../../src/ops/ar-norm-checks.js";
import { roomFor } from "../../../src/ops/ar-norm.js";
import { rmsNormRows } from "../../../src/ops/rms-norm.js";
import { decodeToF32, rawArray, type DType, type RawArray } from "../../../src/runtime/dtype.js";
import { Graph } from "../../../src/runtime/graph.js";
import { defaultStream } from "../../../src/runtime/stream.js";
import { Tensor } from "../../../src/runtime/tensor.js";
import { guardsIntact, poisoned } from "./guards.js";

const STAGING = 128 << 20;
const group = await init({ backend: "cuda", stagingBytes: STAGING });
const c = group.collectives;
const { rank, worldSize: world, device } = group;
const stream = defaultStream(device);
const seed = await sharedSeed(group.store, rank);
const ALGORITHMS = ["lamport", "lamport_two_shot", "one_shot", "two_shot", "sequential", "nccl"] as const;
type Alg = (typeof ALGORITHMS)[number];
const SLOT = c.mailboxSlotBytes;

type NormDType = "bf16" | "f16";
interface Case {
  readonly dtype: NormDType;
  readonly rows: number;
  readonly hidden: number;
  readonly bias: boolean;
  readonly residual: boolean;
  readonly salt: number;
}
interface Inputs {
  /** Every rank's x, host side. */
  readonly xs: HostTensor[];
  readonly weight: HostTensor;
  readonly bias: HostTensor | undefined;
  readonly residual: HostTensor | undefined;
  /** The reference's output and residualOut. */
  readonly want: RawArray;
  readonly wantResidual: RawArray;
}

const host = (shape: number[], dtype: DType, offset: number, low = -2, high = 2): HostTensor =>
  HostTensor.rand(shape, dtype, { seed, offset, low, high });

/** The reference of case k: every rank's x, summed in rank order, then the host norm. */
function reference(k: Case, xs?: HostTensor[], outDtype: DType = k.dtype, outputScale?: number): Inputs {
  const { dtype, rows, hidden } = k;
  const shape = [rows, hidden];
  xs ??= Array.from({ length: world }, (_, r) => host(shape, dtype, 1000 * k.salt + r));
  const weight = host([hidden], dtype, 1000 * k.salt + 100, 0.5, 1.5);
  const bias = k.bias ? host([hidden], dtype, 1000 * k.salt + 101, -0.5, 0.5) : undefined;
  const residual = k.residual ? host(shape, dtype, 1000 * k.salt + 102) : undefined;
  const p = checkAllReduceRmsNorm("reference", xs[0]!, {
    weight,
    eps: 1e-5,
    output: HostTensor.empty(shape, outDtype),
    outputScale,
  });
  const sum = rawArray(dtype, rows * hidden);
  reduceInto(
    dtype,
    "sum",
    xs.map((x) => x.raw),
    0,
    sum,
    0,
    rows * hidden,
  );
  const want = rawArray(outDtype, rows * hidden);
  const wantResidual = rawArray(dtype, rows * hidden);
  rmsNormRows(p, sum, { weight: weight.raw, bias: bias?.raw, residual: residual?.raw }, want, wantResidual);
  return { xs, weight, bias, residual, want, wantResidual };
}

/** The reference against float64 arithmetic: within two roundings of the dtype, relative to each row's
 * largest |y| (the norm's f32 rounding is far below the dtype's). */
function checkFloat64(k: Case, inp: Inputs): void {
  const { rows, hidden, dtype } = k;
  const xs = inp.xs.map((x) => decodeToF32(dtype, x.raw));
  const w = decodeToF32(dtype, inp.weight.raw);
  const b = inp.bias && decodeToF32(dtype, inp.bias.raw);
  const res = inp.residual && decodeToF32(dtype, inp.residual.raw);
  const got = decodeToF32(dtype, inp.want);
  const ulp = dtype === "bf16" ? 2 ** -8 : 2 ** -11;
  for (let r = 0; r < rows; r++) {
    const h = new Float64Array(hidden);
    let ss = 0;
    for (let j = 0; j < hidden; j++) {
      const i = r * hidden + j;
      let v = 0;
      for (const x of xs) v += x[i]!;
      h[j] = v + (b ? b[j]! : 0) + (res ? res[i]! : 0);
      ss += h[j]! * h[j]!;
    }
    const rstd = 1 / Math.sqrt(ss / hidden + 1e-5);
    let max = 0;
    const y = h.map((v, j) => v * rstd * w[j]!);
    y.forEach((v) => (max = Math.max(max, Math.abs(v))));
    // a, h and y are each rounded to the dtype once: three roundings of values up to max.
    y.forEach((v, j) => {
      const e = Math.abs(got[r * hidden + j]! - v);
      if (e > 4 * ulp * max)
        assert.fail(
          `float64 check ${JSON.stringify(k)} row ${r} col ${j}: ${got[r * hidden + j]} vs ${v} (seed ${seed})`,
        );
    });
  }
}

const upload = (t: HostTensor | undefined): Tensor | undefined =>
  t && Tensor.fromHost(t.raw, t.dtype, { shape: [...t.shape] });

/** Whether `a` can run case k here (else the call must be a typed error). */
const runs = (a: Alg, k: Case, symmetric = false): boolean =>
  roomFor(a, k.rows * k.hidden * 2, k.rows, world, SLOT, STAGING, symmetric) === undefined;

function isInvalid(e: unknown): boolean {
  return e instanceof InvalidArgumentError && e.code === "SYMMKIT_INVALID_ARGUMENT";
}

// Every algorithm, every shape: the reference's bits.
{
  let cases = 0;
  let refused = 0;
  let salt = 1;
  for (const dtype of ["bf16", "f16"] as const)
    for (const [rows, hiddens] of [
      [1, [1024, 4096, 8192, 8200]],
      [7, [1024, 4096, 8192, 8200]],
      [128, [1024, 4096, 8192, 8200]],
      [4097, [1024, 8200]],
    ] as const)
      for (const hidden of hiddens)
        for (const [bias, residual] of [
          [true, true],
          [false, false],
          [rows === 7, rows !== 7],
        ] as const) {
          const k: Case = { dtype, rows, hidden, bias, residual, salt: salt++ };
          const inp = reference(k);
          if (rows <= 128) checkFloat64(k, inp);
          const x = upload(inp.xs[rank])!;
          const weight = upload(inp.weight)!;
          const biasT = upload(inp.bias);
          const residualT = upload(inp.residual);
          const [oWhole, output] = poisoned(dtype, [rows, hidden]);
          const [rWhole, residualOut] = poisoned(dtype, [rows, hidden]);
          for (const algorithm of [...ALGORITHMS, "auto"] as const) {
            const what = `${algorithm} ${JSON.stringify(k)}`;
            oWhole.fill(NaN, stream);
            rWhole.fill(NaN, stream);
            const call = () =>
              c.allReduceRmsNorm(x, {
                weight,
                bias: biasT,
                residual: residualT,
                eps: 1e-5,
                output,
                residualOut,
                algorithm,
              });
            if (algorithm !== "auto" && !runs(algorithm, k)) {
              assert.throws(call, isInvalid, what);
              refused++;
              continue;
            }
            call();
            group.synchronize(stream);
            assertSameBits(output.toHost(), inp.want, `${what}: output`, seed);
            assertSameBits(residualOut.toHost(), inp.wantResidual, `${what}: residualOut`, seed);
            guardsIntact(oWhole, `${what}: output`);
            guardsIntact(rWhole, `${what}: residualOut`);
            cases++;
          }
          for (const t of [x, weight, biasT, residualT, oWhole, rWhole]) t?.dispose();
        }
  console.log(
    `every algorithm and shape bit for bit with the reference: ${cases} calls, ${refused} refused for want of room`,
  );
}

// In place, a symmetric x, and an fp8 output, every algorithm.
{
  const k: Case = { dtype: "bf16", rows: 7, hidden: 4096, bias: true, residual: true, salt: 500 };
  const inp = reference(k);
  const weight = upload(inp.weight)!;
  const bias = upload(inp.bias)!;
  for (const algorithm of ALGORITHMS) {
    const x = upload(inp.xs[rank])!;
    const residual = upload(inp.residual)!;
    c.allReduceRmsNorm(x, { weight, bias, residual, eps: 1e-5, output: x, residualOut: residual, algorithm });
    group.synchronize(stream);
    assertSameBits(x.toHost(), inp.want, `${algorithm} in place: output`, seed);
    assertSameBits(residual.toHost(), inp.wantResidual, `${algorithm} in place: residualOut`, seed);
    x.dispose();
    residual.dispose();
  }
  const sym = await group.symmetric.empty([k.rows, k.hidden], "bf16");
  sym.tensor.copyFrom(upload(inp.xs[rank])!, stream);
  const residual = upload(inp.residual)!;
  for (const algorithm of ALGORITHMS) {
    const out = Tensor.empty([k.rows, k.hidden], "bf16");
    const rOut = Tensor.empty([k.rows, k.hidden], "bf16");
    c.allReduceRmsNorm(sym, { weight, bias, residual, eps: 1e-5, output: out, residualOut: rOut, algorithm });
    group.synchronize(stream);
    assertSameBits(out.toHost(), inp.want, `${algorithm} symmetric x: output`, seed);
    assertSameBits(rOut.toHost(), inp.wantResidual, `${algorithm} symmetric x: residualOut`, seed);
    out.dispose();
    rOut.dispose();
  }
  await sym.dispose();
  const fp8 = reference({ ...k, salt: 501 }, undefined, "fp8e4m3", 0.25);
  const x = upload(fp8.xs[rank])!;
  const w8 = upload(fp8.weight)!;
  const b8 = upload(fp8.bias)!;
  const r8 = upload(fp8.residual)!;
  for (const algorithm of ALGORITHMS) {
    const [whole, out] = poisoned("fp8e4m3", [k.rows, k.hidden]);
    const rOut = Tensor.empty([k.rows, k.hidden], "bf16");
    c.allReduceRmsNorm(x, {
      weight: w8,
      bias: b8,
      residual: r8,
      eps: 1e-5,
      output: out,
      outputScale: 0.25,
      residualOut: rOut,
      algorithm,
    });
    group.synchronize(stream);
    assertSameBits(out.toHost(), fp8.want, `${algorithm} fp8 output`, seed);
    assertSameBits(rOut.toHost(), fp8.wantResidual, `${algorithm} fp8 output: residualOut`, seed);
    guardsIntact(whole, `${algorithm} fp8 output`);
    whole.dispose();
    rOut.dispose();
  }
  for (const t of [weight, bias, residual, x, w8, b8, r8]) t.dispose();
  console.log("in place, a symmetric x and an fp8 output (scale 0.25): every algorithm bit for bit");
}

// A CUDA graph of every algorithm, replayed with x and the residual changed in between.
{
  const base: Case = { dtype: "bf16", rows: 128, hidden: 8192, bias: true, residual: true, salt: 600 };
  const sets = [0, 1, 2].map((i) => reference({ ...base, salt: 600 + i }));
  // One weight and bias for all sets (the graph keeps pointing at them): set 0's.
  const fixed = sets[0]!;
  const x = upload(sets[0]!.xs[rank])!;
  const weight = upload(fixed.weight)!;
  const bias = upload(fixed.bias)!;
  const residual = Tensor.empty([base.rows, base.hidden], "bf16");
  const outs = ALGORITHMS.map(
    () =>
      [
        Tensor.empty([base.rows, base.hidden], "bf16"),
        Tensor.empty([base.rows, base.hidden], "bf16"),
      ] as const,
  );
  const residualSets = sets.map((s) => upload(s.residual)!);
  const xSets = sets.map((s) => upload(s.xs[rank])!);
  const graph = Graph.capture(stream, () => {
    ALGORITHMS.forEach((algorithm, j) =>
      c.allReduceRmsNorm(x, {
        weight,
        bias,
        residual,
        eps: 1e-5,
        output: outs[j]![0],
        residualOut: outs[j]![1],
        algorithm,
        stream,
      }),
    );
  });
  for (let replay = 0; replay < 6; replay++) {
    const i = replay % 3;
    x.copyFrom(xSets[i]!, stream);
    residual.copyFrom(residualSets[i]!, stream);
    graph.launch(stream);
    group.synchronize(stream);
    // The reference with this set's x and residual, and the fixed weight and bias.
    const r = sets[i]!.residual!;
    const sum = rawArray("bf16", base.rows * base.hidden);
    reduceInto(
      "bf16",
      "sum",
      sets[i]!.xs.map((t) => t.raw),
      0,
      sum,
      0,
      sum.length,
    );
    const p = checkAllReduceRmsNorm("graph", sets[i]!.xs[0]!, { weight: fixed.weight, eps: 1e-5 });
    const wOut = rawArray("bf16", sum.length);
    const wRes = rawArray("bf16", sum.length);
    rmsNormRows(p, sum, { weight: fixed.weight.raw, bias: fixed.bias!.raw, residual: r.raw }, wOut, wRes);
    ALGORITHMS.forEach((algorithm, j) => {
      assertSameBits(outs[j]![0].toHost(), wOut, `graph replay ${replay} ${algorithm}`, seed);
      assertSameBits(outs[j]![1].toHost(), wRes, `graph replay ${replay} ${algorithm}: residualOut`, seed);
    });
  }
  graph.dispose();
  for (const t of [x, weight, bias, residual, ...outs.flat(), ...residualSets, ...xSets]) t.dispose();
  console.log(
    "a CUDA graph of every algorithm, replayed 6 times with x and the residual changed: bit for bit",
  );
}

// A straggler, then 120 calls alternating sizes and algorithms.
{
  const ks: Case[] = [
    { dtype: "bf16", rows: 1, hidden: 8192, bias: false, residual: true, salt: 700 },
    { dtype: "bf16", rows: 33, hidden: 4096, bias: true, residual: true, salt: 701 },
    { dtype: "f16", rows: 300, hidden: 1032, bias: true, residual: false, salt: 702 },
  ];
  const data = ks.map((k) => {
    const inp = reference(k);
    return {
      k,
      inp,
      x: upload(inp.xs[rank])!,
      weight: upload(inp.weight)!,
      bias: upload(inp.bias),
      residual: upload(inp.residual),
    };
  });
  const run = (d: (typeof data)[number], algorithm: Alg | "auto") => {
    const r = c.allReduceRmsNorm(d.x, {
      weight: d.weight,
      bias: d.bias,
      residual: d.residual,
      eps: 1e-5,
      residualOut: Tensor.empty([d.k.rows, d.k.hidden], d.k.dtype),
      algorithm,
    });
    return r;
  };
  for (const algorithm of ALGORITHMS) {
    if (rank === world - 1) await sleep(50);
    const r = run(data[1]!, algorithm);
    group.synchronize(stream);
    assertSameBits(r.output.toHost(), data[1]!.inp.want, `straggler ${algorithm}`, seed);
    r.output.dispose();
    r.residualOut!.dispose();
  }
  let s = Number(seed % 1000n);
  for (let i = 0; i < 120; i++) {
    s = (s * 1103515245 + 12345) % 2147483648;
    const d = data[s % 3]!;
    const algorithm = ([...ALGORITHMS, "auto"] as const)[(s >> 4) % 7]!;
    if (rank === world - 1 && i % 17 === 0) await sleep(5);
    const r = run(d, algorithm);
    group.synchronize(stream);
    assertSameBits(r.output.toHost(), d.inp.want, `call ${i}: ${algorithm} ${JSON.stringify(d.k)}`, seed);
    assertSameBits(r.residualOut!.toHost(), d.inp.wantResidual, `call ${i}: ${algorithm} residualOut`, seed);
    r.output.dispose();
    r.residualOut!.dispose();
  }
  for (const d of data) for (const t of [d.x, d.weight, d.bias, d.residual]) t?.dispose();
  console.log("a rank 50 ms late, then 120 calls alternating sizes and algorithms: bit for bit");
}

// NaN and Inf stay in their rows.
{
  const k: Case = { dtype: "bf16", rows: 8, hidden: 1024, bias: true, residual: true, salt: 800 };
  const xs = Array.from({ length: world }, (_, r) => host([k.rows, k.hidden], "bf16", 800_000 + r));
  const nan = Number(HostTensor.fromHost([NaN], "bf16").raw[0]);
  const inf = Number(HostTensor.fromHost([Infinity], "bf16").raw[0]);
  (xs[0]!.raw as Uint16Array)[3 * k.hidden + 5] = nan;
  (xs[world - 1]!.raw as Uint16Array)[5 * k.hidden + 9] = inf;
  const inp = reference(k, xs);
  const x = upload(xs[rank])!;
  const weight = upload(inp.weight)!;
  const bias = upload(inp.bias)!;
  const residual = upload(inp.residual)!;
  for (const algorithm of ALGORITHMS) {
    const r = c.allReduceRmsNorm(x, { weight, bias, residual, eps: 1e-5, algorithm });
    group.synchronize(stream);
    const got = decodeToF32("bf16", r.output.toHost());
    const want = decodeToF32("bf16", inp.want);
    for (let i = 0; i < got.length; i++) {
      // The reference's NaNs may carry other payloads; every other value bit for bit.
      const same = Number.isNaN(want[i]!) ? Number.isNaN(got[i]!) : Object.is(got[i], want[i]);
      if (!same)
        assert.fail(`${algorithm} NaN/Inf: element ${i} is ${got[i]}, expected ${want[i]} (seed ${seed})`);
    }
    // The NaN's row is NaN throughout; the Inf's row is NaN where the Inf was (Inf x 0) and 0 elsewhere.
    assert.ok(got.subarray(3 * k.hidden, 4 * k.hidden).every(Number.isNaN), `${algorithm}: the NaN's row`);
    assert.ok(Number.isNaN(got[5 * k.hidden + 9]!), `${algorithm}: the Inf`);
    r.output.dispose();
  }
  for (const t of [x, weight, bias, residual]) t.dispose();
  console.log(
    "NaN and Inf in x: as the reference (their rows NaN or zero), every other row exact, every algorithm",
  );
}

// Bad input: a typed error, nothing written.
{
  const x = Tensor.rand([7, 1024], "bf16", { seed, offset: 900 });
  const weight = Tensor.rand([1024], "bf16", { seed, offset: 901 });
  const [oWhole, output] = poisoned("bf16", [7, 1024]);
  const [rWhole, residualOut] = poisoned("bf16", [7, 1024]);
  const big = Tensor.empty([1100, 8192], "bf16");
  const bigW = Tensor.empty([8192], "bf16");
  const base = { weight, output, residualOut, eps: 1e-5 };
  const before = [oWhole.toHost(), rWhole.toHost()];
  const bad: [string, () => unknown][] = [
    ["eps 0", () => c.allReduceRmsNorm(x, { ...base, eps: 0 })],
    ["eps < 0", () => c.allReduceRmsNorm(x, { ...base, eps: -1 })],
    [
      "weight of the wrong length",
      () => c.allReduceRmsNorm(x, { ...base, weight: Tensor.empty([1032], "bf16") }),
    ],
    [
      "weight of another dtype",
      () => c.allReduceRmsNorm(x, { ...base, weight: Tensor.empty([1024], "f16") }),
    ],
    [
      "residual of another shape",
      () => c.allReduceRmsNorm(x, { ...base, residual: Tensor.empty([8, 1024], "bf16") }),
    ],
    [
      "output of another shape",
      () => c.allReduceRmsNorm(x, { ...base, output: Tensor.empty([7, 1032], "bf16") }),
    ],
    [
      "hidden not a multiple of 8",
      () =>
        c.allReduceRmsNorm(Tensor.empty([7, 1020], "bf16"), {
          ...base,
          weight: Tensor.empty([1020], "bf16"),
        }),
    ],
    ["x of f32", () => c.allReduceRmsNorm(Tensor.empty([7, 1024], "f32"), base)],
    [
      "fp8 output without a scale",
      () => c.allReduceRmsNorm(x, { ...base, output: Tensor.empty([7, 1024], "fp8e4m3") }),
    ],
    ["output overlapping residualOut", () => c.allReduceRmsNorm(x, { ...base, output: residualOut })],
    ["unknown algorithm", () => c.allReduceRmsNorm(x, { ...base, algorithm: "ring" as ArNormAlgorithm })],
    [
      "lamport past the mailbox slot",
      () => c.allReduceRmsNorm(big, { weight: bigW, eps: 1e-5, output: big, algorithm: "lamport" }),
    ],
  ];
  for (const [what, f] of bad) {
    assert.throws(f, isInvalid, what);
    group.synchronize(stream);
    assertSameBits(oWhole.toHost(), before[0]!, `${what}: output was written`, seed);
    assertSameBits(rWhole.toHost(), before[1]!, `${what}: residualOut was written`, seed);
  }
  // The group is still in step.
  const r = c.allReduceRmsNorm(x, { weight, eps: 1e-5 });
  group.synchronize(stream);
  r.output.dispose();
  for (const t of [x, weight, oWhole, rWhole, big, bigW]) t.dispose();
  console.log(`bad input: ${bad.length} cases, typed errors, nothing written`);
}

await group.destroy();
console.log("gpu ar-norm ok");
