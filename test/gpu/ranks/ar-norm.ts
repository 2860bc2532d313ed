// One rank of the all-reduce + RMSNorm check (test/gpu/distributed.test.ts): allReduceRmsNorm on GPUs.
//   Every symmkit algorithm and auto bit for bit equal to the host reference (src/ops/norm/rms-norm.ts on the
//   rank-order sum, the same operations in the same order), and the reference within rounding of a
//   float64 computation; nccl, which sums in NCCL's order, within its rounding of the reference
//   (ncclNormTolerance: world ulps of relative Frobenius difference; on 2 ranks its one addition is the
//   rank-order sum, so bit for bit there). Every algorithm against bf16 and f16; rows 1, 7, 128, 1025,
//   4097 (4097 x 4096 is 32 MiB: sequential's all-reduce past the shipped tables' 16 MiB rule); hidden
//   1024, 4096, 8192 (the kernels' two-slot classes) and 8200 (four slots, a tail); bias and residual in
//   each of their four combinations across the shapes; outputs poisoned inside guards; in place (output
//   = x, residualOut = residual); a symmetric x; an fp8 output with a scale; a CUDA graph replayed with
//   the inputs changed in between; a rank 50 ms late; 48 calls alternating sizes and algorithms; NaN
//   and Inf propagating row by row; a staging buffer smaller than x (sequential and auto run the
//   all-reduce in pieces, as do allReduce and reduceScatter, eager and in a graph); bad input a typed
//   error with nothing written. Inputs are drawn on the GPU (the host's Philox is far slower) and copied
//   back for the reference. Seeded, the seed printed; each section's seconds printed.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { assertSameBits, sharedSeed } from "../../support/agree.js";
import { init } from "../../../src/init.js";
import { InvalidArgumentError } from "../../../src/errors.js";
import { reduceInto } from "../../../src/ops/coll/reduce.js";
import {
  AR_NORM_RANK_ORDER,
  checkAllReduceRmsNorm,
  ncclNormTolerance,
  type ArNormAlgorithm,
} from "../../../src/ops/norm/checks.js";
import { roomFor } from "../../../src/ops/norm/ar-norm.js";
import { GpuCollectives } from "../../../src/ops/gpu-collectives.js";
import { rmsNormRows } from "../../../src/ops/norm/rms-norm.js";
import { decodeToF32, encode, rawArray, type DType, type RawArray } from "../../../src/runtime/dtype.js";
import { Graph } from "../../../src/runtime/graph.js";
import { defaultStream } from "../../../src/runtime/stream.js";
import { Tensor } from "../../../src/runtime/tensor.js";
import { guardsIntact, poisoned, sectionTimer } from "./guards.js";

const STAGING = 128 << 20;
const group = await init({ backend: "cuda", stagingBytes: STAGING });
const c = group.collectives;
const { rank, worldSize: world } = group;
const stream = defaultStream(group.device);
const seed = await sharedSeed(group.store, rank);
const lap = sectionTimer(rank);
const ALGORITHMS = ["lamport", "lamport_two_shot", "one_shot", "two_shot", "sequential", "nccl"] as const;
type Alg = (typeof ALGORITHMS)[number] | "auto";
const SLOT = c.mailboxSlotBytes;
const EPS = 1e-5;

type NormDType = "bf16" | "f16";
interface Case {
  readonly dtype: NormDType;
  readonly rows: number;
  readonly hidden: number;
  readonly bias: boolean;
  readonly residual: boolean;
  readonly salt: number;
}
/** A case's inputs (this rank's on its GPU, every rank's on the host) and the reference's results. */
interface Inputs {
  /** Every rank's x, host side, in rank order. */
  readonly xs: RawArray[];
  readonly weight: RawArray;
  readonly bias: RawArray | undefined;
  readonly residual: RawArray | undefined;
  /** The rank-order sum of the xs, rounded once to the dtype. */
  readonly sum: RawArray;
  /** The reference's output and residualOut. */
  readonly want: RawArray;
  readonly wantResidual: RawArray;
  /** On this GPU: this rank's x, the weight, bias and residual. */
  readonly x: Tensor;
  readonly dWeight: Tensor;
  readonly dBias: Tensor | undefined;
  readonly dResidual: Tensor | undefined;
  dispose(): void;
}

/** Uniform values drawn on the GPU and copied back: the bits the host's rand would give. */
function draw(shape: number[], dtype: DType, offset: number, low = -2, high = 2): RawArray {
  const t = Tensor.rand(shape, dtype, { seed, offset, low, high, stream });
  const raw = t.toHost({ stream });
  t.dispose();
  return raw;
}
const upload = (raw: RawArray, dtype: DType, shape: number[]): Tensor =>
  Tensor.fromHost(raw, dtype, { shape, stream });

/**
 * Case k's inputs and reference: every rank's x (after `edit`, which may change them), summed in rank
 * order, then the host norm, into an output of `outDtype` (fp8e4m3 with `outputScale`).
 */
function reference(
  k: Case,
  o: { edit?: (xs: RawArray[]) => void; outDtype?: DType; outputScale?: number } = {},
): Inputs {
  const { dtype, rows, hidden } = k;
  const shape = [rows, hidden];
  const xs = Array.from({ length: world }, (_, r) => draw(shape, dtype, 1000 * k.salt + r));
  o.edit?.(xs);
  const weight = draw([hidden], dtype, 1000 * k.salt + 100, 0.5, 1.5);
  const bias = k.bias ? draw([hidden], dtype, 1000 * k.salt + 101, -0.5, 0.5) : undefined;
  const residual = k.residual ? draw(shape, dtype, 1000 * k.salt + 102) : undefined;
  const outDtype = o.outDtype ?? dtype;
  const n = rows * hidden;
  const p = checkAllReduceRmsNorm(
    "reference",
    { shape, dtype, numel: n },
    {
      weight: { shape: [hidden], dtype, numel: hidden },
      eps: EPS,
      output: { shape, dtype: outDtype, numel: n },
      outputScale: o.outputScale,
    },
  );
  const sum = rawArray(dtype, n);
  reduceInto(dtype, "sum", xs, 0, sum, 0, n);
  const want = rawArray(outDtype, n);
  const wantResidual = rawArray(dtype, n);
  rmsNormRows(p, sum, { weight, bias, residual }, want, wantResidual);
  const device = {
    x: upload(xs[rank]!, dtype, shape),
    dWeight: upload(weight, dtype, [hidden]),
    dBias: bias && upload(bias, dtype, [hidden]),
    dResidual: residual && upload(residual, dtype, shape),
  };
  return {
    xs,
    weight,
    bias,
    residual,
    sum,
    want,
    wantResidual,
    ...device,
    dispose: () => Object.values(device).forEach((t) => t?.dispose()),
  };
}

/** The reference against float64 arithmetic: within two roundings of the dtype, relative to each row's
 * largest |y| (the norm's f32 rounding is far below the dtype's). */
function checkFloat64(k: Case, inp: Inputs): void {
  const { rows, hidden, dtype } = k;
  const xs = inp.xs.map((x) => decodeToF32(dtype, x));
  const w = decodeToF32(dtype, inp.weight);
  const b = inp.bias && decodeToF32(dtype, inp.bias);
  const res = inp.residual && decodeToF32(dtype, inp.residual);
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
    const rstd = 1 / Math.sqrt(ss / hidden + EPS);
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

/** Whether `algorithm` promises the reference's bits here: every symmkit algorithm and auto; nccl on 2
 * ranks, where its one addition is the rank-order sum. */
const exact = (algorithm: Alg): boolean =>
  algorithm === "auto" || AR_NORM_RANK_ORDER[algorithm] || world === 2;

/**
 * `got` (of `dtype`) against the reference `want`: bit for bit for an exact algorithm; else within NCCL's
 * rounding (ncclNormTolerance) as a relative Frobenius difference over the finite elements, with NaN and
 * infinities where the reference has them.
 */
function expect(algorithm: Alg, got: RawArray, want: RawArray, dtype: DType, what: string): void {
  if (exact(algorithm)) return assertSameBits(got, want, what, seed);
  assert.equal(got.length, want.length, `${what}: length`);
  const g = decodeToF32(dtype, got);
  const w = decodeToF32(dtype, want);
  let num = 0;
  let den = 0;
  for (let i = 0; i < w.length; i++) {
    if (!Number.isFinite(w[i]!)) {
      const same = Number.isNaN(w[i]!) ? Number.isNaN(g[i]!) : g[i] === w[i];
      if (!same) assert.fail(`${what}: element ${i} is ${g[i]}, expected ${w[i]} (seed ${seed})`);
      continue;
    }
    num += (g[i]! - w[i]!) ** 2;
    den += w[i]! ** 2;
  }
  const rel = den === 0 ? Math.sqrt(num) : Math.sqrt(num / den);
  const tol = ncclNormTolerance(dtype, world);
  if (!(rel <= tol))
    assert.fail(
      `${what}: ${rel} relative Frobenius difference from the reference, more than NCCL's rounding allows (${tol}) (seed ${seed})`,
    );
}

/** Whether `a` can run case k here (else the call must be a typed error). */
const runs = (a: Alg, k: Case, symmetric = false): boolean =>
  a === "auto" || roomFor(a, k.rows * k.hidden * 2, k.rows, world, SLOT, STAGING, symmetric) === undefined;

function isInvalid(e: unknown): boolean {
  return e instanceof InvalidArgumentError && e.code === "SYMMKIT_INVALID_ARGUMENT";
}

/** Bias and residual, in the four combinations; each shape takes one, rotated across shapes. */
const OPTIONS = [
  [true, true],
  [false, false],
  [true, false],
  [false, true],
] as const;

// Every algorithm, every dtype, hidden class and row count: the reference's bits (nccl within rounding).
{
  const shapes: [NormDType, number, number][] = [];
  for (const dtype of ["bf16", "f16"] as const)
    for (const rows of [1, 7, 128])
      for (const hidden of [1024, 4096, 8192, 8200]) shapes.push([dtype, rows, hidden]);
  // More rows than SMs, past the mailbox (lamport refused), and 32 MiB where the shipped tables' all-reduce
  // rules once named NCCL: sequential's all-reduce is auto's, in rank order.
  shapes.push(["bf16", 4097, 4096], ["f16", 4097, 1024], ["f16", 1025, 8200]);
  let cases = 0;
  let refused = 0;
  for (const [i, [dtype, rows, hidden]] of shapes.entries()) {
    const [bias, residual] = OPTIONS[(i + Math.floor(i / 4)) % 4]!;
    const k: Case = { dtype, rows, hidden, bias, residual, salt: i + 1 };
    const inp = reference(k);
    if (rows <= 128) checkFloat64(k, inp);
    const [oWhole, output] = poisoned(dtype, [rows, hidden]);
    const [rWhole, residualOut] = poisoned(dtype, [rows, hidden]);
    for (const algorithm of [...ALGORITHMS, "auto"] as const) {
      const what = `${algorithm} ${JSON.stringify(k)}`;
      oWhole.fill(NaN, stream);
      rWhole.fill(NaN, stream);
      const call = () =>
        c.allReduceRmsNorm(inp.x, {
          weight: inp.dWeight,
          bias: inp.dBias,
          residual: inp.dResidual,
          eps: EPS,
          output,
          residualOut,
          algorithm,
        });
      if (!runs(algorithm, k)) {
        assert.throws(call, isInvalid, what);
        refused++;
        continue;
      }
      call();
      group.synchronize(stream);
      expect(algorithm, output.toHost(), inp.want, dtype, `${what}: output`);
      expect(algorithm, residualOut.toHost(), inp.wantResidual, dtype, `${what}: residualOut`);
      guardsIntact(oWhole, `${what}: output`);
      guardsIntact(rWhole, `${what}: residualOut`);
      cases++;
    }
    for (const t of [oWhole, rWhole]) t.dispose();
    inp.dispose();
  }
  console.log(
    `every algorithm, ${shapes.length} shapes: symmkit's bit for bit with the reference, nccl within rounding; ${cases} calls, ${refused} refused for want of room`,
  );
  lap("every algorithm and shape");
}

// In place, a symmetric x, and an fp8 output, every algorithm.
{
  const k: Case = { dtype: "bf16", rows: 7, hidden: 4096, bias: true, residual: true, salt: 500 };
  const inp = reference(k);
  const [weight, bias] = [inp.dWeight, inp.dBias!];
  for (const algorithm of ALGORITHMS) {
    const x = upload(inp.xs[rank]!, "bf16", [k.rows, k.hidden]);
    const residual = upload(inp.residual!, "bf16", [k.rows, k.hidden]);
    c.allReduceRmsNorm(x, { weight, bias, residual, eps: EPS, output: x, residualOut: residual, algorithm });
    group.synchronize(stream);
    expect(algorithm, x.toHost(), inp.want, "bf16", `${algorithm} in place: output`);
    expect(algorithm, residual.toHost(), inp.wantResidual, "bf16", `${algorithm} in place: residualOut`);
    x.dispose();
    residual.dispose();
  }
  const sym = await group.symmetric.empty([k.rows, k.hidden], "bf16");
  sym.tensor.copyFrom(inp.x, stream);
  for (const algorithm of ALGORITHMS) {
    const out = Tensor.empty([k.rows, k.hidden], "bf16");
    const rOut = Tensor.empty([k.rows, k.hidden], "bf16");
    const residual = inp.dResidual;
    c.allReduceRmsNorm(sym, { weight, bias, residual, eps: EPS, output: out, residualOut: rOut, algorithm });
    group.synchronize(stream);
    expect(algorithm, out.toHost(), inp.want, "bf16", `${algorithm} symmetric x: output`);
    expect(algorithm, rOut.toHost(), inp.wantResidual, "bf16", `${algorithm} symmetric x: residualOut`);
    out.dispose();
    rOut.dispose();
  }
  await sym.dispose();
  inp.dispose();
  const fp8 = reference({ ...k, salt: 501 }, { outDtype: "fp8e4m3", outputScale: 0.25 });
  for (const algorithm of ALGORITHMS) {
    const [whole, out] = poisoned("fp8e4m3", [k.rows, k.hidden]);
    const rOut = Tensor.empty([k.rows, k.hidden], "bf16");
    c.allReduceRmsNorm(fp8.x, {
      weight: fp8.dWeight,
      bias: fp8.dBias,
      residual: fp8.dResidual,
      eps: EPS,
      output: out,
      outputScale: 0.25,
      residualOut: rOut,
      algorithm,
    });
    group.synchronize(stream);
    expect(algorithm, out.toHost(), fp8.want, "fp8e4m3", `${algorithm} fp8 output`);
    expect(algorithm, rOut.toHost(), fp8.wantResidual, "bf16", `${algorithm} fp8 output: residualOut`);
    guardsIntact(whole, `${algorithm} fp8 output`);
    whole.dispose();
    rOut.dispose();
  }
  fp8.dispose();
  console.log("in place, a symmetric x and an fp8 output (scale 0.25): every algorithm as the reference");
  lap("in place, symmetric x, fp8 output");
}

// A CUDA graph of every algorithm and auto, replayed with x and the residual changed in between.
{
  const base: Case = { dtype: "bf16", rows: 128, hidden: 8192, bias: true, residual: true, salt: 600 };
  const shape = [base.rows, base.hidden];
  const sets = [0, 1, 2].map((i) => reference({ ...base, salt: 600 + i }));
  // One weight and bias for all sets (the graph keeps pointing at them): set 0's. The reference of each
  // set with them: its x and residual, set 0's weight and bias.
  const fixed = sets[0]!;
  const p = checkAllReduceRmsNorm("graph", fixed.x, { weight: fixed.dWeight, eps: EPS });
  const wants = sets.map((s) => {
    const out = rawArray("bf16", s.sum.length);
    const res = rawArray("bf16", s.sum.length);
    rmsNormRows(p, s.sum, { weight: fixed.weight, bias: fixed.bias, residual: s.residual }, out, res);
    return [out, res] as const;
  });
  const x = Tensor.empty(shape, "bf16");
  const residual = Tensor.empty(shape, "bf16");
  const algorithms = [...ALGORITHMS, "auto"] as const;
  const outs = algorithms.map(() => [Tensor.empty(shape, "bf16"), Tensor.empty(shape, "bf16")] as const);
  const graph = Graph.capture(stream, () => {
    algorithms.forEach((algorithm, j) =>
      c.allReduceRmsNorm(x, {
        weight: fixed.dWeight,
        bias: fixed.dBias,
        residual,
        eps: EPS,
        output: outs[j]![0],
        residualOut: outs[j]![1],
        algorithm,
        stream,
      }),
    );
  });
  for (const [replay, i] of [0, 1, 2, 0].entries()) {
    x.copyFrom(sets[i]!.x, stream);
    residual.copyFrom(sets[i]!.dResidual!, stream);
    graph.launch(stream);
    group.synchronize(stream);
    const [wOut, wRes] = wants[i]!;
    algorithms.forEach((algorithm, j) => {
      expect(algorithm, outs[j]![0].toHost(), wOut, "bf16", `graph replay ${replay} ${algorithm}`);
      expect(
        algorithm,
        outs[j]![1].toHost(),
        wRes,
        "bf16",
        `graph replay ${replay} ${algorithm}: residualOut`,
      );
    });
  }
  graph.dispose();
  for (const t of [x, residual, ...outs.flat()]) t.dispose();
  for (const s of sets) s.dispose();
  console.log("a CUDA graph of every algorithm and auto, replayed 4 times with x and the residual changed");
  lap("graph");
}

// A straggler, then 48 calls alternating sizes and algorithms.
{
  const ks: Case[] = [
    { dtype: "bf16", rows: 1, hidden: 8192, bias: false, residual: true, salt: 700 },
    { dtype: "bf16", rows: 33, hidden: 4096, bias: true, residual: true, salt: 701 },
    { dtype: "f16", rows: 300, hidden: 1032, bias: true, residual: false, salt: 702 },
  ];
  const data = ks.map((k) => ({ k, inp: reference(k) }));
  const run = (d: (typeof data)[number], algorithm: Alg) =>
    c.allReduceRmsNorm(d.inp.x, {
      weight: d.inp.dWeight,
      bias: d.inp.dBias,
      residual: d.inp.dResidual,
      eps: EPS,
      residualOut: Tensor.empty([d.k.rows, d.k.hidden], d.k.dtype),
      algorithm,
    });
  const d1 = data[1]!;
  for (const algorithm of ALGORITHMS) {
    if (rank === world - 1) await sleep(50);
    const r = run(d1, algorithm);
    group.synchronize(stream);
    expect(algorithm, r.output.toHost(), d1.inp.want, d1.k.dtype, `straggler ${algorithm}`);
    r.output.dispose();
    r.residualOut!.dispose();
  }
  let s = Number(seed % 1000n);
  for (let i = 0; i < 48; i++) {
    s = (s * 1103515245 + 12345) % 2147483648;
    const d = data[s % 3]!;
    const algorithm = ([...ALGORITHMS, "auto"] as const)[(s >> 4) % 7]!;
    if (rank === world - 1 && i % 17 === 0) await sleep(5);
    const r = run(d, algorithm);
    group.synchronize(stream);
    const what = `call ${i}: ${algorithm} ${JSON.stringify(d.k)}`;
    expect(algorithm, r.output.toHost(), d.inp.want, d.k.dtype, what);
    expect(algorithm, r.residualOut!.toHost(), d.inp.wantResidual, d.k.dtype, `${what} residualOut`);
    r.output.dispose();
    r.residualOut!.dispose();
  }
  for (const d of data) d.inp.dispose();
  console.log("a rank 50 ms late, then 48 calls alternating sizes and algorithms: as the reference");
  lap("straggler, alternating calls");
}

// NaN and Inf stay in their rows.
{
  const k: Case = { dtype: "bf16", rows: 8, hidden: 1024, bias: true, residual: true, salt: 800 };
  const [nan, inf] = encode("bf16", [NaN, Infinity]);
  const inp = reference(k, {
    edit: (xs) => {
      (xs[0] as Uint16Array)[3 * k.hidden + 5] = nan!;
      (xs[world - 1] as Uint16Array)[5 * k.hidden + 9] = inf!;
    },
  });
  for (const algorithm of ALGORITHMS) {
    const r = c.allReduceRmsNorm(inp.x, {
      weight: inp.dWeight,
      bias: inp.dBias,
      residual: inp.dResidual,
      eps: EPS,
      algorithm,
    });
    group.synchronize(stream);
    const raw = r.output.toHost();
    const got = decodeToF32("bf16", raw);
    if (exact(algorithm)) {
      const want = decodeToF32("bf16", inp.want);
      for (let i = 0; i < got.length; i++) {
        // The reference's NaNs may carry other payloads; every other value bit for bit.
        const same = Number.isNaN(want[i]!) ? Number.isNaN(got[i]!) : Object.is(got[i], want[i]);
        if (!same)
          assert.fail(`${algorithm} NaN/Inf: element ${i} is ${got[i]}, expected ${want[i]} (seed ${seed})`);
      }
    } else {
      expect(algorithm, raw, inp.want, "bf16", `${algorithm} NaN/Inf`);
    }
    // The NaN's row is NaN throughout; the Inf's row is NaN where the Inf was (Inf x 0) and 0 elsewhere.
    assert.ok(got.subarray(3 * k.hidden, 4 * k.hidden).every(Number.isNaN), `${algorithm}: the NaN's row`);
    assert.ok(Number.isNaN(got[5 * k.hidden + 9]!), `${algorithm}: the Inf`);
    r.output.dispose();
  }
  inp.dispose();
  console.log(
    "NaN and Inf in x: as the reference (their rows NaN or zero), every other row as the reference, every algorithm",
  );
  lap("NaN and Inf");
}

// A staging buffer (2 MiB) and mailbox slot (1 MiB) smaller than x: no rank-order algorithm takes the
// all-reduce whole, so sequential and auto run it in pieces the buffer holds, still the reference's bits;
// so do allReduce and reduceScatter with auto (reduce-scatter's pieces: the copy engines, each rank's
// chunk read where it lies).
{
  const small = (await group.newGroupWith<GpuCollectives>(group.ranks, (g) =>
    GpuCollectives.create(g, 2 << 20, { mailboxSlotBytes: 1 << 20 }),
  ))!;
  const sc = small.collectives;
  // 8 MiB of x: past the staging buffer, and past the mailbox for lamport_two_shot up to 8 ranks.
  const k: Case = { dtype: "bf16", rows: 2049, hidden: 2048, bias: true, residual: true, salt: 900 };
  const shape = [k.rows, k.hidden];
  const inp = reference(k);
  assert.equal(sc.autoArNormAlgorithm(inp.x.nbytes, k.rows), "sequential");
  for (const algorithm of ["sequential", "auto", "nccl"] as const) {
    const r = sc.allReduceRmsNorm(inp.x, {
      weight: inp.dWeight,
      bias: inp.dBias,
      residual: inp.dResidual,
      eps: EPS,
      residualOut: Tensor.empty(shape, "bf16"),
      algorithm,
    });
    small.synchronize(stream);
    expect(algorithm, r.output.toHost(), inp.want, "bf16", `pieces: ${algorithm}`);
    expect(algorithm, r.residualOut!.toHost(), inp.wantResidual, "bf16", `pieces: ${algorithm} residualOut`);
    r.output.dispose();
    r.residualOut!.dispose();
  }
  const sum = sc.allReduce(inp.x);
  const inPlace = upload(inp.xs[rank]!, "bf16", shape);
  sc.allReduce(inPlace, { output: inPlace });
  small.synchronize(stream);
  assertSameBits(sum.toHost(), inp.sum, "pieces: allReduce auto", seed);
  assertSameBits(inPlace.toHost(), inp.sum, "pieces: allReduce auto in place", seed);
  for (const t of [sum, inPlace]) t.dispose();
  // Reduce-scatter: an odd chunk (1 MiB + 6 bytes of output, world times that of input), so the pieces
  // of ranks' chunks lie at unaligned offsets.
  const chunk = (1 << 19) + 3;
  assert.equal(sc.autoAlgorithm("reduce-scatter", chunk * 2, chunk * 2 * world), "copy_engine");
  const mine: RawArray[] = [];
  let x: Tensor | undefined;
  for (let r = 0; r < world; r++) {
    const t = Tensor.rand([chunk * world], "bf16", { seed, offset: 950_000 + r, low: -2, high: 2, stream });
    mine.push(t.slice(rank * chunk, (rank + 1) * chunk).toHost({ stream }));
    if (r === rank) x = t;
    else t.dispose();
  }
  const want = rawArray("bf16", chunk);
  reduceInto("bf16", "sum", mine, 0, want, 0, chunk);
  const [whole, out] = poisoned("bf16", [chunk]);
  sc.reduceScatter(x!, out);
  small.synchronize(stream);
  assertSameBits(out.toHost(), want, "pieces: reduceScatter auto", seed);
  guardsIntact(whole, "pieces: reduceScatter auto");
  // Pieces are calls like any other: captured in a CUDA graph and replayed.
  const gOut = Tensor.empty(shape, "bf16");
  const gRes = Tensor.empty(shape, "bf16");
  const gScatter = Tensor.empty([chunk], "bf16");
  const graph = Graph.capture(stream, () => {
    sc.allReduceRmsNorm(inp.x, {
      weight: inp.dWeight,
      bias: inp.dBias,
      residual: inp.dResidual,
      eps: EPS,
      output: gOut,
      residualOut: gRes,
      algorithm: "sequential",
      stream,
    });
    sc.reduceScatter(x!, gScatter, { stream });
  });
  for (let replay = 0; replay < 2; replay++) {
    for (const t of [gOut, gRes, gScatter]) t.fill(NaN, stream);
    graph.launch(stream);
    small.synchronize(stream);
    assertSameBits(gOut.toHost(), inp.want, `pieces: graph replay ${replay}, sequential`, seed);
    assertSameBits(gRes.toHost(), inp.wantResidual, `pieces: graph replay ${replay}, residualOut`, seed);
    assertSameBits(gScatter.toHost(), want, `pieces: graph replay ${replay}, reduceScatter`, seed);
  }
  graph.dispose();
  // In place on this rank's chunk of the input.
  const own = x!.slice(rank * chunk, (rank + 1) * chunk);
  sc.reduceScatter(x!, own);
  small.synchronize(stream);
  assertSameBits(own.toHost(), want, "pieces: reduceScatter auto into its own chunk", seed);
  for (const t of [whole, x!, gOut, gRes, gScatter]) t.dispose();
  inp.dispose();
  await small.destroy();
  console.log(
    "a 2 MiB staging buffer: sequential, auto, allReduce and reduceScatter in pieces, eager and in a graph, bit for bit; nccl within rounding",
  );
  lap("pieces past the staging buffer");
}

// Bad input: a typed error, nothing written.
{
  const x = Tensor.rand([7, 1024], "bf16", { seed, offset: 900 });
  const weight = Tensor.rand([1024], "bf16", { seed, offset: 901 });
  const [oWhole, output] = poisoned("bf16", [7, 1024]);
  const [rWhole, residualOut] = poisoned("bf16", [7, 1024]);
  const big = Tensor.empty([1100, 8192], "bf16");
  const bigW = Tensor.empty([8192], "bf16");
  const base = { weight, output, residualOut, eps: EPS };
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
      () => c.allReduceRmsNorm(big, { weight: bigW, eps: EPS, output: big, algorithm: "lamport" }),
    ],
    // A JavaScript caller's: typed errors, not a TypeError reading the options.
    ["options missing", () => c.allReduceRmsNorm(x, undefined as unknown as typeof base)],
    ["options null", () => c.allReduceRmsNorm(x, null as unknown as typeof base)],
  ];
  for (const [what, f] of bad) {
    assert.throws(f, isInvalid, what);
    group.synchronize(stream);
    assertSameBits(oWhole.toHost(), before[0]!, `${what}: output was written`, seed);
    assertSameBits(rWhole.toHost(), before[1]!, `${what}: residualOut was written`, seed);
  }
  // The group is still in step.
  const r = c.allReduceRmsNorm(x, { weight, eps: EPS });
  group.synchronize(stream);
  r.output.dispose();
  for (const t of [x, weight, oWhole, rWhole, big, bigW]) t.dispose();
  console.log(`bad input: ${bad.length} cases, typed errors, nothing written`);
  lap("bad input");
}

await group.destroy();
console.log("gpu ar-norm ok");
