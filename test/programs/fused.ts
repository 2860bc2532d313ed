// One rank of the fused-matmul check, on the backend its argument names (symmkit run -n N fused.js
// cpu|cuda): allGatherMatmul and matmulReduceScatter with every algorithm of that backend (the lists of
// src/ops/fused/checks.ts, from its records) and the default. The CPU backend runs it in
// test/cpu-fused.test.ts (worlds 2 and 3), GPUs in test/gpu/distributed.test.ts, shared-gpu.test.ts and
// bench/gpu-suite.sh (any world from 2 to 8: every shape is derived from it).
//
// Both backends make every check, with inputs drawn from the seed: bf16 and fp8 e4m3 with per-tensor
// scales, B as [n, k] and [k, n]; one row per rank, rows that fill no tile, m not a multiple of world x
// tile, n and k odd multiples of 16; small integers (every partial sum exact) and uniform values. The
// gathered A bit for bit and alike on every rank; all-gather + GEMM bit for bit with the backend's GEMM of
// the gathered A (GPUs: symmkit's tile GEMM; the CPU backend: its host GEMM), GEMM + reduce-scatter with
// that GEMM per rank, each partial rounded to bf16, summed in f32 in rank order, rounded once; both
// against a float64 product written out here: bit for bit on small integers, within bf16 rounding on
// uniform values (element by element where the backend's GEMM accumulates in f32, and in norm); NCCL +
// cuBLASLt (GPUs), whose GEMM is cuBLASLt's, within rounding. Each checked call follows a call of the same
// shape on other operands (a decoy), so that a receive slot or staged shard read before this call's data
// landed holds another call's values; outputs poisoned inside guards. A rank 50 ms late for every
// algorithm; calls alternating shapes and algorithms (auto's pick predicted) in batches, a rank late for
// each batch; bad inputs as typed errors with nothing written (among them operands past the staging buffer
// for every algorithm that stages them, and the other backend's algorithm names), the group usable after.
// On GPUs only: the benchmark's sizes (the first call on the fresh staging buffer, one on a staging buffer
// poisoned with NaN, every algorithm against the reference and against sequential, 100 alternating calls
// each checked), symmetric shards read in place, a CUDA graph of every fused construction replayed with new
// inputs, refusals only GPUs make, auto falling back to sequential where fused has no room. The straggler
// and the alternating calls take smaller shapes on the CPU backend (its host GEMM).
//
// Sections that both backends run go in batches (test/support/batch.ts): inputs and poisoned outputs
// first, a store barrier, the calls back to back, one wait, then the checks. Seeded, the seed printed;
// rank 0 prints each section with its seconds.
import assert from "node:assert/strict";
import { assertSameBits, rawHash } from "../support/agree.js";
import type { Case } from "../support/batch.js";
import { startProgram, untyped } from "../support/program.js";
import {
  assertClose,
  bytesOf,
  concat,
  expectPoisonedIn,
  fromBytes,
  poisonedIn,
  poisonOf,
} from "../support/tensors.js";
import { hostMatmul } from "../../src/cpu/matmul.js";
import type { HostTensor } from "../../src/cpu/host-tensor.js";
import { readDistEnv } from "../../src/distributed/env.js";
import { reduceInto } from "../../src/ops/coll/reduce.js";
import { matmulShapes, tileMatmul } from "../../src/ops/gemm/matmul.js";
import {
  ALL_GATHER_MATMUL_ALGORITHMS,
  CPU_FUSED_MATMUL_ALGORITHMS,
  MATMUL_REDUCE_SCATTER_ALGORITHMS,
  type AllGatherMatmulAlgorithm,
  type FusedProblem,
  type MatmulReduceScatterAlgorithm,
} from "../../src/ops/fused/checks.js";
import { ALL_GATHER_MATMUL, MATMUL_REDUCE_SCATTER } from "../../src/ops/fused/records.js";
import type { OpRecords } from "../../src/ops/records.js";
import { Device, deviceCount } from "../../src/runtime/device.js";
import { decodeToF32, encode, type DType, type RawArray } from "../../src/runtime/dtype.js";
import { Graph } from "../../src/runtime/graph.js";
import { defaultStream } from "../../src/runtime/stream.js";
import { Tensor, type AnyTensor } from "../../src/runtime/tensor.js";

/** A problem's size: [rows per rank, n, k]. */
type Dims = readonly [number, number, number];
/** GEMM + reduce-scatter at the benchmark's sizes, [rows per rank, n, k per rank] (tile-rows of 128 go in
 * bands of 8 per shard): the 8192 x 8192 x 8192 layer at world 4, two full bands per shard; and the
 * 8192 x 4096 x 14336 layer's n and k with three bands, the last one short and its last tile-row partial. */
const RS_BIG: Dims[] = [
  [2048, 8192, 2048],
  [2340, 4096, 3584],
];
/** all-gather + GEMM at the benchmark's sizes, [rows per rank, n, k]: the 8192 x 8192 x 8192 layer at
 * world 4, and 16384 x 6656 x 16384's n with shards that end inside a tile (tiles straddle shards). */
const AG_BIG: Dims[] = [
  [2048, 8192, 8192],
  [1000, 6656, 2048],
];
const WORLD = readDistEnv().worldSize;
// GPUs: room for the largest receive buffer (m x n x 2 bytes) and staged shard above, 32 MiB at least; the
// CPU backend: 4 MiB, so that operands beyond it stay small.
const program = await startProgram(
  "fused",
  {
    cuda: Math.max(
      32 << 20,
      ...RS_BIG.map(([rows, n]) => rows * WORLD * n * 2),
      ...AG_BIG.map(([rows, , k]) => rows * k * 2),
    ),
    cpu: 1 << 22,
  },
  2,
);
const { backend, cuda, group, gpu, c, make, rank, world, capacity, seed } = program;
const { agree, ranks, wait, batch, done, total } = program;

// ---- Algorithms: this backend's, auto first, from the records.
const AG_ALGORITHMS: readonly string[] = cuda ? ALL_GATHER_MATMUL_ALGORITHMS : CPU_FUSED_MATMUL_ALGORITHMS;
const RS_ALGORITHMS: readonly string[] = cuda
  ? MATMUL_REDUCE_SCATTER_ALGORITHMS
  : CPU_FUSED_MATMUL_ALGORITHMS;
/** Every algorithm of `list` but auto. */
const named = (list: readonly string[]): string[] => list.filter((a) => a !== "auto");
/** An algorithm, or undefined: the default (auto). */
type Algorithm = string | undefined;
const nameOf = (a: Algorithm): string => a ?? "default";
/** The fused constructions of `list`: those whose records say they stage into the group's buffer. */
const fusedOf = (records: OpRecords, list: readonly string[]): string[] =>
  list.filter((a) => records[a]?.needs.includes("staging buffer"));
const AG_FUSED = fusedOf(ALL_GATHER_MATMUL, AG_ALGORITHMS) as AllGatherMatmulAlgorithm[];
const RS_FUSED = fusedOf(MATMUL_REDUCE_SCATTER, RS_ALGORITHMS) as MatmulReduceScatterAlgorithm[];
/** NCCL + cuBLASLt: cuBLASLt's GEMM, not symmkit's, so within rounding of the reference only. */
const CUBLAS = "nccl_cublaslt";

type Layout = "nk" | "kn";
interface Combo {
  readonly dtype: "bf16" | "fp8e4m3";
  readonly layout: Layout;
}
const BF16: Combo = { dtype: "bf16", layout: "nk" };
const COMBOS: Combo[] = [BF16, { dtype: "bf16", layout: "kn" }, { dtype: "fp8e4m3", layout: "nk" }];
const SCALE_A = 0.5;
const SCALE_B = 1.5;
const scaleA = make.fromHost([SCALE_A], "f32");
const scaleB = make.fromHost([SCALE_B], "f32");
const scalesFor = (dtype: DType) => (dtype === "fp8e4m3" ? { scaleA, scaleB } : {});
/** What the scales multiply a product by. */
const scaleOf = (dtype: DType): number => (dtype === "fp8e4m3" ? SCALE_A * SCALE_B : 1);

// ---- Operands and references.
let salts = 0;
/** A decoy's operands: the case's salt plus this (no case's own salt comes near). */
const DECOY = 1 << 16;
/** Rank r's operand `salt`, the same on every rank that asks for it: small integers in [-4, 4] (`exact`),
 * or uniform in [-1, 1). */
function operand(dtype: DType, shape: [number, number], r: number, salt: number, exact: boolean): AnyTensor {
  if (exact)
    return make.fromHost(
      Array.from({ length: shape[0] * shape[1] }, (_, i) => ((i * 7 + r * 13 + salt * 5) % 9) - 4),
      dtype,
      { shape },
    );
  return make.rand(shape, dtype, {
    seed,
    offset: BigInt(salt) * (1n << 36n) + BigInt(r) * (1n << 30n),
    low: -1,
    high: 1,
  });
}

/** Rows [from, to) of a x b (bf16 bits) as the backend's GEMM gives them: GPUs run symmkit's tile GEMM
 * (the fused kernels' arithmetic) on the whole of a, the CPU backend its host GEMM on those rows. */
function gemmRows(a: AnyTensor, b: AnyTensor, combo: Combo, from: number, to: number): RawArray {
  const o = { layoutB: combo.layout, ...scalesFor(combo.dtype) };
  if (cuda) {
    const p = tileMatmul(a as Tensor, b as Tensor, o as { scaleA?: Tensor; scaleB?: Tensor });
    const raw = p.slice(from, to).toHost();
    p.dispose();
    return raw;
  }
  const rows = a.slice(from, to) as HostTensor;
  const p = matmulShapes("the reference", rows, b, o);
  const out = make.empty([p.m, p.n], "bf16") as HostTensor;
  return hostMatmul(p, rows, b as HostTensor, out, o as { scaleA?: HostTensor; scaleB?: HostTensor }).raw;
}

/** Rows [from, to) of a x b in float64, scaled: the product written out plainly. */
function product64(a: AnyTensor, b: AnyTensor, combo: Combo, from: number, to: number): Float64Array {
  const k = a.shape[1]!;
  const n = combo.layout === "nk" ? b.shape[0]! : b.shape[1]!;
  const av = a.toHost({ decode: true });
  const bv = b.toHost({ decode: true });
  const scale = scaleOf(combo.dtype);
  const d = new Float64Array((to - from) * n);
  for (let i = from; i < to; i++)
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let t = 0; t < k; t++)
        s += av[i * k + t]! * (combo.layout === "nk" ? bv[j * k + t]! : bv[t * n + j]!);
      d[(i - from) * n + j] = s * scale;
    }
  return d;
}

/** What a case's output must hold. */
interface Reference {
  readonly what: string;
  readonly combo: Combo;
  /** Small integers: every partial sum exact. */
  readonly exact: boolean;
  /** The backend's bits. */
  readonly want: RawArray;
  /** The float64 product (GEMM + reduce-scatter: its partials rounded to bf16, summed in f32 in rank
   * order) and the partials' summed magnitudes; none where the host would take too long. */
  readonly f64: { readonly want: Float64Array; readonly magnitude?: Float64Array } | undefined;
}

/** One all-gather + GEMM problem: this rank's shard and weight, a decoy's (the same shapes, other
 * values), the gathered A and the reference. */
interface AgCase extends Reference {
  readonly rows: number;
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly shard: AnyTensor;
  readonly b: AnyTensor;
  readonly decoy: readonly [AnyTensor, AnyTensor];
  readonly gathered: Uint8Array;
}

/** [rows per rank, n, k] of combo with small integers (`exact`) or uniform values; `f64`: with the float64
 * product. */
function agCase(combo: Combo, [rows, n, k]: Dims, exact: boolean, f64: boolean): AgCase {
  const { dtype, layout } = combo;
  const salt = (salts += 2);
  const m = rows * world;
  const shards = ranks.map((r) => operand(dtype, [rows, k], r, salt, exact));
  const bShape: [number, number] = layout === "nk" ? [n, k] : [k, n];
  const b = operand(dtype, bShape, rank, salt + 1, exact);
  const gathered = concat(shards.map(bytesOf));
  const whole = fromBytes(make, dtype, gathered, [m, k]);
  const x: AgCase = {
    what: `allGatherMatmul ${dtype} B ${layout} ${rows}x${n}x${k} per rank${exact ? " integers" : ""}`,
    combo,
    exact,
    rows: rows,
    m,
    n: n,
    k: k,
    shard: shards[rank]!,
    b,
    decoy: [
      operand(dtype, [rows, k], rank, salt + DECOY, exact),
      operand(dtype, bShape, rank, salt + 1 + DECOY, exact),
    ],
    gathered,
    want: gemmRows(whole, b, combo, 0, m),
    f64: f64 ? { want: product64(whole, b, combo, 0, m) } : undefined,
  };
  shards.forEach((s, r) => r !== rank && s.dispose());
  whole.dispose();
  return x;
}

/** One GEMM + reduce-scatter problem: this rank's a and b, a decoy's, and the reference over this rank's
 * rows (the backend's GEMM per rank, then the rank-order reduction of src/ops/coll/reduce.ts). */
interface RsCase extends Reference {
  readonly rows: number;
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly a: AnyTensor;
  readonly b: AnyTensor;
  readonly decoy: readonly [AnyTensor, AnyTensor];
}

function rsCase(combo: Combo, [rows, n, k]: Dims, exact: boolean, f64: boolean): RsCase {
  const { dtype, layout } = combo;
  const salt = (salts += 2);
  const m = rows * world;
  const bShape: [number, number] = layout === "nk" ? [n, k] : [k, n];
  const [from, to] = [rank * rows, (rank + 1) * rows];
  // Only this rank's rows of each partial come to the host: the reference at the benchmark's sizes stays
  // a few seconds and a few hundred MB at world 8.
  const partials: RawArray[] = [];
  const partials64: Float32Array[] = [];
  let mine: [AnyTensor, AnyTensor] | undefined;
  for (const r of ranks) {
    const a = operand(dtype, [m, k], r, salt, exact);
    const b = operand(dtype, bShape, r, salt + 1, exact);
    partials.push(gemmRows(a, b, combo, from, to));
    if (f64) partials64.push(decodeToF32("bf16", encode("bf16", product64(a, b, combo, from, to))));
    if (r === rank) mine = [a, b];
    else for (const t of [a, b]) t.dispose();
  }
  const want = encode("bf16", new Float32Array(rows * n));
  reduceInto("bf16", "sum", partials, 0, want, 0, rows * n);
  let reference: RsCase["f64"];
  if (f64) {
    const sum = new Float64Array(rows * n);
    const magnitude = new Float64Array(rows * n);
    for (let i = 0; i < sum.length; i++) {
      let s = 0;
      for (const p of partials64) {
        s = Math.fround(s + p[i]!);
        magnitude[i]! += Math.abs(p[i]!);
      }
      sum[i] = s;
    }
    reference = { want: sum, magnitude };
  }
  return {
    what: `matmulReduceScatter ${dtype} B ${layout} ${m}x${n}x${k}${exact ? " integers" : ""}`,
    combo,
    exact,
    rows: rows,
    m,
    n: n,
    k: k,
    a: mine![0],
    b: mine![1],
    decoy: [
      operand(dtype, [m, k], rank, salt + DECOY, exact),
      operand(dtype, bShape, rank, salt + 1 + DECOY, exact),
    ],
    want,
    f64: reference,
  };
}

const disposeCase = (x: AgCase | RsCase): void =>
  ["shard" in x ? x.shard : x.a, x.b, ...x.decoy].forEach((t) => t.dispose());

const problemOf = (x: AgCase | RsCase): FusedProblem => ({
  elem: x.combo.dtype,
  layoutB: x.combo.layout,
  m: x.m,
  n: x.n,
  k: x.k,
  shardRows: x.rows,
});
/** What `algorithm` runs for x: auto's pick on GPUs (the CPU backend has one construction). */
function agRuns(x: AgCase, algorithm: Algorithm): string {
  if ((algorithm ?? "auto") !== "auto" || !gpu) return nameOf(algorithm);
  return gpu.collectives.fusedMatmul.autoAllGatherMatmul(problemOf(x), x.shard.nbytes);
}
function rsRuns(x: RsCase, algorithm: Algorithm): string {
  if ((algorithm ?? "auto") !== "auto" || !gpu) return nameOf(algorithm);
  return gpu.collectives.fusedMatmul.autoMatmulReduceScatter(problemOf(x));
}

function runAg(
  x: AgCase,
  algorithm: Algorithm,
  outputs: { out?: AnyTensor; gathered?: AnyTensor } = {},
  decoy = false,
): { out: AnyTensor; gathered: AnyTensor } {
  const [shard, b] = decoy ? x.decoy : [x.shard, x.b];
  return c.allGatherMatmul(shard, b, {
    ...(algorithm !== undefined && { algorithm }),
    layoutB: x.combo.layout,
    ...scalesFor(x.combo.dtype),
    ...outputs,
  });
}

function runRs(x: RsCase, algorithm: Algorithm, out?: AnyTensor, decoy = false): AnyTensor {
  const [a, b] = decoy ? x.decoy : [x.a, x.b];
  return c.matmulReduceScatter(a, b, {
    ...(algorithm !== undefined && { algorithm }),
    layoutB: x.combo.layout,
    ...scalesFor(x.combo.dtype),
    ...(out && { out }),
  });
}

// ---- Checks.
const same = (got: RawArray, want: RawArray, what: string): void =>
  assertSameBits(got, want, `rank ${rank}: ${what}`, seed);

/** Within bf16 rounding of `want` (decoded values) in norm, for results computed in another order. */
const close = (got: RawArray, want: Float32Array | Float64Array, what: string, tol = 2 ** -6): void =>
  void assertClose(decodeToF32("bf16", got), want, `rank ${rank}: ${what} (seed ${seed})`, tol);

/** Against the float64 product: bit for bit on small integers; else within one bf16 rounding of the result
 * plus one of each rank's partial, element by element, where the backend's GEMM accumulates in f32 (GPUs'
 * fp8 tensor cores keep fewer bits: there only in norm), and in norm. */
function nearF64(got: RawArray, x: Reference, what: string): void {
  const f = x.f64;
  if (!f) return;
  const name = `${what}: against the float64 product`;
  if (x.exact) return same(got, encode("bf16", f.want), name);
  if (!(gpu && x.combo.dtype === "fp8e4m3")) {
    const g = decodeToF32("bf16", got);
    for (let i = 0; i < f.want.length; i++) {
      const w: number = f.want[i]!;
      if (Math.abs(g[i]! - w) > 2 ** -7 * (Math.abs(w) + (f.magnitude?.[i] ?? 0)) + 1e-3 * world)
        assert.fail(`rank ${rank}: ${name}: element ${i} is ${g[i]}, expected about ${w} (seed ${seed})`);
    }
  }
  close(got, f.want, name, 2 ** -7);
}

/** A result of algorithm `runs`: bit for bit with the backend's reference and near the float64 product;
 * NCCL + cuBLASLt within rounding. */
function holds(got: RawArray, x: Reference, runs: string, what: string): void {
  if (runs === CUBLAS) return close(got, decodeToF32("bf16", x.want), what);
  same(got, x.want, what);
  nearF64(got, x, what);
}

/** `out`, inside the guards of `whole` (made by poisonedIn), holds x's result. */
function holdsInside(whole: AnyTensor, out: AnyTensor, x: Reference, runs: string, what: string): void {
  expectPoisonedIn(make, whole, bytesOf(out), `rank ${rank}: ${what}`, seed);
  holds(out.toHost(), x, runs, what);
}

/** The gathered A of every all-gather + GEMM in a batch, hashed for the ranks to agree on. */
let hashes: string[] = [];
/** A batch, then the gathered A agreed bit for bit by every rank. */
async function checked(what: string, cases: readonly Case[], late?: number): Promise<void> {
  hashes = [];
  await batch(cases, late);
  await agree(new TextEncoder().encode(hashes.join("\n")), `${what}: the gathered A`);
}

/** allGatherMatmul of x with `algorithm`, after a decoy into outputs of its own, into a poisoned out and
 * gathered, each checked inside its guards. */
function agChecked(x: AgCase, algorithm: Algorithm): Case {
  const what = `${x.what} ${nameOf(algorithm)}`;
  const [oWhole, out] = poisonedIn(make, "bf16", [x.m, x.n]);
  const [gWhole, gathered] = poisonedIn(make, x.combo.dtype, [x.m, x.k]);
  const decoy = { out: make.empty([x.m, x.n], "bf16"), gathered: make.empty([x.m, x.k], x.combo.dtype) };
  let got: { out: AnyTensor; gathered: AnyTensor } | undefined;
  return {
    run: () => {
      runAg(x, algorithm, decoy, true);
      got = runAg(x, algorithm, { out, gathered });
    },
    check: () => {
      assert.ok(got?.out === out && got.gathered === gathered, `${what}: returns the given outputs`);
      hashes.push(
        rawHash(expectPoisonedIn(make, gWhole, x.gathered, `rank ${rank}: ${what}: gathered`, seed)),
      );
      holdsInside(oWhole, out, x, agRuns(x, algorithm), what);
    },
    tensors: [oWhole, gWhole, decoy.out, decoy.gathered],
  };
}

/** allGatherMatmul of x with `algorithm` into outputs the call makes. */
function agPlain(x: AgCase, algorithm: string, what = `${x.what} ${algorithm}`): Case {
  const tensors: AnyTensor[] = [];
  return {
    run: () => {
      const { out, gathered } = runAg(x, algorithm);
      tensors.push(out, gathered);
    },
    check: () => {
      const [out, gathered] = tensors as [AnyTensor, AnyTensor];
      const bytes = bytesOf(gathered);
      same(bytes, x.gathered, `${what}: gathered`);
      hashes.push(rawHash(bytes));
      holds(out.toHost(), x, agRuns(x, algorithm), what);
    },
    tensors,
  };
}

/** matmulReduceScatter of x with `algorithm`, after a decoy into an output of its own, into a poisoned
 * out checked inside its guards. */
function rsChecked(x: RsCase, algorithm: Algorithm): Case {
  const what = `${x.what} ${nameOf(algorithm)}`;
  const [oWhole, out] = poisonedIn(make, "bf16", [x.rows, x.n]);
  const decoy = make.empty([x.rows, x.n], "bf16");
  let got: AnyTensor | undefined;
  return {
    run: () => {
      runRs(x, algorithm, decoy, true);
      got = runRs(x, algorithm, out);
    },
    check: () => {
      assert.equal(got, out, `${what}: returns the given out`);
      holdsInside(oWhole, out, x, rsRuns(x, algorithm), what);
    },
    tensors: [oWhole, decoy],
  };
}

/** matmulReduceScatter of x with `algorithm` into an output the call makes. */
function rsPlain(x: RsCase, algorithm: string, what = `${x.what} ${algorithm}`): Case {
  const tensors: AnyTensor[] = [];
  return {
    run: () => void tensors.push(runRs(x, algorithm)),
    check: () => holds(tensors[0]!.toHost(), x, rsRuns(x, algorithm), what),
    tensors,
  };
}

/** Every algorithm of both operations on x and y, auto as the default (the alternating calls name it),
 * each after a decoy into poisoned outputs. */
const everyAlgorithm = (x: AgCase, y: RsCase): Case[] => [
  ...[undefined, ...named(AG_ALGORITHMS)].map((a) => agChecked(x, a)),
  ...[undefined, ...named(RS_ALGORITHMS)].map((a) => rsChecked(y, a)),
];

/** The first element where `got` and `want` differ, or -1. */
function firstDiff(got: RawArray, want: RawArray): number {
  const bytes = (a: RawArray): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  if (got.length === want.length && bytes(got).equals(bytes(want))) return -1;
  const i = got.findIndex((v, j) => !Object.is(v, want[j]));
  return i < 0 ? Math.min(got.length, want.length) : i;
}

/**
 * Every symmkit algorithm in `got` bit for bit with the reference and with `sequential`, NCCL + cuBLASLt
 * within rounding. Every relation is judged before failing, so that a failure says which side is wrong
 * (the fused kernel, or the sequential path).
 */
function threeWay(what: string, n: number, got: ReadonlyMap<string, RawArray>, want: RawArray): void {
  const wrong: string[] = [];
  const at = (i: number): string => `element ${i} (row ${Math.floor(i / n)}, column ${i % n})`;
  const sequential = got.get("sequential")!;
  for (const [algorithm, out] of got) {
    if (algorithm === CUBLAS) continue;
    const i = firstDiff(out, want);
    if (i >= 0) wrong.push(`${algorithm}: ${at(i)} is ${out[i]}, the reference ${want[i]}`);
    const j = algorithm === "sequential" ? -1 : firstDiff(out, sequential);
    if (j >= 0) wrong.push(`${algorithm} and sequential differ at ${at(j)}`);
  }
  if (wrong.length) assert.fail(`${what} (rank ${rank} of ${world}, seed ${seed}): ${wrong.join("; ")}`);
  const nccl = got.get(CUBLAS);
  if (nccl) close(nccl, decodeToF32("bf16", want), `${what} ${CUBLAS}`);
}

// ---- The benchmark's sizes, GPUs only (the host GEMM would take hours; the staging buffer is poisoned
// through its GPU handle). GEMM + reduce-scatter first on the fresh staging buffer (the program's first
// collective call), then on one poisoned with NaN, then every algorithm after a decoy into the same output;
// symmkit's against the host reference and against sequential. Then all-gather + GEMM likewise.
if (gpu) {
  for (const [i, shape] of RS_BIG.entries()) {
    const x = rsCase(BF16, shape, false, false);
    const out = make.empty([x.rows, x.n], "bf16");
    if (i === 0) {
      runRs(x, RS_FUSED[0], out);
      wait();
      same(out.toHost(), x.want, `${x.what} ${RS_FUSED[0]}, first call on the fresh staging buffer`);
    }
    for (const algorithm of RS_FUSED) {
      // All bits set: a bf16 NaN in every receive slot. Every rank's fill lands before any rank's call.
      gpu.collectives.staging.tensor.fill(0xff);
      wait();
      await group.barrier();
      runRs(x, algorithm, out);
      wait();
      same(out.toHost(), x.want, `${x.what} ${algorithm}, on a staging buffer poisoned with NaN`);
    }
    const got = new Map<string, RawArray>();
    for (const algorithm of named(RS_ALGORITHMS)) {
      out.fill(NaN);
      runRs(x, algorithm, out, true);
      runRs(x, algorithm, out);
      wait();
      got.set(algorithm, out.toHost());
    }
    threeWay(`${x.what} after a decoy`, x.n, got, x.want);
    if (i === 0) {
      // A unit that reads a peer's partial before it lands shows only when the slot holds other values,
      // and only now and then (the reduce that read rows behind the other half's flags: about one call
      // in 60 wrong at world 4): many alternating calls, each checked.
      for (let round = 0; round < 100; round++)
        for (const algorithm of RS_FUSED) {
          runRs(x, algorithm, out, true);
          runRs(x, algorithm, out);
          wait();
          same(out.toHost(), x.want, `${x.what} ${algorithm} after a decoy, round ${round}`);
        }
    }
    out.dispose();
    disposeCase(x);
  }
  done("matmulReduceScatter at the benchmark's sizes: fresh and NaN staging, every algorithm, 100 rounds");

  for (const shape of AG_BIG) {
    const x = agCase(BF16, shape, false, false);
    const outputs = { out: make.empty([x.m, x.n], "bf16"), gathered: make.empty([x.m, x.k], "bf16") };
    const got = new Map<string, RawArray>();
    for (const algorithm of named(AG_ALGORITHMS)) {
      runAg(x, algorithm, outputs, true);
      runAg(x, algorithm, outputs);
      wait();
      same(bytesOf(outputs.gathered), x.gathered, `${x.what} ${algorithm} after a decoy: gathered`);
      got.set(algorithm, outputs.out.toHost());
    }
    threeWay(`${x.what} after a decoy`, x.n, got, x.want);
    for (const t of Object.values(outputs)) t.dispose();
    disposeCase(x);
  }
  done("allGatherMatmul at the benchmark's sizes: every algorithm after a decoy");
}

// ---- Every dtype and layout, shape, kind of data and algorithm, each call after a decoy, into poisoned
// outputs. Shapes, [rows per rank, n, k]: one row per rank; rows that fill no tile and m not a multiple of
// world x 128; n and k odd multiples of 16; several tiles in both directions with a partial last tile
// (GPUs only, and without the float64 product: the host would take minutes).
{
  const SHAPES: Dims[] = [
    [1, 16, 16],
    [1, 48, 32],
    [7, 48, 80],
    [13, 112, 208],
    [64, 80, 96],
    [77, 272, 208],
  ];
  const GPU_SHAPES: Dims[] = cuda ? [[300, 784, 400]] : [];
  let calls = 0;
  for (const combo of COMBOS)
    for (const shape of [...SHAPES, ...GPU_SHAPES])
      for (const exact of [true, false]) {
        const f64 = SHAPES.includes(shape);
        const x = agCase(combo, shape, exact, f64);
        const y = rsCase(combo, shape, exact, f64);
        const cases = everyAlgorithm(x, y);
        await checked(x.what, cases);
        calls += cases.length;
        disposeCase(x);
        disposeCase(y);
      }
  done(
    `every dtype, layout, shape and algorithm, ${calls} checked calls after decoys: the backend's GEMM bit for bit, near the float64 product${cuda ? ", NCCL + cuBLASLt within rounding" : ""}; guards intact, ranks agree`,
  );
}

// ---- A symmetric shard, read in place (no staging copy), by every fused construction. GPUs only: the CPU
// backend takes its symmetric tensors as the plain tensors they are.
if (gpu) {
  const x = agCase(BF16, [200, 528, 272], false, false);
  const sym = await gpu.symmetric.empty([200, 272], "bf16");
  sym.tensor.copyFrom(x.shard as Tensor);
  for (const algorithm of AG_FUSED) {
    const { out, gathered } = gpu.collectives.allGatherMatmul(sym, x.b as Tensor, { algorithm });
    wait();
    same(bytesOf(gathered), x.gathered, `symmetric shard ${algorithm}: gathered`);
    same(out.toHost(), x.want, `symmetric shard ${algorithm}`);
    for (const t of [out, gathered]) t.dispose();
  }
  await group.barrier();
  await sym.dispose();
  disposeCase(x);
  done("allGatherMatmul on a symmetric shard, read in place: bit for bit");
}

// ---- One CUDA graph holding every fused construction, replayed with new inputs copied in between replays.
// GPUs only: the CPU backend has no graphs.
if (gpu) {
  const gc = gpu.collectives;
  const stream = defaultStream(gpu.device);
  const sets = [0, 1].map(() => ({
    ag: agCase(BF16, [130, 528, 208], false, false),
    rs: rsCase(BF16, [130, 528, 208], false, false),
  }));
  const shard = Tensor.empty([130, 208], "bf16");
  const bAg = Tensor.empty([528, 208], "bf16");
  const a = Tensor.empty([130 * world, 208], "bf16");
  const bRs = Tensor.empty([528, 208], "bf16");
  const agOuts = AG_FUSED.map(
    () => [Tensor.empty([130 * world, 528], "bf16"), Tensor.empty([130 * world, 208], "bf16")] as const,
  );
  const rsOuts = RS_FUSED.map(() => Tensor.empty([130, 528], "bf16"));
  const load = (i: number): void => {
    shard.copyFrom(sets[i]!.ag.shard as Tensor, stream);
    bAg.copyFrom(sets[i]!.ag.b as Tensor, stream);
    a.copyFrom(sets[i]!.rs.a as Tensor, stream);
    bRs.copyFrom(sets[i]!.rs.b as Tensor, stream);
  };
  load(0);
  const graph = Graph.capture(stream, () => {
    AG_FUSED.forEach((algorithm, j) =>
      gc.allGatherMatmul(shard, bAg, { algorithm, out: agOuts[j]![0], gathered: agOuts[j]![1], stream }),
    );
    RS_FUSED.forEach((algorithm, j) =>
      gc.matmulReduceScatter(a, bRs, { algorithm, out: rsOuts[j]!, stream }),
    );
  });
  for (let replay = 0; replay < 4; replay++) {
    const i = replay % 2;
    load(i);
    graph.launch(stream);
    gpu.synchronize(stream);
    AG_FUSED.forEach((algorithm, j) => {
      same(agOuts[j]![0].toHost(), sets[i]!.ag.want, `graph replay ${replay} ${algorithm}`);
      same(bytesOf(agOuts[j]![1]), sets[i]!.ag.gathered, `graph replay ${replay} ${algorithm}: gathered`);
    });
    RS_FUSED.forEach((algorithm, j) =>
      same(rsOuts[j]!.toHost(), sets[i]!.rs.want, `graph replay ${replay} ${algorithm}`),
    );
  }
  graph.dispose();
  for (const t of [shard, bAg, a, bRs, ...agOuts.flat(), ...rsOuts]) t.dispose();
  for (const s of sets) {
    disposeCase(s.ag);
    disposeCase(s.rs);
  }
  done(
    "a CUDA graph of every fused construction, replayed 4 times with the inputs changed in between: bit for bit",
  );
}

// ---- A straggler: the last rank starts 50 ms late for each algorithm; everyone waits for it and gets the
// reference. 256 rows a rank on GPUs, 16 on the CPU backend (its host GEMM).
{
  const rows = cuda ? 256 : 16;
  const x = agCase(BF16, [rows, 1024, 512], false, false);
  const y = rsCase(BF16, [rows, 1024, 512], false, false);
  for (const a of named(AG_ALGORITHMS)) await checked(`straggler ${a}`, [agPlain(x, a)], world - 1);
  for (const a of named(RS_ALGORITHMS)) await checked(`straggler ${a}`, [rsPlain(y, a)], world - 1);
  disposeCase(x);
  disposeCase(y);
  done("a rank 50 ms late: every algorithm waits for it and is exact");
}

// ---- Calls alternating all-gather + GEMM and GEMM + reduce-scatter, two shapes each and every algorithm
// (auto's pick predicted), in batches of 50 made back to back, a different rank 50 ms late for each batch;
// every result checked. GPUs: 200 calls, the larger shape 260 rows a rank; the CPU backend (its host
// GEMM): 40, 13 rows.
{
  const CALLS = cuda ? 200 : 40;
  const SHAPES: Dims[] = [[77, 272, 208], cuda ? [260, 528, 400] : [13, 112, 208]];
  const xs = SHAPES.map((s) => agCase(BF16, s, false, false));
  const ys = SHAPES.map((s) => rsCase(BF16, s, false, false));
  for (let start = 0; start < CALLS; start += 50) {
    const cases: Case[] = [];
    for (let i = start; i < Math.min(start + 50, CALLS); i++) {
      const what = `call ${i}`;
      if (i % 2 === 0) {
        const x = xs[(i >> 1) % 2]!;
        const a = AG_ALGORITHMS[(i >> 2) % AG_ALGORITHMS.length]!;
        cases.push(agPlain(x, a, `${what}: ${x.what} ${a}`));
      } else {
        const y = ys[(i >> 1) % 2]!;
        const a = RS_ALGORITHMS[(i >> 2) % RS_ALGORITHMS.length]!;
        cases.push(rsPlain(y, a, `${what}: ${y.what} ${a}`));
      }
    }
    await checked(`calls ${start} on`, cases, (start / 50) % world);
  }
  [...xs, ...ys].forEach(disposeCase);
  done(
    `${CALLS} calls alternating shapes and algorithms, a rank late: exact${cuda ? " (NCCL + cuBLASLt within rounding)" : ""}`,
  );
}

// ---- Bad inputs, made alike on every rank: typed errors with a stable code before anything is written
// (the outputs given stay poisoned); the group usable after.
{
  const shard = operand("bf16", [64, 128], rank, 50, false);
  const b = operand("bf16", [256, 128], rank, 51, false);
  const a = operand("bf16", [64 * world, 128], rank, 52, false);
  const [oWhole, out] = poisonedIn(make, "bf16", [64 * world, 256]);
  const [rWhole, rOut] = poisonedIn(make, "bf16", [64, 256]);
  // Past the staging buffer, at every world: a receive buffer of twice its size (m rows split over the
  // ranks), and a shard one 8 KiB row beyond it.
  const bigM = world * Math.ceil(capacity / (8192 * 2 * world)) * 2;
  const big = make.empty([bigM, 4096], "bf16");
  const bigB = make.empty([8192, 4096], "bf16");
  const bigShard = make.empty([Math.floor(capacity / (4096 * 2)) + 1, 4096], "bf16");
  const fp8 = make.empty([64, 128], "fp8e4m3");
  /** The algorithms of `list` that stage their operand whole: GPUs' fused constructions, every one of the
   * CPU backend's. */
  const staging = (records: OpRecords, list: readonly string[]): string[] =>
    cuda ? fusedOf(records, list) : [...list];
  /** Names of the other backend's algorithms that this backend lacks. */
  const theirs = (ours: readonly string[], gpuList: readonly string[]): string[] =>
    [...gpuList, ...CPU_FUSED_MATMUL_ALGORITHMS].filter((x) => !ours.includes(x));
  type Bad = [string, () => unknown];
  const bad: Bad[] = [
    ["dtype mismatch", () => c.allGatherMatmul(shard, make.empty([256, 128], "fp8e4m3"), { out })],
    ["k mismatch", () => c.allGatherMatmul(shard, make.empty([256, 64], "bf16"), { out })],
    ["out flat", () => c.allGatherMatmul(shard, b, { out: out.view([64 * world * 256]) })],
    ["out of one rank's rows", () => c.allGatherMatmul(shard, b, { out: rOut })],
    [
      "gathered f32",
      () => c.allGatherMatmul(shard, b, { out, gathered: make.empty([64 * world, 128], "f32") }),
    ],
    [
      "rows do not split",
      () => c.matmulReduceScatter(make.empty([64 * world + 1, 128], "bf16"), b, { out: rOut }),
    ],
    [
      "k not 16 bytes",
      () =>
        c.matmulReduceScatter(make.empty([64 * world, 4], "bf16"), make.empty([256, 4], "bf16"), {
          out: rOut,
        }),
    ],
    ["scales on bf16", () => c.allGatherMatmul(shard, b, { out, scaleA })],
    ["fp8 B [k, n]", () => c.allGatherMatmul(fp8, make.empty([128, 256], "fp8e4m3"), { out, layoutB: "kn" })],
    ["allGatherMatmul algorithm ring", () => c.allGatherMatmul(shard, b, { out, algorithm: "ring" })],
    [
      "matmulReduceScatter algorithm ring",
      () => c.matmulReduceScatter(a, b, { out: rOut, algorithm: "ring" }),
    ],
    ...theirs(AG_ALGORITHMS, ALL_GATHER_MATMUL_ALGORITHMS).map((x): Bad => [
      `allGatherMatmul algorithm ${x} (the other backend's)`,
      () => c.allGatherMatmul(shard, b, { out, algorithm: x }),
    ]),
    ...theirs(RS_ALGORITHMS, MATMUL_REDUCE_SCATTER_ALGORITHMS).map((x): Bad => [
      `matmulReduceScatter algorithm ${x} (the other backend's)`,
      () => c.matmulReduceScatter(a, b, { out: rOut, algorithm: x }),
    ]),
    ...staging(MATMUL_REDUCE_SCATTER, RS_ALGORITHMS).map((x): Bad => [
      `receive buffer larger than the staging buffer, ${x}`,
      () => c.matmulReduceScatter(big, bigB, { algorithm: x }),
    ]),
    ...staging(ALL_GATHER_MATMUL, AG_ALGORITHMS).map((x): Bad => [
      `plain shard larger than the staging buffer, ${x}`,
      () => c.allGatherMatmul(bigShard, bigB, { algorithm: x }),
    ]),
  ];
  // An out over the input, on both backends (a GPU writes out while its GEMM still reads the input).
  bad.push([
    "out overlaps the input",
    () =>
      c.matmulReduceScatter(a, b, {
        out: a
          .view([64 * world * 128])
          .slice(0, 64 * 256)
          .view([64, 256]),
      }),
  ]);
  // GPUs only: devices.
  if (gpu && deviceCount() > 1) {
    const other = Device.get((gpu.device.ordinal + 1) % deviceCount());
    bad.push([
      "b on another GPU",
      () => c.allGatherMatmul(shard, Tensor.empty([256, 128], "bf16", { device: other }), { out }),
    ]);
  }
  const wrong = untyped(bad);
  wait();
  assert.deepEqual(wrong, [], `rank ${rank}: bad inputs must give InvalidArgumentError`);
  expectPoisonedIn(make, oWhole, poisonOf(make, "bf16", out.numel), "bad inputs: out was written", seed);
  expectPoisonedIn(make, rWhole, poisonOf(make, "bf16", rOut.numel), "bad inputs: out was written", seed);
  // What fused refuses for want of room, auto runs the sequential way on GPUs (the CPU backend refuses it
  // with every algorithm, above).
  if (gpu) {
    const seq = c.matmulReduceScatter(big, bigB);
    wait();
    const p = { elem: "bf16", m: bigM, n: 8192, k: 4096, layoutB: "nk", shardRows: bigM / world } as const;
    assert.equal(gpu.collectives.fusedMatmul.autoMatmulReduceScatter(p), "sequential");
    seq.dispose();
  }
  for (const t of [shard, b, a, oWhole, rWhole, big, bigB, bigShard, fp8]) t.dispose();
  const x = agCase(BF16, [7, 48, 80], false, true);
  const y = rsCase(BF16, [7, 48, 80], false, true);
  await checked("after bad inputs", everyAlgorithm(x, y));
  disposeCase(x);
  disposeCase(y);
  done(`bad inputs: ${bad.length} typed errors, nothing written; usable after`);
}

c.barrier();
wait();
total(world);
console.log(`${backend} fused ok rank ${rank}`);
await group.destroy();
