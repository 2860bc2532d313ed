// The device headers' layers (device/include/README.md): every header is in the README's table, opens
// with its name and contract, and includes only headers of its own layer or the layers above it; the two
// GEMMs share only the building blocks.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { PACKAGE_ROOT } from "../src/paths.js";

const ROOT = path.join(PACKAGE_ROOT, "device", "include");
const README = fs.readFileSync(path.join(ROOT, "README.md"), "utf8");

/** Each header named in the README's layer table, with its layer's position (0: the top). */
function layers(): Map<string, number> {
  const rows = README.split("\n").filter((l) => /^\| [a-z]/.test(l) && !l.startsWith("| layer"));
  const of = new Map<string, number>();
  rows.forEach((row, i) => {
    for (const [, h] of row.split("|")[2]!.matchAll(/`([a-z0-9_]+\/[a-z0-9_]+\.cuh)`/g)) of.set(h!, i);
  });
  return of;
}

const headers = fs
  .readdirSync(path.join(ROOT, "symmkit"), { recursive: true, encoding: "utf8" })
  .filter((f) => f.endsWith(".cuh"))
  .map((f) => f.split(path.sep).join("/"))
  .sort();

const includes = (h: string): string[] =>
  [...fs.readFileSync(path.join(ROOT, "symmkit", h), "utf8").matchAll(/#include "symmkit\/([^"]+)"/g)].map(
    (m) => m[1]!,
  );

test("device headers: every one is in device/include/README.md's layers, and opens with its contract", () => {
  const of = layers();
  assert.deepEqual(
    headers.filter((h) => !of.has(h)),
    [],
    "add these to the README's table",
  );
  assert.deepEqual(
    [...of.keys()].filter((h) => !headers.includes(h)),
    [],
    "the README names headers that do not exist",
  );
  for (const h of headers) {
    const first = fs.readFileSync(path.join(ROOT, "symmkit", h), "utf8").split("\n")[0]!;
    assert.ok(first.startsWith(`// symmkit/${h}: `), `${h} opens with "// symmkit/${h}: ..." (${first})`);
  }
});

test("device headers: includes go to the same layer or up, and the GEMMs share only building blocks", () => {
  const of = layers();
  const wrong = headers.flatMap((h) =>
    includes(h)
      .filter((i) => (of.get(i) ?? -1) > of.get(h)!)
      .map((i) => `${h} includes ${i}, a layer below it`),
  );
  assert.deepEqual(wrong, []);
  assert.ok(!includes("gemm/decode_gemm.cuh").includes("gemm/hopper_gemm.cuh"));
  assert.ok(!includes("gemm/hopper_gemm.cuh").includes("gemm/decode_gemm.cuh"));
  // The check can fail: a header of the top layer including an operation's.
  assert.ok((of.get("coll/mailbox.cuh") ?? 0) > of.get("core/memory.cuh")!);
});
