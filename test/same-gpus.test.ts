// checkSameGpus: a group of ranks on different GPU models is refused on every rank, before any kernel
// could pair work by SM count; a group of one model passes. Ranks here are calls sharing an in-memory store.
import assert from "node:assert/strict";
import { test } from "node:test";
import { UnsupportedError } from "../src/errors.js";
import { checkSameGpus, type GpuModelGroup } from "../src/ops/same-gpus.js";

function ranksOn(models: readonly [string, number][]): GpuModelGroup[] {
  const kv = new Map<string, string>();
  const waiting = new Map<string, (() => void)[]>();
  const store: GpuModelGroup["store"] = {
    set: (k, v) => {
      kv.set(k, v);
      for (const wake of waiting.get(k) ?? []) wake();
      waiting.delete(k);
      return Promise.resolve();
    },
    get: async (k) => {
      while (!kv.has(k)) await new Promise<void>((r) => waiting.set(k, [...(waiting.get(k) ?? []), r]));
      return Buffer.from(kv.get(k)!);
    },
  };
  const ranks = models.map((_, r) => r);
  return models.map(([name, smCount], rank) => ({
    rank,
    ranks,
    store,
    device: { props: { name, smCount } },
  }));
}

test("ranks on one GPU model pass; a rank on another model is refused on every rank, naming both", async () => {
  await Promise.all(
    ranksOn([
      ["NVIDIA H200", 132],
      ["NVIDIA H200", 132],
      ["NVIDIA H200", 132],
    ]).map(checkSameGpus),
  );
  const mixed = await Promise.allSettled(
    ranksOn([
      ["NVIDIA H100 80GB HBM3", 132],
      ["NVIDIA H100 80GB HBM3", 132],
      ["NVIDIA H100 PCIe", 114],
    ]).map(checkSameGpus),
  );
  for (const [rank, r] of mixed.entries()) {
    if (r.status !== "rejected") assert.fail(`rank ${rank} went on`);
    const e: unknown = r.reason;
    assert.ok(e instanceof UnsupportedError, `rank ${rank}: ${String(e)}`);
    assert.match(
      e.message,
      /rank 0 has NVIDIA H100 80GB HBM3 \(132 SMs\), rank 2 has NVIDIA H100 PCIe \(114 SMs\)/,
    );
  }
  // The same model with another SM count (a partitioned or cut-down part) is another model here.
  const cut = await Promise.allSettled(
    ranksOn([
      ["GPU", 132],
      ["GPU", 66],
    ]).map(checkSameGpus),
  );
  assert.ok(cut.every((r) => r.status === "rejected"));
});
