// The registry of collective algorithms (src/ops/coll/registry.ts) and the other ops' records are the one
// source of the algorithm lists, auto's rules and the docs' table: these checks hold the derived facts to
// them.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { PACKAGE_ROOT } from "../src/paths.js";
import {
  builtInPick,
  canRun,
  COLLECTIVE_ALGORITHMS,
  algorithmPrograms,
  collectivePrograms,
  CPU_ALL_REDUCE_ALGORITHMS,
  CPU_ALL_GATHER_ALGORITHMS,
  CPU_REDUCE_SCATTER_ALGORITHMS,
  GPU_ALL_REDUCE_ALGORITHMS,
  TUNABLE_ALGORITHMS,
  type CollectiveAlgorithm,
} from "../src/ops/coll/registry.js";
import { BENCH_IMPLEMENTATIONS } from "../src/bench/collectives.js";
import { algorithmTable } from "../src/ops/algorithm-table.js";
import { CPU_EXCHANGE_ALGORITHMS } from "../src/ops/exchange/checks.js";
import {
  A2A_LL_AUTO_MAX_BYTES,
  A2A_CE_AUTO_MIN_BYTES,
  A2A_CE_AUTO_MIN_SYMMETRIC_BYTES,
  A2A_PULL_AUTO_MAX_BYTES,
  GPU_ALL_TO_ALL_AUTO,
  GPU_ALL_TO_ALL_V_AUTO,
  GPU_SEND_RECV_AUTO,
  LL_AUTO_MAX_BYTES,
} from "../src/ops/exchange/records.js";
import { CPU_MOE_ALGORITHMS } from "../src/ops/moe/checks.js";
import { GPU_MOE_AUTO } from "../src/ops/moe/records.js";
import { autoPick } from "../src/ops/records.js";
import { OP_RECORDS, opPrograms } from "../src/ops/op-records.js";
import { PROGRAMS } from "../src/catalog.js";

test("README's table of algorithms is the registry's", () => {
  const readme = fs.readFileSync(path.join(PACKAGE_ROOT, "README.md"), "utf8");
  const m = /<!-- algorithms:begin -->\n([\s\S]*?)\n<!-- algorithms:end -->/.exec(readme);
  assert.ok(m, "README.md has no algorithms table between its markers");
  assert.equal(m[1], algorithmTable(), "write it again: npm run build && npm run tables");
});

test("the lists come from the records: GPU, CPU, tune candidates and benchmark implementations", () => {
  assert.deepEqual(GPU_ALL_REDUCE_ALGORITHMS, ["auto", ...Object.keys(COLLECTIVE_ALGORITHMS["all-reduce"])]);
  assert.deepEqual(CPU_ALL_REDUCE_ALGORITHMS, ["auto", "one_shot", "two_shot"]);
  assert.deepEqual(CPU_ALL_GATHER_ALGORITHMS, ["auto", "pull"]);
  assert.deepEqual(CPU_REDUCE_SCATTER_ALGORITHMS, ["auto", "pull"]);
  for (const c of ["all-reduce", "all-gather", "reduce-scatter"] as const) {
    const names = Object.keys(COLLECTIVE_ALGORITHMS[c]);
    assert.deepEqual(TUNABLE_ALGORITHMS[c], names);
    assert.deepEqual(
      [...new Set(BENCH_IMPLEMENTATIONS[c].map((i) => i.algorithm))],
      names,
      `${c}: the benchmark times every algorithm`,
    );
    assert.equal(names.at(-1), "nccl", `${c}: nccl is last`);
  }
  assert.deepEqual(
    BENCH_IMPLEMENTATIONS["all-reduce"].filter((i) => i.plain).map((i) => i.name),
    ["one_shot_plain", "two_shot_plain"],
  );
});

test("auto's built-in rule, from the records, at world 2 and 4", () => {
  const cap = (world: number, stagingBytes = 64 << 20) => ({
    world,
    mailboxSlotBytes: 4 << 20,
    stagingBytes,
  });
  assert.equal(builtInPick("all-reduce", 4096, 4096, cap(2)), "lamport");
  assert.equal(builtInPick("all-reduce", 1 << 20, 1 << 20, cap(2)), "lamport_two_shot");
  // Past the mailbox: one-shot on 2 GPUs at any size, two-shot on 4 above 256 KiB.
  assert.equal(builtInPick("all-reduce", 64 << 20, 0, cap(2)), "one_shot");
  assert.equal(builtInPick("all-reduce", 64 << 20, 0, cap(4)), "two_shot");
  // A plain input larger than the staging buffer leaves no rank-order algorithm for the whole call (it
  // runs in pieces); NCCL, which sums in its own order, is never auto's for a reduction.
  assert.equal(builtInPick("all-reduce", 64 << 20, 64 << 20, cap(4, 1 << 20)), undefined);
  assert.equal(builtInPick("reduce-scatter", 16 << 20, 64 << 20, cap(4, 1 << 20)), undefined);
  // An all-gather moves bits: NCCL, which needs no room, takes what nothing else can.
  assert.equal(builtInPick("all-gather", 64 << 20, 64 << 20, cap(4, 1 << 20)), "nccl");
  assert.equal(builtInPick("all-gather", 4096, 4096, cap(2)), "ll");
  assert.equal(builtInPick("all-gather", 8 << 20, 8 << 20, cap(2)), "copy_engine");
  assert.equal(builtInPick("all-gather", 1 << 20, 1 << 20, cap(2)), "pull");
  assert.equal(builtInPick("reduce-scatter", 1 << 20, 2 << 20, cap(2)), "lamport");
  assert.equal(builtInPick("reduce-scatter", 4 << 20, 8 << 20, cap(2)), "pull");
  // The copy-engine reduce-scatter needs world slots of the output, whatever the input.
  assert.equal(canRun("reduce-scatter", "copy_engine", 1 << 20, 0, cap(4, 3 << 20)), false);
  assert.equal(canRun("reduce-scatter", "copy_engine", 1 << 20, 0, cap(4, 4 << 20)), true);
});

test("the catalog compiles every record's programs, each once", () => {
  const names = collectivePrograms().map((p) => p.name);
  assert.equal(new Set(names).size, names.length);
  for (const [collective, records] of Object.entries(COLLECTIVE_ALGORITHMS))
    for (const [name, r] of Object.entries(records) as [string, CollectiveAlgorithm][])
      for (const p of algorithmPrograms(r))
        assert.ok(names.includes(p.name), `${collective} ${name}: ${p.name}`);
  // A reducing kernel's programs: one per dtype and op.
  assert.ok(names.includes("symmkit/coll/lamport_all_reduce/bf16/min"));
  const catalog = PROGRAMS.map((p) => p.name);
  assert.equal(new Set(catalog).size, catalog.length, "each program once");
  // Every record's programs are in the catalog; the ops' programs are these (the GEMMs' are the GEMM
  // programs, named by the catalog itself).
  for (const [op, records] of OP_RECORDS)
    for (const [name, r] of Object.entries(records))
      for (const p of r.programs?.() ?? []) assert.ok(catalog.includes(p.name), `${op} ${name}: ${p.name}`);
  assert.deepEqual(
    opPrograms()
      .map((p) => p.name)
      .sort(),
    [
      "symmkit/coll/all_to_all_pull",
      "symmkit/coll/all_to_all_v",
      "symmkit/coll/p2p",
      "symmkit/fused/all_gather_pull",
      "symmkit/moe/moe",
      ...[
        "lamport_ar_rms_norm",
        "lamport_two_shot_ar_rms_norm",
        "pull_ar_rms_norm",
        "pull_two_shot_ar_rms_norm",
        "rms_norm_rows",
      ].flatMap((k) => ["bf16", "f16"].map((d) => `symmkit/fused/${k}/${d}`)),
    ].sort(),
  );
});

test("exchange and MoE auto: the records' rules cover every situation, exactly one algorithm each, the ones measured", () => {
  const bools = [false, true];
  /** The one algorithm whose rule holds (a situation two rules claim would make record order decide). */
  const only = <S>(order: readonly (readonly [string, (s: S) => boolean])[], s: S): string => {
    const holding = order.filter(([, when]) => when(s)).map(([name]) => name);
    assert.equal(holding.length, 1, `${JSON.stringify(s)}: ${holding.join(", ") || "no rule"} holds`);
    assert.equal(autoPick(order, s), holding[0]);
    return holding[0]!;
  };
  for (const bytes of [0, 4096, LL_AUTO_MAX_BYTES, LL_AUTO_MAX_BYTES + 1, 1 << 30])
    assert.equal(only(GPU_SEND_RECV_AUTO, { bytes }), bytes <= LL_AUTO_MAX_BYTES ? "ll" : "put");
  const a2aBytes = (chunk: number): number[] => [
    chunk,
    ...[A2A_PULL_AUTO_MAX_BYTES, A2A_CE_AUTO_MIN_BYTES, A2A_CE_AUTO_MIN_SYMMETRIC_BYTES].flatMap((b) => [
      b,
      b + 1,
    ]),
    4 * chunk,
  ];
  for (const world of [1, 2, 4])
    for (const fitsStaging of bools)
      for (const plain of bools)
        for (const chunkBytes of [0, A2A_LL_AUTO_MAX_BYTES, A2A_LL_AUTO_MAX_BYTES + 1, 1 << 30])
          for (const bytes of a2aBytes(chunkBytes)) {
            // copy_engine at world 2 only, where it was measured.
            const ce =
              world === 2 &&
              (plain
                ? !fitsStaging || bytes > A2A_CE_AUTO_MIN_BYTES
                : bytes > A2A_CE_AUTO_MIN_SYMMETRIC_BYTES);
            const pull = fitsStaging && (world === 1 || !(plain && bytes > A2A_PULL_AUTO_MAX_BYTES));
            assert.equal(
              only(GPU_ALL_TO_ALL_AUTO, { world, fitsStaging, plain, bytes, chunkBytes }),
              chunkBytes <= A2A_LL_AUTO_MAX_BYTES ? "ll" : ce ? "copy_engine" : pull ? "pull" : "nccl",
            );
          }
  for (const countsOnDevice of bools)
    assert.equal(only(GPU_ALL_TO_ALL_V_AUTO, { countsOnDevice }), countsOnDevice ? "pull" : "nccl");
  for (const capturing of bools)
    for (const into of bools)
      for (const fixedRows of bools)
        for (const routeFits of bools)
          assert.equal(
            only(GPU_MOE_AUTO, { capturing, into, fixedRows, routeFits }),
            capturing || into || (fixedRows && routeFits) ? "pull_device" : "pull",
          );
  // The CPU backend runs one algorithm per op: auto is it.
  for (const list of [CPU_EXCHANGE_ALGORITHMS, CPU_MOE_ALGORITHMS]) assert.deepEqual(list, ["auto", "pull"]);
  assert.throws(() => autoPick([], {}), /miss a case/);
});
