// One rank of the fused-matmul check (test/gpu/distributed.test.ts): allGatherMatmul and
// matmulReduceScatter on GPUs, at any world size (every shape is derived from it).
//   all-gather + GEMM: bit for bit equal to symmkit's GEMM on the gathered A (same kernel, same tile
//     math), the gathered A exact and equal on every rank;
//   GEMM + reduce-scatter: bit for bit equal to the deterministic reference (symmkit's GEMM per rank, then
//     the partials summed in f32 in rank order on the host, rounded once), fused and sequential also bit
//     for bit with each other;
//   both: NCCL + cuBLASLt within bf16 rounding, a float64 product within rounding; bf16 and fp8 with
//   scales, B as [n, k] and [k, n], m not a multiple of the tile or of world x tile, n and k odd multiples
//   of 16, one row per rank; the benchmark's sizes (several bands of tile-rows per shard, a short last
//   band, tiles straddling shards); outputs poisoned with guards; symmetric inputs; a CUDA graph replayed
//   with the inputs changed between replays; a rank delayed 50 ms; 200 calls alternating shapes and
//   algorithms; bad input is a typed error with nothing written. Seeded inputs, the seed printed.
// Every checked call follows a call of the same shape on other operands (a decoy), so that a receive slot
// or staged shard read before this call's data landed holds another call's values and the check fails;
// the first GEMM + reduce-scatter runs on the fresh staging buffer and another on one poisoned with NaN.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { agreement, assertSameBits, rawHash, sharedSeed } from "../../support/agree.js";
import { init } from "../../../src/init.js";
import { InvalidArgumentError } from "../../../src/errors.js";
import { readDistEnv } from "../../../src/distributed/env.js";
import { reduceInto } from "../../../src/ops/coll/reduce.js";
import { tileMatmul } from "../../../src/ops/gemm/matmul.js";
import type {
  AllGatherMatmulAlgorithm,
  MatmulReduceScatterAlgorithm,
} from "../../../src/ops/fused/checks.js";
import { Device, deviceCount } from "../../../src/runtime/device.js";
import { decodeToF32, encode, type DType, type RawArray } from "../../../src/runtime/dtype.js";
import { Graph } from "../../../src/runtime/graph.js";
import { defaultStream } from "../../../src/runtime/stream.js";
import { Tensor } from "../../../src/runtime/tensor.js";
import { guardsIntact, poisoned, sectionTimer } from "./guards.js";

const WORLD = readDistEnv().worldSize;
/** GEMM + reduce-scatter at the benchmark's sizes, [rows per rank, n, k per rank] (tile-rows of 128 go in
 * bands of 8 per shard): the 8192 x 8192 x 8192 layer at world 4, two full bands per shard; and the
 * 8192 x 4096 x 14336 layer's n and k with three bands, the last one short and its last tile-row partial. */
const RS_BIG: [number, number, number][] = [
  [2048, 8192, 2048],
  [2340, 4096, 3584],
];
/** all-gather + GEMM at the benchmark's sizes, [rows per rank, n, k]: the 8192 x 8192 x 8192 layer at
 * world 4, and 16384 x 6656 x 16384's n with shards that end inside a tile (tiles straddle shards). */
const AG_BIG: [number, number, number][] = [
  [2048, 8192, 8192],
  [1000, 6656, 2048],
];
// Room for the largest receive buffer (m x n x 2 bytes) and staged shard above, 32 MiB at least.
const STAGING = Math.max(
  32 << 20,
  ...RS_BIG.map(([rows, n]) => rows * WORLD * n * 2),
  ...AG_BIG.map(([rows, , k]) => rows * k * 2),
);

const group = await init({ backend: "cuda", stagingBytes: STAGING });
const c = group.collectives;
const { rank, worldSize: world, device } = group;
const stream = defaultStream(device);
const seed = await sharedSeed(group.store, rank);
const lap = sectionTimer(rank);

type Layout = "nk" | "kn";
interface Combo {
  readonly dtype: "bf16" | "fp8e4m3";
  readonly layout: Layout;
}
const BF16: Combo = { dtype: "bf16", layout: "nk" };
const COMBOS: Combo[] = [BF16, { dtype: "bf16", layout: "kn" }, { dtype: "fp8e4m3", layout: "nk" }];
const AG_FUSED: AllGatherMatmulAlgorithm[] = ["fused_copy_engine", "fused_pull"];
const RS_FUSED: MatmulReduceScatterAlgorithm[] = ["fused"];
const scaleA = Tensor.fromHost([0.5], "f32");
const scaleB = Tensor.fromHost([1.5], "f32");
const scalesFor = (dtype: DType) => (dtype === "fp8e4m3" ? { scaleA, scaleB } : {});
/** A decoy's operands: the case's salt plus this (no case's own salt comes near). */
const DECOY = 500;

/** Rank r's operand `salt`: uniform values, the same on every rank that asks for it. */
const operand = (dtype: DType, shape: [number, number], r: number, salt: number): Tensor =>
  Tensor.rand(shape, dtype, {
    seed,
    offset: BigInt(salt) * (1n << 36n) + BigInt(r) * (1n << 30n),
    low: -1,
    high: 1,
  });

const same = (got: RawArray, want: RawArray, what: string): void => assertSameBits(got, want, what, seed);

/** Within bf16 rounding of `want` (decoded values), for results computed in another order. */
function close(got: RawArray, want: Float32Array | Float64Array, what: string, tol = 2 ** -6): void {
  const g = decodeToF32("bf16", got);
  let num = 0;
  let den = 0;
  for (let i = 0; i < want.length; i++) {
    num += (g[i]! - want[i]!) ** 2;
    den += want[i]! ** 2;
  }
  const rel = Math.sqrt(num / Math.max(den, 1e-30));
  if (!(rel < tol)) assert.fail(`${what}: relative difference ${rel} from the reference (seed ${seed})`);
}

const hash = rawHash;
const agree = agreement(group.store, rank, world);

/** One all-gather + GEMM problem: every rank's shard, this rank's weight, the references, and a decoy
 * (this rank's shard and weight of the same shape, other values). */
interface AgCase {
  readonly what: string;
  readonly combo: Combo;
  readonly rows: number;
  readonly n: number;
  readonly k: number;
  readonly shard: Tensor;
  readonly b: Tensor;
  readonly decoy: readonly [Tensor, Tensor];
  readonly gatheredWant: RawArray;
  readonly want: RawArray;
}

function agCase(combo: Combo, rows: number, n: number, k: number, salt = 1): AgCase {
  const { dtype, layout } = combo;
  const shards = Array.from({ length: world }, (_, r) => operand(dtype, [rows, k], r, salt));
  const bShape: [number, number] = layout === "nk" ? [n, k] : [k, n];
  const b = operand(dtype, bShape, rank, salt + 1);
  const whole = Tensor.empty([world * rows, k], dtype);
  shards.forEach((s, r) => whole.slice(r * rows, (r + 1) * rows).copyFrom(s));
  const want = tileMatmul(whole, b, { layoutB: layout, ...scalesFor(dtype) });
  const c0: AgCase = {
    what: `allGatherMatmul ${dtype} B ${layout} ${rows}x${n}x${k} per rank`,
    combo,
    rows,
    n,
    k,
    shard: shards[rank]!,
    b,
    decoy: [operand(dtype, [rows, k], rank, salt + DECOY), operand(dtype, bShape, rank, salt + 1 + DECOY)],
    gatheredWant: whole.toHost(),
    want: want.toHost(),
  };
  shards.forEach((s, r) => r !== rank && s.dispose());
  whole.dispose();
  want.dispose();
  return c0;
}

const disposeAg = (x: AgCase): void => [x.shard, x.b, ...x.decoy].forEach((t) => t.dispose());

/** One GEMM + reduce-scatter problem, its deterministic reference (symmkit's GEMM per rank, then the
 * rank-order reduction of src/ops/coll/reduce.ts over this rank's rows) and a decoy (operands of the same
 * shape, other values). */
interface RsCase {
  readonly what: string;
  readonly combo: Combo;
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly a: Tensor;
  readonly b: Tensor;
  readonly decoy: readonly [Tensor, Tensor];
  readonly want: RawArray;
}

function rsCase(combo: Combo, m: number, n: number, k: number, salt = 3): RsCase {
  const { dtype, layout } = combo;
  const rows = m / world;
  const bShape: [number, number] = layout === "nk" ? [n, k] : [k, n];
  // Only this rank's rows of each partial come to the host: the reference at the benchmark's sizes stays
  // a few seconds and a few hundred MB at world 8.
  const partials: RawArray[] = [];
  let mine: [Tensor, Tensor] | undefined;
  for (let r = 0; r < world; r++) {
    const a = operand(dtype, [m, k], r, salt);
    const b = operand(dtype, bShape, r, salt + 1);
    const p = tileMatmul(a, b, { layoutB: layout, ...scalesFor(dtype) });
    partials.push(p.slice(rank * rows, (rank + 1) * rows).toHost());
    p.dispose();
    if (r === rank) mine = [a, b];
    else for (const t of [a, b]) t.dispose();
  }
  const want = encode("bf16", new Float32Array(rows * n));
  reduceInto("bf16", "sum", partials, 0, want, 0, rows * n);
  return {
    what: `matmulReduceScatter ${dtype} B ${layout} ${m}x${n}x${k}`,
    combo,
    m,
    n,
    k,
    a: mine![0],
    b: mine![1],
    decoy: [operand(dtype, [m, k], rank, salt + DECOY), operand(dtype, bShape, rank, salt + 1 + DECOY)],
    want,
  };
}

const disposeRs = (x: RsCase): void => [x.a, x.b, ...x.decoy].forEach((t) => t.dispose());

function runAg(
  x: AgCase,
  algorithm: AllGatherMatmulAlgorithm,
  out: Tensor,
  gathered: Tensor,
  decoy = false,
): void {
  const [shard, b] = decoy ? x.decoy : [x.shard, x.b];
  c.allGatherMatmul(shard, b, {
    algorithm,
    out,
    gathered,
    layoutB: x.combo.layout,
    ...scalesFor(x.combo.dtype),
  });
}

function runRs(x: RsCase, algorithm: MatmulReduceScatterAlgorithm, out: Tensor, decoy = false): void {
  const [a, b] = decoy ? x.decoy : [x.a, x.b];
  c.matmulReduceScatter(a, b, { algorithm, out, layoutB: x.combo.layout, ...scalesFor(x.combo.dtype) });
}

/** The decoy call, then the case's, back to back on the stream, into the same output. */
function rsAfterDecoy(x: RsCase, algorithm: MatmulReduceScatterAlgorithm, out: Tensor): void {
  runRs(x, algorithm, out, true);
  runRs(x, algorithm, out);
}

/** The first element where `got` and `want` differ, or -1. */
function firstDiff(got: RawArray, want: RawArray): number {
  const bytes = (a: RawArray): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  if (got.length === want.length && bytes(got).equals(bytes(want))) return -1;
  const i = got.findIndex((v, j) => !Object.is(v, want[j]));
  return i < 0 ? Math.min(got.length, want.length) : i;
}

/**
 * Every symmkit algorithm in `got` bit for bit with the reference and with `sequential`, nccl_cublaslt
 * within rounding. Every relation is judged before failing, so that a failure says which side is wrong
 * (the fused kernel, or the sequential path).
 */
function threeWay(what: string, n: number, got: ReadonlyMap<string, RawArray>, want: RawArray): void {
  const wrong: string[] = [];
  const at = (i: number): string => `element ${i} (row ${Math.floor(i / n)}, column ${i % n})`;
  const sequential = got.get("sequential")!;
  for (const [algorithm, out] of got) {
    if (algorithm === "nccl_cublaslt") continue;
    const i = firstDiff(out, want);
    if (i >= 0) wrong.push(`${algorithm}: ${at(i)} is ${out[i]}, the reference ${want[i]}`);
    const j = algorithm === "sequential" ? -1 : firstDiff(out, sequential);
    if (j >= 0) wrong.push(`${algorithm} and sequential differ at ${at(j)}`);
  }
  if (wrong.length) assert.fail(`${what} (rank ${rank} of ${world}, seed ${seed}): ${wrong.join("; ")}`);
  const nccl = got.get("nccl_cublaslt");
  if (nccl) close(nccl, decodeToF32("bf16", want), `${what} nccl_cublaslt`);
}

/** Waits for symmkit's kernels and NCCL's. */
async function settle(): Promise<void> {
  group.synchronize();
  (await group.nccl()).synchronize();
}

// GEMM + reduce-scatter at the benchmark's sizes: first on the fresh staging buffer (this is the
// program's first collective call), then on one poisoned with NaN, then every algorithm after a decoy;
// fused and sequential against the host reference and against each other.
for (const [i, [rows, n, k]] of RS_BIG.entries()) {
  const x = rsCase(BF16, rows * world, n, k, 60 + 4 * i);
  const out = Tensor.empty([rows, n], "bf16");
  if (i === 0) {
    runRs(x, "fused", out);
    await settle();
    same(out.toHost(), x.want, `${x.what} fused, first call on the fresh staging buffer`);
  }
  // All bits set: a bf16 NaN in every receive slot. Every rank's fill lands before any rank's call.
  c.staging.tensor.fill(0xff);
  group.synchronize();
  await group.barrier();
  runRs(x, "fused", out);
  await settle();
  same(out.toHost(), x.want, `${x.what} fused, on a staging buffer poisoned with NaN`);
  const got = new Map<string, RawArray>();
  for (const algorithm of [...RS_FUSED, "sequential", "nccl_cublaslt"] as const) {
    out.fill(NaN);
    rsAfterDecoy(x, algorithm, out);
    await settle();
    got.set(algorithm, out.toHost());
  }
  threeWay(`${x.what} after a decoy`, n, got, x.want);
  if (i === 0) {
    // A unit that reads a peer's partial before it lands shows only when the slot holds other values,
    // and only now and then (the reduce that read rows behind the other half's flags: about one call
    // in 60 wrong at world 4): many alternating calls, each checked.
    for (let round = 0; round < 100; round++) {
      rsAfterDecoy(x, "fused", out);
      group.synchronize();
      same(out.toHost(), x.want, `${x.what} fused after a decoy, round ${round}`);
    }
  }
  out.dispose();
  disposeRs(x);
}
lap("matmulReduceScatter at the benchmark's sizes");

// all-gather + GEMM at the benchmark's sizes: every algorithm after a decoy into the same outputs.
for (const [i, [rows, n, k]] of AG_BIG.entries()) {
  const x = agCase(BF16, rows, n, k, 70 + 4 * i);
  const out = Tensor.empty([world * rows, n], "bf16");
  const gathered = Tensor.empty([world * rows, k], "bf16");
  const got = new Map<string, RawArray>();
  for (const algorithm of [...AG_FUSED, "sequential", "nccl_cublaslt"] as const) {
    runAg(x, algorithm, out, gathered, true);
    runAg(x, algorithm, out, gathered);
    await settle();
    same(gathered.toHost(), x.gatheredWant, `${x.what} ${algorithm} after a decoy: gathered`);
    got.set(algorithm, out.toHost());
  }
  threeWay(`${x.what} after a decoy`, n, got, x.want);
  for (const t of [out, gathered]) t.dispose();
  disposeAg(x);
}
lap("allGatherMatmul at the benchmark's sizes");

// Shapes per rank: one row per rank; rows that fill no tile and m not a multiple of world x 128; n and k
// odd multiples of 16; several tiles in both directions with a partial last tile.
const AG_SHAPES: [number, number, number][] = [
  [1, 48, 32],
  [77, 272, 208],
  [300, 784, 400],
];
const RS_SHAPES: [number, number, number][] = [
  [world, 48, 32],
  [77 * world, 272, 208],
  [300 * world, 784, 400],
];

for (const combo of COMBOS) {
  for (const [rows, n, k] of AG_SHAPES) {
    const x = agCase(combo, rows, n, k);
    // The decoy's outputs are its own: the checked call's stay poisoned until it writes them.
    const decoyOut = Tensor.empty([world * rows, n], "bf16");
    const decoyGathered = Tensor.empty([world * rows, k], combo.dtype);
    for (const algorithm of [...AG_FUSED, "sequential", "nccl_cublaslt"] as const) {
      const [oWhole, out] = poisoned("bf16", [world * rows, n]);
      const [gWhole, gathered] = poisoned(combo.dtype, [world * rows, k]);
      runAg(x, algorithm, decoyOut, decoyGathered, true);
      runAg(x, algorithm, out, gathered);
      await settle();
      const what = `${x.what} ${algorithm}`;
      same(gathered.toHost(), x.gatheredWant, `${what}: gathered`);
      if (algorithm === "nccl_cublaslt") close(out.toHost(), decodeToF32("bf16", x.want), what);
      else same(out.toHost(), x.want, what);
      guardsIntact(oWhole, `${what}: out`);
      guardsIntact(gWhole, `${what}: gathered`);
      await agree(gathered.toHost(), `${what}: gathered`);
      for (const t of [oWhole, gWhole]) t.dispose();
    }
    for (const t of [decoyOut, decoyGathered]) t.dispose();
    disposeAg(x);
  }
  for (const [m, n, k] of RS_SHAPES) {
    const x = rsCase(combo, m, n, k);
    const decoyOut = Tensor.empty([m / world, n], "bf16");
    for (const algorithm of [...RS_FUSED, "sequential", "nccl_cublaslt"] as const) {
      const [oWhole, out] = poisoned("bf16", [m / world, n]);
      runRs(x, algorithm, decoyOut, true);
      runRs(x, algorithm, out);
      await settle();
      const what = `${x.what} ${algorithm}`;
      if (algorithm === "nccl_cublaslt") close(out.toHost(), decodeToF32("bf16", x.want), what);
      else same(out.toHost(), x.want, what);
      guardsIntact(oWhole, what);
      oWhole.dispose();
    }
    decoyOut.dispose();
    disposeRs(x);
  }
}
console.log(
  "allGatherMatmul (copy engine, pull, sequential) bit for bit with symmkit's GEMM of the gathered A; matmulReduceScatter (fused, sequential) bit for bit with the rank-order reference; NCCL + cuBLASLt within rounding; bf16, fp8, B [n,k] and [k,n]; each after a decoy call; guards intact",
);
lap("every dtype, layout and small shape");

// Against a float64 product: the references above are right, not only self-consistent.
{
  const x = rsCase(BF16, 64 * world, 80, 96, 7);
  const rows = x.m / world;
  const host = (t: Tensor): Float32Array => t.toHost({ decode: true });
  const f64 = new Float64Array(rows * x.n);
  for (let r = 0; r < world; r++) {
    const a = operand("bf16", [x.m, x.k], r, 7);
    const b = operand("bf16", [x.n, x.k], r, 8);
    const [av, bv] = [host(a), host(b)];
    for (let i = 0; i < rows; i++)
      for (let j = 0; j < x.n; j++) {
        let s = 0;
        for (let t = 0; t < x.k; t++) s += av[(rank * rows + i) * x.k + t]! * bv[j * x.k + t]!;
        f64[i * x.n + j]! += s;
      }
    for (const t of [a, b]) t.dispose();
  }
  const out = c.matmulReduceScatter(x.a, x.b, { algorithm: "fused" });
  group.synchronize();
  close(out.toHost(), f64, "matmulReduceScatter against float64", 2 ** -7);
  out.dispose();
  disposeRs(x);
  console.log("matmulReduceScatter within bf16 rounding of a float64 product");
}

// A symmetric shard is read in place (no staging copy).
{
  const x = agCase(BF16, 200, 528, 272, 11);
  const sym = await group.symmetric.empty([200, 272], "bf16");
  sym.tensor.copyFrom(x.shard);
  for (const algorithm of AG_FUSED) {
    const { out, gathered } = c.allGatherMatmul(sym, x.b, { algorithm });
    group.synchronize();
    same(gathered.toHost(), x.gatheredWant, `symmetric shard ${algorithm}: gathered`);
    same(out.toHost(), x.want, `symmetric shard ${algorithm}`);
    for (const t of [out, gathered]) t.dispose();
  }
  await group.barrier();
  await sym.dispose();
  disposeAg(x);
  console.log("allGatherMatmul on a symmetric shard, read in place: bit for bit");
}
lap("float64 product, symmetric shard");

// One CUDA graph holding every fused construction, replayed with new inputs copied in between replays.
{
  const sets = [0, 1].map((i) => ({
    ag: agCase(BF16, 130, 528, 208, 20 + 4 * i),
    rs: rsCase(BF16, 130 * world, 528, 208, 22 + 4 * i),
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
    shard.copyFrom(sets[i]!.ag.shard, stream);
    bAg.copyFrom(sets[i]!.ag.b, stream);
    a.copyFrom(sets[i]!.rs.a, stream);
    bRs.copyFrom(sets[i]!.rs.b, stream);
  };
  load(0);
  const graph = Graph.capture(stream, () => {
    AG_FUSED.forEach((algorithm, j) =>
      c.allGatherMatmul(shard, bAg, { algorithm, out: agOuts[j]![0], gathered: agOuts[j]![1], stream }),
    );
    RS_FUSED.forEach((algorithm, j) => c.matmulReduceScatter(a, bRs, { algorithm, out: rsOuts[j]!, stream }));
  });
  for (let replay = 0; replay < 4; replay++) {
    const i = replay % 2;
    load(i);
    graph.launch(stream);
    group.synchronize(stream);
    AG_FUSED.forEach((algorithm, j) => {
      same(agOuts[j]![0].toHost(), sets[i]!.ag.want, `graph replay ${replay} ${algorithm}`);
      same(agOuts[j]![1].toHost(), sets[i]!.ag.gatheredWant, `graph replay ${replay} ${algorithm}: gathered`);
    });
    RS_FUSED.forEach((algorithm, j) =>
      same(rsOuts[j]!.toHost(), sets[i]!.rs.want, `graph replay ${replay} ${algorithm}`),
    );
  }
  graph.dispose();
  for (const s of sets) {
    disposeAg(s.ag);
    disposeRs(s.rs);
  }
  console.log(
    "a CUDA graph of every fused construction, replayed 4 times with the inputs changed in between: bit for bit",
  );
}

// A straggler: the last rank starts 50 ms late; everyone waits for it and gets the reference.
{
  const ag = agCase(BF16, 256, 1024, 512, 30);
  const rs = rsCase(BF16, 256 * world, 1024, 512, 32);
  for (const algorithm of AG_FUSED) {
    if (rank === world - 1) await sleep(50);
    const { out, gathered } = c.allGatherMatmul(ag.shard, ag.b, { algorithm });
    group.synchronize();
    same(out.toHost(), ag.want, `straggler ${algorithm}`);
    for (const t of [out, gathered]) t.dispose();
  }
  for (const algorithm of RS_FUSED) {
    if (rank === world - 1) await sleep(50);
    const out = c.matmulReduceScatter(rs.a, rs.b, { algorithm });
    group.synchronize();
    same(out.toHost(), rs.want, `straggler ${algorithm}`);
    out.dispose();
  }
  disposeAg(ag);
  disposeRs(rs);
  console.log("a rank 50 ms late: every fused construction waits for it and is exact");
}
lap("graph replays, straggler");

// 200 calls alternating shapes and algorithms, every result checked; a rank delayed now and then.
{
  const ags = [agCase(BF16, 77, 272, 208, 40), agCase(BF16, 260, 528, 400, 42)];
  const rss = [rsCase(BF16, 77 * world, 272, 208, 44), rsCase(BF16, 260 * world, 528, 400, 46)];
  const agAlgs: AllGatherMatmulAlgorithm[] = [...AG_FUSED, "sequential", "auto"];
  const rsAlgs: MatmulReduceScatterAlgorithm[] = [...RS_FUSED, "sequential", "auto"];
  /** Bit for bit, unless auto took NCCL + cuBLASLt (small problems): within rounding then. */
  const check = (got: RawArray, want: RawArray, viaCublas: boolean, what: string): void => {
    if (viaCublas) close(got, decodeToF32("bf16", want), what);
    else if (hash(got) !== hash(want)) assert.fail(`${what} wrong (seed ${seed})`);
  };
  const problem = (m: number, n: number, k: number, shardRows: number) =>
    ({ elem: "bf16", layoutB: "nk", m, n, k, shardRows }) as const;
  for (let i = 0; i < 200; i++) {
    if (i % 50 === 25 && rank === i % world) await sleep(20);
    if (i % 2 === 0) {
      const x = ags[(i >> 1) % 2]!;
      const algorithm = agAlgs[(i >> 2) % agAlgs.length]!;
      const picked =
        algorithm === "auto"
          ? c.fusedMatmul.autoAllGatherMatmul(problem(x.rows * world, x.n, x.k, x.rows), x.shard.nbytes)
          : algorithm;
      const { out, gathered } = c.allGatherMatmul(x.shard, x.b, { algorithm });
      await settle();
      check(out.toHost(), x.want, picked === "nccl_cublaslt", `call ${i}: ${x.what} ${algorithm}`);
      for (const t of [out, gathered]) t.dispose();
    } else {
      const x = rss[(i >> 1) % 2]!;
      const algorithm = rsAlgs[(i >> 2) % rsAlgs.length]!;
      const picked =
        algorithm === "auto"
          ? c.fusedMatmul.autoMatmulReduceScatter(problem(x.m, x.n, x.k, x.m / world))
          : algorithm;
      const out = c.matmulReduceScatter(x.a, x.b, { algorithm });
      await settle();
      check(out.toHost(), x.want, picked === "nccl_cublaslt", `call ${i}: ${x.what} ${algorithm}`);
      out.dispose();
    }
  }
  ags.forEach(disposeAg);
  rss.forEach(disposeRs);
  console.log(
    "200 calls alternating shapes and algorithms (fused, sequential, auto), a rank delayed now and then: all exact (within rounding where auto took cuBLASLt)",
  );
}
lap("200 alternating calls");

// Bad input: a typed error before anything is written.
{
  const x = agCase(BF16, 64, 256, 128, 50);
  const y = rsCase(BF16, 64 * world, 256, 128, 52);
  const [oWhole, out] = poisoned("bf16", [64 * world, 256]);
  const [rWhole, rOut] = poisoned("bf16", [64, 256]);
  const before = [oWhole.toHost(), rWhole.toHost()];
  const other = deviceCount() > 1 ? Device.get((device.ordinal + 1) % deviceCount()) : undefined;
  // Past the staging buffer, at every world: a receive buffer of twice its size (m rows split over the
  // ranks), and a shard one 8 KiB row beyond it.
  const bigM = world * Math.ceil(STAGING / (8192 * 2 * world)) * 2;
  const big = Tensor.empty([bigM, 4096], "bf16");
  const bigB = Tensor.empty([8192, 4096], "bf16");
  const bigShard = Tensor.empty([STAGING / (4096 * 2) + 1, 4096], "bf16");
  const bad: [string, () => unknown][] = [
    ["dtype mismatch", () => c.allGatherMatmul(x.shard, Tensor.empty([256, 128], "fp8e4m3"), { out })],
    ["k mismatch", () => c.allGatherMatmul(x.shard, Tensor.empty([256, 64], "bf16"), { out })],
    ["out shape", () => c.allGatherMatmul(x.shard, x.b, { out: out.view([64 * world * 256]) })],
    [
      "rows do not split",
      () => c.matmulReduceScatter(Tensor.empty([64 * world + 1, 128], "bf16"), y.b, { out: rOut }),
    ],
    ["unknown algorithm", () => c.matmulReduceScatter(y.a, y.b, { out: rOut, algorithm: "ring" as "auto" })],
    [
      "out overlaps the input",
      () =>
        c.matmulReduceScatter(y.a, y.b, {
          out: y.a
            .view([64 * world * 128])
            .slice(0, 64 * 256)
            .view([64, 256]),
        }),
    ],
    [
      "receive buffer larger than the staging buffer",
      () => c.matmulReduceScatter(big, bigB, { algorithm: "fused" }),
    ],
    [
      "plain shard larger than the staging buffer",
      () => c.allGatherMatmul(bigShard, bigB, { algorithm: "fused" }),
    ],
    ...(other
      ? ([
          [
            "b on another GPU",
            () => c.allGatherMatmul(x.shard, Tensor.empty([256, 128], "bf16", { device: other }), { out }),
          ],
        ] as [string, () => unknown][])
      : []),
  ];
  for (const [what, f] of bad) {
    assert.throws(
      f,
      (e: Error) => e instanceof InvalidArgumentError && e.code === "SYMMKIT_INVALID_ARGUMENT",
      what,
    );
    group.synchronize();
    same(oWhole.toHost(), before[0]!, `${what}: out was written`);
    same(rWhole.toHost(), before[1]!, `${what}: out was written`);
  }
  // What fused refuses for want of room, auto runs the sequential way.
  const seq = c.matmulReduceScatter(big, bigB);
  group.synchronize();
  assert.equal(
    c.fusedMatmul.autoMatmulReduceScatter({
      elem: "bf16",
      m: bigM,
      n: 8192,
      k: 4096,
      layoutB: "nk",
      shardRows: bigM / world,
    }),
    "sequential",
  );
  for (const t of [seq, big, bigB, bigShard, oWhole, rWhole]) t.dispose();
  disposeAg(x);
  disposeRs(y);
  console.log(
    `bad input: ${bad.length} cases, typed errors, nothing written; auto falls back when fused has no room`,
  );
}
lap("bad input");

await group.destroy();
console.log("gpu fused ok");
