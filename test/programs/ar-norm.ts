// One rank of the all-reduce + RMSNorm check, on the backend its argument names (symmkit run -n N
// ar-norm.js cpu|cuda): allReduceRmsNorm with every algorithm of that backend (the lists of
// src/ops/norm/checks.ts, from the records) and auto. The CPU backend runs it in test/cpu-ar-norm.test.ts
// (worlds 2 and 3), GPUs in test/gpu/distributed.test.ts, shared-gpu.test.ts, bench/gpu-suite.sh and
// bench/gpu-ar-norm.sh (any world from 2 to 8).
//
// Every rank draws every rank's x from the shared seed and computes the reference: the rank-order sum
// rounded once (src/ops/coll/reduce.ts), then the host norm (src/ops/norm/rms-norm.ts, the kernels'
// operations in their order). Every rank-order algorithm and auto give its bits; nccl, which sums in
// NCCL's order, lies within its rounding (ncclNormTolerance), bit for bit on 2 ranks and on exactly
// representable inputs. The reference itself is checked against float64 arithmetic (each element within a
// derived rounding bound, and within four roundings of its row's largest value), residualOut against
// round((sum + bias) + residual) written out here, and the backend's allReduce against the rank-order sum.
//
// Both backends make every check: bf16 and f16; rows 1, 7 and 128 (33 on the CPU backend) of hidden 1024,
// 4096, 8192 (the kernels' two-slot classes) and 8200 (four slots, a tail), bias and residual in each of
// their four combinations, outputs poisoned inside guards, a typed refusal where an algorithm lacks room;
// 144 random cases (rows 1, 7, 33; hidden 8, 1024, 1032; eps 1e-5 and 1e-6, half at a scale where eps
// moves the answer) out of place, in place (output = x, residualOut = residual) and with residualOut = x,
// inputs unwritten; exactly representable answers (output = sign(h) x weight, an fp8 output saturating at
// 448), also in 3-D; fp8 outputs with a scale, saturating; NaN and Inf confined to their rows; a rank
// 50 ms late for every algorithm, then 48 calls alternating sizes and algorithms, with and without
// residualOut; bad inputs as typed errors alike on every rank, nothing written, a valid call after; ranks
// agree on every exact result. On GPUs only: more rows than SMs and 32 MiB of x, a symmetric x read in
// place, a CUDA graph replayed with new inputs, a staging buffer smaller than x (the all-reduce in pieces),
// the refusals of GPUs' own constructions.
//
// Sections run in batches (test/support/batch.ts): inputs and poisoned outputs first, a store barrier,
// the calls back to back, one wait, then the checks. Seeded, the seed printed; rank 0 prints each section
// with its seconds.
import assert from "node:assert/strict";
import { assertSameBits, rawHash } from "../support/agree.js";
import type { Case } from "../support/batch.js";
import { startProgram, typed } from "../support/program.js";
import { bytesOf, expectPoisonedIn, GUARD, poisonedIn, poisonOf } from "../support/tensors.js";
import { HostTensor } from "../../src/cpu/host-tensor.js";
import { reduceInto } from "../../src/ops/coll/reduce.js";
import { GpuCollectives } from "../../src/ops/gpu-collectives.js";
import { roomFor } from "../../src/ops/norm/ar-norm.js";
import {
  AR_NORM_ALGORITHMS,
  CPU_AR_NORM_ALGORITHMS,
  ncclNormTolerance,
  type AllReduceRmsNormOptions,
  type ArNormAlgorithm,
  type NormProblem,
} from "../../src/ops/norm/checks.js";
import { AR_NORM, type ArNormRecord } from "../../src/ops/norm/records.js";
import { rmsNormRows } from "../../src/ops/norm/rms-norm.js";
import {
  decodeToF32,
  encode,
  encodeE4M3,
  rawArray,
  type DType,
  type RawArray,
} from "../../src/runtime/dtype.js";
import { Graph } from "../../src/runtime/graph.js";
import { DeviceMemory } from "../../src/runtime/memory.js";
import { defaultStream } from "../../src/runtime/stream.js";
import { Tensor, type AnyTensor } from "../../src/runtime/tensor.js";
import { readEnvVar } from "../../src/settings.js";

// GPUs: x of up to 32 MiB a rank (4097 x 4096 bf16) staged whole by every algorithm that stages it; the
// CPU backend: 1 MiB, past its largest x (300 x 1032 f16).
const program = await startProgram("ar-norm", { cuda: 128 << 20, cpu: 1 << 20 });
const { backend, cuda, group, gpu, c, make, rank, world, capacity, seed } = program;
const { agree, wait, batch, done, total } = program;
const f = Math.fround;
const EPS = 1e-5;
// Ranks sharing a GPU wait for its time slices at every call: there each random case takes one algorithm
// rather than each.
const sharing = readEnvVar("SYMMKIT_SHARE_GPUS");

// ---- Algorithms: this backend's, auto first.
const ALGORITHMS: readonly string[] = cuda ? AR_NORM_ALGORITHMS : CPU_AR_NORM_ALGORITHMS;
const record = (a: string): ArNormRecord => (AR_NORM as Readonly<Record<string, ArNormRecord>>)[a]!;
/** Whether `a` gives the reference's bits: auto and the rank-order algorithms; nccl on 2 ranks, where its
 * one addition is the rank-order sum. */
const exact = (a: string): boolean => a === "auto" || record(a).rankOrder || world === 2;
/** Whether `a` can take x of `rows` x `hidden` (2-byte elements; `symmetric`: read in place), else its call
 * is a typed refusal: GPUs by the room its record needs (auto always, in pieces beyond the staging buffer),
 * the CPU backend while x fits its staging buffer (it stages x whole). */
function runs(a: string, rows: number, hidden: number, symmetric = false): boolean {
  const bytes = 2 * rows * hidden;
  if (!gpu) return bytes <= capacity;
  const slot = gpu.collectives.mailboxSlotBytes;
  const name = a as Exclude<ArNormAlgorithm, "auto">;
  return a === "auto" || roomFor(name, bytes, rows, world, slot, capacity, symmetric) === undefined;
}
/** Whether a call of `a` on x of `rows` x `hidden` with an fp8 output needs a residualOut: on GPUs the
 * sequential constructions (no kernel of their own, auto's pick among them) keep the all-reduced sum there.
 * The CPU backend needs none. */
const needsHome = (a: string, rows: number, hidden: number): boolean =>
  gpu !== undefined &&
  record(a === "auto" ? gpu.collectives.autoArNormAlgorithm(2 * rows * hidden, rows) : a).kernel ===
    undefined;

// ---- Inputs and the reference.
type NormDtype = "bf16" | "f16";
type Range = readonly [number, number];
interface Problem {
  readonly dtype: NormDtype;
  /** x's shape: rows of hidden elements, hidden last. */
  readonly shape: readonly number[];
  readonly bias: boolean;
  readonly residual: boolean;
  readonly eps: number;
  /** Every partial sum of the xs is exact in any order (small multiples of 1/2): NCCL's sum too. */
  readonly exactSums?: boolean;
}
/** Where x, weight, bias and residual are drawn from (uniform). */
interface Ranges {
  readonly x: Range;
  readonly weight: Range;
  readonly bias: Range;
  readonly residual: Range;
}
/** A layer's values: x and residual in [-2, 2), weight near 1, a small bias. */
const LAYER: Ranges = { x: [-2, 2], weight: [0.5, 1.5], bias: [-0.5, 0.5], residual: [-2, 2] };
/** Bias and residual in their four combinations. */
const OPTIONS = [
  [true, true],
  [false, false],
  [true, false],
  [false, true],
] as const;

/** A problem's raw inputs: every rank's x in rank order, the weight, bias and residual. */
interface Raw {
  readonly xs: Uint16Array[];
  readonly weight: Uint16Array;
  readonly bias: Uint16Array | undefined;
  readonly residual: Uint16Array | undefined;
}
const rowsOf = (p: Problem): [rows: number, hidden: number] => {
  const hidden = p.shape.at(-1)!;
  return [p.shape.reduce((a, b) => a * b, 1) / hidden, hidden];
};

let salts = 0;
/** Uniform values in `range`, drawn by the backend (GPUs draw millions fast, where the host's Philox takes
 * seconds) and read back. Every rank draws every tensor in the same order, so offsets match. */
function draw(shape: readonly number[], dtype: NormDtype, [low, high]: Range): Uint16Array {
  const t = make.rand(shape, dtype, { seed, offset: BigInt(salts++) << 32n, low, high });
  const raw = t.toHost();
  t.dispose();
  return raw;
}
function drawRaw(p: Problem, r: Ranges): Raw {
  const hidden = rowsOf(p)[1];
  return {
    xs: Array.from({ length: world }, () => draw(p.shape, p.dtype, r.x)),
    weight: draw([hidden], p.dtype, r.weight),
    bias: p.bias ? draw([hidden], p.dtype, r.bias) : undefined,
    residual: p.residual ? draw(p.shape, p.dtype, r.residual) : undefined,
  };
}

/** What rmsNormRows takes, written out here (not from the checks): an fp8e4m3 output with `outputScale`. */
function normProblem(p: Problem, outputScale?: number): NormProblem {
  const [rows, hidden] = rowsOf(p);
  return {
    rows,
    hidden,
    dtype: p.dtype,
    outDtype: outputScale === undefined ? p.dtype : "fp8e4m3",
    outScaleInv: outputScale === undefined ? 0 : f(1 / outputScale),
    eps: p.eps,
  };
}
/** The reference norm of `sum` with weight, bias and residual from `parts`: output and residualOut. */
function normOf(
  p: Problem,
  sum: Uint16Array,
  parts: Omit<Raw, "xs">,
  outputScale?: number,
): { want: RawArray; wantResidual: Uint16Array } {
  const np = normProblem(p, outputScale);
  const want = rawArray(np.outDtype, sum.length);
  const wantResidual = new Uint16Array(sum.length);
  rmsNormRows(np, sum, parts, want, wantResidual);
  return { want, wantResidual };
}
/** The rank-order sum of `xs`, rounded once. */
function sumOf(p: Problem, xs: readonly Uint16Array[]): Uint16Array {
  const sum = new Uint16Array(xs[0]!.length);
  reduceInto(p.dtype, "sum", xs, 0, sum, 0, sum.length);
  return sum;
}

interface Inputs extends Raw {
  readonly p: Problem;
  readonly rows: number;
  readonly hidden: number;
  readonly sum: Uint16Array;
  /** The output's dtype, and for fp8e4m3 its scale. */
  readonly outDtype: DType;
  readonly outputScale: number | undefined;
  /** The reference's output and residualOut. */
  readonly want: RawArray;
  readonly wantResidual: Uint16Array;
  /** This rank's x, and what every call takes: weight, eps, bias, residual. */
  readonly x: AnyTensor;
  readonly opts: {
    readonly weight: AnyTensor;
    readonly eps: number;
    readonly bias: AnyTensor | undefined;
    readonly residual: AnyTensor | undefined;
  };
  /** The tensors made, with the elements they were made from. */
  readonly made: readonly (readonly [AnyTensor, Uint16Array])[];
}
const upload = (raw: Uint16Array, dtype: NormDtype, shape: readonly number[]): AnyTensor =>
  make.fromHost(raw, dtype, { shape });
/** Problem `p` on `raw`: the reference, and this rank's tensors. */
function inputs(p: Problem, raw: Raw, outputScale?: number): Inputs {
  const [rows, hidden] = rowsOf(p);
  const sum = sumOf(p, raw.xs);
  const made: (readonly [AnyTensor, Uint16Array])[] = [];
  const put = (r: Uint16Array | undefined, shape: readonly number[]): AnyTensor | undefined => {
    if (!r) return undefined;
    const t = upload(r, p.dtype, shape);
    made.push([t, r]);
    return t;
  };
  return {
    ...raw,
    ...normOf(p, sum, raw, outputScale),
    p,
    rows,
    hidden,
    sum,
    outDtype: outputScale === undefined ? p.dtype : "fp8e4m3",
    outputScale,
    x: put(raw.xs[rank], p.shape)!,
    opts: {
      weight: put(raw.weight, [hidden])!,
      eps: p.eps,
      bias: put(raw.bias, [hidden]),
      residual: put(raw.residual, p.shape),
    },
    made,
  };
}
/** A case that checks, once the batch's calls are done, that `inp`'s tensors hold what they were made
 * from; then they go. */
const kept = (inp: Inputs, what: string): Case => ({
  run: () => undefined,
  check: () =>
    inp.made.forEach(([t, r], k) =>
      assertSameBits(t.toHost(), r, `rank ${rank}: ${what}: input ${k} was written`, seed),
    ),
  tensors: inp.made.map(([t]) => t),
});

// ---- The reference against float64 arithmetic.
/** Unit roundoff (half an ulp, relative) and half the subnormal spacing (absolute) of each format. */
const UNIT: Record<NormDtype | "fp8e4m3", { u: number; eta: number }> = {
  bf16: { u: 2 ** -8, eta: 2 ** -134 },
  f16: { u: 2 ** -11, eta: 2 ** -25 },
  fp8e4m3: { u: 2 ** -4, eta: 2 ** -10 },
};

/**
 * The float64 answer: A = sum of the ranks' x, H = A + bias + residual, Y = H / sqrt(mean(H^2) + eps) x
 * weight (fp8: times 1 / outputScale, clamped to +-448), and for each element a bound on how far a correct
 * reference may be from it. The bound, derived (u: unit roundoff of x's dtype, eta: half its subnormal
 * spacing):
 *  - a = round(A) is within u|A| + eta of A (the float32 sum of a few bf16/f16 values is exact or off by
 *    2^-24 relative, far below u); the float32 additions of bias and residual add at most
 *    2^-23 (|a| + |b| + |r|); rounding that to h adds u of it. So h is within
 *    D_i = u|H| + (u + u^2 + 2^-22)(|A| + |b| + |r|) + 3 eta of H. D_i is not relative to |H_i|: a sum
 *    that cancels (|A| >> |H|) keeps a's rounding error.
 *  - rms is 1-Lipschitz in the row as a vector over sqrt(hidden), and so is sqrt(ms + eps) in rms, so
 *    the denominator rho moves by at most Drho = sqrt(mean(D_i^2)).
 *  - h_i / rho_h - H_i / rho is then, to first order, within D_i / rho + |H_i| Drho / rho^2; times |w_i|.
 *  - the norm's float32 arithmetic (per thread at most 32 additions, then two butterflies; a division, a
 *    square root, a reciprocal, two products) is within 2^-16 |Y| with a wide margin; the output's
 *    rounding adds u_out |y| + eta_out.
 * The sum of these times 1.25 (for second-order terms) is the bound. With no cancellation it is about
 * 2.5 u |Y_i| + u |w_i| |A_i| / rho: two or three ulps of the output dtype, the "couple of ulps" a correct
 * implementation must meet and a wrong formula does not (a missing bias, residual or weight; eps left out,
 * which the small-scale cases, mean(h^2) about eps, see; hidden - 1 for hidden, which hidden 8 sees).
 */
function float64(inp: Inputs): {
  y: Float64Array;
  yBound: Float64Array;
  /** The largest magnitude, in y's units, that a rounding of a, h or y acts on: max(|Y_i|,
   * |w_i| (|A_i| + |b_i| + |r_i|) / rho). */
  yScale: Float64Array;
  h: Float64Array;
  hBound: Float64Array;
} {
  const { rows, hidden } = inp;
  const dtype = inp.p.dtype;
  const n = rows * hidden;
  const xs = inp.xs.map((x) => decodeToF32(dtype, x));
  const w = decodeToF32(dtype, inp.weight);
  const b = inp.bias && decodeToF32(dtype, inp.bias);
  const r = inp.residual && decodeToF32(dtype, inp.residual);
  const { u, eta } = UNIT[dtype];
  const out = UNIT[inp.outputScale === undefined ? dtype : "fp8e4m3"];
  const scale = inp.outputScale === undefined ? 1 : 1 / inp.outputScale;
  const H = new Float64Array(n);
  const D = new Float64Array(n);
  const yScale = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (const x of xs) s += x[i]!;
    const bi = b ? b[i % hidden]! : 0;
    const ri = r ? r[i]! : 0;
    H[i] = s + bi + ri;
    yScale[i] = Math.abs(s) + Math.abs(bi) + Math.abs(ri);
    D[i] =
      u * Math.abs(H[i]!) + (u + u * u + 2 ** -22) * (Math.abs(s) + Math.abs(bi) + Math.abs(ri)) + 3 * eta;
  }
  const y = new Float64Array(n);
  const yBound = new Float64Array(n);
  for (let row = 0; row < rows; row++) {
    const at = row * hidden;
    let sq = 0;
    let dsq = 0;
    for (let k = 0; k < hidden; k++) {
      sq += H[at + k]! ** 2;
      dsq += D[at + k]! ** 2;
    }
    const rho = Math.sqrt(sq / hidden + inp.p.eps);
    const dRho = Math.sqrt(dsq / hidden);
    for (let k = 0; k < hidden; k++) {
      const i = at + k;
      const wk = Math.abs(w[k]!);
      let v = (H[i]! / rho) * w[k]! * scale;
      if (inp.outputScale !== undefined) v = Math.max(-448, Math.min(448, v));
      y[i] = v;
      const before =
        wk * scale * (D[i]! / rho + (Math.abs(H[i]!) * dRho) / rho ** 2) + 2 ** -16 * Math.abs(v);
      yBound[i] = 1.25 * (before + out.u * (Math.abs(v) + before)) + out.eta;
      yScale[i] = Math.max(Math.abs(v), (wk * scale * yScale[i]!) / rho);
    }
  }
  return { y, yBound, yScale, h: H, hBound: D };
}

/** got (raw elements of `dtype`) within bound of want, element by element; returns the worst got/bound. */
function near(got: RawArray, dtype: DType, want: Float64Array, bound: Float64Array, what: string): number {
  const g = decodeToF32(dtype, got);
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(g[i]! - want[i]!);
    if (!(err <= bound[i]!))
      assert.fail(
        `${what}: element ${i} is ${g[i]}, expected ${want[i]} within ${bound[i]} (seed ${seed}, rank ${rank})`,
      );
    if (bound[i]! > 0) worst = Math.max(worst, err / bound[i]!);
  }
  return worst;
}

/** The largest error of the reference over the bound, over all checked. */
let worstRatio = 0;
/** The reference of `inp` against float64: each element within its bound (output and residualOut), and an
 * output of x's dtype within four roundings of the largest magnitude its row's roundings act on (a, h and
 * y each rounded once; where the residual cancels the sum, a's rounding acts on the sum, not on y). */
function checkFloat64(inp: Inputs, what: string): void {
  const r = float64(inp);
  worstRatio = Math.max(worstRatio, near(inp.want, inp.outDtype, r.y, r.yBound, `${what}: output`));
  near(inp.wantResidual, inp.p.dtype, r.h, r.hBound, `${what}: residualOut`);
  if (inp.outputScale !== undefined) return;
  const got = decodeToF32(inp.p.dtype, inp.want);
  const ulp = UNIT[inp.p.dtype].u;
  for (let row = 0; row < inp.rows; row++) {
    const ys = r.y.subarray(row * inp.hidden, (row + 1) * inp.hidden);
    const max = r.yScale
      .subarray(row * inp.hidden, (row + 1) * inp.hidden)
      .reduce((m, v) => Math.max(m, v), 0);
    ys.forEach((v, j) => {
      const g = got[row * inp.hidden + j]!;
      if (!(Math.abs(g - v) <= 4 * ulp * max))
        assert.fail(`${what}: float64 row ${row} col ${j}: ${g} vs ${v} (seed ${seed})`);
    });
  }
}

/** round((sum + bias) + residual) in float32, written out: what residualOut must hold. */
function residualOf(inp: Inputs): Uint16Array {
  const dtype = inp.p.dtype;
  const a = decodeToF32(dtype, inp.sum);
  const b = inp.bias && decodeToF32(dtype, inp.bias);
  const r = inp.residual && decodeToF32(dtype, inp.residual);
  const h = new Float64Array(a.length);
  for (let i = 0; i < a.length; i++) {
    let v = a[i]!;
    if (b) v = f(v + b[i % inp.hidden]!);
    if (r) v = f(v + r[i]!);
    h[i] = v;
  }
  return encode(dtype, h);
}

// ---- Checks: results against the reference, hashed for the ranks to agree on once a batch.
let outputs: string[] = [];
/** Whether `a` gives `inp`'s reference bits: an exact algorithm, or any on sums exact in any order. */
const bitsFor = (a: string, inp: Inputs): boolean => exact(a) || inp.p.exactSums === true;
/**
 * `got` (of `dtype`) against the reference `want`: bit for bit where promised (`bits`, then also agreed by
 * the ranks); else within NCCL's rounding (ncclNormTolerance) as a relative Frobenius
 * difference over the finite elements, with NaN and infinities where the reference has them.
 */
function expect(bits: boolean, got: RawArray, want: RawArray, dtype: DType, what: string): void {
  if (bits) {
    assertSameBits(got, want, `rank ${rank}: ${what}`, seed);
    outputs.push(rawHash(got));
    return;
  }
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
/** The ranks agree on the exact results checked since the last agreement. */
async function agreed(what: string): Promise<void> {
  await agree(new TextEncoder().encode(outputs.join("\n")), `${what}: the outputs`);
  outputs = [];
}
/** A batch, then the ranks' exact results agreed bit for bit. */
async function checked(what: string, cases: readonly (Case | undefined)[], late?: number): Promise<void> {
  outputs = [];
  await batch(cases, late);
  await agreed(what);
}
/** `whole` (made by poisonedIn) holds the poison in its guards, `inner` between them. */
const guarded = (whole: AnyTensor, inner: AnyTensor, what: string): void =>
  void expectPoisonedIn(make, whole, bytesOf(inner), `rank ${rank}: ${what}`, seed);
/** `whole` (made by poisonedIn) holds the poison throughout: nothing was written. */
const untouched = (whole: AnyTensor, what: string): void =>
  void expectPoisonedIn(make, whole, poisonOf(make, whole.dtype, whole.numel - 2 * GUARD), what, seed);
/** What `call` does: the error it throws, or "no error". */
function thrown(call: () => unknown): unknown {
  try {
    call();
  } catch (e) {
    return e;
  }
  return "no error";
}
type Opts = Parameters<typeof c.allReduceRmsNorm>[1];
type Result = ReturnType<typeof c.allReduceRmsNorm>;

// ---- Cases: one call each (test/support/batch.ts), checked against the reference.
/**
 * A call of `a` into a poisoned output (of the reference's dtype and outputScale) and a poisoned
 * residualOut (with `residualOut` false, one only where the call needs it: needsHome): both checked, guards
 * intact. Where `a` cannot take x here (runs), a typed refusal at the call with both left as they were.
 * `call` makes the call with the options (default: on inp.x); `symmetric`: its x is read in place.
 */
function intoPoisoned(
  inp: Inputs,
  a: string,
  what: string,
  o: { call?: (options: Opts) => Result; symmetric?: boolean; residualOut?: boolean } = {},
): Case & { readonly output: AnyTensor } {
  const call = o.call ?? ((options: Opts) => c.allReduceRmsNorm(inp.x, options));
  const [oWhole, output] = poisonedIn(make, inp.outDtype, inp.p.shape);
  const home = o.residualOut !== false || needsHome(a, inp.rows, inp.hidden);
  const [rWhole, residualOut] = home ? poisonedIn(make, inp.p.dtype, inp.p.shape) : [];
  const options = {
    ...inp.opts,
    output,
    residualOut,
    outputScale: inp.outputScale,
    algorithm: a,
  };
  const takes = runs(a, inp.rows, inp.hidden, o.symmetric);
  const bits = bitsFor(a, inp);
  let r: Result | undefined;
  let error: unknown;
  return {
    output,
    run: () => {
      if (takes) r = call(options);
      else error = thrown(() => call(options));
    },
    check: () => {
      if (!takes) {
        assert.ok(
          typed(error),
          `${what}: ${a} lacks the room: expected a typed refusal, got ${String(error)}`,
        );
        untouched(oWhole, `${what}: output after the refusal`);
        if (rWhole) untouched(rWhole, `${what}: residualOut after the refusal`);
        return;
      }
      assert.ok(r?.output === output, `${what}: returns the given output`);
      assert.equal(r.residualOut, residualOut, `${what}: returns the given residualOut`);
      expect(bits, output.toHost(), inp.want, inp.outDtype, `${what}: output`);
      guarded(oWhole, output, `${what}: output`);
      if (residualOut) {
        expect(bits, residualOut.toHost(), inp.wantResidual, inp.p.dtype, `${what}: residualOut`);
        guarded(rWhole!, residualOut, `${what}: residualOut`);
      }
    },
    tensors: [oWhole, ...(rWhole ? [rWhole] : [])],
  };
}

/** A call of `a` whose output it makes (x's shape and dtype), with a poisoned residualOut or none (then it
 * returns none). */
function allocated(inp: Inputs, a: string, what: string, withResidualOut: boolean): Case {
  const [rWhole, residualOut] = withResidualOut ? poisonedIn(make, inp.p.dtype, inp.p.shape) : [];
  const tensors = rWhole ? [rWhole] : [];
  let r: Result | undefined;
  return {
    run: () => {
      r = c.allReduceRmsNorm(inp.x, { ...inp.opts, residualOut, algorithm: a });
      tensors.push(r.output);
    },
    check: () => {
      assert.ok(r);
      assert.deepEqual(r.output.shape, inp.p.shape, `${what}: output shape`);
      assert.equal(r.output.dtype, inp.p.dtype, `${what}: output dtype`);
      assert.equal(
        r.residualOut,
        residualOut,
        `${what}: residualOut the given one, or none if not asked for`,
      );
      expect(bitsFor(a, inp), r.output.toHost(), inp.want, inp.p.dtype, `${what}: output`);
      if (!residualOut) return;
      expect(bitsFor(a, inp), residualOut.toHost(), inp.wantResidual, inp.p.dtype, `${what}: residualOut`);
      guarded(rWhole!, residualOut, `${what}: residualOut`);
    },
    tensors,
  };
}

/** A call of `a` in place: output = x (a copy of this rank's), residualOut = residual (a copy; without a
 * residual, a tensor of NaN). */
function inPlace(inp: Inputs, a: string, what: string): Case {
  const { dtype, shape } = inp.p;
  const x = upload(inp.xs[rank]!, dtype, shape);
  const res = inp.residual ? upload(inp.residual, dtype, shape) : make.full(shape, NaN, dtype);
  let r: Result | undefined;
  return {
    run: () => {
      const residual = inp.residual ? res : undefined;
      r = c.allReduceRmsNorm(x, { ...inp.opts, residual, output: x, residualOut: res, algorithm: a });
    },
    check: () => {
      assert.ok(r?.output === x && r.residualOut === res, `${what}: in place returns its tensors`);
      expect(bitsFor(a, inp), x.toHost(), inp.want, dtype, `${what}: in place output`);
      expect(bitsFor(a, inp), res.toHost(), inp.wantResidual, dtype, `${what}: in place residualOut`);
    },
    tensors: [x, res],
  };
}

/** A call of `a` with residualOut = x (a copy of this rank's; read before it is written), its output made. */
function residualOutIsX(inp: Inputs, a: string, what: string): Case {
  const x = upload(inp.xs[rank]!, inp.p.dtype, inp.p.shape);
  const tensors = [x];
  let r: Result | undefined;
  return {
    run: () => {
      r = c.allReduceRmsNorm(x, { ...inp.opts, residualOut: x, algorithm: a });
      tensors.push(r.output);
    },
    check: () => {
      assert.ok(r?.residualOut === x, `${what}: residualOut = x returns x`);
      expect(bitsFor(a, inp), r.output.toHost(), inp.want, inp.p.dtype, `${what}: residualOut = x, output`);
      expect(bitsFor(a, inp), x.toHost(), inp.wantResidual, inp.p.dtype, `${what}: residualOut = x`);
    },
    tensors,
  };
}

/** The backend's allReduce of this rank's x: the rank-order sum the reference starts from. */
function allReduced(inp: Inputs, what: string): Case {
  const tensors: AnyTensor[] = [];
  return {
    run: () => void tensors.push(c.allReduce(inp.x)),
    check: () => expect(true, tensors[0]!.toHost(), inp.sum, inp.p.dtype, `${what}: allReduce`),
    tensors,
  };
}

// ---- Every algorithm, dtype, hidden class and row count, into poisoned outputs: the reference's bits
// (nccl within rounding), or a typed refusal where the algorithm lacks the room.
{
  // The CPU backend's calls are host loops on shared cores: fewer rows.
  const ROWS = cuda ? [1, 7, 128] : [1, 7, 33];
  const shapes: [NormDtype, number, number][] = [];
  for (const dtype of ["bf16", "f16"] as const)
    for (const rows of ROWS)
      for (const hidden of [1024, 4096, 8192, 8200]) shapes.push([dtype, rows, hidden]);
  // GPUs only: more rows than SMs, past the mailbox (lamport refused), and 32 MiB where the shipped tables'
  // all-reduce rules once named NCCL (sequential's all-reduce is auto's, in rank order): what GPU kernels
  // and tables meet; the CPU backend stages x whole in a small buffer.
  if (gpu) shapes.push(["bf16", 4097, 4096], ["f16", 4097, 1024], ["f16", 1025, 8200]);
  let calls = 0;
  let refused = 0;
  for (const [i, [dtype, rows, hidden]] of shapes.entries()) {
    const [bias, residual] = OPTIONS[(i + Math.floor(i / 4)) % 4]!;
    const p: Problem = { dtype, shape: [rows, hidden], bias, residual, eps: EPS };
    const what = JSON.stringify(p);
    const inp = inputs(p, drawRaw(p, LAYER));
    if (rows <= 128) checkFloat64(inp, `${what}: the reference`);
    const taken = ALGORITHMS.filter((a) => runs(a, rows, hidden)).length;
    calls += taken;
    refused += ALGORITHMS.length - taken;
    await checked(what, [...ALGORITHMS.map((a) => intoPoisoned(inp, a, `${a} ${what}`)), kept(inp, what)]);
  }
  done(
    `every algorithm, ${shapes.length} shapes: bit for bit with the reference (nccl within rounding), guards intact; ${calls} calls, ${refused} refused for want of room`,
  );
}

// ---- Random data (eps 1e-5 and 1e-6; bias and residual in every combination; half the cases at a scale
// where mean(h^2) is about eps, so that eps moves the answer): the reference within its float64 bound;
// residualOut as written out; the backend's allReduce the rank-order sum; every algorithm out of place
// (its output made, residualOut given), in place and with residualOut = x; inputs unwritten.
{
  let cases = 0;
  for (const dtype of ["bf16", "f16"] as const)
    for (const [rowIndex, rows] of [1, 7, 33].entries()) {
      const batch: Case[] = [];
      for (const hidden of [8, 1024, 1032])
        for (let combo = 0; combo < 8; combo++) {
          const bias = (combo & 1) !== 0;
          const residual = (combo & 2) !== 0;
          const eps = combo & 4 ? 1e-6 : 1e-5;
          // Each combination of bias, residual and eps meets both scales (over the row counts).
          const parity = (combo ^ (combo >> 1) ^ (combo >> 2) ^ rowIndex) & 1;
          const s = parity === 0 ? 1 : 2 ** -9;
          const p: Problem = { dtype, shape: [rows, hidden], bias, residual, eps };
          const what = `${dtype} rows ${rows} hidden ${hidden} bias ${bias} residual ${residual} eps ${eps} scale ${s}`;
          const inp = inputs(
            p,
            drawRaw(p, { x: [-s, s], weight: [-2, 2], bias: [-s, s], residual: [-s, s] }),
          );
          checkFloat64(inp, `${what}: the reference`);
          assertSameBits(inp.wantResidual, residualOf(inp), `${what}: residualOut as written out`, seed);
          const algorithms = sharing ? [ALGORITHMS[cases % ALGORITHMS.length]!] : ALGORITHMS;
          for (const a of algorithms)
            batch.push(
              allocated(inp, a, `${a} ${what}`, true),
              inPlace(inp, a, `${a} ${what}`),
              residualOutIsX(inp, a, `${a} ${what}`),
            );
          batch.push(allReduced(inp, what), kept(inp, what));
          cases++;
        }
      await checked(`random ${dtype} rows ${rows}`, batch);
    }
  done(
    `random: ${cases} cases, the reference within its float64 bound (worst ${worstRatio.toFixed(3)} of it); every algorithm out of place, in place, residualOut = x; allReduce the rank-order sum; inputs unwritten`,
  );
}

// ---- Exactly representable: every element of row r is +-m_r (m_r a power of two), so sum(h^2) / hidden
// = m_r^2 exactly, + eps (1e-9) rounds back to m_r^2, rstd = 1 / m_r exactly and y = sign(h) x weight
// exactly; weights are powers of two, one of them 1024 (over e4m3's 448 once doubled: saturates). The
// xs are small multiples of 1/2, so every partial sum is exact in any order: every algorithm, NCCL's too,
// gives these bits.
{
  for (const dtype of ["bf16", "f16"] as const)
    for (const shape of [
      [3, 8],
      [2, 4, 16],
      [5, 1032],
    ]) {
      const p: Problem = { dtype, shape, bias: true, residual: true, eps: 1e-9, exactSums: true };
      const [rows, hidden] = rowsOf(p);
      const n = rows * hidden;
      const mag = (i: number): number => 2 ** ((Math.floor(i / hidden) % 4) - 1); // 0.5, 1, 2, 4
      const sign = (i: number): number => ((i * 7 + Math.floor(i / hidden)) % 3 === 0 ? -1 : 1);
      const h = Array.from({ length: n }, (_, i) => sign(i) * mag(i));
      const bias = Array.from({ length: hidden }, (_, k) => (k % 5) - 2);
      const residual = Array.from({ length: n }, (_, i) => ((i * 3 + 1) % 7) - 3);
      // Ranks but the last hold small integers and halves; the last what makes the sum h - bias - residual.
      const xs = Array.from({ length: world }, (_, r) =>
        Array.from({ length: n }, (_, i) => (((i + 2 * r) % 9) - 4) / 2),
      );
      for (let i = 0; i < n; i++) {
        let others = 0;
        for (let r = 0; r < world - 1; r++) others += xs[r]![i]!;
        xs[world - 1]![i] = h[i]! - bias[i % hidden]! - residual[i]! - others;
      }
      const w = Array.from({ length: hidden }, (_, k) =>
        k === hidden - 1 ? 1024 : (k % 2 ? -1 : 1) * 2 ** ((k % 9) - 4),
      );
      const raw: Raw = {
        xs: xs.map((x) => encode(dtype, x)),
        weight: encode(dtype, w),
        bias: encode(dtype, bias),
        residual: encode(dtype, residual),
      };
      const what = `exact ${dtype} shape ${JSON.stringify(shape)}`;
      raw.xs.forEach((x, r) =>
        assert.deepEqual(Array.from(decodeToF32(dtype, x)), xs[r], `${what}: rank ${r}'s x is representable`),
      );
      const inp = inputs(p, raw);
      // fp8, outputScale 0.5: e4m3(2 sign(h) weight), exact but for 2048, which saturates to 448.
      const inp8 = inputs(p, raw, 0.5);
      assertSameBits(inp.wantResidual, encode(dtype, h), `${what}: residualOut = h`, seed);
      const y = h.map((v, i) => Math.sign(v) * w[i % hidden]!);
      assertSameBits(inp.want, encode(dtype, y), `${what}: output = sign(h) x weight`, seed);
      const y8 = y.map((v) => Math.sign(v) * Math.min(448, Math.abs(2 * v)));
      assertSameBits(inp8.want, encode("fp8e4m3", y8), `${what}: fp8 output`, seed);
      const saturated = decodeToF32("fp8e4m3", inp8.want).filter((v) => Math.abs(v) === 448).length;
      assert.equal(saturated, rows, `${what}: one saturated element per row`);
      await checked(what, [
        ...ALGORITHMS.flatMap((a) => [
          intoPoisoned(inp, a, `${a} ${what}`),
          intoPoisoned(inp8, a, `${a} ${what} fp8`, { residualOut: false }),
        ]),
        kept(inp, what),
        kept(inp8, `${what} fp8`),
      ]);
    }
  // The saturating encoder itself, as the kernels' conversion: 448 and beyond -> 448, sign kept.
  assert.equal(encodeE4M3(f(2048)), 0x7e);
  assert.equal(encodeE4M3(f(-1e30)), 0xfe);
  done(
    "exact: output = sign(h) x weight and fp8 e4m3(2 sign(h) weight), saturated, every algorithm bit for bit",
  );
}

// ---- In place (output = x, residualOut = residual) and fp8 outputs at hidden 4096, every algorithm: a
// layer's values with outputScale 0.25 into a poisoned output, residualOut given; and weights up to 300
// with outputScale 0.5, many elements saturating at 448 (never NaN), residualOut only where the call
// needs one.
{
  const p: Problem = { dtype: "bf16", shape: [7, 4096], bias: true, residual: true, eps: EPS };
  const inp = inputs(p, drawRaw(p, LAYER));
  const fp8 = inputs(p, drawRaw(p, LAYER), 0.25);
  checkFloat64(fp8, "fp8 output, scale 0.25: the reference");
  const cases: Case[] = ALGORITHMS.flatMap((a) => [
    inPlace(inp, a, `${a} in place`),
    intoPoisoned(fp8, a, `${a} fp8 output, scale 0.25`),
  ]);
  for (const dtype of ["bf16", "f16"] as const) {
    const q: Problem = { dtype, shape: [7, 1032], bias: true, residual: true, eps: 1e-6 };
    const what = `fp8 output from ${dtype}, scale 0.5`;
    const sat = inputs(
      q,
      drawRaw(q, { x: [-1, 1], weight: [-300, 300], bias: [-1, 1], residual: [-1, 1] }),
      0.5,
    );
    checkFloat64(sat, `${what}: the reference`);
    for (const a of ALGORITHMS) {
      const k = intoPoisoned(sat, a, `${a} ${what}`, { residualOut: false });
      cases.push({
        ...k,
        check: () => {
          k.check();
          const raw = k.output.toHost();
          const n = decodeToF32("fp8e4m3", raw).filter((v) => Math.abs(v) === 448).length;
          assert.ok(n > 0 && n < raw.length, `${a} ${what}: ${n} saturated elements`);
          // Saturated, not NaN: e4m3 has no Inf, and its NaN is 0x7f / 0xff.
          assert.ok(!(raw as Uint8Array).some((b) => (b & 0x7f) === 0x7f), `${a} ${what}: NaN in the output`);
        },
      });
    }
    cases.push(kept(sat, what));
  }
  await checked("in place and fp8", [...cases, kept(inp, "in place"), kept(fp8, "fp8 output")]);
  done("in place and fp8 outputs (scales 0.25 and 0.5, saturating): every algorithm as the reference");
}

// ---- A symmetric x, read in place by the algorithms that stage x, every algorithm into poisoned outputs.
// The CPU backend takes its symmetric tensors as the host tensors they are, staged like any other.
if (gpu) {
  const gc = gpu.collectives;
  const p: Problem = { dtype: "bf16", shape: [7, 4096], bias: true, residual: true, eps: EPS };
  const inp = inputs(p, drawRaw(p, LAYER));
  const sym = await gpu.symmetric.empty(p.shape, "bf16");
  sym.tensor.copyFrom(inp.x as Tensor);
  const call = (o: Opts): Result =>
    // The options' tensors are this backend's: Tensors.
    gc.allReduceRmsNorm(
      sym,
      o as unknown as AllReduceRmsNormOptions<Tensor> & { algorithm?: ArNormAlgorithm },
    );
  await checked("symmetric x", [
    ...ALGORITHMS.map((a) => intoPoisoned(inp, a, `${a} symmetric x`, { call, symmetric: true })),
    kept(inp, "symmetric x"),
  ]);
  await sym.dispose();
  done("a symmetric x: every algorithm as the reference");
}

// ---- A CUDA graph of every algorithm and auto, replayed 4 times with x and the residual changed before
// each replay and every output copied aside after it, all on the stream; checked once the stream is done.
// The CPU backend has no graphs.
if (gpu) {
  const gc = gpu.collectives;
  const stream = defaultStream(gpu.device);
  const p: Problem = { dtype: "bf16", shape: [128, 8192], bias: true, residual: true, eps: EPS };
  const sets = [0, 1, 2].map(() => inputs(p, drawRaw(p, LAYER)));
  // One weight and bias for all sets (the graph keeps pointing at them): set 0's. The reference of each
  // set with them: its x and residual, set 0's weight and bias.
  const fixed = sets[0]!;
  const wants = sets.map((s) => normOf(p, s.sum, { ...fixed, residual: s.residual }));
  const x = Tensor.empty(p.shape, "bf16");
  const residual = Tensor.empty(p.shape, "bf16");
  const pair = (): [Tensor, Tensor] => [Tensor.empty(p.shape, "bf16"), Tensor.empty(p.shape, "bf16")];
  const outs = ALGORITHMS.map(pair);
  const replays = [0, 1, 2, 0].map((set) => ({ set, outs: ALGORITHMS.map(pair) }));
  await group.barrier();
  const graph = Graph.capture(stream, () => {
    ALGORITHMS.forEach((a, j) =>
      gc.allReduceRmsNorm(x, {
        weight: fixed.opts.weight as Tensor,
        bias: fixed.opts.bias as Tensor,
        residual,
        eps: EPS,
        output: outs[j]![0],
        residualOut: outs[j]![1],
        algorithm: a as ArNormAlgorithm,
        stream,
      }),
    );
  });
  for (const r of replays) {
    x.copyFrom(sets[r.set]!.x as Tensor, stream);
    residual.copyFrom(sets[r.set]!.opts.residual as Tensor, stream);
    graph.launch(stream);
    r.outs.forEach((o, j) => o.forEach((t, k) => t.copyFrom(outs[j]![k]!, stream)));
  }
  gpu.synchronize(stream);
  for (const [i, r] of replays.entries()) {
    const { want, wantResidual } = wants[r.set]!;
    ALGORITHMS.forEach((a, j) => {
      const [o, res] = r.outs[j]!;
      expect(exact(a), o.toHost(), want, "bf16", `graph replay ${i} ${a}`);
      expect(exact(a), res.toHost(), wantResidual, "bf16", `graph replay ${i} ${a}: residualOut`);
    });
  }
  await agreed("graph");
  graph.dispose();
  for (const t of [x, residual, ...outs.flat(), ...replays.flatMap((r) => r.outs.flat())]) t.dispose();
  for (const s of sets) for (const [t] of s.made) t.dispose();
  done("a CUDA graph of every algorithm and auto, replayed 4 times with x and the residual changed");
}

// ---- A rank 50 ms late for every algorithm, then 48 calls alternating sizes and algorithms back to back,
// every other one without residualOut, the last rank late.
{
  const problems: Problem[] = [
    { dtype: "bf16", shape: [1, 8192], bias: false, residual: true, eps: EPS },
    { dtype: "bf16", shape: [33, 4096], bias: true, residual: true, eps: EPS },
    { dtype: "f16", shape: [300, 1032], bias: true, residual: false, eps: EPS },
  ];
  const data = problems.map((p) => inputs(p, drawRaw(p, LAYER)));
  const d1 = data[1]!;
  for (const a of ALGORITHMS)
    await checked(`straggler ${a}`, [allocated(d1, a, `straggler ${a}`, true)], world - 1);
  let s = Number(seed % 1000n);
  const cases: Case[] = [];
  for (let i = 0; i < 48; i++) {
    s = (s * 1103515245 + 12345) % 2147483648;
    const d = data[s % 3]!;
    const a = ALGORITHMS[(s >> 4) % ALGORITHMS.length]!;
    cases.push(allocated(d, a, `call ${i}: ${a} ${JSON.stringify(d.p)}`, i % 2 === 0));
  }
  await checked(
    "alternating calls",
    [...cases, ...data.map((d, i) => kept(d, `alternating ${i}`))],
    world - 1,
  );
  done("a rank 50 ms late, then 48 calls alternating sizes and algorithms: as the reference");
}

// ---- NaN and Inf: a NaN in rank 0's x makes its row NaN throughout; an Inf in the last rank's makes its
// element NaN (Inf x rstd 0) and the rest of its row zero; residualOut keeps both; every other row has the
// clean inputs' bits. Every algorithm, as the reference: on the CPU backend bit for bit (it runs the host
// code itself), on GPUs value for value (a NaN's payload is the kernel's).
{
  const H = 1024;
  const nanAt = 3 * H + 5;
  const infAt = 5 * H + 9;
  const cases: Case[] = [];
  for (const dtype of ["bf16", "f16"] as const) {
    const p: Problem = { dtype, shape: [8, H], bias: true, residual: true, eps: EPS };
    const raw = drawRaw(p, LAYER);
    const clean = normOf(p, sumOf(p, raw.xs), raw).want;
    const xs = raw.xs.map((x) => x.slice());
    const [nan, inf] = encode(dtype, [NaN, Infinity]);
    xs[0]![nanAt] = nan!;
    xs[world - 1]![infAt] = inf!;
    const inp = inputs(p, { ...raw, xs });
    /** `got` holds `want`'s values (see above), agreed by the ranks. */
    const sameValues = (got: RawArray, want: RawArray, what: string): void => {
      outputs.push(rawHash(got));
      if (!cuda) return assertSameBits(got, want, `rank ${rank}: ${what}`, seed);
      const [g, w] = [decodeToF32(dtype, got), decodeToF32(dtype, want)];
      const i = w.findIndex((v, k) => !(Number.isNaN(v) ? Number.isNaN(g[k]!) : Object.is(v, g[k])));
      if (i >= 0) assert.fail(`${what}: element ${i} is ${g[i]}, expected ${w[i]} (seed ${seed})`);
    };
    for (const a of ALGORITHMS) {
      const what = `${a} NaN/Inf ${dtype}`;
      const [rWhole, residualOut] = poisonedIn(make, dtype, p.shape);
      const tensors = [rWhole];
      let r: Result | undefined;
      cases.push({
        run: () => {
          r = c.allReduceRmsNorm(inp.x, { ...inp.opts, residualOut, algorithm: a });
          tensors.push(r.output);
        },
        check: () => {
          assert.ok(r);
          const got = r.output.toHost();
          const res = residualOut.toHost();
          if (exact(a)) {
            sameValues(got, inp.want, `${what}: output`);
            sameValues(res, inp.wantResidual, `${what}: residualOut`);
            for (const row of [0, 1, 2, 4, 6, 7]) {
              const span = (t: RawArray): RawArray => t.subarray(row * H, (row + 1) * H);
              assertSameBits(span(got), span(clean), `${what}: row ${row} is not the clean one`, seed);
            }
          } else {
            expect(false, got, inp.want, dtype, `${what}: output`);
            expect(false, res, inp.wantResidual, dtype, `${what}: residualOut`);
          }
          const y = decodeToF32(dtype, got);
          const h = decodeToF32(dtype, res);
          for (let i = 3 * H; i < 4 * H; i++)
            assert.ok(Number.isNaN(y[i]!), `${what}: the NaN's row: ${y[i]}`);
          for (let i = 5 * H; i < 6 * H; i++)
            if (i === infAt) assert.ok(Number.isNaN(y[i]!), `${what}: the Inf gives ${y[i]}, not NaN`);
            else assert.equal(Math.abs(y[i]!), 0, `${what}: the Inf's row, element ${i - 5 * H}: ${y[i]}`);
          assert.ok(Number.isNaN(h[nanAt]!), `${what}: residualOut keeps the NaN`);
          assert.equal(h[infAt], Infinity, `${what}: residualOut keeps the Inf`);
          guarded(rWhole, residualOut, `${what}: residualOut`);
        },
        tensors,
      });
    }
    cases.push(kept(inp, `NaN/Inf ${dtype}`));
  }
  await checked("NaN and Inf", cases);
  done(
    "NaN and Inf in x: confined to their rows (NaN, or zero but the Inf), every other row as the reference",
  );
}

// ---- A staging buffer (2 MiB) and mailbox slot (1 MiB) smaller than x: no rank-order algorithm takes the
// all-reduce whole, so sequential and auto run it in pieces the buffer holds, still the reference's bits;
// so do allReduce and reduceScatter with auto (reduce-scatter's pieces: the copy engines, each rank's
// chunk read where it lies); eager and in a graph. GPUs only: the CPU backend stages x whole, refusing
// one past its staging buffer (the bad inputs below).
if (gpu) {
  const stream = defaultStream(gpu.device);
  const small = (await gpu.newGroupWith<GpuCollectives>(gpu.ranks, (g) =>
    GpuCollectives.create(g, 2 << 20, { mailboxSlotBytes: 1 << 20 }),
  ))!;
  const sc = small.collectives;
  // 8 MiB of x: past the staging buffer, and past the mailbox for lamport_two_shot up to 8 ranks.
  const p: Problem = { dtype: "bf16", shape: [2049, 2048], bias: true, residual: true, eps: EPS };
  const inp = inputs(p, drawRaw(p, LAYER));
  const x = inp.x as Tensor;
  const options = {
    weight: inp.opts.weight as Tensor,
    bias: inp.opts.bias as Tensor,
    residual: inp.opts.residual as Tensor,
    eps: EPS,
  };
  assert.equal(sc.autoArNormAlgorithm(x.nbytes, inp.rows), "sequential");
  // Reduce-scatter: an odd chunk (1 MiB + 6 bytes of output, world times that of input), so the pieces
  // of ranks' chunks lie at unaligned offsets.
  const chunk = (1 << 19) + 3;
  assert.equal(sc.autoAlgorithm("reduce-scatter", chunk * 2, chunk * 2 * world), "copy_engine");
  const wholes = Array.from({ length: world }, () => draw([chunk * world], "bf16", LAYER.x));
  const want = new Uint16Array(chunk);
  reduceInto(
    "bf16",
    "sum",
    wholes.map((w) => w.subarray(rank * chunk, (rank + 1) * chunk)),
    0,
    want,
    0,
    chunk,
  );
  const big = Tensor.fromHost(wholes[rank]!, "bf16");
  const [whole, out] = poisonedIn(Tensor, "bf16", [chunk]);
  const inPlaceSum = upload(inp.xs[rank]!, "bf16", p.shape) as Tensor;
  await group.barrier();
  const norms = (["sequential", "auto", "nccl"] as const).map((a) => ({
    a,
    r: sc.allReduceRmsNorm(x, { ...options, residualOut: Tensor.empty(p.shape, "bf16"), algorithm: a }),
  }));
  const sum = sc.allReduce(x);
  sc.allReduce(inPlaceSum, { output: inPlaceSum });
  sc.reduceScatter(big, out);
  small.synchronize(stream);
  for (const { a, r } of norms) {
    expect(exact(a), r.output.toHost(), inp.want, "bf16", `pieces: ${a}`);
    expect(exact(a), r.residualOut!.toHost(), inp.wantResidual, "bf16", `pieces: ${a} residualOut`);
  }
  expect(true, sum.toHost(), inp.sum, "bf16", "pieces: allReduce auto");
  expect(true, inPlaceSum.toHost(), inp.sum, "bf16", "pieces: allReduce auto in place");
  guarded(whole, out, "pieces: reduceScatter auto");
  assertSameBits(out.toHost(), want, "pieces: reduceScatter auto", seed);
  // Pieces are calls like any other: captured in a CUDA graph and replayed.
  const gOut = Tensor.empty(p.shape, "bf16");
  const gRes = Tensor.empty(p.shape, "bf16");
  const gScatter = Tensor.empty([chunk], "bf16");
  const graph = Graph.capture(stream, () => {
    sc.allReduceRmsNorm(x, {
      ...options,
      output: gOut,
      residualOut: gRes,
      algorithm: "sequential",
      stream,
    });
    sc.reduceScatter(big, gScatter, { stream });
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
  const own = big.slice(rank * chunk, (rank + 1) * chunk);
  sc.reduceScatter(big, own);
  small.synchronize(stream);
  assertSameBits(own.toHost(), want, "pieces: reduceScatter auto into its own chunk", seed);
  await agreed("pieces");
  for (const t of [
    whole,
    big,
    gOut,
    gRes,
    gScatter,
    sum,
    inPlaceSum,
    ...norms.flatMap(({ r }) => [r.output, r.residualOut!]),
    ...inp.made.map(([t]) => t),
  ])
    t.dispose();
  await small.destroy();
  done(
    "a 2 MiB staging buffer: sequential, auto, allReduce and reduceScatter in pieces, eager and in a graph, bit for bit; nccl within rounding",
  );
}

// ---- Bad inputs, made alike on every rank: typed errors thrown before anything is enqueued or exchanged,
// the same message on every rank, no tensor written (each checked after each call); then every algorithm
// runs. Arguments that are not tensors are typed errors too, never TypeErrors.
{
  const R = 7;
  const H = 1024;
  const shape = [R, H];
  const p: Problem = { dtype: "bf16", shape, bias: false, residual: true, eps: EPS };
  const inp = inputs(p, drawRaw(p, LAYER));
  assertSameBits(inp.wantResidual, residualOf(inp), "bad inputs: residualOut as written out", seed);
  const { x } = inp;
  const { weight } = inp.opts;
  const residual = inp.opts.residual!;
  const [oWhole, out] = poisonedIn(make, "bf16", shape);
  const [rWhole, resOut] = poisonedIn(make, "bf16", shape);
  const ok = { weight, eps: EPS, output: out, residualOut: resOut };
  const zeros = (s: readonly number[], dtype: DType = "bf16"): AnyTensor => make.zeros(s, dtype);
  // A row more than x: an output of the wrong size, and memory x and the outputs share.
  const big = make.full([R + 1, H], NaN, "bf16");
  const out32 = make.full(shape, NaN, "f32");
  const out8 = make.full(shape, 1, "fp8e4m3");
  // Memory that holds a read-only tensor and a written one at once.
  const w32 = make.full(shape, NaN, "bf16");
  const b32 = make.full(shape, NaN, "bf16");
  // One memory as x (bf16) and an fp8 output over its first bytes: device memory of the program's own on
  // GPUs, a host buffer on the CPU backend.
  const [overX, over8, freeOver] = ((): [AnyTensor, AnyTensor, () => void] => {
    if (gpu) {
      const mem = DeviceMemory.alloc(2 * R * H, gpu.device);
      return [
        Tensor.fromMemory(mem, shape, "bf16"),
        Tensor.fromMemory(mem, shape, "fp8e4m3"),
        () => mem.dispose(),
      ];
    }
    const t = HostTensor.empty(shape, "bf16");
    const o = HostTensor.over(t.raw.buffer, t.raw.byteOffset, shape, "fp8e4m3", () => true);
    return [t, o, () => t.dispose()];
  })();
  // x past the room of an algorithm: 18 MiB (past GPUs' mailbox slot), and a row past the staging buffer.
  const wide = zeros([8192]);
  const huge = [1100, Math.floor(capacity / (2 * 8192)) + 1].map((rows) => zeros([rows, 8192]));
  const watched = [x, weight, residual, oWhole, rWhole, big, out32, out8, w32, b32].map(
    (t) => [t, t.toHost()] as const,
  );
  const call =
    (o: object, input: unknown = x) =>
    (): unknown =>
      c.allReduceRmsNorm(input as AnyTensor, o as Opts);
  const theirs = AR_NORM_ALGORITHMS.filter((a) => !ALGORITHMS.includes(a));
  type Bad = [string, () => unknown];
  const bad: Bad[] = [
    ["eps 0", call({ ...ok, eps: 0 })],
    ["eps -1", call({ ...ok, eps: -1 })],
    ["eps NaN", call({ ...ok, eps: NaN })],
    ["eps Infinity", call({ ...ok, eps: Infinity })],
    ["eps missing", call({ weight, output: out })],
    ["weight missing", call({ eps: EPS, output: out })],
    [`weight of ${H + 8} elements`, call({ ...ok, weight: zeros([H + 8]) })],
    ["weight f16", call({ ...ok, weight: zeros([H], "f16") })],
    [`bias of ${H / 2} elements`, call({ ...ok, bias: zeros([H / 2]) })],
    ["bias f16", call({ ...ok, bias: zeros([H], "f16") })],
    [`residual of ${R + 1} rows`, call({ ...ok, residual: zeros([R + 1, H]) })],
    ["residualOut of one row", call({ ...ok, residualOut: zeros([H]) })],
    [
      `hidden ${H - 4}, not a multiple of 8`,
      call({ ...ok, weight: zeros([H - 4]), output: zeros([R, H - 4]) }, zeros([R, H - 4])),
    ],
    ["hidden 16392, past 16384", call({ weight: zeros([16392]), eps: EPS }, zeros([1, 16392]))],
    ["x f32", call(ok, zeros(shape, "f32"))],
    [
      "x f32, weight and output f32",
      call({ weight: zeros([H], "f32"), eps: EPS, output: out32 }, zeros(shape, "f32")),
    ],
    ["output f32 for bf16 x", call({ ...ok, output: out32 })],
    [`output of ${R + 1} rows`, call({ ...ok, output: big })],
    ["fp8 output without outputScale", call({ ...ok, output: out8 })],
    ["fp8 output with outputScale 0", call({ ...ok, output: out8, outputScale: 0 })],
    ["fp8 output with outputScale NaN", call({ ...ok, output: out8, outputScale: NaN })],
    ["fp8 output, 1 / outputScale over float32", call({ ...ok, output: out8, outputScale: 1e-39 })],
    ["outputScale with a bf16 output", call({ ...ok, outputScale: 0.5 })],
    ["outputScale with the default output", call({ weight, eps: EPS, outputScale: 0.5 })],
    ["algorithm ring", call({ ...ok, algorithm: "ring" })],
    ...theirs.map((a): Bad => [`algorithm ${a}, the other backend's`, call({ ...ok, algorithm: a })]),
    ["output = residual", call({ ...ok, residual, output: residual })],
    ["output = residualOut", call({ ...ok, residualOut: out })],
    ["output over weight's memory", call({ ...ok, output: w32, weight: w32.view([R * H]).slice(0, H) })],
    [
      "residualOut over bias's memory",
      call({ ...ok, bias: b32.view([R * H]).slice(0, H), residualOut: b32 }),
    ],
    [
      "residualOut = output = x",
      call({ weight, eps: EPS, output: big.slice(0, R), residualOut: big.slice(0, R) }, big.slice(0, R)),
    ],
    [
      "output overlaps x, not exactly",
      call({ weight, eps: EPS, output: big.slice(1, R + 1) }, big.slice(0, R)),
    ],
    ["fp8 output over x's memory", call({ weight, eps: EPS, outputScale: 0.5, output: over8 }, overX)],
    ["x not a tensor", call(ok, {})],
    ["options missing", () => c.allReduceRmsNorm(x, undefined as unknown as Opts)],
    ["options null", () => c.allReduceRmsNorm(x, null as unknown as Opts)],
    // In place, as a layer's norm, by every algorithm that lacks the room (runs).
    ...huge.flatMap((t) =>
      ALGORITHMS.filter((a) => !runs(a, t.shape[0]!, 8192)).map((a): Bad => [
        `${a}: x of ${t.shape[0]} x 8192`,
        call({ weight: wide, eps: EPS, output: t, algorithm: a }, t),
      ]),
    ),
    // GPUs only: their sequential constructions keep the all-reduced sum in residualOut for an fp8 output,
    // which must then be given and not be the residual (the CPU backend takes these: the fp8 section).
    ...ALGORITHMS.filter((a) => needsHome(a, R, H)).flatMap((a): Bad[] => [
      [
        `${a}: fp8 output without residualOut`,
        call({ weight, eps: EPS, output: out8, outputScale: 0.5, algorithm: a }),
      ],
      [
        `${a}: fp8 output, residualOut = residual`,
        call({
          weight,
          eps: EPS,
          residual,
          residualOut: residual,
          output: out8,
          outputScale: 0.5,
          algorithm: a,
        }),
      ],
    ]),
  ];
  const wrong: string[] = [];
  const said: string[] = [];
  await group.barrier();
  for (const [what, f] of bad) {
    const e = thrown(f);
    if (typed(e)) said.push(e.message);
    else wrong.push(`${what}: ${String(e)}`);
    wait();
    watched.forEach(([t, before], k) =>
      assertSameBits(t.toHost(), before, `bad input: ${what}: tensor ${k} was written`, seed),
    );
  }
  assert.deepEqual(wrong, [], `rank ${rank}: bad inputs must give InvalidArgumentError`);
  await agree(new TextEncoder().encode(said.join("\n")), "bad inputs: the messages");
  for (const [t] of watched.slice(3)) t.dispose();
  for (const t of [wide, ...huge]) t.dispose();
  freeOver();
  // The group is still in step: every algorithm, as the reference.
  await checked("after bad inputs", [
    ...ALGORITHMS.map((a) => intoPoisoned(inp, a, `after bad inputs: ${a}`)),
    kept(inp, "after bad inputs"),
  ]);
  done(`bad inputs: ${bad.length} cases, typed errors alike on every rank, nothing written; usable after`);
}

c.barrier();
wait();
total(world);
console.log(`${backend} ar-norm ok rank ${rank}`);
await group.destroy();
