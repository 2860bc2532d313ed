// Joining a job, for either backend: the launch environment, the rendezvous store (served by the
// launcher, by a child process of rank 0, or in-process for a lone rank), the parent-death signal, and
// the exchange of file descriptors between the ranks of a host.
import { spawn, type ChildProcess } from "node:child_process";
import crypto from "node:crypto";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";
import { SymmkitError } from "../errors.js";
import { libc, PR_SET_PDEATHSIG } from "../cuda/libc.js";
import { readEnvVar } from "../settings.js";
import {
  joinedKey,
  JOINING_KEY,
  joiningKey,
  joinTimeoutKey,
  readDistEnv,
  type DistEnv,
  type JoinVerdict,
} from "./env.js";
import { FdExchange } from "./fd-exchange.js";
import { ScopedStore } from "./scoped-store.js";
import { StoreClient, StoreTimeoutError } from "./store/client.js";
import { StoreServer } from "./store/server.js";

/** "rank 2" or "ranks 0, 1". */
const ranksNamed = (ranks: readonly number[]): string =>
  `${ranks.length === 1 ? "rank" : "ranks"} ${ranks.join(", ")}`;

export interface Job {
  readonly env: DistEnv;
  readonly client: StoreClient;
  readonly storeTimeoutMs: number;
  readonly worldStore: ScopedStore;
  /** The ranks of this host. */
  readonly hostStore: ScopedStore;
  readonly fds: FdExchange;
  /** Undone in reverse order when the world group is destroyed. */
  readonly cleanup: (() => Promise<void> | void)[];
}

export async function joinJob(options: { storeTimeoutMs?: number } = {}): Promise<Job> {
  const env = readDistEnv();
  const storeTimeoutMs = options.storeTimeoutMs ?? readEnvVar("SYMMKIT_STORE_TIMEOUT_MS");
  const cleanup: (() => Promise<void> | void)[] = [];
  if (env.launcherPid !== undefined) dieWithLauncher(env.launcherPid);
  const { client, stop } = await connectStore(env, storeTimeoutMs);
  cleanup.push(stop, () => client.close());
  // The launcher learns who is joining and who has joined: a rank that exits without joining while
  // others wait for it then fails the job at once, rather than at the store timeout.
  await Promise.all([client.set(joiningKey(env.rank), "1"), client.set(JOINING_KEY, "1")]);
  const worldStore = new ScopedStore(client, "world", env.worldSize);
  const node = Math.floor(env.rank / env.localWorldSize);
  const hostStore = worldStore.scope(`node${node}`, env.localWorldSize);
  const fds = await FdExchange.open(worldStore, env.rank, env.localRank, node);
  cleanup.push(() => fds.close(() => hostStore.barrier("fd-close")));
  await client.set(joinedKey(env.rank), "1");
  try {
    await waitForOthers(client, env, storeTimeoutMs);
  } catch (e) {
    // The job cannot go on: leave it without waiting for the ranks that are missing.
    await fds.close(() => Promise.resolve()).catch(() => undefined);
    client.close();
    await stop();
    throw e;
  }
  return { env, client, storeTimeoutMs, worldStore, hostStore, fds, cleanup };
}

/**
 * Every rank has joined: the first place a rank waits for the others, so that one missing is named here
 * (and to the launcher, through joinTimeoutKey), not in some later wait on a key it never set.
 */
async function waitForOthers(client: StoreClient, env: DistEnv, timeoutMs: number): Promise<void> {
  const ranks = Array.from({ length: env.worldSize }, (_, r) => r);
  try {
    await client.wait(ranks.map(joinedKey), { timeoutMs });
  } catch (e) {
    if (!(e instanceof StoreTimeoutError)) throw e;
    const missing = ranks.filter((r) => e.keys.includes(joinedKey(r)));
    const started = await Promise.all(missing.map((r) => client.tryGet(joiningKey(r))));
    const notStarted = missing.filter((_, i) => started[i] === undefined);
    const verdict: JoinVerdict = { missing, notStarted, timeoutMs };
    // For the launcher to name them; the rank says it anyway.
    await client.set(joinTimeoutKey(env.rank), JSON.stringify(verdict)).catch(() => undefined);
    const late = missing.filter((r) => !notStarted.includes(r));
    const why = [
      notStarted.length > 0 &&
        `${ranksNamed(notStarted)} never started joining (${notStarted.length === 1 ? "has it" : "have they"} called init()?)`,
      late.length > 0 && `${ranksNamed(late)} started joining but did not finish`,
    ].filter(Boolean);
    throw new StoreTimeoutError(
      `joining the group on rank ${env.rank}`,
      e.keys,
      timeoutMs,
      `${why.join("; ")}. Every rank must call init(); if one is only slow to get there, raise ` +
        "SYMMKIT_STORE_TIMEOUT_MS (or init({ storeTimeoutMs }))",
    );
  }
}

/** If the launcher dies, so does this rank (Linux parent-death signal). */
function dieWithLauncher(launcherPid: number): void {
  libc().prctl(PR_SET_PDEATHSIG, 15, 0, 0, 0);
  if (process.ppid !== launcherPid) {
    process.stderr.write("symmkit: the launcher is gone; exiting\n");
    process.exit(1);
  }
}

async function connectStore(
  env: DistEnv,
  timeoutMs: number,
): Promise<{ client: StoreClient; stop: () => Promise<void> | void }> {
  if (env.worldSize === 1 && env.token === undefined) {
    // A lone rank's store listens on loopback, but other local users could reach it: a fresh secret.
    const token = crypto.randomBytes(24).toString("hex");
    const server = await StoreServer.start({ token });
    const client = await StoreClient.connect({ host: "127.0.0.1", port: server.port, token }, { timeoutMs });
    return { client, stop: () => server.close() };
  }
  if (env.token === undefined) {
    throw new SymmkitError(
      "SYMMKIT_ENVIRONMENT",
      "no SYMMKIT_JOB_TOKEN: start the ranks with symmkit run, or give every rank the same SYMMKIT_JOB_TOKEN",
    );
  }
  let child: ChildProcess | undefined;
  let port = env.masterPort;
  if (env.launcherPid === undefined && env.rank === 0) ({ child, port } = await startStoreProcess(env));
  const client = await StoreClient.connect({ host: env.masterAddr, port, token: env.token }, { timeoutMs });
  return { client, stop: () => void child?.stdin?.end() };
}

async function startStoreProcess(env: DistEnv): Promise<{ child: ChildProcess; port: number }> {
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), "store", "standalone.js");
  // A small young generation: a flood of strangers' connections then costs the store little memory, and
  // briefly (src/distributed/store/thread.ts says the same of the launcher's).
  const child = spawn(process.execPath, ["--max-semi-space-size=1", script], {
    stdio: ["pipe", "pipe", "inherit"],
    env: { ...process.env, MASTER_PORT: String(env.masterPort) },
  });
  const first = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: child.stdout }).once("line", resolve);
    child.once("exit", (code) =>
      reject(new SymmkitError("SYMMKIT_STORE_CLOSED", `the store process exited with ${code}`)),
    );
  });
  return { child, port: Number(first.split(" ")[1]) };
}
