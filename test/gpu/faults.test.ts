// GPU fault cases (test/gpu/ranks/faults.ts) on 2 GPUs or more: NCCL waits bounded by the watchdog
// (a rank that skips an NCCL call, eager and in a graph; a rank killed outside the launcher), ranks out
// of step caught by the fingerprints, a send met by a receive of another algorithm, and destroy() with a
// live graph that captured NCCL work.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { deviceCount } from "../../src/runtime/device.js";
import { runRanks, showOutput, skipReason } from "./gpu.js";
import { freePort } from "../support/hosts.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const script = path.join(here, "ranks", "faults.js");
const gpus = skipReason ? 0 : deviceCount();
const skip = skipReason || (gpus < 2 ? `needs 2 or more GPUs, this machine has ${gpus}` : false);
if (skip) console.log(`# GPU fault tests skipped: ${skip}`);
const LIMIT_MS = 3000;
const n = Math.min(gpus, 4);

/** The cases run with SYMMKIT_CHECK_CALLS. */
const CHECKED = new Set(["weight-digest"]);

const run = (fault: string): { status: number | null; out: string; ms: number } =>
  runRanks(n, script, {
    env: {
      FAULT: fault,
      SYMMKIT_SYNC_TIMEOUT_MS: String(LIMIT_MS),
      ...(CHECKED.has(fault) ? { SYMMKIT_CHECK_CALLS: "1" } : {}),
    },
    timeoutMs: 120_000,
  });

const lines = (out: string, fault: string): string[] =>
  out.split("\n").filter((l) => l.includes(`fault ${fault}: `));

/** Runs `fault`; its ranks' outcome lines that hold `kind` (all by default), `count` of them (every rank's
 * by default), the job having ended cleanly. */
function outcomes(fault: string, kind = "", count = n): string[] {
  const r = run(fault);
  assert.equal(r.status, 0, r.out);
  const got = lines(r.out, fault).filter((l) => l.includes(kind));
  assert.equal(got.length, count, r.out);
  return got;
}

/** The time a line reports, checked against the deadline plus 5 s. */
function withinDeadline(line: string): void {
  const ms = Number(/after (\d+) ms/.exec(line)?.[1]);
  assert.ok(ms < LIMIT_MS + 5000, `too late: ${line}`);
}

// The fingerprint barrier before every NCCL call is where the others wait for a rank that never comes;
// in a copy-engine allToAll, the signal kernel waiting for its staged round.
for (const fault of ["nccl-skip", "nccl-graph-skip", "a2a-ce-skip"]) {
  test(`${fault}: the ranks in the call end with SymmTimeoutError naming the skipper`, { skip }, () => {
    const got = outcomes(fault, "SymmTimeoutError", n - 1);
    for (const l of got) {
      assert.match(l, new RegExp(`naming \\[${n - 1}\\]`));
      withinDeadline(l);
    }
  });
}

/** Each mismatch case, and what every rank's error must name. */
const MISMATCHES: Readonly<Record<string, RegExp>> = {
  "mismatch-size": /element count/,
  "mismatch-algorithm": /operation or algorithm/,
  "mismatch-lamport": /element count/,
  "mismatch-ll": /element count/,
  "mismatch-copy-engine": /element count/,
  "mismatch-nccl": /element count/,
  "mismatch-a2a-copy-engine": /element count/,
  "mismatch-a2a-symmetric-copy-engine": /operation or algorithm/,
  "collision-one-shot": /element count: ours (4096|3603) elements, theirs (4096|3603) elements/,
  "collision-lamport": /element count: ours (4096|3603) elements, theirs (4096|3603) elements/,
  "collision-ll": /element count: ours (4096|3603) elements, theirs (4096|3603) elements/,
  "shape-fused": /: k: ours (512|256), theirs (512|256)$/,
  "shape-fused-mailbox": /: k: ours (512|256), theirs (512|256)$/,
  "mismatch-fused-mailbox": /operation or algorithm/,
  "shape-norm-lamport": /: hidden size: ours (1024|512), theirs (1024|512)$/,
  "shape-norm-one-shot": /: hidden size: ours (1024|512), theirs (1024|512)$/,
  "weight-digest": /: weight and bias digest: ours \d+, theirs \d+$/,
};

for (const [fault, names] of Object.entries(MISMATCHES)) {
  test(`${fault}: every rank ends with CollectiveMismatchError at the first signal`, { skip }, () => {
    const got = outcomes(fault, "CollectiveMismatchError");
    for (const l of got) {
      assert.ok(Number(/after (\d+) ms/.exec(l)?.[1]) < LIMIT_MS, `by the deadline, not the signal: ${l}`);
      assert.match(l, names, l);
    }
  });
}

// pull's barriers meet in the symmetric tensor's pad on some ranks and the staging buffer's on the others.
test(
  "mismatch-a2a-symmetric-pull: every rank ends with SymmTimeoutError naming a peer, never wrong data",
  { skip },
  () => {
    for (const l of outcomes("mismatch-a2a-symmetric-pull")) {
      assert.match(l, /SymmTimeoutError naming \[\d\]/, l);
      withinDeadline(l);
    }
  },
);

for (const fault of ["refused-lamport", "refused-one-shot"]) {
  test(
    `${fault}: a call refused on one rank ends every rank in a typed error, never wrong data`,
    { skip },
    () => {
      const got = outcomes(fault);
      for (const l of got) {
        assert.match(l, /CollectiveMismatchError|SymmTimeoutError naming/, l);
        withinDeadline(l);
      }
    },
  );
}

// A send by one algorithm met by a receive by another: the receiver's first wait sees the other's first
// store and gives up; the sender ends in a typed error or completes (an ll send does not wait).
for (const fault of ["p2p-put-vs-ll", "p2p-ll-vs-put"]) {
  test(
    `${fault}: the receiver ends with CollectiveMismatchError naming the sender, never wrong data`,
    { skip },
    () => {
      const got = outcomes(fault);
      const of = (k: number): string => got.find((l) => l.includes(`[rank ${k}] `)) ?? `no line of rank ${k}`;
      assert.match(of(1), /CollectiveMismatchError rank 1 names rank 0 after \d+ ms/, got.join("\n"));
      assert.ok(
        Number(/after (\d+) ms/.exec(of(1))?.[1]) < LIMIT_MS,
        `by the deadline, not the signal: ${of(1)}`,
      );
      assert.match(of(0), /NO ERROR|CollectiveMismatchError|SymmTimeoutError naming \[1\]/, of(0));
      withinDeadline(of(0));
      for (let k = 2; k < n; k++) assert.match(of(k), /idle/, of(k));
    },
  );
}

test("destroy() releases a live graph that captured NCCL work and returns promptly", { skip }, () => {
  const got = outcomes("destroy-graph");
  for (const l of got) {
    assert.ok(Number(/destroy took (\d+) ms/.exec(l)?.[1]) < 10_000, l);
    assert.match(l, /replay refused: SYMMKIT_DISPOSED/);
  }
});

test(
  "a rank SIGKILLed outside the launcher: the NCCL watchdog ends the survivor's wait, naming it",
  { skip },
  async () => {
    const port = await freePort();
    const t0 = Date.now();
    const procs = [0, 1].map((rank) =>
      spawn(process.execPath, [script], {
        env: {
          ...process.env,
          FAULT: "nccl-kill",
          SYMMKIT_SYNC_TIMEOUT_MS: String(LIMIT_MS),
          RANK: String(rank),
          WORLD_SIZE: "2",
          LOCAL_RANK: String(rank),
          LOCAL_WORLD_SIZE: "2",
          MASTER_ADDR: "127.0.0.1",
          MASTER_PORT: String(port),
          SYMMKIT_JOB_TOKEN: "fault-test-token",
          NCCL_NVLS_ENABLE: "0",
        },
        stdio: ["ignore", "pipe", "pipe"],
      }),
    );
    const outs = procs.map((p) => {
      let s = "";
      p.stdout.on("data", (d: Buffer) => (s += d.toString()));
      p.stderr.on("data", (d: Buffer) => (s += d.toString()));
      return () => s;
    });
    const exits = await Promise.all(
      procs.map(
        (p) =>
          new Promise<{ code: number | null; signal: string | null }>((res) => {
            const timer = setTimeout(() => p.kill("SIGKILL"), 90_000);
            p.on("close", (code, signal) => {
              clearTimeout(timer);
              res({ code, signal });
            });
          }),
      ),
    );
    const out = outs.map((o, i) => `[rank ${i}] ${o()}`).join("\n");
    showOutput(out);
    assert.equal(exits[1]!.signal, "SIGKILL", out);
    assert.equal(exits[0]!.code, 0, out);
    const line = lines(outs[0]!(), "nccl-kill")[0] ?? "";
    assert.match(line, /NcclTimeoutError naming \[1\]/, out);
    withinDeadline(line);
    assert.ok(Date.now() - t0 < 60_000, `the survivor took ${Date.now() - t0} ms to exit`);
  },
);
