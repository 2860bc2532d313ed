// `symmkit run`: starts one process per local rank with the torchrun-style environment, serves the
// rendezvous store (node 0, from a thread of its own), prefixes every output line with its rank, and tears
// the whole job down when any rank fails (on any host of a multi-host job: JOB_FAILED_KEY), or exits 0
// without joining while others wait for it; a rank that waited for one that never joined names that one.
// Each rank runs in a process group of its own, so that teardown reaches whatever it started; no process
// outlives the launcher.
import { spawn, type ChildProcess } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { Writable } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Command, CommanderError, InvalidArgumentError as CommanderInvalidArgument } from "commander";
import { InvalidArgumentError, SymmkitError, UnsupportedError, type ErrorCode } from "../errors.js";
import { readEnvVar } from "../settings.js";
import { joinedKey, JOINING_KEY, joiningKey, joinTimeoutKey, type JoinVerdict } from "./env.js";
import { StoreClient, StoreTimeoutError } from "./store/client.js";
import { startStoreThread, type StoreThread } from "./store/thread.js";

export interface LaunchOptions {
  readonly nprocPerNode: number;
  readonly nnodes: number;
  readonly nodeRank: number;
  readonly masterAddr: string;
  /** 0 picks a free port (single node only). */
  readonly masterPort: number;
  /** argv of each rank: a script run with this Node, or any command. */
  readonly command: readonly string[];
  /** Between SIGTERM and SIGKILL when tearing down. */
  readonly graceMs: number;
  /** More ranks than GPUs: they share them round-robin (see shareGpusEnv). */
  readonly shareGpus?: boolean;
  readonly stdout?: (line: string) => void;
  readonly stderr?: (line: string) => void;
}

export interface RankExit {
  readonly rank: number;
  readonly pid: number;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

const SIGNAL_NUMBERS: Partial<Record<NodeJS.Signals, number>> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGKILL: 9,
  SIGTERM: 15,
  SIGSEGV: 11,
  SIGABRT: 6,
};

export function exitCodeOf(e: RankExit): number {
  if (e.signal) return 128 + (SIGNAL_NUMBERS[e.signal] ?? 1);
  return e.code ?? 1;
}

export function describeExit(e: RankExit): string {
  return `rank ${e.rank} (pid ${e.pid}) ${e.signal ? `was killed by ${e.signal}` : `exited with code ${e.code}`}`;
}

function validate(o: LaunchOptions): void {
  const int = (v: number, name: string, min: number): void => {
    if (!Number.isInteger(v) || v < min)
      throw new InvalidArgumentError(`${name} must be an integer >= ${min}, got ${v}`);
  };
  int(o.nprocPerNode, "--nproc-per-node", 1);
  int(o.nnodes, "--nnodes", 1);
  int(o.nodeRank, "--node-rank", 0);
  int(o.masterPort, "--master-port", 0);
  if (o.masterAddr === "") throw new InvalidArgumentError("--master-addr needs an address");
  if (o.nodeRank >= o.nnodes)
    throw new InvalidArgumentError(`--node-rank ${o.nodeRank} must be below --nnodes ${o.nnodes}`);
  if (o.nnodes > 1 && o.masterPort === 0)
    throw new InvalidArgumentError("a multi-node job needs an explicit --master-port");
  if (o.command.length === 0)
    throw new InvalidArgumentError("nothing to run: give a script, or a command after --");
}

/** The job token: random for one node; shared through SYMMKIT_JOB_TOKEN across nodes. */
function jobToken(o: LaunchOptions): string {
  const given = readEnvVar("SYMMKIT_JOB_TOKEN");
  if (given) return given;
  if (o.nnodes > 1) {
    throw new SymmkitError(
      "SYMMKIT_ENVIRONMENT",
      "a multi-node job needs SYMMKIT_JOB_TOKEN set to the same secret on every node",
    );
  }
  return crypto.randomBytes(24).toString("hex");
}

/** Node >= 22.6 runs TypeScript itself, stripping the types. */
function nodeStripsTypes(): boolean {
  const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
  return major > 22 || (major === 22 && minor >= 6);
}

/** Loaded first into a rank run with this Node: its stdout and stderr written blocking (see the file). */
const RANK_STDIO = pathToFileURL(
  path.join(path.dirname(fileURLToPath(import.meta.url)), "rank-stdio.js"),
).href;

/** A script that is not there fails now, once, rather than in every rank. */
function checkScript(file: string): void {
  let stat: fs.Stats | undefined;
  try {
    stat = fs.statSync(file);
  } catch {
    // Said below.
  }
  if (stat?.isFile()) return;
  throw new InvalidArgumentError(
    `symmkit run: ${file} ${stat ? "is not a file" : "does not exist"} (looked for ${path.resolve(file)}): ` +
      "give the script each rank runs, or a command after --",
  );
}

/**
 * argv of each rank: a JavaScript file runs with this Node (TypeScript too, where Node can), its stdout and
 * stderr written blocking, so that nothing it printed is lost when it calls process.exit(); anything else
 * runs as a command.
 */
function rankArgv(command: readonly string[]): string[] {
  const [file, ...args] = command as [string, ...string[]];
  const node = [process.execPath, "--import", RANK_STDIO];
  if (/\.[cm]?js$/.test(file)) {
    checkScript(file);
    return [...node, file, ...args];
  }
  if (/\.[cm]?ts$/.test(file)) {
    checkScript(file);
    if (nodeStripsTypes()) return [...node, "--experimental-strip-types", file, ...args];
    throw new UnsupportedError(
      `symmkit run: ${file} is TypeScript, which Node ${process.version} cannot run: compile it (tsc) and ` +
        "give the .js, or use Node >= 22.6, where symmkit runs it with --experimental-strip-types",
    );
  }
  return [file, ...args];
}

/** This process's limit on open files (the soft one), if Linux says. */
function openFilesLimit(): string | undefined {
  try {
    return /^Max open files\s+(\S+)/m.exec(fs.readFileSync("/proc/self/limits", "utf8"))?.[1];
  } catch {
    return undefined;
  }
}

/** Why a rank's command could not start, and what to do. */
function startFailure(e: NodeJS.ErrnoException): string {
  if (e.code === "EACCES")
    return "EACCES: it is not executable; chmod +x it, or name its interpreter (symmkit run -- python3 script.py)";
  if (e.code === "ENOENT") return "ENOENT: no such file, nor command on PATH";
  if (e.code === "EMFILE" || e.code === "ENFILE") {
    const limit = openFilesLimit();
    return (
      `${e.code}: ${e.code === "EMFILE" ? "the launcher" : "the system"} has too many files open (each rank ` +
      `holds up to 3 of the launcher's: its stdout, its stderr and its store connection): raise the limit ` +
      `(ulimit -n${limit ? `, now ${limit}` : ""}) or start fewer ranks per host`
    );
  }
  if (e.code === "EAGAIN")
    return "EAGAIN: the system refused another process: raise ulimit -u, or start fewer ranks";
  return e.message;
}

/** The code a failure to start a rank is reported with. */
const START_FAILURE_CODE: ErrorCode = "SYMMKIT_OS_ERROR";

/** The store, served where the ranks are told it is; an address this host cannot serve fails now. */
async function startStore(
  o: LaunchOptions,
  token: string,
  onLost: (why: string) => void,
): Promise<StoreThread> {
  try {
    return await startStoreThread({ token, port: o.masterPort, host: o.masterAddr }, onLost);
  } catch (e) {
    if (e instanceof SymmkitError) throw e;
    const { code, message } = e as NodeJS.ErrnoException;
    const addresses = Object.values(os.networkInterfaces())
      .flatMap((list) => list ?? [])
      .map((a) => a.address)
      .join(", ");
    const fix = `node 0 serves the rendezvous store there: give one of this host's addresses (${addresses}), or leave it out on one host`;
    if (code === "EADDRNOTAVAIL")
      throw new InvalidArgumentError(
        `--master-addr ${o.masterAddr} is not an address of this host (${code}); ${fix}`,
      );
    if (code === "ENOTFOUND" || code === "EAI_AGAIN")
      throw new InvalidArgumentError(`--master-addr ${o.masterAddr} does not resolve (${code}); ${fix}`);
    if (code === "EADDRINUSE") {
      throw new InvalidArgumentError(
        `--master-port ${o.masterPort} is in use on ${o.masterAddr}: choose another` +
          (o.nnodes === 1 ? ", or leave it out for a free one" : ""),
      );
    }
    throw new SymmkitError(
      "SYMMKIT_ENVIRONMENT",
      `node 0 cannot serve the rendezvous store on ${o.masterAddr}:${o.masterPort}: ${message}`,
    );
  }
}

/**
 * Removes `dir` once this process is gone, however it ends (SIGKILL too, when no code of ours runs): a
 * shell in a session of its own waits on a pipe that only this process holds, which the kernel closes
 * then. Returns that pipe: ending it lets the shell go at once.
 */
function removeWhenGone(dir: string): Writable {
  // Without it, the launcher's own removal at the end of the job is all there is.
  const none = (): Writable => new Writable({ write: (_c, _e, done) => done() });
  let sentinel: ChildProcess;
  try {
    sentinel = spawn("/bin/sh", ["-c", 'read -r _; rm -rf -- "$0"', dir], {
      detached: true,
      stdio: ["pipe", "ignore", "ignore"],
    });
  } catch {
    return none();
  }
  sentinel.on("error", () => undefined);
  sentinel.unref();
  // No pipe when it could not start (out of file descriptors, say).
  if (!sentinel.stdin) return none();
  sentinel.stdin.on("error", () => undefined);
  return sentinel.stdin;
}

/** "rank 2" or "ranks 0, 1". */
const ranksNamed = (ranks: readonly number[]): string =>
  `${ranks.length === 1 ? "rank" : "ranks"} ${ranks.join(", ")}`;

/** The launcher's store is in its own process: it answers at once. */
const CONNECT_TIMEOUT_MS = 10_000;
/** Set by the first host whose ranks fail a multi-host job ({ node, what }); every other host's launcher
 * waits on it and stops its own ranks, so one host failing stops the job everywhere. */
export const JOB_FAILED_KEY = "symmkit/job/failed";
/** How long one wait on JOB_FAILED_KEY lasts before the watcher waits again. */
const FAILED_WATCH_MS = 60_000;
/** How long the launcher waits for a rank to start joining: as long as a timer can count (~24.8 days). */
const JOIN_WATCH_MS = 24 * 24 * 3600 * 1000;

/** What ended the job: the launcher's exit code, and what to say. */
interface Failure {
  readonly exitCode: number;
  readonly what: string;
  /** The error code it is reported with, if it is one of symmkit's. */
  readonly code?: ErrorCode;
  /** What became of the other ranks (default: they were stopped). */
  readonly stopped?: string;
}

/** Runs the job; resolves with the launcher's exit code (the first failure's, or 0). */
export async function launch(o: LaunchOptions): Promise<number> {
  validate(o);
  const out = o.stdout ?? ((l: string) => void process.stdout.write(l + "\n"));
  const err = o.stderr ?? ((l: string) => void process.stderr.write(l + "\n"));
  const token = jobToken(o);
  const argv = rankArgv(o.command);
  // The store going away mid-job (its thread ended) fails the job; `fail` exists once the ranks start.
  let storeLost = (why: string): void => err(`symmkit run: the rendezvous store stopped: ${why}`);
  const server = o.nodeRank === 0 ? await startStore(o, token, (why) => storeLost(why)) : undefined;
  const port = server?.port ?? o.masterPort;
  const world = o.nnodes * o.nprocPerNode;
  // Node 0 learns from its store which ranks started joining and which joined (src/distributed/job.ts).
  let store: StoreClient | undefined;
  try {
    store =
      server && world > 1
        ? await StoreClient.connect({ host: o.masterAddr, port, token }, { timeoutMs: CONNECT_TIMEOUT_MS })
        : undefined;
  } catch (e) {
    await server?.close();
    throw e;
  }
  // Every host's launcher of a multi-host job watches the job's failure key and sets it when its own ranks
  // fail: two connections of its own (a connection answers in order, and the watch blocks one), made in
  // the background and as patiently as the ranks' own (node 0 may start long after this host).
  const connectHosts = (): Promise<StoreClient> =>
    StoreClient.connect(
      { host: o.masterAddr, port, token },
      { timeoutMs: readEnvVar("SYMMKIT_STORE_TIMEOUT_MS") },
    );
  const hosts =
    o.nnodes > 1
      ? Promise.all([connectHosts(), connectHosts()]).then(([watch, tell]) => ({ watch, tell }))
      : undefined;
  // A host that never reaches node 0's store cannot tell or hear of failures; its ranks fail on their own.
  hosts?.catch((e: unknown) => err(`symmkit run: cannot reach the other hosts: ${(e as Error).message}`));
  // The ranks' private socket directory, named by this process so that it can be told whose it is.
  const fdDir = fs.mkdtempSync(path.join(os.tmpdir(), `symmkit-job-${process.pid}-`));
  fs.chmodSync(fdDir, 0o700);
  const sentinel = removeWhenGone(fdDir);

  const children: { rank: number; proc: ChildProcess; exited: boolean }[] = [];
  let firstFailure: Failure | undefined;
  let interrupted: NodeJS.Signals | undefined;
  let killTimer: NodeJS.Timeout | undefined;
  let ended = false;

  const signalAll = (sig: NodeJS.Signals): void => {
    for (const c of children) {
      if (c.exited || c.proc.pid === undefined) continue;
      try {
        process.kill(-c.proc.pid, sig); // the rank's whole process group
      } catch {
        // already gone
      }
    }
  };
  const running = (): string =>
    children
      .filter((c) => !c.exited && c.proc.pid !== undefined)
      .map((c) => c.rank)
      .join(", ");
  const teardown = (): void => {
    if (killTimer || !running()) return;
    err(`symmkit run: stopping ranks ${running()} (SIGTERM, then SIGKILL after ${o.graceMs} ms)`);
    signalAll("SIGTERM");
    killTimer = setTimeout(() => {
      if (running()) err(`symmkit run: ranks ${running()} still running after ${o.graceMs} ms: SIGKILL`);
      signalAll("SIGKILL");
    }, o.graceMs);
  };
  let announced: Promise<void> | undefined;
  const fail = (f: Failure, fromHost?: number): void => {
    if (firstFailure || ended) return;
    firstFailure = f;
    if (!interrupted) teardown();
    // The first failure on this host is the job's, unless another host's came first.
    if (hosts && fromHost === undefined)
      announced = hosts
        .then((h) =>
          h.tell.compareSet(JOB_FAILED_KEY, undefined, JSON.stringify({ node: o.nodeRank, what: f.what })),
        )
        .then(
          () => undefined,
          (e: unknown) => err(`symmkit run: could not tell the other hosts: ${(e as Error).message}`),
        );
  };
  storeLost = (why) => fail({ exitCode: 1, what: `the rendezvous store stopped (${why})` });
  const watchHosts = async (client: StoreClient): Promise<void> => {
    for (;;) {
      try {
        await client.wait([JOB_FAILED_KEY], { timeoutMs: FAILED_WATCH_MS });
      } catch (e) {
        if (e instanceof StoreTimeoutError && !ended) continue;
        // Node 0's store is gone: the job ended there (its ranks tell of anything worse themselves).
        return;
      }
      const { node, what } = JSON.parse((await client.get(JOB_FAILED_KEY)).toString()) as {
        node: number;
        what: string;
      };
      if (node !== o.nodeRank) fail({ exitCode: 1, what: `node ${node} failed the job: ${what}` }, node);
      return;
    }
  };
  hosts
    ?.then((h) => watchHosts(h.watch))
    .catch((e: unknown) => {
      if (!ended) err(`symmkit run: could not read the other hosts' failure: ${(e as Error).message}`);
    });
  const onSignal = (sig: NodeJS.Signals): void => {
    interrupted ??= sig;
    err(`symmkit run: ${sig} received, stopping all ranks`);
    signalAll(sig);
    killTimer ??= setTimeout(() => signalAll("SIGKILL"), o.graceMs);
  };
  const lastResort = (): void => signalAll("SIGKILL");
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  process.on("exit", lastResort);

  // A rank that exits 0 without having joined is fine while no rank joins (a job that never calls
  // init()); once one starts joining, it would wait for the missing rank until the store timeout.
  const toCheck: number[] = [];
  const notJoined = new Set<number>();
  let watching = false;
  const watchJoins = async (client: StoreClient): Promise<void> => {
    for (let ranks = toCheck.splice(0); ranks.length; ranks = toCheck.splice(0)) {
      const joined = await Promise.all(ranks.map((r) => client.tryGet(joinedKey(r))));
      ranks.forEach((r, i) => !joined[i] && notJoined.add(r));
    }
    if (notJoined.size === 0) {
      watching = false;
      return;
    }
    await client.wait([JOINING_KEY], { timeoutMs: JOIN_WATCH_MS });
    const first = Math.min(...notJoined);
    const gone = new Set(children.filter((c) => c.exited).map((c) => c.rank));
    const others = Array.from({ length: world }, (_, r) => r).filter((r) => !gone.has(r));
    const started = await Promise.all(others.map((r) => client.tryGet(joiningKey(r))));
    const waiting = others.filter((_, i) => started[i]);
    const who = waiting.length
      ? `${ranksNamed(waiting)} ${waiting.length === 1 ? "is" : "are"}`
      : "a rank that joins would be";
    const pid = children.find((c) => c.rank === first)?.proc.pid;
    fail({
      exitCode: 1,
      what:
        `rank ${first} (pid ${pid}) exited with code 0 before joining the group (init()); ` +
        `${who} waiting for it (every rank must call init(), or none)`,
    });
  };
  const exitedClean = (rank: number): void => {
    if (!store) return;
    toCheck.push(rank);
    if (watching) return;
    watching = true;
    watchJoins(store).catch((e: unknown) => {
      if (!ended) err(`symmkit run: lost track of which ranks joined: ${(e as Error).message}`);
    });
  };

  // A rank that gave up waiting for others to join left its verdict in the store (src/distributed/job.ts):
  // the ranks it names are the job's culprits, not the rank that waited for them.
  const verdictStore: Promise<StoreClient | undefined> = store
    ? Promise.resolve(store)
    : (hosts?.then((h) => h.tell).catch(() => undefined) ?? Promise.resolve(undefined));
  const neverJoined = async (e: RankExit): Promise<string | undefined> => {
    const client = await verdictStore;
    const found = await client?.tryGet(joinTimeoutKey(e.rank));
    if (!found) return undefined;
    const v = JSON.parse(found.toString()) as JoinVerdict;
    const withPid = (r: number): string => {
      const pid = children.find((c) => c.rank === r)?.proc.pid;
      return pid === undefined ? String(r) : `${r} (pid ${pid})`;
    };
    const late = v.missing.filter((r) => !v.notStarted.includes(r));
    const who = (ranks: readonly number[]): string => (v.missing.length === 1 ? "it" : ranksNamed(ranks));
    const why = [
      v.notStarted.length > 0 && `${who(v.notStarted)} had not called init()`,
      late.length > 0 && `${who(late)} had started joining but not finished`,
    ].filter(Boolean);
    const them = v.missing.length === 1 ? "it" : "them";
    return (
      `${v.missing.length === 1 ? "rank" : "ranks"} ${v.missing.map(withPid).join(", ")} never joined the ` +
      `group (${why.join("; ")}); ${describeExit(e)} after waiting ${v.timeoutMs} ms for ${them}`
    );
  };
  /** How long the launcher looks for a failed rank's verdict before it reports the failure plainly. */
  const VERDICT_WAIT_MS = 2000;
  const failedExit = async (e: RankExit): Promise<void> => {
    const culprits = await Promise.race([
      neverJoined(e).catch(() => undefined),
      new Promise<undefined>((done) => setTimeout(() => done(undefined), VERDICT_WAIT_MS).unref()),
    ]);
    fail({ exitCode: exitCodeOf(e), what: culprits ?? `${describeExit(e)} first` });
  };

  const env = (rank: number, local: number): NodeJS.ProcessEnv => ({
    ...process.env,
    RANK: String(rank),
    WORLD_SIZE: String(world),
    LOCAL_RANK: String(local),
    LOCAL_WORLD_SIZE: String(o.nprocPerNode),
    MASTER_ADDR: o.masterAddr,
    MASTER_PORT: String(port),
    SYMMKIT_JOB_TOKEN: token,
    SYMMKIT_LAUNCHER_PID: String(process.pid),
    SYMMKIT_FD_DIR: fdDir,
    // NVLink multicast can take a shared host out of service: off unless the user says otherwise.
    NCCL_NVLS_ENABLE: process.env.NCCL_NVLS_ENABLE ?? "0",
    ...(o.shareGpus ? shareGpusEnv(rank) : {}),
  });
  const startFailed = (rank: number, e: NodeJS.ErrnoException): void => {
    const others = children.some((c) => c.rank !== rank && c.proc.pid !== undefined);
    fail({
      exitCode: 127,
      what: `rank ${rank} could not start ${argv[0]}: ${startFailure(e)}`,
      code: START_FAILURE_CODE,
      stopped: others ? "the ranks started before it were stopped" : "no rank was started",
    });
  };
  // Once one rank could not start, the rest are not started: the job is over.
  let unstartable = false;
  const start = (local: number): Promise<void> => {
    const rank = o.nodeRank * o.nprocPerNode + local;
    if (unstartable || firstFailure) return Promise.resolve();
    let proc: ChildProcess;
    try {
      proc = spawn(argv[0]!, argv.slice(1), {
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
        env: env(rank, local),
      });
    } catch (e) {
      // Node throws what it cannot report as an "error" event (an argument list too long, say).
      unstartable = true;
      startFailed(rank, e as NodeJS.ErrnoException);
      return Promise.resolve();
    }
    const entry = { rank, proc, exited: false };
    children.push(entry);
    // Without a pid the process never started (out of file descriptors or processes, no such file): the
    // "error" event that follows says why, and it has no pipes to read.
    const { stdout, stderr } = proc;
    if (proc.pid === undefined || !stdout || !stderr) {
      unstartable = true;
      entry.exited = true;
      stdout?.destroy();
      stderr?.destroy();
      return new Promise<void>((resolve) =>
        proc.once("error", (e) => {
          startFailed(rank, e);
          resolve();
        }),
      );
    }
    readline.createInterface({ input: stdout }).on("line", (l) => out(`[rank ${rank}] ${l}`));
    readline.createInterface({ input: stderr }).on("line", (l) => err(`[rank ${rank}] ${l}`));
    // The rank is done once it exited and its pipes closed: "exit" can come while the pipes still hold
    // its last lines. A process the rank started outside its group could hold them open after the rank
    // is gone: give them a moment to drain, then stop reading, so the launcher never waits on them.
    const drained = Promise.all(
      [stdout, stderr].map((s) => new Promise<void>((done) => s.once("close", () => done()))),
    );
    const release = (): NodeJS.Timeout =>
      setTimeout(() => {
        stdout.destroy();
        stderr.destroy();
      }, 3000).unref();
    return new Promise<void>((resolve) => {
      // A process that started can still fail to be killed or waited for: nothing the job can act on.
      proc.on("error", () => undefined);
      proc.on("exit", (code, signal) => {
        entry.exited = true;
        release();
        const e: RankExit = { rank, pid: proc.pid!, code, signal };
        let judged: Promise<void> | undefined;
        if (code !== 0 || signal) judged = failedExit(e);
        else exitedClean(rank);
        // The rank itself is gone; anything it left in its group goes too.
        try {
          process.kill(-proc.pid!, "SIGKILL");
        } catch {
          // nothing left
        }
        void Promise.all([drained, judged]).then(() => resolve());
      });
    });
  };
  const exits = Array.from({ length: o.nprocPerNode }, (_, local) => start(local));

  await Promise.all(exits);
  ended = true;
  if (killTimer) clearTimeout(killTimer);
  process.off("SIGINT", onSignal);
  process.off("SIGTERM", onSignal);
  process.off("exit", lastResort);
  // The other hosts learn of this host's failure before the connection closes (unless node 0's store was
  // never reached: then not for longer than the grace).
  if (announced) await Promise.race([announced, new Promise((done) => setTimeout(done, o.graceMs).unref())]);
  void hosts?.then(
    (h) => {
      h.watch.close();
      h.tell.close();
    },
    () => undefined,
  );
  store?.close();
  await server?.close();
  fs.rmSync(fdDir, { recursive: true, force: true });
  sentinel.end();
  if (interrupted) {
    err(`symmkit run: stopped by ${interrupted}`);
    return 128 + (SIGNAL_NUMBERS[interrupted] ?? 1);
  }
  if (firstFailure) {
    const { what, code, stopped } = firstFailure;
    err(`symmkit run: ${what}; ${stopped ?? "the other ranks were stopped"}${code ? ` [${code}]` : ""}`);
    return firstFailure.exitCode;
  }
  return 0;
}

/**
 * What a rank of a --share-gpus job gets. NCCL refuses two ranks on one GPU of one host ("Duplicate GPU
 * detected"); a host id of its own per rank makes NCCL see separate hosts and connect them through sockets.
 */
function shareGpusEnv(rank: number): Record<string, string> {
  return { SYMMKIT_SHARE_GPUS: "1", NCCL_HOSTID: `symmkit-shared-gpu-rank-${rank}` };
}

/** A whole number from `min` to `max`, as a commander option parser. */
function wholeNumber(min: number, max = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || n < min || n > max) {
      const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
      throw new CommanderInvalidArgument(`Expected a whole number ${range}.`);
    }
    return n;
  };
}

/**
 * Declares `symmkit run`'s options and operands on `cmd`: the CLI's command, or parseRunArgs' own. Options
 * come first; the first operand (or everything after `--`) starts the command, passed through untouched.
 */
export function declareRunOptions<C extends Command>(cmd: C): C {
  return cmd
    .usage("[options] <script> [args...]\n       symmkit run [options] -- <command> [args...]")
    .option("-n, --nproc-per-node <N>", "ranks on this node", wholeNumber(1), 1)
    .option("--nnodes <M>", "nodes in the job", wholeNumber(1), 1)
    .option("--node-rank <R>", "this node's index, 0 to M - 1", wholeNumber(0), 0)
    .option("--master-addr <A>", "node 0's address, where it serves the rendezvous store", "127.0.0.1")
    .option(
      "--master-port <P>",
      "the rendezvous store's port; 0 picks a free one (one node only)",
      wholeNumber(0, 65535),
      0,
    )
    .option("--grace-ms <T>", "between SIGTERM and SIGKILL when the ranks are stopped", wholeNumber(0), 5000)
    .option(
      "--share-gpus",
      "let more ranks than GPUs run, sharing them round-robin (time-sliced: to test multi-rank code " +
        "on fewer GPUs; NCCL goes through sockets, timings mean nothing and benchmarks refuse)",
    )
    .argument("<command...>", "the script or command each rank runs, and its own arguments")
    .passThroughOptions()
    .addHelpText(
      "after",
      // What rankArgv does with the command.
      `
A script ending in .js, .mjs or .cjs runs with this Node; one ending in .ts, .mts or .cts too,
on Node >= 22.6 (with --experimental-strip-types). Anything else runs as a command: name it after
--, which ends symmkit run's options, e.g.
  symmkit run -n 2 train.js --lr 3e-4          (train.js gets --lr 3e-4)
  symmkit run -n 2 -- python3 x.py
  symmkit run -n 2 -- symmkit bench all-reduce
Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT.`,
    );
}

/** The launch options `cmd` (declared by declareRunOptions) parsed, checked together. */
export function launchOptionsOf(cmd: Command): LaunchOptions {
  // The options' names are LaunchOptions' own (commander camel-cases --nproc-per-node and the others).
  const options: LaunchOptions = { ...cmd.opts<Omit<LaunchOptions, "command">>(), command: cmd.args };
  validate(options);
  return options;
}

/** Parses `symmkit run` arguments: options up to the script (or `--`), the rest is the command. */
export function parseRunArgs(argv: readonly string[]): LaunchOptions {
  const cmd = declareRunOptions(new Command("run"))
    .helpOption(false)
    .exitOverride()
    .configureOutput({ outputError: () => undefined });
  try {
    cmd.parse([...argv], { from: "user" });
  } catch (e) {
    if (e instanceof CommanderError)
      throw new InvalidArgumentError(
        `symmkit run: ${e.message.replace(/^error: /, "").replaceAll("\n", " ")}`,
      );
    throw e;
  }
  return launchOptionsOf(cmd);
}
