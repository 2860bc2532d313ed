// `symmkit run`: starts one process per local rank with the torchrun-style environment, serves the
// rendezvous store (node 0), prefixes every output line with its rank, and tears the whole job down when
// any rank fails. Each rank runs in a process group of its own, so that teardown reaches whatever it
// started; no process outlives the launcher.
import { spawn, type ChildProcess } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { InvalidArgumentError, SymmkitError } from "../errors.js";
import { readEnvVar } from "../settings.js";
import { StoreServer } from "./store/server.js";

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

/** Runs the job; resolves with the launcher's exit code (the first failure's, or 0). */
export async function launch(o: LaunchOptions): Promise<number> {
  validate(o);
  const out = o.stdout ?? ((l: string) => void process.stdout.write(l + "\n"));
  const err = o.stderr ?? ((l: string) => void process.stderr.write(l + "\n"));
  const token = jobToken(o);
  const server =
    o.nodeRank === 0
      ? await StoreServer.start({
          token,
          port: o.masterPort,
          host: o.nnodes > 1 ? o.masterAddr : "127.0.0.1",
        })
      : undefined;
  const port = server?.port ?? o.masterPort;
  const world = o.nnodes * o.nprocPerNode;
  // The ranks' private socket directory: made here so that it goes away with the job, however it ends.
  const fdDir = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-job-"));
  fs.chmodSync(fdDir, 0o700);
  const [file, ...args] = o.command as [string, ...string[]];
  const argv =
    file.endsWith(".js") || file.endsWith(".mjs") ? [process.execPath, file, ...args] : [file, ...args];

  const children: { rank: number; proc: ChildProcess; exited: boolean }[] = [];
  let firstFailure: RankExit | undefined;
  let interrupted: NodeJS.Signals | undefined;
  let killTimer: NodeJS.Timeout | undefined;

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
      .filter((c) => !c.exited)
      .map((c) => c.rank)
      .join(", ");
  const teardown = (): void => {
    if (killTimer) return;
    err(`symmkit run: stopping ranks ${running()} (SIGTERM, then SIGKILL after ${o.graceMs} ms)`);
    signalAll("SIGTERM");
    killTimer = setTimeout(() => {
      if (running()) err(`symmkit run: ranks ${running()} still running after ${o.graceMs} ms: SIGKILL`);
      signalAll("SIGKILL");
    }, o.graceMs);
  };
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

  const exits = Array.from({ length: o.nprocPerNode }, (_, local) => {
    const rank = o.nodeRank * o.nprocPerNode + local;
    const proc = spawn(argv[0]!, argv.slice(1), {
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
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
      },
    });
    const entry = { rank, proc, exited: false };
    children.push(entry);
    readline.createInterface({ input: proc.stdout }).on("line", (l) => out(`[rank ${rank}] ${l}`));
    readline.createInterface({ input: proc.stderr }).on("line", (l) => err(`[rank ${rank}] ${l}`));
    // The rank is done once it exited and its pipes closed: "exit" can come while the pipes still hold
    // its last lines. A process the rank started outside its group could hold them open after the rank
    // is gone: give them a moment to drain, then stop reading, so the launcher never waits on them.
    const drained = Promise.all(
      [proc.stdout, proc.stderr].map((s) => new Promise<void>((done) => s.once("close", () => done()))),
    );
    const release = (): NodeJS.Timeout =>
      setTimeout(() => {
        proc.stdout.destroy();
        proc.stderr.destroy();
      }, 3000).unref();
    return new Promise<RankExit>((resolve) => {
      proc.on("error", (e) => {
        err(`symmkit run: rank ${rank} could not start ${argv[0]}: ${e.message}`);
        entry.exited = true;
        firstFailure ??= { rank, pid: proc.pid ?? -1, code: 127, signal: null };
        teardown();
        resolve({ rank, pid: proc.pid ?? -1, code: 127, signal: null });
      });
      proc.on("exit", (code, signal) => {
        entry.exited = true;
        release();
        const e: RankExit = { rank, pid: proc.pid!, code, signal };
        if ((code !== 0 || signal) && !firstFailure) {
          firstFailure = e;
          if (!interrupted) teardown();
        }
        // The rank itself is gone; anything it left in its group goes too.
        try {
          process.kill(-proc.pid!, "SIGKILL");
        } catch {
          // nothing left
        }
        void drained.then(() => resolve(e));
      });
    });
  });

  await Promise.all(exits);
  if (killTimer) clearTimeout(killTimer);
  process.off("SIGINT", onSignal);
  process.off("SIGTERM", onSignal);
  process.off("exit", lastResort);
  await server?.close();
  fs.rmSync(fdDir, { recursive: true, force: true });
  if (interrupted) {
    err(`symmkit run: stopped by ${interrupted}`);
    return 128 + (SIGNAL_NUMBERS[interrupted] ?? 1);
  }
  if (firstFailure) {
    err(`symmkit run: ${describeExit(firstFailure)} first; the other ranks were stopped`);
    return exitCodeOf(firstFailure);
  }
  return 0;
}

/** Parses `symmkit run` arguments: options up to the script (or `--`), the rest is the command. */
export function parseRunArgs(argv: readonly string[]): LaunchOptions {
  const o = {
    nprocPerNode: 1,
    nnodes: 1,
    nodeRank: 0,
    masterAddr: "127.0.0.1",
    masterPort: 0,
    graceMs: 5000,
  };
  const num = (flag: string, v: string | undefined): number => {
    if (v === undefined || !/^\d+$/.test(v))
      throw new InvalidArgumentError(`${flag} needs a non-negative integer, got ${v}`);
    return Number(v);
  };
  let i = 0;
  for (; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--") {
      i++;
      break;
    }
    if (!a.startsWith("-")) break;
    const [flag, inline] = a.includes("=")
      ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)]
      : [a, undefined];
    const value = (): string | undefined => inline ?? argv[++i];
    switch (flag) {
      case "-n":
      case "--nproc-per-node":
        o.nprocPerNode = num(flag, value());
        break;
      case "--nnodes":
        o.nnodes = num(flag, value());
        break;
      case "--node-rank":
        o.nodeRank = num(flag, value());
        break;
      case "--master-addr":
        o.masterAddr = value() ?? "";
        break;
      case "--master-port":
        o.masterPort = num(flag, value());
        break;
      case "--grace-ms":
        o.graceMs = num(flag, value());
        break;
      default:
        throw new InvalidArgumentError(`symmkit run: unknown option ${flag}`);
    }
  }
  return { ...o, command: argv.slice(i) };
}
