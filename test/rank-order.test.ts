// The reductions' promise: every symmkit algorithm, and auto, gives the rank-order bits (f32 accumulation
// in rank order, one rounding) at every size and world; NCCL's sums are baselines a caller names, never
// auto's. These checks hold the registry's marks, auto's candidates, the tune tables (shipped or not) and
// `symmkit tune`'s rules to that; no GPU needed.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { InvalidArgumentError } from "../src/errors.js";
import {
  AUTO_ALGORITHMS,
  BASELINE_ALGORITHMS,
  builtInPick,
  canRun,
  COLLECTIVE_ALGORITHMS,
  pieceBytes,
  REDUCE_SCATTER_PIECES,
  type CollectiveAlgorithm,
  type CollectiveName,
} from "../src/ops/coll/registry.js";
import { TUNE_KNOWN } from "../src/ops/tune-known.js";
import { BUILT_IN_FUSED_RULES } from "../src/ops/fused/checks.js";
import {
  AR_NORM_AUTO,
  AR_NORM_BASELINES,
  AR_NORM_RANK_ORDER,
  AR_NORM_TUNABLE,
  ncclNormTolerance,
} from "../src/ops/norm/checks.js";
import {
  loadTuneTable,
  pickRule,
  SHIPPED_TUNE_DIR,
  TUNED_COLLECTIVES,
  tuneFileName,
} from "../src/ops/tune-table.js";
import { fusedRulesFrom, rulesFrom, tuneUsable } from "../src/bench/tune.js";
import { arNormRulesFrom, type ArNormBenchResult } from "../src/bench/ar-norm.js";
import type { CollectiveBenchResult } from "../src/bench/collectives.js";
import type { FusedBenchResult } from "../src/bench/fused.js";

const REDUCING: readonly CollectiveName[] = ["all-reduce", "reduce-scatter"];
const records = (c: CollectiveName): [string, CollectiveAlgorithm][] =>
  Object.entries(COLLECTIVE_ALGORITHMS[c] as Record<string, CollectiveAlgorithm>);

test("the records mark which algorithms give the rank-order bits: all but NCCL's reductions", () => {
  for (const c of REDUCING)
    for (const [name, r] of records(c)) assert.equal(r.rankOrder, name !== "nccl", `${c}/${name}`);
  for (const [name, r] of records("all-gather")) assert.equal(r.rankOrder, true, `all-gather/${name}`);
  assert.deepEqual(AR_NORM_AUTO, ["lamport", "lamport_two_shot", "one_shot", "two_shot", "sequential"]);
  assert.deepEqual(AR_NORM_BASELINES, ["nccl"]);
  assert.deepEqual([...AR_NORM_AUTO, ...AR_NORM_BASELINES].sort(), [...AR_NORM_TUNABLE].sort());
});

test("auto's candidates for a reduction are exactly its rank-order records; all-gather keeps NCCL", () => {
  for (const c of TUNED_COLLECTIVES) {
    const rankOrder = records(c).flatMap(([n, r]) => (r.rankOrder ? [n] : []));
    assert.deepEqual(AUTO_ALGORITHMS[c], rankOrder, c);
    assert.deepEqual(TUNE_KNOWN[c], rankOrder, `${c}: what a table may name`);
    for (const b of BASELINE_ALGORITHMS[c]) assert.ok(!AUTO_ALGORITHMS[c].includes(b as never), `${c}/${b}`);
  }
  assert.deepEqual(BASELINE_ALGORITHMS["all-reduce"], ["nccl"]);
  assert.deepEqual(BASELINE_ALGORITHMS["reduce-scatter"], ["nccl"]);
  assert.deepEqual(BASELINE_ALGORITHMS["all-gather"], []);
  assert.ok(AUTO_ALGORITHMS["all-gather"].includes("nccl"));
  assert.deepEqual(TUNE_KNOWN.arNorm, AR_NORM_AUTO);
  for (const op of ["matmul-reduce-scatter", "matmul-all-reduce"] as const) {
    assert.ok(!TUNE_KNOWN[op]?.includes("nccl_cublaslt"), `${op}: NCCL's sum is a baseline`);
    assert.deepEqual(TUNE_KNOWN.baselines?.[op], ["nccl_cublaslt"]);
  }
  assert.ok(TUNE_KNOWN["all-gather-matmul"]?.includes("nccl_cublaslt"), "all-gather + GEMM moves bits");
});

test("auto's built-in rule picks only rank-order algorithms for a reduction, at every size, world and room", () => {
  for (const c of REDUCING)
    for (const world of [1, 2, 3, 4, 5, 6, 7, 8])
      for (const stagingBytes of [1 << 16, 1 << 20, 16 << 20, 64 << 20, 1 << 30])
        for (const mailboxSlotBytes of [1 << 16, 4 << 20, 64 << 20])
          for (let bytes = 16; bytes <= 1 << 30; bytes *= 4)
            for (const staged of [0, c === "reduce-scatter" ? bytes * world : bytes]) {
              const cap = { world, stagingBytes, mailboxSlotBytes };
              const a = builtInPick(c, bytes, staged, cap);
              const what = `${c} ${bytes} bytes (staged ${staged}) at world ${world}, ${JSON.stringify(cap)}`;
              if (a === undefined) {
                // Nothing rank-order takes it whole: a plain input past the staging buffer, run in pieces.
                assert.ok(staged > stagingBytes, what);
                continue;
              }
              assert.ok(AUTO_ALGORITHMS[c].includes(a as never), `${what}: ${a}`);
              assert.ok(canRun(c, a, bytes, staged, cap), `${what}: ${a} cannot run`);
            }
});

test("the fused matmuls' built-in rules, from their records' bounds, are the measured crossovers", () => {
  assert.deepEqual(BUILT_IN_FUSED_RULES, {
    "all-gather-matmul": [
      { maxRows: 256, algorithm: "nccl_cublaslt" },
      { maxRows: 1024, algorithm: "sequential" },
      { maxRows: 2 ** 31, algorithm: "fused_copy_engine" },
    ],
    "matmul-reduce-scatter": [
      { maxRows: 512, algorithm: "sequential" },
      { maxRows: 2 ** 31, algorithm: "fused" },
    ],
    "matmul-all-reduce": [{ maxRows: 2 ** 31, algorithm: "sequential" }],
  });
  // GEMM + reduce-scatter and GEMM + all-reduce: only rank-order constructions.
  for (const op of ["matmul-reduce-scatter", "matmul-all-reduce"] as const)
    for (const r of BUILT_IN_FUSED_RULES[op])
      assert.ok(TUNE_KNOWN[op]!.includes(r.algorithm), `${op}: ${r.algorithm}`);
});

test("a call run in pieces: every piece fits the staging buffer, and its algorithm can run it", () => {
  for (const world of [2, 3, 4, 8])
    for (const stagingBytes of [(1 << 20) + 7, 16 << 20, 64 << 20]) {
      const cap = { world, stagingBytes, mailboxSlotBytes: 4 << 20 };
      const ar = pieceBytes("all-reduce", cap);
      assert.ok(ar % 16 === 0 && ar <= stagingBytes && ar > stagingBytes - 16);
      const a = builtInPick("all-reduce", ar, ar, cap);
      assert.ok(a !== undefined && AUTO_ALGORITHMS["all-reduce"].includes(a), `all-reduce piece: ${a}`);
      const rs = pieceBytes("reduce-scatter", cap);
      assert.ok(rs % 16 === 0 && rs * world <= stagingBytes && (rs + 16) * world > stagingBytes);
      assert.ok(canRun("reduce-scatter", REDUCE_SCATTER_PIECES, rs, 0, cap));
      assert.ok(COLLECTIVE_ALGORITHMS["reduce-scatter"][REDUCE_SCATTER_PIECES].rankOrder);
    }
});

/** A table for 4 H200s whose `op` rules name `algorithm` (every other rule a rank-order one). */
function tableNaming(op: string, algorithm: string): unknown {
  const rule = (a: string) => [{ maxBytes: 1 << 20, algorithm: a }];
  const rows = (a: string) => [{ maxRows: 1024, algorithm: a }];
  return {
    device: "NVIDIA H200",
    worldSize: 4,
    dtype: "bf16",
    gitRevision: "test",
    date: "2026-01-01",
    rules: {
      "all-reduce": rule(op === "all-reduce" ? algorithm : "two_shot"),
      "all-gather": rule(op === "all-gather" ? algorithm : "pull"),
      "reduce-scatter": rule(op === "reduce-scatter" ? algorithm : "pull"),
    },
    ...(op.startsWith("matmul")
      ? { fused: { gitRevision: "test", date: "2026-01-01", [op]: rows(algorithm) } }
      : {}),
    ...(op === "arNorm"
      ? { arNorm: { gitRevision: "test", date: "2026-01-01", rules: rule(algorithm) } }
      : {}),
  };
}

test("a tune table naming NCCL's sum for a reduction is refused when loaded: a typed error, no fallback", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-rank-order-"));
  const file = path.join(dir, tuneFileName("NVIDIA H200", 4));
  const load = () => loadTuneTable("NVIDIA H200", 4, TUNE_KNOWN, [dir]);
  try {
    for (const [op, algorithm] of [
      ["all-reduce", "nccl"],
      ["reduce-scatter", "nccl"],
      ["arNorm", "nccl"],
      ["matmul-reduce-scatter", "nccl_cublaslt"],
      ["matmul-all-reduce", "nccl_cublaslt"],
    ] as const) {
      fs.writeFileSync(file, JSON.stringify(tableNaming(op, algorithm)));
      assert.throws(
        load,
        (e: unknown) =>
          e instanceof InvalidArgumentError &&
          e.code === "SYMMKIT_INVALID_ARGUMENT" &&
          e.message.includes(file) &&
          e.message.includes(`${op}: ${algorithm} is a baseline that sums in its own order`) &&
          /run symmkit tune again/.test(e.message),
        `${op}: ${algorithm}`,
      );
    }
    // An unknown name is refused too, never skipped.
    fs.writeFileSync(file, JSON.stringify(tableNaming("all-reduce", "ring")));
    assert.throws(
      load,
      (e: unknown) => e instanceof InvalidArgumentError && /unknown algorithm ring/.test(String(e)),
    );
    // All-gather moves bits: NCCL may stay among its picks, as may all-gather + GEMM's NCCL construction.
    fs.writeFileSync(file, JSON.stringify(tableNaming("all-gather", "nccl")));
    assert.equal(pickRule(load()!.rules["all-gather"], 4096), "nccl");
    fs.writeFileSync(file, JSON.stringify(tableNaming("all-gather-matmul", "nccl_cublaslt")));
    assert.doesNotThrow(load);
  } finally {
    fs.rmSync(dir, { recursive: true });
  }
});

test("the shipped tables load as auto reads them and name only rank-order algorithms for reductions", () => {
  for (const world of [2, 3, 4]) {
    const t = loadTuneTable("NVIDIA H200", world, TUNE_KNOWN, [SHIPPED_TUNE_DIR]);
    assert.ok(t, `w${world}`);
    for (const c of REDUCING)
      for (const r of t.rules[c])
        assert.ok(AUTO_ALGORITHMS[c].includes(r.algorithm as never), `w${world} ${c}`);
    for (const r of t.arNorm?.rules ?? []) assert.ok(AR_NORM_AUTO.includes(r.algorithm as never));
    // What the table says above 16 MiB, where NCCL used to be named: the fastest rank-order algorithm.
    if (world > 2) {
      assert.equal(pickRule(t.rules["all-reduce"], 64 << 20), "two_shot");
      assert.match(t.note ?? "", /two_shot instead of nccl/);
    }
  }
});

test("symmkit tune writes a reduction's rules among rank-order algorithms, though NCCL is measured", () => {
  const bench = (collective: CollectiveName, rows: [number, Record<string, number>][]) =>
    ({
      environment: { worldSize: 4 },
      collective,
      implementations: Object.keys(rows[0]![1]),
      rows: rows.map(([bytes, us]) => ({ bytes, count: bytes / 2, dtype: "bf16", us })),
    }) as unknown as CollectiveBenchResult;
  // bench/results/h200x4/tune-w4.json, 16 MiB to 256 MiB of all-reduce: NCCL fastest from 64 MiB.
  const ar = bench("all-reduce", [
    [16 << 20, { lamport_two_shot: 84.5, two_shot: 94.4, nccl: 97.6, two_shot_plain: 104.2 }],
    [64 << 20, { nccl: 322.9, lamport_two_shot: 330.1, two_shot: 367.0, two_shot_plain: 413.3 }],
    [256 << 20, { nccl: 1177.5, lamport_two_shot: 1302.6, two_shot: 1429.7 }],
  ]);
  assert.deepEqual(rulesFrom(ar, tuneUsable(4)), [{ maxBytes: 256 << 20, algorithm: "two_shot" }]);
  const rs = bench("reduce-scatter", [[4 << 20, { pull: 20, nccl: 10 }]]);
  assert.deepEqual(rulesFrom(rs, tuneUsable(4)), [{ maxBytes: 1 << 20, algorithm: "pull" }]);
  const ag = bench("all-gather", [[16 << 20, { pull: 71.1, nccl: 64.4 }]]);
  assert.deepEqual(rulesFrom(ag, tuneUsable(4)), [{ maxBytes: 4 << 20, algorithm: "nccl" }]);
  const fused = {
    environment: { worldSize: 4 },
    bench: "gemm-rs",
    rows: [{ m: 256, n: 8192, k: 8192, rankFlops: 1, us: { fused: 60, sequential: 55, nccl_cublaslt: 50 } }],
  } as unknown as FusedBenchResult;
  assert.deepEqual(fusedRulesFrom(fused, TUNE_KNOWN["matmul-reduce-scatter"]), [
    { maxRows: 256, algorithm: "sequential" },
  ]);
  const norm = {
    environment: { worldSize: 4 },
    bench: "ar-norm",
    rows: [
      { tokens: 4096, hidden: 8192, bytes: 64 << 20, us: { one_shot: 500, sequential: 450, nccl: 400 } },
    ],
  } as unknown as ArNormBenchResult;
  assert.deepEqual(arNormRulesFrom(norm), [{ maxBytes: 64 << 20, algorithm: "sequential" }]);
});

test("nccl's allReduceRmsNorm tolerance: world ulps of the dtype, below a missing rank's difference", () => {
  for (const world of [2, 3, 4, 5, 6, 7, 8]) {
    for (const dtype of ["bf16", "f16"] as const) {
      const tol = ncclNormTolerance(dtype, world);
      assert.ok(tol < 1 / Math.sqrt(world + 1) / 4, `${dtype} at ${world}`);
    }
    assert.equal(ncclNormTolerance("bf16", world), world * 2 ** -7);
  }
  assert.ok(AR_NORM_RANK_ORDER.sequential && !AR_NORM_RANK_ORDER.nccl);
});
