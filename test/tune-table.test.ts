// Tune tables (src/ops/tune-table.ts) and how `symmkit tune` turns measurements into rules
// (src/bench/tune.ts); no GPU needed.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { SymmkitError } from "../src/errors.js";
import { TUNABLE_ALGORITHMS } from "../src/ops/coll/registry.js";
import { mailboxBytesPerPeer } from "../src/ops/coll/registry.js";
import {
  checkTuneTable,
  loadTuneTable,
  pickRule,
  SHIPPED_TUNE_DIR,
  tuneFileName,
  userTuneDir,
} from "../src/ops/tune-table.js";
import { fusedRulesFrom, rulesFrom } from "../src/bench/tune.js";
import type { FusedBenchResult } from "../src/bench/fused.js";
import { FUSED_TUNABLE } from "../src/ops/fused/checks.js";
import { AR_NORM_TUNABLE } from "../src/ops/norm/checks.js";
import { arNormRulesFrom, type ArNormBenchResult } from "../src/bench/ar-norm.js";
import { pickFusedRule, type TunedCollective } from "../src/ops/tune-table.js";
import type { CollectiveBenchResult } from "../src/bench/collectives.js";

const table = (device: string, world: number, allReduce = "lamport") => ({
  device,
  worldSize: world,
  dtype: "bf16",
  gitRevision: "test",
  date: "2026-11-21",
  rules: {
    "all-reduce": [
      { maxBytes: 262144, algorithm: allReduce },
      { maxBytes: 4 << 20, algorithm: "lamport_two_shot" },
      { maxBytes: 64 << 20, algorithm: "nccl" },
    ],
    "all-gather": [{ maxBytes: 4096, algorithm: "ll" }],
    "reduce-scatter": [{ maxBytes: 4096, algorithm: "pull" }],
  },
});

test("table files are named by device and world size; the user's directory follows the environment", () => {
  assert.equal(tuneFileName("NVIDIA H200", 4), "nvidia-h200-w4.json");
  assert.equal(tuneFileName("NVIDIA H100 80GB HBM3", 2), "nvidia-h100-80gb-hbm3-w2.json");
  assert.equal(userTuneDir({ SYMMKIT_TUNE_DIR: "/x/y" }), "/x/y");
  assert.equal(userTuneDir({ XDG_CACHE_HOME: "/c" }), "/c/symmkit/tune");
});

test("a size takes the first rule that covers it, and sizes above the last take the last", () => {
  const rules = table("d", 4).rules["all-reduce"];
  assert.equal(pickRule(rules, 1), "lamport");
  assert.equal(pickRule(rules, 262144), "lamport");
  assert.equal(pickRule(rules, 262145), "lamport_two_shot");
  assert.equal(pickRule(rules, 1 << 30), "nccl");
  assert.equal(pickRule([], 5), undefined);
});

test("malformed tables are refused with a typed error that says what to do", () => {
  const refuses = (value: unknown, pattern: RegExp): void =>
    assert.throws(
      () => checkTuneTable(value, TUNABLE_ALGORITHMS, "t.json"),
      (e: unknown) =>
        e instanceof SymmkitError && e.code === "SYMMKIT_INVALID_ARGUMENT" && pattern.test(e.message),
    );
  refuses(null, /not a JSON object/);
  refuses({ ...table("d", 4), rules: undefined }, /no rules/);
  refuses(table("d", 4, "warp_drive"), /all-reduce: unknown algorithm warp_drive/);
  const t = table("d", 4);
  refuses({ ...t, rules: { ...t.rules, "all-gather": [] } }, /no rules for all-gather/);
  refuses(
    {
      ...t,
      rules: {
        ...t.rules,
        "all-gather": [
          { maxBytes: 8, algorithm: "ll" },
          { maxBytes: 8, algorithm: "pull" },
        ],
      },
    },
    /ascending/,
  );
  assert.doesNotThrow(() => checkTuneTable(t, TUNABLE_ALGORITHMS, "t.json"));
});

test("the user's table comes before the shipped one; a table for other GPUs is refused", () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-tune-"));
  const user = path.join(root, "user");
  const shipped = path.join(root, "shipped");
  for (const d of [user, shipped]) fs.mkdirSync(d);
  const file = tuneFileName("NVIDIA H200", 4);
  fs.writeFileSync(path.join(shipped, file), JSON.stringify(table("NVIDIA H200", 4, "one_shot")));
  const dirs = [user, shipped];
  assert.equal(
    loadTuneTable("NVIDIA H200", 4, TUNABLE_ALGORITHMS, dirs)?.rules["all-reduce"][0]?.algorithm,
    "one_shot",
  );
  fs.writeFileSync(path.join(user, file), JSON.stringify(table("NVIDIA H200", 4, "lamport")));
  const t = loadTuneTable("NVIDIA H200", 4, TUNABLE_ALGORITHMS, dirs);
  assert.equal(t?.rules["all-reduce"][0]?.algorithm, "lamport");
  assert.equal(t?.file, path.join(user, file));
  assert.equal(loadTuneTable("NVIDIA H200", 2, TUNABLE_ALGORITHMS, dirs), undefined);
  fs.writeFileSync(path.join(user, file), JSON.stringify(table("NVIDIA H100", 4)));
  assert.throws(() => loadTuneTable("NVIDIA H200", 4, TUNABLE_ALGORITHMS, dirs), /is for 4 x NVIDIA H100/);
  fs.writeFileSync(path.join(user, file), "{");
  assert.throws(() => loadTuneTable("NVIDIA H200", 4, TUNABLE_ALGORITHMS, dirs), /not valid JSON/);
  fs.rmSync(root, { recursive: true });
});

test("tune keeps per size the fastest usable algorithm, merges runs, and counts bytes per rank", () => {
  const result = (
    collective: CollectiveBenchResult["collective"],
    rows: [number, Record<string, number>][],
  ) =>
    ({
      environment: { worldSize: 4 },
      collective,
      implementations: Object.keys(rows[0]![1]),
      rows: rows.map(([bytes, us]) => ({ bytes, count: bytes / 2, dtype: "bf16", us })),
    }) as unknown as CollectiveBenchResult;
  const ar = result("all-reduce", [
    [4096, { lamport: 4, one_shot: 5, nccl: 9, one_shot_plain: 3 }],
    [16384, { lamport: 4.5, one_shot: 5, nccl: 9, one_shot_plain: 3 }],
    [1 << 20, { lamport: 14, one_shot: 18, nccl: 17, one_shot_plain: 3 }],
    [64 << 20, { lamport: 100, one_shot: 600, nccl: 300, one_shot_plain: 3 }],
  ]);
  const usable = (collective: TunedCollective, a: string, bytes: number): boolean =>
    mailboxBytesPerPeer(collective, a, bytes, 4) <= 4 << 20;
  // 64 MiB: lamport is fastest but does not fit the default mailbox; one_shot_plain is no algorithm.
  assert.deepEqual(rulesFrom(ar, usable), [
    { maxBytes: 1 << 20, algorithm: "lamport" },
    { maxBytes: 64 << 20, algorithm: "nccl" },
  ]);
  const ag = result("all-gather", [[16384, { ll: 3, pull: 7, nccl: 7 }]]);
  assert.deepEqual(rulesFrom(ag, usable), [{ maxBytes: 4096, algorithm: "ll" }]);
});

test("mailbox bytes per peer: one-shot and ll send it all, two-shot two chunks of 16-byte groups", () => {
  assert.equal(mailboxBytesPerPeer("all-reduce", "lamport", 1000, 4), 1000);
  assert.equal(mailboxBytesPerPeer("all-gather", "ll", 1000, 4), 1000);
  assert.equal(mailboxBytesPerPeer("all-reduce", "lamport_two_shot", 1000, 4), 2 * 16 * 16);
  assert.equal(mailboxBytesPerPeer("all-reduce", "two_shot", 1 << 30, 4), 0);
});

test("the tables shipped in tune/ load and name only known algorithms", () => {
  const known = { ...TUNABLE_ALGORITHMS, ...FUSED_TUNABLE, arNorm: AR_NORM_TUNABLE };
  for (const world of [2, 3, 4]) {
    const t = loadTuneTable("NVIDIA H200", world, known, [SHIPPED_TUNE_DIR]);
    assert.equal(t?.worldSize, world);
    assert.equal(pickRule(t.rules["all-reduce"], 4096), "lamport");
  }
  const w2 = loadTuneTable("NVIDIA H200", 2, known, [SHIPPED_TUNE_DIR]);
  assert.equal(pickFusedRule(w2!.fused!["all-gather-matmul"]!, 8192), "fused_copy_engine");
  assert.equal(pickFusedRule(w2!.fused!["matmul-reduce-scatter"]!, 8192), "fused");
  assert.equal(pickRule(w2!.arNorm!.rules, 16 * 1024), "lamport");
  assert.equal(pickRule(w2!.arNorm!.rules, 64 << 20), "lamport_two_shot");
  assert.equal(pickFusedRule(w2!.fused!["matmul-all-reduce"]!, 1), "fused");
});

test("allReduceRmsNorm rules: by bytes at the largest hidden size, fastest of its algorithms only, validated", () => {
  const us = (lamport: number, one_shot: number, ar_lamport: number) => ({
    lamport,
    one_shot,
    ar_lamport,
    nccl_norm: 1,
  });
  const result = {
    environment: { worldSize: 2 },
    bench: "ar-norm",
    dtype: "bf16",
    seed: "1",
    rows: [
      { tokens: 1, hidden: 8192, bytes: 16384, us: us(5, 9, 3) },
      { tokens: 64, hidden: 8192, bytes: 1 << 20, us: us(9, 12, 6) },
      { tokens: 512, hidden: 8192, bytes: 8 << 20, us: us(40, 36, 30) },
      { tokens: 512, hidden: 4096, bytes: 4 << 20, us: us(10, 50, 8) },
    ],
  } as unknown as ArNormBenchResult;
  const rules = arNormRulesFrom(result);
  assert.deepEqual(rules, [
    { maxBytes: 1 << 20, algorithm: "lamport" },
    { maxBytes: 8 << 20, algorithm: "one_shot" },
  ]);
  const known = { ...TUNABLE_ALGORITHMS, ...FUSED_TUNABLE, arNorm: AR_NORM_TUNABLE };
  assert.doesNotThrow(() =>
    checkTuneTable({ ...table("d", 2), arNorm: { gitRevision: "x", date: "y", rules } }, known, "t.json"),
  );
  assert.throws(
    () =>
      checkTuneTable(
        {
          ...table("d", 2),
          arNorm: { gitRevision: "x", date: "y", rules: [{ maxBytes: 8, algorithm: "ar_lamport" }] },
        },
        known,
        "t.json",
      ),
    /arNorm: unknown algorithm ar_lamport/,
  );
});

test("fused rules: by rows, fastest of the fused, sequential and NCCL paths (never a floor), validated", () => {
  const result = (rows: [number, Record<string, number>][]): FusedBenchResult =>
    ({
      environment: { worldSize: 2 },
      bench: "gemm-rs",
      dtype: "bf16",
      seed: "1",
      implementations: Object.keys(rows[0]![1]),
      rows: rows.map(([m, us]) => ({ m, n: 8192, k: 8192, rankFlops: 1, us })),
    }) as unknown as FusedBenchResult;
  const r = result([
    [1024, { fused: 120, sequential: 130, nccl_cublaslt: 140, gemm_alone: 90 }],
    [256, { fused: 56, sequential: 52, nccl_cublaslt: 51, gemm_alone: 40 }],
    [512, { fused: 66, sequential: 62, nccl_cublaslt: 78, cublaslt_alone: 45 }],
    [8192, { fused: 800, sequential: 1000, nccl_cublaslt: 1000, gemm_alone: 790 }],
  ]);
  const rules = fusedRulesFrom(r);
  assert.deepEqual(rules, [
    { maxRows: 256, algorithm: "nccl_cublaslt" },
    { maxRows: 512, algorithm: "sequential" },
    { maxRows: 8192, algorithm: "fused" },
  ]);
  assert.equal(pickFusedRule(rules, 300), "sequential");
  assert.equal(pickFusedRule(rules, 1 << 20), "fused");
  const known = { ...TUNABLE_ALGORITHMS, ...FUSED_TUNABLE };
  const t = { ...table("d", 2), fused: { gitRevision: "x", date: "y", "matmul-reduce-scatter": rules } };
  assert.doesNotThrow(() => checkTuneTable(t, known, "t.json"));
  // GEMM + all-reduce's rules (decode sizes) name its own algorithms.
  const ar = [
    { maxRows: 64, algorithm: "fused" },
    { maxRows: 512, algorithm: "nccl_cublaslt" },
  ];
  const tAr = { ...table("d", 2), fused: { gitRevision: "x", date: "y", "matmul-all-reduce": ar } };
  assert.doesNotThrow(() => checkTuneTable(tAr, known, "t.json"));
  assert.equal(pickFusedRule(ar, 32), "fused");
  assert.throws(
    () =>
      checkTuneTable(
        {
          ...table("d", 2),
          fused: {
            gitRevision: "x",
            date: "y",
            "matmul-all-reduce": [{ maxRows: 8, algorithm: "fused_pull" }],
          },
        },
        known,
        "t.json",
      ),
    /unknown algorithm fused_pull/,
  );
  for (const [bad, pattern] of [
    [{ "matmul-reduce-scatter": [] }, /no rules for matmul-reduce-scatter/],
    [{ "all-gather-matmul": [{ maxRows: 8, algorithm: "fused_tma" }] }, /unknown algorithm fused_tma/],
    [
      {
        "matmul-reduce-scatter": [
          { maxRows: 8, algorithm: "fused" },
          { maxRows: 4, algorithm: "sequential" },
        ],
      },
      /maxRows must be ascending/,
    ],
  ] as const) {
    assert.throws(
      () =>
        checkTuneTable({ ...table("d", 2), fused: { gitRevision: "x", date: "y", ...bad } }, known, "t.json"),
      (e: unknown) => e instanceof SymmkitError && pattern.test(e.message),
    );
  }
});
