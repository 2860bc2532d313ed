import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { launch, parseRunArgs } from "../src/distributed/launcher.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, "..", "src", "cli.js");
const rankScript = path.join(here, "fixtures", "rank.js");

interface Run {
  code: number | null;
  stdout: string[];
  stderr: string[];
  pids: number[];
}

/** Runs `symmkit run` on the fixture; `onLine` may act on the job while it runs. */
function run(
  n: number,
  behaviour: Record<number, string>,
  extra: string[] = [],
  onLine?: (l: string, p: ReturnType<typeof spawn>) => void,
): Promise<Run> {
  return new Promise((resolve) => {
    const p = spawn(
      process.execPath,
      [cli, "run", "-n", String(n), "--grace-ms", "500", ...extra, rankScript],
      {
        env: { ...process.env, BEHAVIOUR: JSON.stringify(behaviour) },
      },
    );
    const r: Run = { code: null, stdout: [], stderr: [], pids: [] };
    let buf = "";
    p.stdout.on("data", (d: Buffer) => {
      buf += d.toString();
      for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        r.stdout.push(line);
        const m = /"pid":(\d+)|"grandchild":(\d+)/.exec(line);
        if (m) r.pids.push(Number(m[1] ?? m[2]));
        onLine?.(line, p);
      }
    });
    p.stderr.on("data", (d: Buffer) => r.stderr.push(...d.toString().split("\n").filter(Boolean)));
    // "close": after the exit and the last of the launcher's output.
    p.on("close", (code) => {
      r.code = code;
      resolve(r);
    });
  });
}

/** Running: exists and is not a zombie waiting for its (new) parent to reap it. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
  } catch {
    return false;
  }
}

async function noneAlive(pids: number[]): Promise<void> {
  for (let i = 0; i < 150 && pids.some(alive); i++) await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(pids.filter(alive), [], "processes left behind");
}

test("three ranks get the torchrun environment; output is prefixed by rank", async () => {
  const r = await run(3, {});
  assert.equal(r.code, 0, r.stderr.join("\n"));
  type RankEnv = Record<string, string | number | boolean> & { prefix: number };
  const envs: RankEnv[] = r.stdout.map((l) => {
    const m = /^\[rank (\d)\] (\{.*\})$/.exec(l);
    assert.ok(m, l);
    const parsed = JSON.parse(m[2]!) as Record<string, string | number | boolean>;
    return { ...parsed, prefix: Number(m[1]) };
  });
  assert.deepEqual(envs.map((e) => e.prefix).sort(), [0, 1, 2]);
  for (const e of envs) {
    assert.equal(e.rank, e.prefix);
    assert.equal(e.world, "3");
    assert.equal(e.local, String(e.prefix));
    assert.equal(e.localWorld, "3");
    assert.equal(e.addr, "127.0.0.1");
    assert.ok(Number(e.port) > 0, "the store's real port, not 0");
    assert.equal(e.hasToken, true);
    assert.equal(e.nvls, process.env.NCCL_NVLS_ENABLE ?? "0");
    assert.equal(e.shareGpus, process.env.SYMMKIT_SHARE_GPUS);
    assert.equal(e.ncclHostId, process.env.NCCL_HOSTID);
  }
  assert.equal(r.stderr.filter((l) => /^\[rank \d\] to stderr$/.test(l)).length, 3);
  await noneAlive(r.pids);
});

test("--share-gpus: every rank is told, and NCCL sees each rank as a host of its own", async () => {
  const r = await run(2, {}, ["--share-gpus"]);
  assert.equal(r.code, 0, r.stderr.join("\n"));
  const envs = r.stdout.map((l) => JSON.parse(l.replace(/^\[rank \d\] /, "")) as Record<string, unknown>);
  assert.deepEqual(
    envs.map((e) => e.shareGpus),
    ["1", "1"],
  );
  // NCCL refuses two ranks on one GPU of one host; distinct host ids make it connect them by sockets.
  const ids = new Set(envs.map((e) => e.ncclHostId));
  assert.equal(ids.size, 2);
  assert.ok([...ids].every((id) => typeof id === "string" && id.length > 0));
  await noneAlive(r.pids);
});

test("one rank exits 3: the others are stopped and the launcher exits 3, naming it", async () => {
  const r = await run(3, { 1: "exit3", 0: "hang", 2: "hang" });
  assert.equal(r.code, 3);
  assert.ok(
    r.stderr.some((l) => /rank 1 \(pid \d+\) exited with code 3 first/.test(l)),
    r.stderr.join("\n"),
  );
  await noneAlive(r.pids);
});

test("a rank killed by SIGKILL: exit 137, reported by signal", async () => {
  const r = await run(2, { 0: "hang", 1: "sigkill" });
  assert.equal(r.code, 137);
  assert.ok(
    r.stderr.some((l) => /rank 1 \(pid \d+\) was killed by SIGKILL first/.test(l)),
    r.stderr.join("\n"),
  );
  await noneAlive(r.pids);
});

test("ranks that ignore SIGTERM are killed after the grace period, with what they started", async () => {
  const r = await run(3, { 0: "exit3", 1: "stubborn", 2: "spawn-child" });
  assert.equal(r.code, 3);
  assert.equal(r.pids.length, 4, "three ranks and a grandchild");
  await noneAlive(r.pids);
});

test("a process that escaped a rank's group and holds its output does not keep the launcher alive", async () => {
  const t0 = Date.now();
  const r = await run(2, { 0: "hang", 1: "escape" });
  assert.equal(r.code, 3);
  assert.ok(Date.now() - t0 < 10_000, `launcher took ${Date.now() - t0} ms`);
  const escaped = r.stdout.map((l) => /"escaped":(\d+)/.exec(l)?.[1]).find(Boolean);
  if (escaped) process.kill(Number(escaped), "SIGKILL");
  await noneAlive(r.pids);
});

test("SIGINT to the launcher stops every rank", async () => {
  let ready = 0;
  const r = await run(2, { 0: "hang", 1: "spawn-child" }, [], (line, p) => {
    if (line.includes('"pid"') && ++ready === 2) setTimeout(() => p.kill("SIGINT"), 100);
  });
  assert.equal(r.code, 130);
  assert.ok(r.stderr.some((l) => /stopped by SIGINT/.test(l)));
  await noneAlive(r.pids);
});

test("a rank's last lines, written just before it exits, all reach the launcher's output", async () => {
  for (let attempt = 0; attempt < 3; attempt++) {
    const r = await run(3, { 0: "burst", 1: "burst", 2: "burst" });
    assert.equal(r.code, 0);
    for (const rank of [0, 1, 2]) {
      const lines = r.stdout.filter((l) => l.startsWith(`[rank ${rank}] burst`));
      assert.equal(lines.length, 20001, `rank ${rank}: ${lines.length} of 20001 lines`);
      assert.equal(lines.at(-1), `[rank ${rank}] burst done`);
    }
  }
});

test("ranks that print 20000 lines and call process.exit() at once: every line arrives", async () => {
  const r = await run(3, { 0: "exit-burst", 1: "exit-burst", 2: "exit-burst" });
  assert.equal(r.code, 0, r.stderr.slice(-5).join("\n"));
  for (const rank of [0, 1, 2]) {
    const out = r.stdout.filter((l) => l.startsWith(`[rank ${rank}] exit-burst `));
    const err = r.stderr.filter((l) => l.startsWith(`[rank ${rank}] exit-burst err `));
    assert.equal(out.length, 20000, `rank ${rank}: ${out.length} of 20000 lines`);
    assert.equal(out.at(-1), `[rank ${rank}] exit-burst 19999`);
    assert.equal(err.length, 2000, `rank ${rank}: ${err.length} of 2000 lines on stderr`);
  }
});

test("20 jobs whose ranks exit right after their last line: every line arrives", async () => {
  // process.exit() right after the write: the launcher sees "exit" while the pipes may still hold it.
  const script = 'process.stdout.write(`last ${process.env.RANK}\\n`); console.error("err"); process.exit(0)';
  for (let run = 0; run < 20; run++) {
    const out: string[] = [];
    const err: string[] = [];
    const code = await launch({
      ...parseRunArgs(["-n", "2", "--", process.execPath, "-e", script]),
      stdout: (l) => out.push(l),
      stderr: (l) => err.push(l),
    });
    assert.equal(code, 0, err.join("\n"));
    assert.deepEqual(out.sort(), ["[rank 0] last 0", "[rank 1] last 1"], `run ${run}`);
    assert.deepEqual(err.sort(), ["[rank 0] err", "[rank 1] err"], `run ${run}`);
  }
});

test("argument parsing: options, then the script and its own arguments", () => {
  const o = parseRunArgs(["-n", "4", "--master-port=29500", "train.js", "-n", "7"]);
  assert.equal(o.nprocPerNode, 4);
  assert.equal(o.masterPort, 29500);
  assert.deepEqual(o.command, ["train.js", "-n", "7"]);
  assert.deepEqual(parseRunArgs(["--", "python3", "-c", "1"]).command, ["python3", "-c", "1"]);
  assert.equal(o.shareGpus, undefined);
  assert.equal(parseRunArgs(["--share-gpus", "x.js"]).shareGpus, true);
  assert.throws(() => parseRunArgs(["--bogus"]), /unknown option '--bogus'/);
  assert.throws(() => parseRunArgs(["-n", "x"]), /option '-n, --nproc-per-node <N>' argument 'x' is invalid/);
});
