// One rank of the GEMM + all-reduce check, on the backend its argument names (symmkit run -n N gemm-ar.js
// cpu|cuda): matmulAllReduce (a row-parallel linear layer, optionally followed by RMSNorm) with every
// algorithm of that backend (the lists of src/ops/fused/checks.ts) and the default. The CPU backend runs it
// in test/cpu-gemm-ar.test.ts (worlds 2 and 3), GPUs in test/gpu/distributed.test.ts, shared-gpu.test.ts,
// bench/gpu-suite.sh and gpu-fused.sh (any world from 1 to 8: every shape is the whole problem on every
// rank).
//
// Every rank draws every rank's operands from the shared seed and computes each rank's partial with its
// backend's GEMM (GPUs: matmul(), split-K as it splits it; the CPU backend: hostMatmul), the bf16 partial
// the algorithms sum. The reference, written out here: the partials summed in f32 in rank order, rounded
// once to bf16. Both backends make every check: bf16 and fp8 e4m3 with per-tensor scales, B as [n, k] and
// [k, n]; m 1, 7, 33, n 16, 48, 264, k 16, 80; every algorithm bit for bit with the reference (NCCL's,
// which sums in its own order, within bf16 rounding), each checked call after a decoy of its shape and
// algorithm on other operands (a receive slot read before this call's partial landed holds the decoy's
// values); outputs given poisoned inside guards, or allocated by the call; with rmsNorm (bias and residual
// each present or not, residualOut given or not) bit for bit the host norm (rmsNormRows) of the reference,
// bf16 and fp8 outputs, residualOut also against round((sum + bias) + residual) written out here; the
// reference within bf16 rounding of a float64 product; small integers giving the exact integer answer
// with every algorithm; partials that cancel first in rank order keeping the tiny ones; inputs
// unwritten; ranks agree bit for bit; a rank 50 ms late for 30 calls alternating shapes and algorithms;
// bad inputs as typed errors with nothing written, the group usable after. On GPUs only: the shapes that
// pick the GPU GEMM's kernel paths, and CUDA graphs replayed with the inputs changed in between.
//
// Sections run in batches (test/support/batch.ts): inputs and poisoned outputs first, a store barrier,
// the calls back to back, one wait, then the checks. Seeded, the seed printed; rank 0 prints each section
// with its seconds.
import assert from "node:assert/strict";
import { assertSameBits, rawHash } from "../support/agree.js";
import type { Case } from "../support/batch.js";
import { startProgram, untyped } from "../support/program.js";
import {
  assertClose,
  asBytes,
  bytesOf,
  expectPoisonedIn,
  fromBytes,
  poisonedIn,
  poisonOf,
} from "../support/tensors.js";
import { HostTensor } from "../../src/cpu/host-tensor.js";
import { hostMatmul } from "../../src/cpu/matmul.js";
import {
  CPU_FUSED_MATMUL_ALGORITHMS,
  MATMUL_ALL_REDUCE_ALGORITHMS,
  type MatmulRmsNormOptions,
} from "../../src/ops/fused/checks.js";
import { MATMUL_ALL_REDUCE } from "../../src/ops/fused/records.js";
import { matmul, type BLayout, type MatmulProblem } from "../../src/ops/gemm/matmul.js";
import type { OpAlgorithm } from "../../src/ops/records.js";
import { rmsNormRows } from "../../src/ops/norm/rms-norm.js";
import { decodeToF32, encode, rawArray, type DType, type RawArray } from "../../src/runtime/dtype.js";
import { Graph } from "../../src/runtime/graph.js";
import { defaultStream } from "../../src/runtime/stream.js";
import { Tensor, type AnyTensor } from "../../src/runtime/tensor.js";

// GPUs: the fused algorithm's receive slots (world x m x n x 2 bytes) of every shape below up to world 8
// (260 x 16384 the largest: 68 MB there, 34 MB at world 4); the CPU backend stages the partials of its
// small shapes.
const program = await startProgram("gemm-ar", { cuda: 80 << 20, cpu: 4 << 20 });
const { backend, cuda, group, gpu, c, make, rank, world, seed } = program;
const { agree, ranks, wait, batch, done, total } = program;
const f = Math.fround;
const EPS = 1e-5;

// ---- Algorithms: this backend's, the default (undefined) first.
type Algorithm = string | undefined;
const LIST: readonly string[] = cuda ? MATMUL_ALL_REDUCE_ALGORITHMS : CPU_FUSED_MATMUL_ALGORITHMS;
const ALGORITHMS: readonly Algorithm[] = [undefined, ...LIST];
const named = (a: Algorithm): string => a ?? "default";
const opt = (a: Algorithm): { algorithm?: string } => (a === undefined ? {} : { algorithm: a });
const recordOf = (a: Algorithm): OpAlgorithm | undefined =>
  (MATMUL_ALL_REDUCE as Readonly<Record<string, OpAlgorithm>>)[a ?? "auto"];
/** Whether `a` gives the rank-order reference's bits: auto and the default pick only such algorithms;
 * NCCL's sums in its own order. */
const rankOrder = (a: Algorithm): boolean => recordOf(a)?.rankOrder ?? true;
const RANK_ORDER = ALGORITHMS.filter(rankOrder);

// ---- Operands and the reference.
type Elem = "bf16" | "fp8e4m3";
interface Combo {
  readonly dtype: Elem;
  readonly layout: BLayout;
}
const COMBOS: readonly Combo[] = [
  { dtype: "bf16", layout: "nk" },
  { dtype: "bf16", layout: "kn" },
  { dtype: "fp8e4m3", layout: "nk" },
];
type Shape3 = readonly [number, number, number];
/** fp8's per-tensor scales: 0.5 x 1.5 on random data; 0.5 x 4 = 2 on small integers (sums stay exact). */
const scaleA = make.fromHost([0.5], "f32");
const scaleB = make.fromHost([1.5], "f32");
const scaleB4 = make.fromHost([4], "f32");
interface Scales {
  readonly scaleA?: AnyTensor;
  readonly scaleB?: AnyTensor;
}
const scaled = (dtype: Elem, b = scaleB): Scales => (dtype === "fp8e4m3" ? { scaleA, scaleB: b } : {});
/** The scale a product is multiplied by. */
const scaleOf = (s: Scales): number =>
  s.scaleA && s.scaleB ? f(s.scaleA.toHost({ decode: true })[0]! * s.scaleB.toHost({ decode: true })[0]!) : 1;

/** Uniforms of case `salt` for rank `r` (every rank draws every rank's, so the offsets are the same on
 * every rank). */
const draw = (
  shape: readonly number[],
  dtype: DType,
  salt: number,
  r: number,
  low = -1,
  high = 1,
): AnyTensor =>
  make.rand([...shape], dtype, {
    seed,
    offset: BigInt(salt) * (1n << 36n) + BigInt(r) * (1n << 30n),
    low,
    high,
  });

/** A problem of this rank, with every rank's partial and the reference. */
interface Problem {
  readonly what: string;
  readonly combo: Combo;
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly scales: Scales;
  readonly a: AnyTensor;
  readonly b: AnyTensor;
  /** Every rank's partial as its GEMM stores it, bf16. */
  readonly partials: readonly RawArray[];
  /** The partials summed in f32 in rank order, rounded once to bf16. */
  readonly sum: RawArray;
  /** The float64 sum over ranks of a_r x b_r^T x scale at elements 0, every, 2 x every, ... (with
   * `float64`), else empty. */
  readonly f64: Float64Array;
  readonly every: number;
}

/** Rank r's partial, from this backend's GEMM. */
function partialOf(p: MatmulProblem, a: AnyTensor, b: AnyTensor, scales: Scales): RawArray {
  if (gpu) {
    const t = matmul(a as Tensor, b as Tensor, {
      layoutB: p.layoutB,
      ...(scales as { scaleA?: Tensor; scaleB?: Tensor }),
    });
    const raw = t.toHost();
    t.dispose();
    return raw;
  }
  const out = HostTensor.empty([p.m, p.n], "bf16");
  return hostMatmul(p, a as HostTensor, b as HostTensor, out, scales as { scaleA?: HostTensor }).raw;
}

/** The partials summed in f32 in rank order, rounded once to bf16. */
function rankOrderSum(partials: readonly RawArray[]): RawArray {
  const ps = partials.map((p) => decodeToF32("bf16", p));
  const sum = new Float32Array(ps[0]!.length);
  for (let i = 0; i < sum.length; i++) {
    let acc = ps[0]![i]!;
    for (let r = 1; r < ps.length; r++) acc = f(acc + ps[r]![i]!);
    sum[i] = acc;
  }
  return encode("bf16", sum);
}

/** Float64 products of up to this many multiply-adds a rank: every element of the small shapes. */
const FLOAT64_MACS = 1 << 20;

/** A problem whose rank r holds operands(r) (a [m, k], b as the layout says); the other ranks' are
 * disposed once their partials are made. */
function problem(
  what: string,
  combo: Combo,
  [m, n, k]: Shape3,
  scales: Scales,
  operands: (r: number, shapeA: number[], shapeB: number[]) => [AnyTensor, AnyTensor],
  float64 = false,
): Problem {
  const p: MatmulProblem = { elem: combo.dtype, m, n, k, layoutB: combo.layout };
  const shapeB = combo.layout === "nk" ? [n, k] : [k, n];
  const every = Math.max(1, Math.ceil((m * n * k) / FLOAT64_MACS));
  const f64 = new Float64Array(float64 ? Math.ceil((m * n) / every) : 0);
  const scale = scaleOf(scales);
  const partials: RawArray[] = [];
  let mine: [AnyTensor, AnyTensor] | undefined;
  for (const r of ranks) {
    const [a, b] = operands(r, [m, k], shapeB);
    partials.push(partialOf(p, a, b, scales));
    if (float64) {
      const av = a.toHost({ decode: true });
      const bv = b.toHost({ decode: true });
      const [jStride, tStride] = combo.layout === "nk" ? [k, 1] : [1, n];
      for (let q = 0; q < f64.length; q++) {
        const i = Math.floor((q * every) / n);
        const j = (q * every) % n;
        let s = 0;
        for (let t = 0; t < k; t++) s += av[i * k + t]! * bv[j * jStride + t * tStride]!;
        f64[q]! += s * scale;
      }
    }
    if (r === rank) mine = [a, b];
    else for (const t of [a, b]) t.dispose();
  }
  const label = `${combo.dtype} B ${combo.layout} ${m}x${n}x${k}`;
  return {
    what: `${what} ${label}`,
    combo,
    m,
    n,
    k,
    scales,
    a: mine![0],
    b: mine![1],
    partials,
    sum: rankOrderSum(partials),
    f64,
    every,
  };
}

/** Uniform operands in [-1, 1) of case `salt`. */
const uniform =
  (dtype: Elem, salt: number) =>
  (r: number, shapeA: number[], shapeB: number[]): [AnyTensor, AnyTensor] => [
    draw(shapeA, dtype, salt, r),
    draw(shapeB, dtype, salt + 1, r),
  ];
let salts = 10;
const randomProblem = (combo: Combo, shape: Shape3, float64 = false): Problem =>
  problem("matmulAllReduce", combo, shape, scaled(combo.dtype), uniform(combo.dtype, (salts += 3)), float64);
/** The options of a call of `x` with algorithm `a`. */
const optsOf = (x: Problem, a: Algorithm) => ({ ...opt(a), layoutB: x.combo.layout, ...x.scales });
/** A decoy's operands: the case's salt plus this (no case's own salt comes near). */
const DECOY = 100_000;

/** Within bf16 rounding of `want`, for results computed in another order. Returns the distance. */
const close = (got: ArrayLike<number>, want: ArrayLike<number>, what: string): number =>
  assertClose(got, want, `${what} (seed ${seed}, rank ${rank})`);

// ---- Outputs: checked, the exact ones hashed for the ranks to agree on once a batch.
let outputs: string[] = [];
/** `out` (of `dtype` [m, n]; given inside the guards of `whole`, or allocated by the call) holds `want`:
 * bit for bit where `exact`, else within rounding. */
function holds(
  out: AnyTensor,
  whole: AnyTensor | undefined,
  x: Problem,
  dtype: DType,
  want: RawArray,
  exact: boolean,
  what: string,
): void {
  assert.equal(out.dtype, dtype, `${what}: dtype`);
  assert.deepEqual(out.shape, [x.m, x.n], `${what}: shape`);
  const got = out.toHost();
  if (whole) expectPoisonedIn(make, whole, asBytes(got), what, seed);
  if (!exact) return void close(decodeToF32(dtype, got), decodeToF32(dtype, want), what);
  assertSameBits(got, want, `rank ${rank}: ${what}`, seed);
  outputs.push(rawHash(got));
}
/** A batch, then every rank's exact outputs agreed bit for bit. */
async function checked(what: string, cases: readonly Case[], late?: number): Promise<void> {
  outputs = [];
  await batch(cases, late);
  await agree(new TextEncoder().encode(outputs.join("\n")), `${what}: the outputs`);
}
/** A case that checks, after the others' calls, that `inputs` hold what they held when it was made (and
 * disposes them after the batch). */
function unwritten(inputs: readonly (AnyTensor | undefined)[], what: string): Case {
  const made = inputs.filter((t) => t !== undefined).map((t) => [t, bytesOf(t)] as const);
  return {
    run: () => undefined,
    check: () =>
      made.forEach(([t, bytes], i) =>
        assertSameBits(bytesOf(t), bytes, `${what}: input ${i} was written`, seed),
      ),
    tensors: made.map(([t]) => t),
  };
}

/** One call: into a poisoned output of `dtype` made here (`given`), or into one the call allocates;
 * `check` gets what it returned and the output's guards (given only). */
function call(
  x: Problem,
  dtype: DType,
  given: boolean,
  run: (out: AnyTensor | undefined) => AnyTensor,
  check: (got: AnyTensor, whole: AnyTensor | undefined) => void,
  what: string,
): Case {
  const [whole, out] = given ? poisonedIn(make, dtype, [x.m, x.n]) : [undefined, undefined];
  const tensors: AnyTensor[] = whole ? [whole] : [];
  let got: AnyTensor | undefined;
  return {
    run: () => void (got = run(out)),
    check: () => {
      if (out) assert.equal(got, out, `${what}: returns the given out`);
      else tensors.push(got!);
      check(got!, whole);
    },
    tensors,
  };
}

// ---- rmsNorm's inputs and the host norm.
interface NormInputs {
  readonly weight: AnyTensor;
  readonly bias: AnyTensor | undefined;
  readonly residual: AnyTensor | undefined;
}
/** Bias and residual both, weight in [0.5, 1.5). */
const fullNorm = (m: number, n: number, salt: number): NormInputs => ({
  weight: draw([n], "bf16", salt, 0, 0.5, 1.5),
  bias: draw([n], "bf16", salt + 1, 0, -0.5, 0.5),
  residual: draw([m, n], "bf16", salt + 2, 0),
});
/** Bias (bit 0 clear) and residual (bit 1 clear) as `pattern` says, weight in [-2, 2). */
const variedNorm = (m: number, n: number, salt: number, pattern: number): NormInputs => ({
  weight: draw([n], "bf16", salt, 0, -2, 2),
  bias: pattern & 1 ? undefined : draw([n], "bf16", salt + 1, 0),
  residual: pattern & 2 ? undefined : draw([m, n], "bf16", salt + 2, 0),
});
const normTensors = (nm: NormInputs): (AnyTensor | undefined)[] => [nm.weight, nm.bias, nm.residual];
const normOptions = (nm: NormInputs): MatmulRmsNormOptions<AnyTensor> => ({
  weight: nm.weight,
  eps: EPS,
  ...(nm.bias && { bias: nm.bias }),
  ...(nm.residual && { residual: nm.residual }),
});

/** The host norm (rmsNormRows) of the reference: the output (bf16, or fp8 with `outputScale`) and residualOut. */
function normWant(x: Problem, nm: NormInputs, outputScale?: number): [RawArray, RawArray] {
  const outDtype = outputScale === undefined ? "bf16" : "fp8e4m3";
  const out = rawArray(outDtype, x.m * x.n);
  const res = rawArray("bf16", x.m * x.n);
  rmsNormRows(
    {
      rows: x.m,
      hidden: x.n,
      dtype: "bf16",
      outDtype,
      outScaleInv: outputScale === undefined ? 0 : f(1 / outputScale),
      eps: EPS,
    },
    x.sum,
    { weight: nm.weight.toHost(), bias: nm.bias?.toHost(), residual: nm.residual?.toHost() },
    out,
    res,
  );
  return [out, res];
}

/** round_bf16((sum + bias) + residual), each add rounded to float32, written out here. */
function residualWant(x: Problem, nm: NormInputs): RawArray {
  const s = decodeToF32("bf16", x.sum);
  const bias = nm.bias?.toHost({ decode: true });
  const residual = nm.residual?.toHost({ decode: true });
  const h = new Float32Array(s.length);
  for (let i = 0; i < s.length; i++) {
    let v = s[i]!;
    if (bias) v = f(v + bias[i % x.n]!);
    if (residual) v = f(v + residual[i]!);
    h[i] = v;
  }
  return encode("bf16", h);
}

// ---- Every combo, shape and algorithm, each call after a decoy: out given and allocated; rmsNorm with
// bias and residual into a given out and residualOut, with the case's bias and residual into an
// allocated out with residualOut and into a given out without; fp8 outputs (outputScale) allocated and
// given, but for NCCL's sum, which needs residualOut to hold it there (refused under bad inputs).
/** The cases of problem `x` with every algorithm; `pattern` picks the varied norm's bias and residual. */
function everyCall(x: Problem, pattern: number): Case[] {
  const { m, n } = x;
  const full = fullNorm(m, n, (salts += 3));
  const varied = variedNorm(m, n, (salts += 3), pattern);
  const wants = (nm: NormInputs, tag: string) => {
    const [out, res] = normWant(x, nm);
    return { nm, tag, out, res, formula: residualWant(x, nm), fp8: normWant(x, nm, 0.25)[0] };
  };
  const fullWant = wants(full, "with bias and residual");
  const variedWant = wants(varied, `pattern ${pattern}`);
  const decoy = {
    a: draw([m, x.k], x.combo.dtype, salts + DECOY, rank),
    b: draw(x.b.shape, x.combo.dtype, salts + 1 + DECOY, rank),
    out: make.empty([m, n], "bf16"),
  };
  const cases: Case[] = [];
  for (const a of ALGORITHMS) {
    const exact = rankOrder(a);
    const opts = optsOf(x, a);
    const what = `${x.what} ${named(a)}`;
    /** A call into an output of `dtype` (given, or made by the call) with `rmsNorm` if any, after a decoy
     * of its shape and algorithm. */
    const after = (
      dtype: DType,
      given: boolean,
      rmsNorm: MatmulRmsNormOptions<AnyTensor> | undefined,
      check: (got: AnyTensor, whole: AnyTensor | undefined) => void,
    ): Case =>
      call(
        x,
        dtype,
        given,
        (out) => {
          c.matmulAllReduce(decoy.a, decoy.b, { ...opts, out: decoy.out });
          return c.matmulAllReduce(x.a, x.b, { ...opts, ...(out && { out }), ...(rmsNorm && { rmsNorm }) });
        },
        check,
        what,
      );
    const made = (given: boolean): string => (given ? "given" : "made");
    const plain = (given: boolean): Case =>
      after("bf16", given, undefined, (got, whole) =>
        holds(got, whole, x, "bf16", x.sum, exact, `${what} out ${made(given)}`),
      );
    /** rmsNorm of `w` into a bf16 out, with residualOut (given, poisoned) if `withRes`. */
    const normed = (w: typeof fullWant, given: boolean, withRes: boolean): Case => {
      const [resWhole, resOut] = withRes ? poisonedIn(make, "bf16", [m, n]) : [undefined, undefined];
      const tag = `${what} rmsNorm ${w.tag}, out ${made(given)}`;
      const norm = { ...normOptions(w.nm), ...(resOut && { residualOut: resOut }) };
      const k = after("bf16", given, norm, (got, whole) => {
        holds(got, whole, x, "bf16", w.out, exact, tag);
        if (!resOut) return;
        holds(resOut, resWhole, x, "bf16", w.res, exact, `${tag}: residualOut`);
        if (exact)
          assertSameBits(
            resOut.toHost(),
            w.formula,
            `${tag}: residualOut vs the sum + bias + residual`,
            seed,
          );
      });
      return { ...k, tensors: resWhole ? [...k.tensors, resWhole] : k.tensors };
    };
    const fp8 = (w: typeof fullWant, given: boolean): Case =>
      after("fp8e4m3", given, { ...normOptions(w.nm), outputScale: 0.25 }, (got, whole) =>
        holds(got, whole, x, "fp8e4m3", w.fp8, true, `${what} rmsNorm ${w.tag}, fp8 ${made(given)}`),
      );
    cases.push(
      plain(true),
      plain(false),
      normed(fullWant, true, true),
      normed(variedWant, false, true),
      normed(variedWant, true, false),
    );
    if (exact) cases.push(fp8(fullWant, false), fp8(variedWant, true));
  }
  const k = unwritten([x.a, x.b, ...normTensors(full), ...normTensors(varied)], x.what);
  return [...cases, { ...k, tensors: [...k.tensors, decoy.a, decoy.b, decoy.out] }];
}

// The fp8 poison is a NaN (no norm output is one), so an element left unwritten shows.
assert.equal(poisonOf(make, "fp8e4m3", 1)[0]! & 0x7f, 0x7f, "the fp8 poison is a NaN");
{
  const SHAPES: Shape3[] = [];
  for (const m of [1, 7, 33]) for (const n of [16, 48, 264]) for (const k of [16, 80]) SHAPES.push([m, n, k]);
  // GPU-only: these pick the GPU GEMM's kernel paths (m from a decode step to 350, K long enough for
  // split-K up to 8 slices and not); the CPU backend has one loop, where every rank's host GEMMs of them
  // would take minutes.
  const KERNEL_PATHS: Shape3[] = [
    [1, 256, 512],
    [7, 1040, 784],
    [128, 512, 1024],
    [300, 784, 512], // wide decode tiles of 152 rows of A (two consumers), two tile-rows
    [5, 2048, 4096],
    [33, 1040, 3072],
    [150, 1040, 1024], // decode tiles of 152 rows of A
    [180, 520, 2048], // decode tiles of 184 rows of A
    [200, 1040, 1024], // two wide tile-rows of 104 rows of A: two consumers, a flag each
    [350, 1032, 1024], // wide decode tiles of 176
    [2, 16384, 256], // 128 wide decode tiles of 8 rows of A (one-consumer tiles would pass one wave)
    [260, 16384, 256], // 256 wide tiles of 136 rows of A: a persistent grid exchanging tile after tile
    [212, 8456, 256], // one tile-row of 216 rows of A where two of 128 would pass one wave (3 passes)
    [240, 8456, 256], // past one wave of wide tiles, two tile-rows of 128: the Hopper GEMM's all-reduce
    [1, 2560, 3072], // 40 tiles in thirds of K
    [200, 4096, 4096], // two tile-rows of 104 in halves of K
    [200, 8192, 4096], // two tile-rows of 104 over 64 tile-columns
    [200, 10240, 1024], // tall decode tiles: two tile-rows of 104 by 192 rows of B, three consumers
    [200, 5632, 3072], // tall decode tiles in halves of K (bf16; fp8 runs two tile-rows of 104 unsplit)
  ];
  let cases = 0;
  let calls = 0;
  let worst = 0;
  // Where the section's time goes: the references made on the host, or the calls and their checks.
  let referenceMs = 0;
  let callMs = 0;
  for (const combo of COMBOS)
    for (const shape of [...SHAPES, ...(cuda ? KERNEL_PATHS : [])]) {
      const t0 = performance.now();
      const x = randomProblem(combo, shape, true);
      const sum = decodeToF32("bf16", x.sum);
      const sampled = x.f64.map((_, q) => sum[q * x.every]!);
      worst = Math.max(worst, close(sampled, x.f64, `${x.what}: the reference vs float64`));
      const k = everyCall(x, cases++ % 4);
      calls += k.length - 1;
      const t1 = performance.now();
      await checked(x.what, k);
      referenceMs += t1 - t0;
      callMs += performance.now() - t1;
    }
  done(
    `random: ${cases} problems, ${calls} calls each after a decoy, bit for bit with the rank-order reference ` +
      `(NCCL's within rounding), rmsNorm bf16 and fp8, outputs given and made, ranks agree; the reference ` +
      `${worst.toExponential(2)} from float64 at worst (bound 2^-6); ${(referenceMs / 1000).toFixed(1)} s ` +
      `making the references, ${(callMs / 1000).toFixed(1)} s in the calls and their checks`,
  );
}

// ---- Small integers: entries in {-1, 0, 1}, so every partial (|.| <= k) and every sum of them in any
// order are integers that bf16 holds (checked: the ranks' |partials| add up to at most 256, x 2 for fp8's
// scales, which keeps them even): every algorithm, NCCL's too, gives the integer answer. fp8 also without
// scales (their default is 1).
{
  const ints = (shape: number[], dtype: Elem, salt: number, r: number): AnyTensor => {
    const t = draw(shape, "i32", salt, r, -1, 2);
    const values = Array.from(t.toHost(), Number);
    t.dispose();
    return make.fromHost(values, dtype, { shape });
  };
  let count = 0;
  const combos: [Combo, Scales, string][] = [
    ...COMBOS.map((cb): [Combo, Scales, string] => [cb, scaled(cb.dtype, scaleB4), "exact"]),
    [COMBOS[2]!, {}, "exact unscaled"],
  ];
  for (const [combo, scales, what] of combos)
    for (const shape of [
      [1, 16, 80],
      [7, 264, 16],
      [33, 48, 80],
    ] as const) {
      const salt = (salts += 3);
      const x = problem(
        what,
        combo,
        shape,
        scales,
        (r, shapeA, shapeB) => [ints(shapeA, combo.dtype, salt, r), ints(shapeB, combo.dtype, salt + 1, r)],
        true,
      );
      const bound = 256 * scaleOf(scales);
      const partials = x.partials.map((p) => decodeToF32("bf16", p));
      x.f64.forEach((v, i) => {
        const size = partials.reduce((s, p) => s + Math.abs(p[i]!), 0);
        assert.ok(Number.isInteger(v) && size <= bound, `${x.what}: ${v} (partials ${size}) may round`);
      });
      const want = encode("bf16", x.f64);
      assert.ok(
        x.f64.some((v) => v !== 0),
        `${x.what}: an all-zero answer tests nothing`,
      );
      const cases = ALGORITHMS.map((a) =>
        call(
          x,
          "bf16",
          false,
          () => c.matmulAllReduce(x.a, x.b, optsOf(x, a)),
          (got) => holds(got, undefined, x, "bf16", want, true, `${x.what} ${named(a)}: the integer answer`),
          x.what,
        ),
      );
      await checked(x.what, [...cases, unwritten([x.a, x.b], x.what)]);
      count++;
    }
  done(`exact: ${count} problems give the integer answer bit for bit with every algorithm`);
}

// ---- Rank order: f32 sums of a few bf16 partials of like magnitude are exact in any order, so the order
// shows only where a partial is absorbed. Rank 0 holds (A, B), rank 1 (-A, B): partials P and -P of about
// 2^20; the other ranks hold tiny operands, partials far below P's last f32 bit. In rank order P + -P = 0
// comes first and the tiny partials survive; any order that adds a tiny one to +-P first loses it. (With
// 2 ranks every order gives 0.) Every rank-order algorithm.
{
  /** `t` with every element's sign flipped (exact, as -A must be). */
  const negated = (t: AnyTensor): AnyTensor => {
    const bytes = bytesOf(t);
    const es = t.elementBytes;
    for (let i = es - 1; i < bytes.length; i += es) bytes[i]! ^= 0x80;
    const minus = fromBytes(make, t.dtype, bytes, t.shape);
    t.dispose();
    return minus;
  };
  for (const combo of COMBOS) {
    const { dtype } = combo;
    const big = dtype === "bf16" ? 2 ** 10 : 448;
    const tiny = 2 ** -7;
    const salt = (salts += 3);
    const x = problem("rank order", combo, [7, 48, 80], scaled(dtype), (r, shapeA, shapeB) => {
      const range = r < 2 ? big : tiny;
      const a = draw(shapeA, dtype, salt, r < 2 ? 0 : r, -range, range);
      return [r === 1 ? negated(a) : a, draw(shapeB, dtype, salt + 1, r < 2 ? 0 : r, -range, range)];
    });
    if (world >= 3) {
      // The tiny partials, summed (in float64: at most a few, of like magnitude) and rounded once.
      const tinySum = new Float64Array(x.m * x.n);
      for (const p of x.partials.slice(2).map((q) => decodeToF32("bf16", q)))
        for (let i = 0; i < tinySum.length; i++) tinySum[i]! += p[i]!;
      assertSameBits(x.sum, encode("bf16", tinySum), `${x.what}: the reference vs the tiny ranks' sum`, seed);
      const p0 = decodeToF32("bf16", x.partials[0]!);
      const absorbed = tinySum.filter((v, i) => v !== 0 && f(v + p0[i]!) === p0[i]!).length;
      assert.ok(absorbed > x.m * x.n * 0.9, `${x.what}: only ${absorbed} tiny sums would be absorbed by P`);
    }
    const cases = RANK_ORDER.map((a) =>
      call(
        x,
        "bf16",
        true,
        (out) => c.matmulAllReduce(x.a, x.b, { ...optsOf(x, a), out: out! }),
        (got, whole) => holds(got, whole, x, "bf16", x.sum, true, `${x.what} ${named(a)}`),
        x.what,
      ),
    );
    await checked(x.what, [...cases, unwritten([x.a, x.b], x.what)]);
  }
  done("rank order: partials that cancel first keep the tiny ones, bit for bit, every rank-order algorithm");
}

// ---- GPU-only (CUDA graphs): a graph of every algorithm, replayed with the inputs changed in between
// (each has run on this stream before, as split-K needs).
if (gpu) {
  const stream = defaultStream(gpu.device);
  const [m, n, k] = [16, 512, 4096]; // 8 slices of K
  const a = Tensor.empty([m, k], "bf16");
  const b = Tensor.empty([n, k], "bf16");
  const outs = MATMUL_ALL_REDUCE_ALGORITHMS.map(() => Tensor.empty([m, n], "bf16"));
  const graph = Graph.capture(stream, () =>
    MATMUL_ALL_REDUCE_ALGORITHMS.forEach((algorithm, i) =>
      gpu.collectives.matmulAllReduce(a, b, { algorithm, out: outs[i]!, stream }),
    ),
  );
  for (let replay = 0; replay < 5; replay++) {
    const x = randomProblem(COMBOS[0]!, [m, n, k]);
    a.copyFrom(x.a as Tensor);
    b.copyFrom(x.b as Tensor);
    graph.launch();
    stream.synchronize();
    MATMUL_ALL_REDUCE_ALGORITHMS.forEach((algorithm, i) => {
      const what = `graph replay ${replay} ${algorithm}`;
      if (rankOrder(algorithm)) assertSameBits(outs[i]!.toHost(), x.sum, what, seed);
      else close(outs[i]!.toHost({ decode: true }), decodeToF32("bf16", x.sum), what);
    });
    for (const t of [x.a, x.b]) t.dispose();
  }
  graph.dispose();
  for (const t of [a, b, ...outs]) t.dispose();
  done("graph replays with changed inputs: exact");
}

// ---- GPU-only: fused calls through the Lamport mailbox (B as [n, k]: the decode GEMM; at n = 9216 its 144
// tiles give some CTAs two steps) and through the staging buffer (B as [k, n]: the Hopper GEMM), between
// Lamport all-reduces that share the mailbox and its call count, a rank late: exact.
if (gpu) {
  const cases: Case[] = [];
  const triangle = (world * (world + 1)) / 2;
  const shapes: readonly (readonly [Combo, Shape3])[] = [
    [COMBOS[0]!, [3, 264, 80]],
    [COMBOS[1]!, [40, 264, 80]],
    [COMBOS[0]!, [5, 9216, 64]],
  ];
  for (let i = 0; i < 12; i++) {
    const [combo, shape] = shapes[i % shapes.length]!;
    const x = randomProblem(combo, shape);
    const what = `fused call ${i}: ${x.what}`;
    cases.push(
      call(
        x,
        "bf16",
        true,
        (out) => c.matmulAllReduce(x.a, x.b, { ...optsOf(x, "fused"), out: out! }),
        (got, whole) => holds(got, whole, x, "bf16", x.sum, true, what),
        what,
      ),
      unwritten([x.a, x.b], what),
    );
    const ones = make.full([1000 + i], rank + 1, "bf16");
    let summed: AnyTensor | undefined;
    cases.push({
      run: () => void (summed = c.allReduce(ones, { algorithm: "lamport" })),
      check: () => {
        const got = summed!.toHost({ decode: true });
        assert.ok(
          got.every((v) => v === triangle),
          `lamport all-reduce ${i} between fused calls: not ${triangle} everywhere (seed ${seed}, rank ${rank})`,
        );
        summed!.dispose();
      },
      tensors: [ones],
    });
  }
  await checked(
    "fused through the mailbox and the staging buffer, between Lamport all-reduces",
    cases,
    world - 1,
  );
  done("fused through the mailbox and the staging buffer between Lamport all-reduces, a straggler: exact");
}

// ---- A rank 50 ms late for 30 calls made back to back, alternating shapes, dtypes and algorithms.
{
  const cases: Case[] = [];
  for (let i = 0; i < 30; i++) {
    const x = randomProblem(COMBOS[i % 3]!, [[1, 5, 64][i % 3]!, 256, 512]);
    const a = ALGORITHMS[Math.floor(i / 3) % ALGORITHMS.length];
    const what = `call ${i} ${named(a)}: ${x.what}`;
    cases.push(
      call(
        x,
        "bf16",
        false,
        () => c.matmulAllReduce(x.a, x.b, optsOf(x, a)),
        (got) => holds(got, undefined, x, "bf16", x.sum, rankOrder(a), what),
        what,
      ),
      unwritten([x.a, x.b], what),
    );
  }
  await checked("alternating calls", cases, world - 1);
  done("a straggler and 30 alternating calls: exact");
}

// ---- Bad inputs, made alike on every rank (so nobody waits): typed errors, nothing written, the group
// usable after. Each backend refuses the names it lacks (the other's, another call's, none's).
{
  const x = randomProblem(COMBOS[0]!, [2, 16, 16]);
  const { a, b } = x;
  const [outWhole, out] = poisonedIn(make, "bf16", [2, 16]);
  const [resWhole, residualOut] = poisonedIn(make, "bf16", [2, 16]);
  const rnd = (shape: number[], dtype: DType = "bf16"): AnyTensor => draw(shape, dtype, (salts += 3), 0);
  const weight = rnd([16]);
  const residual = rnd([2, 16]);
  const nan = (shape: number[], dtype: DType): AnyTensor => make.full(shape, NaN, dtype);
  const out8 = nan([2, 16], "fp8e4m3");
  const out32 = nan([2, 16], "f32");
  const outWide = nan([2, 32], "bf16");
  const outFlat = nan([32], "bf16");
  // a and out in one tensor: out starts in a's second row, or at a's first; b and out likewise.
  const aBytes = new Uint8Array(96);
  aBytes.set(bytesOf(a));
  const aShared = fromBytes(make, "bf16", aBytes);
  const aOver = aShared.slice(0, 32).view([2, 16]);
  const outInA = aShared.slice(16, 48).view([2, 16]);
  const outFromA = aShared.slice(0, 32).view([2, 16]);
  const bShared = fromBytes(make, "bf16", bytesOf(b));
  const bOver = bShared.view([16, 16]);
  const outInB = bShared.slice(32, 64).view([2, 16]);
  const fp8a = rnd([2, 16], "fp8e4m3");
  const fp8b = rnd([16, 16], "fp8e4m3");
  const watched = [
    a,
    b,
    outWhole,
    resWhole,
    weight,
    residual,
    out8,
    out32,
    outWide,
    outFlat,
    aShared,
    bShared,
  ];
  const before = watched.map(bytesOf);
  type Bad = readonly [string, () => unknown];
  // Options as plain objects: some are not of the options' type on purpose (a bad algorithm, layout).
  const mm =
    (o: object, aa = a, bb = b) =>
    (): unknown =>
      c.matmulAllReduce(aa, bb, o);
  const norm = (o: object = {}): { rmsNorm: object } => ({ rmsNorm: { weight, eps: EPS, ...o } });
  const foreign = [
    ...Object.keys(MATMUL_ALL_REDUCE).filter((a) => !LIST.includes(a)),
    "one_shot", // allReduceRmsNorm's
    "pipelined", // no call's
  ];
  const staging = LIST.filter((a) => recordOf(a)?.needs.includes("staging buffer"));
  const bad: Bad[] = [
    ["k mismatch", mm({ out }, a, rnd([16, 32]))],
    ["k mismatch, B [k, n]", mm({ out, layoutB: "kn" }, a, rnd([32, 16]))],
    ["a and b of different dtypes", mm({ out }, a, fp8b)],
    ["out [2, 32]", mm({ out: outWide })],
    ["out 1-D", mm({ out: outFlat })],
    ["out f32", mm({ out: out32 })],
    ["out fp8 without rmsNorm", mm({ out: out8 })],
    ["out overlapping a", mm({ out: outInA }, aOver)],
    ["out over a from its start", mm({ out: outFromA }, aOver)],
    ["out overlapping b", mm({ out: outInB }, a, bOver)],
    ["scales on bf16", mm({ out, scaleA, scaleB })],
    ["fp8 scaleA of 2 elements", mm({ out, scaleA: make.fromHost([1, 1], "f32"), scaleB }, fp8a, fp8b)],
    ["fp8 scaleB f16", mm({ out, scaleA, scaleB: make.fromHost([1], "f16") }, fp8a, fp8b)],
    ["fp8 B [k, n]", mm({ out, layoutB: "kn" }, fp8a, fp8b)],
    ["layoutB mn", mm({ out, layoutB: "mn" })],
    ...foreign.flatMap((name): Bad[] => [
      [`algorithm ${name}`, mm({ out, algorithm: name })],
      [`rmsNorm algorithm ${name}`, mm({ out, algorithm: name, ...norm({ residualOut }) })],
    ]),
    ...ALGORITHMS.map((al): Bad => [
      `rmsNorm eps -1 ${named(al)}`,
      mm({ out, ...opt(al), ...norm({ eps: -1 }) }),
    ]),
    ["rmsNorm eps 0", mm({ out, ...norm({ eps: 0, residualOut }) })],
    ["rmsNorm eps NaN", mm({ out, ...norm({ eps: NaN, residualOut }) })],
    ["rmsNorm weight of 8", mm({ out, ...norm({ weight: rnd([8]), residualOut }) })],
    ["rmsNorm weight of 32", mm({ out, ...norm({ weight: rnd([32]) }) })],
    ["rmsNorm weight f16", mm({ out, ...norm({ weight: rnd([16], "f16") }) })],
    ["rmsNorm bias of 8", mm({ out, ...norm({ bias: rnd([8]) }) })],
    ["rmsNorm residual [1, 16]", mm({ out, ...norm({ residual: rnd([1, 16]) }) })],
    ["rmsNorm residualOut [1, 16]", mm({ out, ...norm({ residualOut: nan([1, 16], "bf16") }) })],
    ["rmsNorm n 20 (not 16 bytes)", mm({ ...norm({ weight: rnd([20]) }) }, a, rnd([20, 16]))],
    ["rmsNorm out f32", mm({ out: out32, ...norm() })],
    ["rmsNorm out [2, 32]", mm({ out: outWide, ...norm() })],
    ["rmsNorm out 1-D", mm({ out: outFlat, ...norm() })],
    ["rmsNorm fp8 out without outputScale", mm({ out: out8, ...norm({ residualOut }) })],
    ["rmsNorm fp8 out, outputScale 0", mm({ out: out8, ...norm({ outputScale: 0 }) })],
    ["rmsNorm bf16 out with outputScale", mm({ out, ...norm({ outputScale: 0.5 }) })],
    ["rmsNorm out = residual", mm({ out: residual, ...norm({ residual }) })],
    ["rmsNorm out = residualOut", mm({ out, ...norm({ residualOut: out }) })],
    ["rmsNorm out overlapping a", mm({ out: outInA, ...norm() }, aOver)],
    ["rmsNorm residualOut overlapping a", mm({ out, ...norm({ residualOut: outFromA }) }, aOver)],
    // NCCL's sum needs a home of the partial's dtype before the fp8 norm: refused before the GEMM.
    ...LIST.filter((al) => !rankOrder(al)).map((al): Bad => [
      `${al} fp8 without residualOut`,
      mm({ algorithm: al, ...norm({ outputScale: 0.25 }) }),
    ]),
  ];
  // world x 4096 x 8192 x 2 bytes of receive buffer: more than the GPUs' 80 MiB staging buffer from world 2.
  if (world > 1 && staging.length > 0) {
    const [aBig, bBig] = [make.full([4096, 64], 0, "bf16"), make.full([8192, 64], 0, "bf16")];
    bad.push(
      ...staging.map((al): Bad => [`${al} beyond the staging buffer`, mm({ algorithm: al }, aBig, bBig)]),
    );
  }
  const wrong = untyped(bad);
  wait();
  assert.deepEqual(wrong, [], `rank ${rank}: bad inputs must give InvalidArgumentError`);
  watched.forEach((t, i) =>
    assertSameBits(bytesOf(t), before[i]!, `bad inputs: tensor ${i} was written`, seed),
  );
  // The group is still in step: valid calls into that out, with the reference's bits.
  const [normOut, normRes] = normWant(x, { weight, bias: undefined, residual });
  const into = (what: string, run: () => AnyTensor, check: () => void): Case => {
    let got: AnyTensor | undefined;
    return {
      run: () => void (got = run()),
      check: () => {
        assert.equal(got, out, `${what}: returns the given out`);
        check();
      },
      tensors: [],
    };
  };
  await checked("after bad inputs", [
    into(
      "after bad inputs",
      () => c.matmulAllReduce(a, b, { out }),
      () => holds(out, outWhole, x, "bf16", x.sum, true, "after bad inputs: out"),
    ),
  ]);
  await checked("after bad inputs, rmsNorm", [
    into(
      "after bad inputs, rmsNorm",
      () => c.matmulAllReduce(a, b, { out, rmsNorm: { weight, eps: EPS, residual, residualOut } }),
      () => {
        holds(out, outWhole, x, "bf16", normOut, true, "after bad inputs: rmsNorm out");
        holds(residualOut, resWhole, x, "bf16", normRes, true, "after bad inputs: rmsNorm residualOut");
      },
    ),
  ]);
  for (const t of [...watched, fp8a, fp8b]) t.dispose();
  done(`bad inputs: ${bad.length} typed errors, nothing written; valid calls after`);
}

c.barrier();
wait();
total(world);
console.log(`${backend} gemm-ar ok rank ${rank}`);
await group.destroy();
