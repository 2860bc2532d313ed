// One rank of the fused-matmul check (test/gpu/distributed.test.ts): allGatherMatmul and
// matmulReduceScatter on GPUs.
//   all-gather + GEMM: bit for bit equal to symmkit's GEMM on the gathered A (same kernel, same tile
//     math), the gathered A exact and equal on every rank;
//   GEMM + reduce-scatter: bit for bit equal to the deterministic reference (symmkit's GEMM per rank, then
//     the partials summed in f32 in rank order, rounded once), on every run;
//   both: NCCL + cuBLASLt within bf16 rounding, a float64 product within rounding; bf16 and fp8 with
//   scales, B as [n, k] and [k, n], m not a multiple of the tile or of world x tile, n and k odd multiples
//   of 16, one row per rank; outputs poisoned with guards; symmetric inputs; a CUDA graph replayed with
//   the inputs changed between replays; a rank delayed 50 ms; 200 calls alternating shapes and
//   algorithms; bad input is a typed error with nothing written. Seeded inputs, the seed printed.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { agreement, rawHash, sharedSeed } from "../../support/agree.js";
import { init } from "../../../src/init.js";
import { InvalidArgumentError } from "../../../src/errors.js";
import { reduceInto } from "../../../src/ops/reduce.js";
import { matmul } from "../../../src/ops/matmul.js";
import type {
  AllGatherMatmulAlgorithm,
  MatmulReduceScatterAlgorithm,
} from "../../../src/ops/fused-checks.js";
import { Device, deviceCount } from "../../../src/runtime/device.js";
import { decodeToF32, encode, type DType, type RawArray } from "../../../src/runtime/dtype.js";
import { Graph } from "../../../src/runtime/graph.js";
import { defaultStream } from "../../../src/runtime/stream.js";
import { Tensor } from "../../../src/runtime/tensor.js";
import { guardsIntact, poisoned } from "./guards.js";

const group = await init({ backend: "cuda", stagingBytes: 32 << 20 });
const c = group.collectives;
const { rank, worldSize: world, device } = group;
const stream = defaultStream(device);
const seed = await sharedSeed(group.store, rank);

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
const AG_FUSED: AllGatherMatmulAlgorithm[] = ["fused_copy_engine", "fused_pull"];
const RS_FUSED: MatmulReduceScatterAlgorithm[] = ["fused"];
const scaleA = Tensor.fromHost([0.5], "f32");
const scaleB = Tensor.fromHost([1.5], "f32");
const scalesFor = (dtype: DType) => (dtype === "fp8e4m3" ? { scaleA, scaleB } : {});

/** Rank r's operand `salt`: uniform values, the same on every rank that asks for it. */
const operand = (dtype: DType, shape: [number, number], r: number, salt: number): Tensor =>
  Tensor.rand(shape, dtype, {
    seed,
    offset: BigInt(salt) * (1n << 36n) + BigInt(r) * (1n << 30n),
    low: -1,
    high: 1,
  });

function same(got: RawArray, want: RawArray, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++)
    if (!Object.is(got[i], want[i]))
      assert.fail(`${what}: element ${i} is ${got[i]}, expected ${want[i]} (seed ${seed})`);
}

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

/** One all-gather + GEMM problem: every rank's shard, this rank's weight, and the references. */
interface AgCase {
  readonly what: string;
  readonly combo: Combo;
  readonly rows: number;
  readonly n: number;
  readonly k: number;
  readonly shard: Tensor;
  readonly b: Tensor;
  readonly gatheredWant: RawArray;
  readonly want: RawArray;
}

function agCase(combo: Combo, rows: number, n: number, k: number, salt = 1): AgCase {
  const { dtype, layout } = combo;
  const shards = Array.from({ length: world }, (_, r) => operand(dtype, [rows, k], r, salt));
  const b = operand(dtype, layout === "nk" ? [n, k] : [k, n], rank, salt + 1);
  const whole = Tensor.empty([world * rows, k], dtype);
  shards.forEach((s, r) => whole.slice(r * rows, (r + 1) * rows).copyFrom(s));
  const want = matmul(whole, b, { layoutB: layout, ...scalesFor(dtype) });
  const c0: AgCase = {
    what: `allGatherMatmul ${dtype} B ${layout} ${rows}x${n}x${k} per rank`,
    combo,
    rows,
    n,
    k,
    shard: shards[rank]!,
    b,
    gatheredWant: whole.toHost(),
    want: want.toHost(),
  };
  shards.forEach((s, r) => r !== rank && s.dispose());
  whole.dispose();
  want.dispose();
  return c0;
}

/** One GEMM + reduce-scatter problem and its deterministic reference (symmkit's GEMM per rank, then the
 * rank-order reduction of src/ops/reduce.ts). */
interface RsCase {
  readonly what: string;
  readonly combo: Combo;
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly a: Tensor;
  readonly b: Tensor;
  readonly want: RawArray;
  readonly partials: RawArray[];
}

function rsCase(combo: Combo, m: number, n: number, k: number, salt = 3): RsCase {
  const { dtype, layout } = combo;
  const rows = m / world;
  const partials: RawArray[] = [];
  let mine: [Tensor, Tensor] | undefined;
  for (let r = 0; r < world; r++) {
    const a = operand(dtype, [m, k], r, salt);
    const b = operand(dtype, layout === "nk" ? [n, k] : [k, n], r, salt + 1);
    const p = matmul(a, b, { layoutB: layout, ...scalesFor(dtype) });
    partials.push(p.toHost());
    p.dispose();
    if (r === rank) mine = [a, b];
    else for (const t of [a, b]) t.dispose();
  }
  const want = encode("bf16", new Float32Array(rows * n));
  reduceInto("bf16", "sum", partials, rank * rows * n, want, 0, rows * n);
  return {
    what: `matmulReduceScatter ${dtype} B ${layout} ${m}x${n}x${k}`,
    combo,
    m,
    n,
    k,
    a: mine![0],
    b: mine![1],
    want,
    partials,
  };
}

function runAg(x: AgCase, algorithm: AllGatherMatmulAlgorithm, out: Tensor, gathered: Tensor): void {
  c.allGatherMatmul(x.shard, x.b, {
    algorithm,
    out,
    gathered,
    layoutB: x.combo.layout,
    ...scalesFor(x.combo.dtype),
  });
}

function runRs(x: RsCase, algorithm: MatmulReduceScatterAlgorithm, out: Tensor): void {
  c.matmulReduceScatter(x.a, x.b, { algorithm, out, layoutB: x.combo.layout, ...scalesFor(x.combo.dtype) });
}

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
    for (const algorithm of [...AG_FUSED, "sequential", "nccl_cublaslt"] as const) {
      const [oWhole, out] = poisoned("bf16", [world * rows, n]);
      const [gWhole, gathered] = poisoned(combo.dtype, [world * rows, k]);
      runAg(x, algorithm, out, gathered);
      group.synchronize();
      (await group.nccl()).synchronize();
      const what = `${x.what} ${algorithm}`;
      same(gathered.toHost(), x.gatheredWant, `${what}: gathered`);
      if (algorithm === "nccl_cublaslt") close(out.toHost(), decodeToF32("bf16", x.want), what);
      else same(out.toHost(), x.want, what);
      guardsIntact(oWhole, `${what}: out`);
      guardsIntact(gWhole, `${what}: gathered`);
      await agree(gathered.toHost(), `${what}: gathered`);
      for (const t of [oWhole, gWhole]) t.dispose();
    }
    for (const t of [x.shard, x.b]) t.dispose();
  }
  for (const [m, n, k] of RS_SHAPES) {
    const x = rsCase(combo, m, n, k);
    for (const algorithm of [...RS_FUSED, "sequential", "nccl_cublaslt"] as const) {
      const [oWhole, out] = poisoned("bf16", [m / world, n]);
      runRs(x, algorithm, out);
      group.synchronize();
      (await group.nccl()).synchronize();
      const what = `${x.what} ${algorithm}`;
      if (algorithm === "nccl_cublaslt") close(out.toHost(), decodeToF32("bf16", x.want), what);
      else same(out.toHost(), x.want, what);
      guardsIntact(oWhole, what);
      oWhole.dispose();
    }
    // The same call again gives the same bits (the epoch moved on; no flag of the last call counts).
    for (const algorithm of RS_FUSED) {
      const out = Tensor.full([m / world, n], NaN, "bf16");
      runRs(x, algorithm, out);
      group.synchronize();
      same(out.toHost(), x.want, `${x.what} ${algorithm}, again`);
      out.dispose();
    }
    for (const t of [x.a, x.b]) t.dispose();
  }
}
console.log(
  "allGatherMatmul (copy engine, pull, sequential) bit for bit with symmkit's GEMM of the gathered A; matmulReduceScatter (fused, sequential) bit for bit with the rank-order reference; NCCL + cuBLASLt within rounding; bf16, fp8, B [n,k] and [k,n]; guards intact",
);

// Against a float64 product: the references above are right, not only self-consistent.
{
  const combo: Combo = { dtype: "bf16", layout: "nk" };
  const x = rsCase(combo, 64 * world, 80, 96, 7);
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
  for (const t of [x.a, x.b, out]) t.dispose();
  console.log("matmulReduceScatter within bf16 rounding of a float64 product");
}

// A symmetric shard is read in place (no staging copy).
{
  const x = agCase({ dtype: "bf16", layout: "nk" }, 200, 528, 272, 11);
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
  for (const t of [x.shard, x.b]) t.dispose();
  console.log("allGatherMatmul on a symmetric shard, read in place: bit for bit");
}

// One CUDA graph holding every fused construction, replayed with new inputs copied in between replays.
{
  const combo: Combo = { dtype: "bf16", layout: "nk" };
  const sets = [0, 1].map((i) => ({
    ag: agCase(combo, 130, 528, 208, 20 + 4 * i),
    rs: rsCase(combo, 130 * world, 528, 208, 22 + 4 * i),
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
  console.log(
    "a CUDA graph of every fused construction, replayed 4 times with the inputs changed in between: bit for bit",
  );
}

// A straggler: the last rank starts 50 ms late; everyone waits for it and gets the reference.
{
  const combo: Combo = { dtype: "bf16", layout: "nk" };
  const ag = agCase(combo, 256, 1024, 512, 30);
  const rs = rsCase(combo, 256 * world, 1024, 512, 32);
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
  console.log("a rank 50 ms late: every fused construction waits for it and is exact");
}

// 200 calls alternating shapes and algorithms, every result checked; a rank delayed now and then.
{
  const combo: Combo = { dtype: "bf16", layout: "nk" };
  const ags = [agCase(combo, 77, 272, 208, 40), agCase(combo, 260, 528, 400, 42)];
  const rss = [rsCase(combo, 77 * world, 272, 208, 44), rsCase(combo, 260 * world, 528, 400, 46)];
  const agAlgs: AllGatherMatmulAlgorithm[] = [...AG_FUSED, "sequential", "auto"];
  const rsAlgs: MatmulReduceScatterAlgorithm[] = [...RS_FUSED, "sequential", "auto"];
  /** Bit for bit, unless auto took NCCL + cuBLASLt (small problems): within rounding then. */
  const check = (got: RawArray, want: RawArray, viaCublas: boolean, what: string): void => {
    if (viaCublas) close(got, decodeToF32("bf16", want), what);
    else if (hash(got) !== hash(want)) assert.fail(`${what} wrong`);
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
      group.synchronize();
      (await group.nccl()).synchronize();
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
      group.synchronize();
      (await group.nccl()).synchronize();
      check(out.toHost(), x.want, picked === "nccl_cublaslt", `call ${i}: ${x.what} ${algorithm}`);
      out.dispose();
    }
  }
  console.log(
    "200 calls alternating shapes and algorithms (fused, sequential, auto), a rank delayed now and then: all exact (within rounding where auto took cuBLASLt)",
  );
}

// Bad input: a typed error before anything is written.
{
  const x = agCase({ dtype: "bf16", layout: "nk" }, 64, 256, 128, 50);
  const y = rsCase({ dtype: "bf16", layout: "nk" }, 64 * world, 256, 128, 52);
  const [oWhole, out] = poisoned("bf16", [64 * world, 256]);
  const [rWhole, rOut] = poisoned("bf16", [64, 256]);
  const before = [oWhole.toHost(), rWhole.toHost()];
  const other = deviceCount() > 1 ? Device.get((device.ordinal + 1) % deviceCount()) : undefined;
  const big = Tensor.empty([4096, 4096], "bf16");
  const bigB = Tensor.empty([8192, 4096], "bf16");
  const bigShard = Tensor.empty([8192, 4096], "bf16");
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
      m: 4096,
      n: 8192,
      k: 4096,
      layoutB: "nk",
      shardRows: 4096 / world,
    }),
    "sequential",
  );
  for (const t of [seq, big, bigB, bigShard, oWhole, rWhole, x.shard, x.b, y.a, y.b]) t.dispose();
  console.log(
    `bad input: ${bad.length} cases, typed errors, nothing written; auto falls back when fused has no room`,
  );
}

await group.destroy();
console.log("gpu fused ok");
