// A soak of the CPU backend under the real launcher (test/fixtures/cpu-soak-rank.ts): 10 000 mixed calls
// (every collective and algorithm, 1 to 64K elements, f32/bf16/f16/i32 where the call allows), each one
// checked bit for bit against a host reference, ranks agreeing bitwise on a sample; resources flat from
// after the warm-up to the end (open descriptors, RSS, live heap and ArrayBuffers, symmkit's mappings, /dev/shm), and
// nothing left behind.
//
//   SOAK_CALLS=100000        the full soak (default 10 000)
//   SOAK_WORLD=3             ranks (default 2)
//   SOAK_RECORD=file         the figures to that file (bench/results/cpu/soak.json)
//   SYMMKIT_TEST_SEED=...    replays a run (the calls drawn and their inputs)
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { hostEnvironment } from "../src/bench/report.js";
import { assertNothingLeft } from "./support/cpu-job.js";
import type { Resources } from "./support/resources.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, "..", "src", "cli.js");
const fixture = path.join(here, "fixtures", "cpu-soak-rank.js");

const CALLS = Number(process.env.SOAK_CALLS ?? 10_000);
const WORLD = Number(process.env.SOAK_WORLD ?? 2);
/** What "flat" allows between the warm-up and the end. */
const SLACK = { fds: 2, rssMiB: 48, heapMiB: 8, arrayBuffersMiB: 8 };

interface SoakResult {
  rank: number;
  world: number;
  seed: string;
  calls: number;
  checked: number;
  agreed: number;
  ms: number;
  usPerCall: number;
  warmupCalls: number;
  gcExposed: boolean;
  atStart: Resources;
  atEnd: Resources;
  samples: { calls: number; rssMiB: number; heapMiB: number; arrayBuffersMiB: number }[];
  byKind: Record<string, number>;
}

/** `symmkit run -n world` the soak rank; its exit status and output. */
function runSoak(
  env: Record<string, string>,
  limitMs: number,
): Promise<{ status: number | null; out: string; ms: number }> {
  const start = performance.now();
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [cli, "run", "-n", String(WORLD), "--grace-ms", "1000", fixture], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const timer = setTimeout(() => p.kill("SIGKILL"), limitMs);
    const chunks: string[] = [];
    p.stdout.on("data", (d: Buffer) => chunks.push(d.toString()));
    p.stderr.on("data", (d: Buffer) => chunks.push(d.toString()));
    p.on("close", (status) => {
      clearTimeout(timer);
      resolve({ status, out: chunks.join(""), ms: performance.now() - start });
    });
  });
}

const shmEntries = (): string[] => fs.readdirSync("/dev/shm").filter((f) => f.includes("symmkit"));

test(
  `CPU soak: ${CALLS} mixed calls at world ${WORLD}, checked, agreed, resources flat`,
  { timeout: 60_000 + CALLS * 20 },
  async (t) => {
    const shmBefore = shmEntries();
    const loadBefore = os.loadavg()[0];
    const env: Record<string, string> = {
      SOAK_CALLS: String(CALLS),
      // Measured after a full collection: a leak, not the pages the allocator keeps.
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --expose-gc`.trim(),
    };
    const r = await runSoak(env, 30_000 + CALLS * 15);
    const seedLine = /seed (\d+) \(replay/.exec(r.out)?.[1];
    t.diagnostic(`seed ${seedLine} (replay with SYMMKIT_TEST_SEED=${seedLine})`);
    assert.equal(r.status, 0, r.out);
    const results = [...r.out.matchAll(/soak-result (\{.*\})/g)].map((m) => JSON.parse(m[1]!) as SoakResult);
    assert.equal(results.length, WORLD, r.out);
    assert.deepEqual(
      results.map((x) => x.rank).sort(),
      Array.from({ length: WORLD }, (_, i) => i),
    );

    const kinds = [
      "allReduce",
      "allGather",
      "reduceScatter",
      "broadcast",
      "sendrecv",
      "barrier",
      "allGatherMatmul",
      "matmulReduceScatter",
    ];
    for (const x of results) {
      const what = `rank ${x.rank}: ${JSON.stringify(x)}`;
      assert.equal(x.calls, CALLS, what);
      // Every call but a barrier compared at least one result with the reference.
      assert.ok(x.checked >= CALLS - (x.byKind.barrier ?? 0) && x.checked > 0, what);
      assert.equal(
        Object.values(x.byKind).reduce((s, n) => s + n, 0),
        CALLS,
        what,
      );
      assert.ok(x.agreed >= Math.floor(CALLS / 64 / 3), `too few bitwise agreements: ${what}`);
      assert.equal(x.gcExposed, true, what);
      if (CALLS >= 5000) {
        for (const k of kinds)
          assert.ok(
            Object.keys(x.byKind).some((key) => key.split("/")[0] === k),
            `no ${k}: ${what}`,
          );
        for (const a of ["one_shot", "two_shot", "auto"])
          for (const d of ["f32", "bf16", "f16"])
            assert.ok((x.byKind[`allReduce/${a}/${d}`] ?? 0) > 0, `no allReduce ${a} ${d}: ${what}`);
        for (const d of ["f32", "bf16", "f16", "i32"]) assert.ok((x.byKind[`allGather/${d}`] ?? 0) > 0, what);
      }
      // Flat: descriptors, mappings and /dev/shm exactly (bar a small slack for descriptors), memory within
      // a slack that a leak of one tensor per call would blow.
      const { atStart: s, atEnd: e } = x;
      assert.ok(e.fds - s.fds <= SLACK.fds, `descriptors ${s.fds} -> ${e.fds}: ${what}`);
      assert.equal(e.symmkitMappings, s.symmkitMappings, `symmkit's mappings: ${what}`);
      assert.equal(e.shm, s.shm, what);
      assert.ok(e.rssMiB - s.rssMiB <= SLACK.rssMiB, `RSS ${s.rssMiB} -> ${e.rssMiB} MiB: ${what}`);
      assert.ok(e.heapMiB - s.heapMiB <= SLACK.heapMiB, `heap ${s.heapMiB} -> ${e.heapMiB} MiB: ${what}`);
      assert.ok(
        e.arrayBuffersMiB - s.arrayBuffersMiB <= SLACK.arrayBuffersMiB,
        `ArrayBuffers ${s.arrayBuffersMiB} -> ${e.arrayBuffersMiB} MiB: ${what}`,
      );
      t.diagnostic(
        `rank ${x.rank}: ${x.calls} calls (${x.checked} results checked, ${x.agreed} agreed) in ${x.ms} ms, ` +
          `${x.usPerCall} us/call; fds ${s.fds} -> ${e.fds}, RSS ${s.rssMiB} -> ${e.rssMiB} MiB, ` +
          `heap ${s.heapMiB} -> ${e.heapMiB} MiB, ArrayBuffers ${s.arrayBuffersMiB} -> ${e.arrayBuffersMiB} MiB, symmkit mappings ${s.symmkitMappings} -> ${e.symmkitMappings}`,
      );
    }
    // The ranks drew the same calls.
    for (const x of results) assert.deepEqual(x.byKind, results[0]!.byKind);
    assert.deepEqual(shmEntries(), shmBefore, "/dev/shm");
    assertNothingLeft(r.out);
    t.diagnostic(`job ${Math.round(r.ms)} ms`);

    const file = process.env.SOAK_RECORD;
    if (file) {
      const result = {
        description:
          "The CPU soak (test/cpu-soak.test.ts, test/fixtures/cpu-soak-rank.ts) under symmkit run: mixed calls " +
          "drawn from the seed (all-reduce one_shot/two_shot/auto x sum/max/min x f32/bf16/f16, in place or not; " +
          "all-gather, broadcast and ring send/recv in f32/bf16/f16/i32; reduce-scatter; barrier; the sequential " +
          "fused matmuls), 1 to 64K elements, every result compared bit for bit with a host reference, ranks " +
          "agreeing bitwise every 64 calls. Resources per rank after the warm-up (atStart) and at the end " +
          "(atEnd), each after a full collection (--expose-gc): open descriptors (/proc/self/fd), RSS, live " +
          "heap, ArrayBuffers (memoryUsage().arrayBuffers), symmkit's mappings (/proc/self/maps), symmkit's entries in /dev/shm. ms: the whole loop; " +
          `usPerCall: after the warm-up. jobMs includes start-up. Replay with SYMMKIT_TEST_SEED=${seedLine}.`,
        ...hostEnvironment(loadBefore),
        seed: seedLine,
        world: WORLD,
        calls: CALLS,
        jobMs: Math.round(r.ms),
        ranks: results.map(({ seed: _seed, world: _world, ...rest }) => rest),
      };
      fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
      fs.writeFileSync(file, JSON.stringify(result, null, 2) + "\n");
    }
  },
);
