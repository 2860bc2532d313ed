// A live job's rendezvous store under 10 000 hostile frames (src/bench/store-fuzz.ts): the job, whose
// ranks run checked rounds of store barriers, store counters and CPU all-reduces, must finish with exit
// code 0 soon after the fuzz ends, the server closing the hostile connections without growing.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { test } from "node:test";
import { runStoreFuzz } from "../src/bench/store-fuzz.js";
import { readEnvVar } from "../src/settings.js";

test("a live job's store survives 10 000 hostile frames", { timeout: 120_000 }, async (t) => {
  const seed = readEnvVar("SYMMKIT_TEST_SEED") ?? BigInt(crypto.randomBytes(6).readUIntLE(0, 6));
  t.diagnostic(`seed ${seed} (replay with SYMMKIT_TEST_SEED=${seed})`);
  const { output, ...figures } = await runStoreFuzz({ frames: 10_000, seed });
  t.diagnostic(JSON.stringify(figures));
  assert.equal(figures.exitCode, 0, output.join("\n"));
  assert.ok(figures.framesSent >= 10_000, `${figures.framesSent} frames sent`);
  for (const [kind, n] of Object.entries(figures.framesByKind)) assert.ok(n > 0, `no ${kind} frames sent`);
  const [r0, r1] = figures.rounds;
  assert.ok(r0 !== undefined && r0 >= 300 && r1 === r0, `rounds by rank: ${String(figures.rounds)}`);
  const closed = figures.closedByServer;
  assert.ok(closed["stalled"] > 0, "the hello deadline closed stalled connections");
  assert.ok(
    closed["huge-length"] > 0 && closed["flood"] > 0 && figures.refusals > 0,
    "hostile frames refused",
  );
  assert.ok(figures.jobMs - figures.fuzzMs < 15_000, "the job ended soon after the fuzz");
  assert.ok(figures.rssMiB.peak - figures.rssMiB.before < 256, "memory stayed bounded");
});
