// The CPU backend's fault suite, under the real launcher: for each collective (all-reduce
// one-shot and two-shot, all-gather, reduce-scatter, broadcast, a send/recv exchange, barrier, and the
// sequential fused matmuls) at world 2 and 3, a rank
//   - SIGKILLed before its first call, during a stream of calls, and after its last call: the launcher
//     stops the job within a few seconds with exit code 137, names the killed rank as the first failure,
//     and leaves no process, no job directory in /tmp and nothing in /dev/shm;
//   - that skips a call (alive, at a store barrier): every rank waiting on it ends with SymmTimeoutError
//     naming it, within the deadline + 5 s, and its next call is refused at once;
//   - that straggles below the deadline: every rank gets the right result; above it: as for a skip.
// Then 20 kills during a stream and 20 skips at world 2, several jobs at a time: no run may hang.
//
// SYMMKIT_TEST_SEED replays a run (victims, kill times and the ranks' inputs); FAULT_SUITE_RECORD=file
// writes the measured times (min/median/max per case) to that file (bench/results/cpu/fault-suite.json);
// FAULT_SUITE_ROUNDS=n runs the matrix n times (more samples per case).
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { hostEnvironment, median } from "../src/bench/report.js";
import { readEnvVar } from "../src/settings.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, "..", "src", "cli.js");
const fixture = path.join(here, "fixtures", "cpu-faults-rank.js");

/** The deadline of the waits, and the stragglers' sleeps below and above it. */
const DEADLINE_MS = 1500;
const STRAGGLE_BELOW_MS = 300;
const STRAGGLE_ABOVE_MS = 2000;
/** How long after a kill the launcher may take to end the job. */
const STOP_LIMIT_MS = 5000;
/** Jobs run at a time (each one 2 or 3 processes mostly waiting). */
const PARALLEL = 3;
/** Times the matrix runs (FAULT_SUITE_ROUNDS; more samples per case for the record). */
const ROUNDS = Number(process.env.FAULT_SUITE_ROUNDS ?? 1);

const seed = readEnvVar("SYMMKIT_TEST_SEED") ?? BigInt(crypto.randomBytes(6).readUIntLE(0, 6));
console.log(`cpu-faults: seed ${seed} (replay with SYMMKIT_TEST_SEED=${seed})`);

/** A deterministic stream of numbers in [0, 1) per name, from the run's seed. */
function random(name: string): () => number {
  let k = 0;
  return () => {
    const h = crypto.createHash("sha256").update(`${seed}/${name}/${k++}`).digest();
    return h.readUInt32LE(0) / 2 ** 32;
  };
}
/** The seed a job's ranks use, from the run's seed and the job's name. */
const jobSeed = (name: string): string =>
  crypto.createHash("sha256").update(`${seed}/${name}`).digest().readUIntLE(0, 6).toString();

interface Job {
  readonly status: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly lines: string[];
  readonly out: string;
  /** The launcher's pid, and when it exited (epoch ms). */
  readonly pid: number;
  readonly endedAt: number;
  readonly ms: number;
  /** It ran past its limit and was killed (a hang). */
  readonly hung: boolean;
}

/** `symmkit run -n world cpu-faults-rank.js TAG` with `env`; killed (and marked hung) after `limitMs`. */
function runJob(world: number, env: Record<string, string>, limitMs: number): Promise<Job & { tag: string }> {
  const tag = `faults-${crypto.randomBytes(8).toString("hex")}`;
  const start = Date.now();
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [cli, "run", "-n", String(world), "--grace-ms", "1000", fixture, tag], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let hung = false;
    let endedAt = 0;
    const timer = setTimeout(() => {
      hung = true;
      p.kill("SIGKILL");
    }, limitMs);
    const chunks: string[] = [];
    p.stdout.on("data", (d: Buffer) => chunks.push(d.toString()));
    p.stderr.on("data", (d: Buffer) => chunks.push(d.toString()));
    p.on("exit", () => (endedAt = Date.now()));
    p.on("close", (status, signal) => {
      clearTimeout(timer);
      const out = chunks.join("");
      resolve({
        tag,
        status,
        signal,
        out,
        lines: out.split("\n"),
        pid: p.pid!,
        endedAt,
        ms: endedAt - start,
        hung,
      });
    });
  });
}

/** The ranks' pids (each prints "pid P rank R"). */
const rankPids = (out: string): Map<number, number> =>
  new Map([...out.matchAll(/pid (\d+) rank (\d+)/g)].map((m) => [Number(m[2]), Number(m[1])]));

/** Processes of the job still there: in a rank's process group, or naming the job's tag or directory. */
function leftovers(job: Job & { tag: string }): string[] {
  const groups = new Set(rankPids(job.out).values());
  const dir = `symmkit-job-${job.pid}-`;
  return execFileSync("ps", ["-eo", "pid=,pgid=,stat=,args="], { encoding: "utf8" })
    .split("\n")
    .filter((l) => {
      const [pid, pgid] = l.trim().split(/\s+/).map(Number);
      return (
        pid !== undefined &&
        pid !== process.pid &&
        !/\bps -eo\b/.test(l) &&
        (groups.has(pgid!) || groups.has(pid) || l.includes(job.tag) || l.includes(dir))
      );
    });
}

/** No process, no job directory in /tmp, nothing of symmkit's in /dev/shm (polled for up to 3 s). */
async function assertNothingLeft(job: Job & { tag: string }): Promise<void> {
  const dirs = (): string[] =>
    fs.readdirSync(os.tmpdir()).filter((f) => f.startsWith(`symmkit-job-${job.pid}-`));
  let procs = leftovers(job);
  for (const end = Date.now() + 3000; (procs.length > 0 || dirs().length > 0) && Date.now() < end;) {
    await new Promise((r) => setTimeout(r, 50));
    procs = leftovers(job);
  }
  assert.deepEqual(procs, [], `processes of the job left behind:\n${job.out}`);
  assert.deepEqual(dirs(), [], `the job's directory left behind in ${os.tmpdir()}`);
  assert.deepEqual(
    fs.readdirSync("/dev/shm").filter((f) => f.includes("symmkit")),
    [],
    "named shared memory left behind",
  );
}

/** Runs `jobs` with at most `limit` at a time. */
async function pool<T>(limit: number, jobs: (() => Promise<T>)[]): Promise<T[]> {
  const results = new Array<T>(jobs.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < jobs.length; i = next++) results[i] = await jobs[i]!();
  };
  await Promise.all(Array.from({ length: Math.min(limit, jobs.length) }, worker));
  return results;
}

// ---- figures ------------------------------------------------------------------------------------------

const figures = new Map<string, number[]>();
const record = (name: string, ms: number): void => void figures.set(name, [...(figures.get(name) ?? []), ms]);
const started = Date.now();
const loadBefore = os.loadavg()[0];

after(() => {
  const file = process.env.FAULT_SUITE_RECORD;
  if (!file) return;
  const round = (x: number): number => Math.round(x * 10) / 10;
  const stats = (xs: number[]): { n: number; min: number; median: number; max: number } => ({
    n: xs.length,
    min: round(Math.min(...xs)),
    median: round(median(xs)),
    max: round(Math.max(...xs)),
  });
  // Every case of one fault together (all collectives, both world sizes): "skip/msToError".
  const byFault = new Map<string, number[]>();
  for (const [key, xs] of figures) {
    const m = /^w\d+ \S+ (\S+)\/(\w+)$/.exec(key);
    if (m) byFault.set(`${m[1]}/${m[2]}`, [...(byFault.get(`${m[1]}/${m[2]}`) ?? []), ...xs]);
  }
  const sorted = (m: Map<string, number[]>): Record<string, ReturnType<typeof stats>> =>
    Object.fromEntries([...m].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => [k, stats(v)]));
  const result = {
    description:
      "The CPU backend's fault suite (test/cpu-faults.test.ts), jobs under symmkit run, up to " +
      `${PARALLEL} at a time on this machine. Per case: msToError is each waiting rank's time from the ` +
      "start of its call to the typed error (SymmTimeoutError naming the rank that skipped or straggled; " +
      `SYMMKIT_SYNC_TIMEOUT_MS=${DEADLINE_MS}); msCall the call's time of each rank waiting on a straggler ` +
      `${STRAGGLE_BELOW_MS} ms late (every rank succeeds); msKillToEnd the time from a rank's SIGKILL to the ` +
      "launcher's exit (exit code 137, the killed rank named first); msNextCallRefused the next call " +
      "after a failure. byFault: each fault over every collective and both world sizes. repeat/* are " +
      "the 20-run loops at world 2 (allReduce two_shot). " +
      `Replay with SYMMKIT_TEST_SEED=${seed}.`,
    ...hostEnvironment(loadBefore),
    seed: String(seed),
    syncTimeoutMs: DEADLINE_MS,
    straggleMs: { below: STRAGGLE_BELOW_MS, above: STRAGGLE_ABOVE_MS },
    totalMs: Date.now() - started,
    rounds: ROUNDS,
    byFault: sorted(byFault),
    cases: sorted(figures),
  };
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(result, null, 2) + "\n");
});

// ---- the matrix ---------------------------------------------------------------------------------------

const OPS = [
  "allReduce/one_shot",
  "allReduce/two_shot",
  "allGather",
  "reduceScatter",
  "broadcast",
  "sendrecv",
  "barrier",
  "allGatherMatmul",
  "matmulReduceScatter",
] as const;
type Op = (typeof OPS)[number];
const FAULTS = [
  "kill-before",
  "kill-during",
  "kill-after",
  "skip",
  "straggle-below",
  "straggle-above",
] as const;
type Fault = (typeof FAULTS)[number];

/** The ranks that wait on the victim in its call: for send/recv, the one it sends to; else all others. */
function waiters(op: Op, world: number, victim: number): number[] {
  if (op === "sendrecv") return [(victim + 1) % world];
  return Array.from({ length: world }, (_, r) => r).filter((r) => r !== victim);
}

const lineOf = (job: Job, prefix: string, r: number): string | undefined =>
  job.lines.find((l) => l.startsWith(`[rank ${r}] ${prefix} rank ${r}:`));
const msIn = (line: string): number => Number(/after ([\d.]+) ms/.exec(line)?.[1]);

/** Runs one case and checks it; returns the job. */
async function runCase(
  world: number,
  op: Op,
  fault: Fault,
  victim: number,
  rnd: () => number,
  run?: number,
  round = 0,
): Promise<Job> {
  // The figures' key: the case, or the loop of repeats it belongs to.
  const name = run === undefined ? `w${world} ${op} ${fault}` : `repeat/${fault}`;
  const env: Record<string, string> = {
    OP: op,
    VICTIM: String(victim),
    SYMMKIT_TEST_SEED: jobSeed(`${name}#${run ?? 0}#${round}`),
    SYMMKIT_SYNC_TIMEOUT_MS: String(fault.startsWith("kill") ? 60_000 : DEADLINE_MS),
  };
  if (fault.startsWith("straggle")) {
    env.FAULT = "straggle";
    env.STRAGGLE_MS = String(fault === "straggle-below" ? STRAGGLE_BELOW_MS : STRAGGLE_ABOVE_MS);
  } else env.FAULT = fault;
  if (fault === "kill-during") env.KILL_MS = String(Math.round(100 + 300 * rnd()));
  const job = await runJob(world, env, 30_000);
  const say = `${name} (victim rank ${victim}, seed ${seed}):\n${job.out}`;
  assert.equal(job.hung, false, `the job hung: ${say}`);
  assert.equal(rankPids(job.out).size, world, `not every rank printed its pid: ${say}`);
  assert.doesNotMatch(job.out, /WRONG|AssertionError|NEXT CALL RAN|PAST THE END/, say);

  if (fault.startsWith("kill")) {
    assert.equal(job.status, 137, say);
    const pid = rankPids(job.out).get(victim);
    assert.ok(pid, say);
    assert.match(
      job.out,
      new RegExp(
        `symmkit run: rank ${victim} \\(pid ${pid}\\) was killed by SIGKILL first; the other ranks were stopped`,
      ),
      say,
    );
    const kill = new RegExp(`\\[rank ${victim}\\] killing rank ${victim} at (\\d+) after (\\d+) calls`).exec(
      job.out,
    );
    assert.ok(kill, say);
    const stopMs = job.endedAt - Number(kill[1]);
    assert.ok(stopMs < STOP_LIMIT_MS, `the launcher took ${stopMs} ms after the kill: ${say}`);
    record(`${name}/msKillToEnd`, stopMs);
    if (fault === "kill-after") {
      const ok = job.lines.filter((l) => /stream ok rank \d+: 20 calls checked/.test(l));
      assert.equal(ok.length, world, say);
    }
    if (fault === "kill-during") assert.ok(Number(kill[2]) > 0, `killed before any call: ${say}`);
  } else {
    assert.equal(job.status, 0, say);
    const failing = fault === "straggle-below" ? [] : waiters(op, world, victim);
    for (let r = 0; r < world; r++) {
      const line = lineOf(job, "outcome", r);
      assert.ok(line, `rank ${r} printed no outcome: ${say}`);
      if (r === victim && fault === "skip") assert.match(line, /skipped$/, say);
      else if (r === victim && fault === "straggle-above")
        // It comes late: its call succeeds, or ends with a typed error (its peers left).
        assert.match(line, /: (ok|timeout naming rank \d|mismatch naming rank \d)/, say);
      else if (failing.includes(r)) {
        assert.match(line, new RegExp(`: timeout naming rank ${victim} after`), say);
        const ms = msIn(line);
        assert.ok(ms >= DEADLINE_MS && ms < DEADLINE_MS + 5000, `rank ${r}: ${ms} ms: ${say}`);
        record(`${name}/msToError`, ms);
        const next = lineOf(job, "next call", r);
        assert.match(next ?? "", /refused SYMMKIT_SYMM_TIMEOUT after/, say);
        assert.ok(
          msIn(next!) < DEADLINE_MS / 3,
          `the next call took ${msIn(next!)} ms to be refused: ${say}`,
        );
        record(`${name}/msNextCallRefused`, msIn(next!));
      } else {
        assert.match(line, /: ok after/, say);
        if (fault === "straggle-below" && waiters(op, world, victim).includes(r)) {
          // It waited for the straggler.
          assert.ok(msIn(line) >= STRAGGLE_BELOW_MS * 0.9, say);
          record(`${name}/msCall`, msIn(line));
        }
      }
    }
  }
  await assertNothingLeft(job);
  return job;
}

for (const world of [2, 3]) {
  describe(`CPU fault suite at world ${world}`, { concurrency: PARALLEL }, () => {
    for (let round = 0; round < ROUNDS; round++) {
      for (const op of OPS) {
        const rnd = random(`w${world} ${op} round ${round}`);
        for (const fault of FAULTS) {
          const victim = Math.floor(rnd() * world);
          const which = ROUNDS > 1 ? `round ${round}, rank ${victim}` : `rank ${victim}`;
          test(`${op}: ${fault} (${which})`, { timeout: 60_000 }, async () => {
            await runCase(world, op, fault, victim, rnd, undefined, round);
          });
        }
      }
    }
  });
}

describe("no hangs: 20 kills during a stream and 20 skips at world 2 (allReduce two_shot)", () => {
  for (const fault of ["kill-during", "skip"] as const) {
    test(`20 x ${fault}`, { timeout: 180_000 }, async (t) => {
      const rnd = random(`repeat ${fault}`);
      const victims = Array.from({ length: 20 }, () => Math.floor(rnd() * 2));
      const start = Date.now();
      const outcomes = await pool(
        PARALLEL,
        victims.map((victim, i) => async () => {
          try {
            const job = await runCase(2, "allReduce/two_shot", fault, victim, rnd, i);
            record(`repeat/${fault}/msJob`, job.ms);
            return "ok";
          } catch (e) {
            return `run ${i}: ${e instanceof Error ? e.message : String(e)}`;
          }
        }),
      );
      const failed = outcomes.filter((o) => o !== "ok");
      t.diagnostic(`20 runs in ${Date.now() - start} ms, ${failed.length} failed`);
      assert.deepEqual(failed, [], "every run ends, as it should, within its bound");
      assert.equal(outcomes.length, 20);
    });
  }
});
