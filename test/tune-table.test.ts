// Tune tables (src/ops/tune-table.ts) and how `symmkit tune` turns measurements into rules
// (src/bench/tune.ts); no GPU needed.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { SymmkitError } from "../src/errors.js";
import { mailboxBytesPerPeer, TUNABLE_ALGORITHMS } from "../src/ops/gpu-collectives.js";
import {
  checkTuneTable,
  loadTuneTable,
  pickRule,
  SHIPPED_TUNE_DIR,
  tuneFileName,
  userTuneDir,
} from "../src/ops/tune-table.js";
import { rulesFrom } from "../src/bench/tune.js";
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
  const usable = (a: string, bytes: number): boolean => mailboxBytesPerPeer(a, bytes, 4) <= 4 << 20;
  // 64 MiB: lamport is fastest but does not fit the default mailbox; one_shot_plain is no algorithm.
  assert.deepEqual(rulesFrom(ar, usable), [
    { maxBytes: 1 << 20, algorithm: "lamport" },
    { maxBytes: 64 << 20, algorithm: "nccl" },
  ]);
  const ag = result("all-gather", [[16384, { ll: 3, pull: 7, nccl: 7 }]]);
  assert.deepEqual(rulesFrom(ag, usable), [{ maxBytes: 4096, algorithm: "ll" }]);
});

test("mailbox bytes per peer: one-shot and ll send it all, two-shot two chunks of 16-byte groups", () => {
  assert.equal(mailboxBytesPerPeer("lamport", 1000, 4), 1000);
  assert.equal(mailboxBytesPerPeer("ll", 1000, 4), 1000);
  assert.equal(mailboxBytesPerPeer("lamport_two_shot", 1000, 4), 2 * 16 * 16);
  assert.equal(mailboxBytesPerPeer("two_shot", 1 << 30, 4), 0);
});

test("the tables shipped in tune/ load and name only known algorithms", () => {
  for (const world of [2, 3, 4]) {
    const t = loadTuneTable("NVIDIA H200", world, TUNABLE_ALGORITHMS, [SHIPPED_TUNE_DIR]);
    assert.equal(t?.worldSize, world);
    assert.equal(pickRule(t.rules["all-reduce"], 4096), "lamport");
  }
});
