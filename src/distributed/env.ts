// The torchrun-style environment a rank is started with (symmkit run sets it), and the store keys by
// which ranks tell their launcher how far they got in joining the job.
import { SymmkitError } from "../errors.js";
import { readEnvVar, type Env } from "../settings.js";

export interface DistEnv {
  readonly rank: number;
  readonly worldSize: number;
  readonly localRank: number;
  readonly localWorldSize: number;
  readonly masterAddr: string;
  readonly masterPort: number;
  /** Shared secret for the store; absent when not started by symmkit run. */
  readonly token: string | undefined;
  readonly launcherPid: number | undefined;
  /** symmkit run --share-gpus: local ranks beyond the host's GPUs share them (SYMMKIT_SHARE_GPUS). */
  readonly shareGpus: boolean;
}

function int(env: Env, name: string, min: number): number {
  const v = env[name];
  if (v === undefined || !/^\d+$/.test(v) || Number(v) < min) {
    throw new SymmkitError(
      "SYMMKIT_ENVIRONMENT",
      `${name} must be an integer >= ${min}, got ${v ?? "nothing"}; start ranks with symmkit run`,
    );
  }
  return Number(v);
}

/** Reads the environment; a process started alone (no WORLD_SIZE) is rank 0 of 1. */
export function readDistEnv(env: Env = process.env): DistEnv {
  const launcherPid = readEnvVar("SYMMKIT_LAUNCHER_PID", env);
  if (env.WORLD_SIZE === undefined) {
    return {
      rank: 0,
      worldSize: 1,
      localRank: 0,
      localWorldSize: 1,
      masterAddr: "127.0.0.1",
      masterPort: 0,
      token: undefined,
      launcherPid,
      shareGpus: false,
    };
  }
  const worldSize = int(env, "WORLD_SIZE", 1);
  const rank = int(env, "RANK", 0);
  const localWorldSize = int(env, "LOCAL_WORLD_SIZE", 1);
  const localRank = int(env, "LOCAL_RANK", 0);
  if (rank >= worldSize || localRank >= localWorldSize || worldSize % localWorldSize !== 0) {
    throw new SymmkitError(
      "SYMMKIT_ENVIRONMENT",
      `inconsistent launch environment: RANK ${rank}, WORLD_SIZE ${worldSize}, LOCAL_RANK ${localRank}, LOCAL_WORLD_SIZE ${localWorldSize}`,
    );
  }
  return {
    rank,
    worldSize,
    localRank,
    localWorldSize,
    masterAddr: env.MASTER_ADDR ?? "127.0.0.1",
    masterPort: worldSize > 1 ? int(env, "MASTER_PORT", 1) : Number(env.MASTER_PORT ?? 0),
    token: readEnvVar("SYMMKIT_JOB_TOKEN", env),
    launcherPid,
    shareGpus: readEnvVar("SYMMKIT_SHARE_GPUS", env),
  };
}

/** SYMMKIT_STAGING_BYTES (src/settings.ts): each rank's staging buffer for collectives, or undefined. */
export function stagingBytesFromEnv(env: Env = process.env): number | undefined {
  return readEnvVar("SYMMKIT_STAGING_BYTES", env);
}

/** Set by each rank as it starts joining (src/distributed/job.ts): from then on, it waits for every other. */
export const JOINING_KEY = "symmkit/joining";
/** Set by rank `rank` once it starts joining. */
export const joiningKey = (rank: number): string => `${JOINING_KEY}/${rank}`;
/** Set by rank `rank` once it has joined. */
export const joinedKey = (rank: number): string => `symmkit/joined/${rank}`;
/**
 * Set by rank `rank` when it gave up waiting for the others to join: `JoinVerdict` as JSON, which the
 * launcher reads to name the ranks that never joined rather than the one that waited for them.
 */
export const joinTimeoutKey = (rank: number): string => `symmkit/join-timeout/${rank}`;

/** What a rank that gave up waiting for the others to join leaves at joinTimeoutKey. */
export interface JoinVerdict {
  /** The ranks that had not joined at the deadline. */
  readonly missing: readonly number[];
  /** Of those, the ones that had not even started joining (had not called init()). */
  readonly notStarted: readonly number[];
  readonly timeoutMs: number;
}
