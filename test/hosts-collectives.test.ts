// HostsCollectives' choice without a GPU: auto's rule by size (the calls themselves run in
// test/gpu/hosts.test.ts, on simulated hosts).
import assert from "node:assert/strict";
import { test } from "node:test";
import { autoHostsAlgorithm, HIERARCHICAL_MAX_BYTES } from "../src/ops/hosts-collectives.js";

test("auto across hosts: hierarchical up to 1 MiB per rank, flat NCCL above", () => {
  assert.equal(HIERARCHICAL_MAX_BYTES, 1 << 20);
  for (const bytes of [0, 2, 4096, 1 << 20])
    assert.equal(autoHostsAlgorithm(bytes), "hierarchical", String(bytes));
  for (const bytes of [(1 << 20) + 2, 1 << 30])
    assert.equal(autoHostsAlgorithm(bytes), "nccl", String(bytes));
});
