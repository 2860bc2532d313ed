// The launcher under faults that could hang a job or leave things behind: a rank that exits
// 0 without joining, a store address not of this host, the launcher killed by SIGKILL, scripts that are
// not executables. Each is reported at once, with a typed error or a message that names what to do.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, "..", "src", "cli.js");
const fixture = path.join(here, "fixtures", "fault-join.js");

interface Run {
  code: number | null;
  stdout: string[];
  stderr: string[];
  /** When the launcher exited (Date.now()). */
  endedAt: number;
}

/**
 * `symmkit run` with `args`; killed after `limitMs` (a job that hangs fails the test rather than
 * stalling it). `onLine` sees each stdout line with the launcher's process.
 */
function run(
  args: string[],
  env: Record<string, string> = {},
  limitMs = 20_000,
  onLine?: (line: string, launcher: ChildProcess) => void,
): Promise<Run> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [cli, "run", "--grace-ms", "500", ...args], {
      env: { ...process.env, ...env },
    });
    const timer = setTimeout(() => p.kill("SIGKILL"), limitMs);
    const r: Run = { code: null, stdout: [], stderr: [], endedAt: 0 };
    let buf = "";
    p.stdout.on("data", (d: Buffer) => {
      buf += d.toString();
      for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        r.stdout.push(line);
        onLine?.(line, p);
      }
    });
    p.stderr.on("data", (d: Buffer) => r.stderr.push(...d.toString().split("\n").filter(Boolean)));
    p.on("exit", () => (r.endedAt = Date.now()));
    p.on("close", (code) => {
      clearTimeout(timer);
      r.code = code;
      resolve(r);
    });
  });
}

const all = (r: Run): string => [...r.stdout, ...r.stderr].join("\n");

/** Running: exists and is not a zombie. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
  } catch {
    return false;
  }
}

/** Polls `done` every 20 ms for up to `ms`; true once it holds. */
async function within(ms: number, done: () => boolean): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 20)))
    if (done()) return true;
  return done();
}

/** When rank 1 left (it prints "leaving at <ms>"). */
const leftAt = (r: Run): number => Number(/leaving at (\d+)/.exec(r.stdout.join("\n"))?.[1]);

test("a rank that exits 0 before init() stops the job at once, naming it and the ranks waiting for it", async (t) => {
  const r = await run(["-n", "3", fixture], { FAULT: "leave" });
  assert.equal(r.code, 1, all(r));
  assert.match(
    all(r),
    /symmkit run: rank 1 \(pid \d+\) exited with code 0 before joining the group \(init\(\)\); ranks? [02](, 2)? (is|are) waiting for it/,
  );
  const ms = r.endedAt - leftAt(r);
  assert.ok(ms < 5000, `the launcher took ${ms} ms after rank 1 left`);
  t.diagnostic(`the launcher exited ${ms} ms after rank 1 left`);
});

test("a rank that exits 0 before init(): the job stops as soon as another rank starts joining", async (t) => {
  const r = await run(["-n", "2", fixture], { FAULT: "late" });
  assert.equal(r.code, 1, all(r));
  assert.match(
    all(r),
    /rank 1 \(pid \d+\) exited with code 0 before joining the group \(init\(\)\); rank 0 is waiting/,
  );
  const joining = Number(/\[rank 0\] joining at (\d+)/.exec(all(r))?.[1]);
  assert.ok(joining > leftAt(r), "rank 0 started joining after rank 1 left");
  const ms = r.endedAt - joining;
  assert.ok(ms < 5000, `the launcher took ${ms} ms after rank 0 started joining`);
  t.diagnostic(
    `the launcher exited ${ms} ms after rank 0 started joining (${joining - leftAt(r)} ms after rank 1 left)`,
  );
});

test("ranks that never call init() and exit 0 are a successful job", async () => {
  const r = await run(["-n", "3", "--", "echo", "hi"]);
  assert.equal(r.code, 0, all(r));
  assert.equal(r.stdout.filter((l) => /^\[rank \d\] hi$/.test(l)).length, 3);
  assert.deepEqual(r.stderr, []);
});

test("a rank that stays out of init(): the others fail after SYMMKIT_STORE_TIMEOUT_MS, and they and the launcher name it", async (t) => {
  const r = await run(["-n", "3", fixture], { FAULT: "stay", SYMMKIT_STORE_TIMEOUT_MS: "1500" });
  assert.equal(r.code, 1, all(r));
  const failed =
    /\[rank ([02])\] init failed at (\d+): SYMMKIT_STORE_TIMEOUT: joining the group on rank \1 timed out after 1500 ms waiting for symmkit\/joined\/1; rank 1 never started joining \(has it called init\(\)\?\)/.exec(
      all(r),
    );
  assert.ok(failed, all(r));
  const joining = new RegExp(`\\[rank ${failed[1]}\\] joining at (\\d+)`).exec(all(r))?.[1];
  const ms = Number(failed[2]) - Number(joining);
  assert.ok(ms >= 1400 && ms < 6000, `rank ${failed[1]} failed ${ms} ms after it started joining`);
  // The launcher names the rank that never joined, not the one that waited for it.
  const pid1 = /\[rank 1\] pid (\d+)/.exec(all(r))?.[1];
  assert.match(
    r.stderr.join("\n"),
    new RegExp(
      `^symmkit run: rank 1 \\(pid ${pid1}\\) never joined the group \\(it had not called init\\(\\)\\); ` +
        "rank [02] \\(pid \\d+\\) exited with code 1 after waiting 1500 ms for it; the other ranks were stopped$",
      "m",
    ),
  );
  assert.doesNotMatch(all(r), /exited with code 1 first/);
  t.diagnostic(`rank ${failed[1]} failed ${ms} ms after it started joining (SYMMKIT_STORE_TIMEOUT_MS=1500)`);
});

/** An IPv4 address of this host other than loopback, if it has one. */
function hostAddress(): string | undefined {
  return Object.values(os.networkInterfaces())
    .flatMap((l) => l ?? [])
    .find((a) => a.family === "IPv4" && !a.internal)?.address;
}

test("--master-addr with this host's address: the store listens there and the job runs", async (t) => {
  const addr = hostAddress();
  if (!addr) return t.skip("this host has no address but loopback");
  let ready = 0;
  const r = await run(
    ["-n", "2", "--master-addr", addr, fixture],
    { SYMMKIT_STORE_TIMEOUT_MS: "5000" },
    20_000,
    (l, p) => {
      if (l.includes("ready") && ++ready === 2) p.kill("SIGINT");
    },
  );
  assert.equal(ready, 2, all(r));
  assert.equal(r.code, 130, all(r));
});

test("--master-addr not of this host: a typed error at once, before any rank starts", async (t) => {
  const local = new Set(
    Object.values(os.networkInterfaces())
      .flatMap((l) => l ?? [])
      .map((a) => a.address),
  );
  const addr = ["198.51.100.7", "203.0.113.7"].find((a) => !local.has(a))!;
  const start = Date.now();
  const r = await run(["-n", "2", "--master-addr", addr, fixture]);
  assert.equal(r.code, 1, all(r));
  assert.match(
    r.stderr.join("\n"),
    new RegExp(
      `symmkit run: --master-addr ${addr} is not an address of this host \\(EADDRNOTAVAIL\\).*\\[SYMMKIT_INVALID_ARGUMENT\\]`,
    ),
  );
  assert.deepEqual(r.stdout, [], "no rank started");
  assert.ok(Date.now() - start < 5000);
  t.diagnostic(`the launcher failed ${Date.now() - start} ms after it was started`);
});

test("the launcher killed by SIGKILL: its ranks and its socket directory go within seconds", async (t) => {
  const pids: number[] = [];
  const dirs: string[] = [];
  let launcherPid = 0;
  let killedAt = 0;
  await run(["-n", "2", fixture], {}, 20_000, (l, p) => {
    const pid = /^\[rank \d\] pid (\d+)/.exec(l)?.[1];
    if (pid) pids.push(Number(pid));
    const dir = /^\[rank \d\] ready (\S+)/.exec(l)?.[1];
    if (dir && dirs.push(dir) === 2) {
      launcherPid = p.pid!;
      killedAt = Date.now();
      p.kill("SIGKILL");
    }
  });
  const dir = dirs[0] ?? "";
  assert.ok(dir.startsWith(path.join(os.tmpdir(), `symmkit-job-${launcherPid}-`)), dir);
  assert.ok(
    await within(5000, () => !pids.some(alive)),
    `ranks left running: ${pids.filter(alive).join(", ")}`,
  );
  assert.ok(await within(5000, () => !fs.existsSync(dir)), `${dir} left behind`);
  t.diagnostic(`ranks and directory gone ${Date.now() - killedAt} ms after the SIGKILL`);
});

test("scripts: .cjs runs with Node; .ts with Node where it can, else says how; a file that is not executable says so", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-scripts-"));
  try {
    const write = (name: string, text: string): string => {
      fs.writeFileSync(path.join(dir, name), text);
      return path.join(dir, name);
    };
    const cjs = await run([
      "-n",
      "2",
      write("rank.cjs", 'console.log("cjs", require("node:os").EOL.length)'),
    ]);
    assert.equal(cjs.code, 0, all(cjs));
    assert.deepEqual(cjs.stdout.sort(), ["[rank 0] cjs 1", "[rank 1] cjs 1"]);

    const ts = await run(["-n", "1", write("rank.ts", 'const n: number = 7;\nconsole.log("ts", n);')]);
    const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
    if (major > 22 || (major === 22 && minor >= 6)) {
      assert.equal(ts.code, 0, all(ts));
      assert.deepEqual(ts.stdout, ["[rank 0] ts 7"]);
    } else {
      assert.equal(ts.code, 1, all(ts));
      assert.match(
        ts.stderr.join("\n"),
        /symmkit run: .*rank\.ts is TypeScript, which Node v[\d.]+ cannot run: compile it \(tsc\).*\[SYMMKIT_UNSUPPORTED\]/,
      );
    }

    const sh = await run(["-n", "2", write("rank.sh", "echo hi\n")]);
    assert.equal(sh.code, 127, all(sh));
    assert.match(
      sh.stderr.join("\n"),
      /rank 0 could not start .*rank\.sh: EACCES: it is not executable; chmod \+x it/,
    );
    assert.doesNotMatch(all(sh), /pid -1/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("a script that is not there: one typed line before any rank starts; a command that is not: one line", async () => {
  const missing = path.join(os.tmpdir(), `symmkit-missing-${process.pid}.js`);
  const [script, command] = await Promise.all([
    run(["-n", "2", missing]),
    run(["-n", "3", "--", "symmkit-no-such-command"]),
  ]);
  assert.equal(script.code, 1, all(script));
  assert.deepEqual(script.stdout, [], "no rank started");
  assert.deepEqual(script.stderr, [
    `symmkit run: ${missing} does not exist (looked for ${missing}): give the script each rank runs, or a ` +
      "command after -- [SYMMKIT_INVALID_ARGUMENT]",
  ]);
  assert.equal(command.code, 127, all(command));
  assert.deepEqual(command.stderr, [
    "symmkit run: rank 0 could not start symmkit-no-such-command: ENOENT: no such file, nor command on PATH; " +
      "no rank was started [SYMMKIT_OS_ERROR]",
  ]);
});

test("out of file descriptors (ulimit -n 100, 60 ranks): one typed line, no stack; the ranks started are stopped", async () => {
  const r = await new Promise<Run>((resolve) => {
    const p = spawn(
      "/bin/sh",
      ["-c", 'ulimit -n 100 && exec "$0" "$1" run -n 60 --grace-ms 500 -- sleep 30', process.execPath, cli],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    const r: Run = { code: null, stdout: [], stderr: [], endedAt: 0 };
    p.stdout.on("data", (d: Buffer) => r.stdout.push(...d.toString().split("\n").filter(Boolean)));
    p.stderr.on("data", (d: Buffer) => r.stderr.push(...d.toString().split("\n").filter(Boolean)));
    const timer = setTimeout(() => p.kill("SIGKILL"), 20_000);
    p.on("close", (code) => {
      clearTimeout(timer);
      r.code = code;
      resolve(r);
    });
  });
  assert.equal(r.code, 127, all(r));
  const said = r.stderr.filter((l) => !/^symmkit run: stopping ranks [\d, ]+ \(SIGTERM/.test(l));
  assert.equal(said.length, 1, all(r));
  assert.match(
    said[0]!,
    /^symmkit run: rank \d+ could not start sleep: EMFILE: the launcher has too many files open .*\(ulimit -n, now 100\) or start fewer ranks per host; the ranks started before it were stopped \[SYMMKIT_OS_ERROR\]$/,
  );
  assert.doesNotMatch(all(r), /TypeError|Unhandled|^\s+at /m);
});
