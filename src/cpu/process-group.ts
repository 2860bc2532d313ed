// The CPU backend's process group: the lifecycle every backend shares (src/distributed/group-base.ts)
// plus symmetric host memory and the collectives, on rank processes that share memory. Each group owns
// a symmetric staging buffer, made when the group is.
import type { DType } from "../runtime/dtype.js";
import type { Shape } from "../runtime/tensor.js";
import { readDistEnv, stagingBytesFromEnv } from "../distributed/env.js";
import { UnsupportedError } from "../errors.js";
import { GroupBase, type GroupShared } from "../distributed/group-base.js";
import { joinJob } from "../distributed/job.js";
import type { ScopedStore } from "../distributed/scoped-store.js";
import { syncTimeoutFromEnv } from "../distributed/sync-watch.js";
import { CpuCollectives } from "./collectives.js";
import { HostTensor } from "./host-tensor.js";
import { CpuSymmetricTensor } from "./symmetric.js";

export const DEFAULT_CPU_STAGING_BYTES = 8 * 1024 * 1024;

export interface CpuInitOptions {
  readonly backend?: "cpu";
  readonly storeTimeoutMs?: number;
  readonly syncTimeoutMs?: number;
  /** Bytes of each rank's staging buffer: the largest tensor a collective takes (default 8 MiB). */
  readonly stagingBytes?: number;
}

interface Shared extends GroupShared {
  readonly syncTimeoutMs: number;
  readonly stagingBytes: number;
}

export class CpuProcessGroup extends GroupBase<Shared, CpuCollectives> {
  readonly backend = "cpu" as const;
  #allocations = 0;
  #staging: CpuSymmetricTensor | undefined;

  private constructor(shared: Shared, ranks: readonly number[], name: string, store: ScopedStore) {
    super(shared, ranks, name, store);
  }

  static async world(options: CpuInitOptions = {}): Promise<CpuProcessGroup> {
    // Refused before joining, alike on every rank of every host: no store connection is left open.
    const env = readDistEnv();
    if (env.worldSize > env.localWorldSize)
      throw new UnsupportedError(
        `the CPU backend shares memory between the rank processes of one host, and this job spans ` +
          `${env.worldSize / env.localWorldSize} hosts (WORLD_SIZE ${env.worldSize}, LOCAL_WORLD_SIZE ` +
          `${env.localWorldSize}): run it on one host (symmkit run -n ${env.worldSize})`,
      );
    const job = await joinJob(
      options.storeTimeoutMs === undefined ? {} : { storeTimeoutMs: options.storeTimeoutMs },
    );
    const stagingBytes = options.stagingBytes ?? stagingBytesFromEnv() ?? DEFAULT_CPU_STAGING_BYTES;
    const shared: Shared = {
      ...job,
      syncTimeoutMs: options.syncTimeoutMs ?? syncTimeoutFromEnv(),
      stagingBytes,
      groupsMade: new Map(),
      left: { value: false },
    };
    const ranks = Array.from({ length: job.env.worldSize }, (_, i) => i);
    return new CpuProcessGroup(shared, ranks, "world", job.worldStore).#open();
  }

  /** Collective: the staging buffer, then the collectives on it, then the members meet. */
  #open(): Promise<this> {
    return this.ready(async () => {
      const staging = await this.symmetric.empty([this.shared.stagingBytes], "u8");
      this.#staging = staging;
      const sync = {
        rank: this.rank,
        world: this.worldSize,
        pads: staging.pads,
        timeoutMs: this.shared.syncTimeoutMs,
      };
      return new CpuCollectives(sync, staging);
    });
  }

  protected openSubgroup(ranks: readonly number[], name: string, store: ScopedStore): Promise<this> {
    return (new CpuProcessGroup(this.shared, ranks, name, store) as this).#open();
  }

  /** HostTensor's constructors: the tensors this group's collectives take. */
  readonly tensors = HostTensor;

  readonly symmetric = {
    /** Collective: every member allocates the same shape and dtype, in the same order. */
    empty: async (shape: Shape, dtype: DType): Promise<CpuSymmetricTensor> => {
      this.checkAlive();
      return CpuSymmetricTensor.allocate(
        {
          rank: this.rank,
          worldSize: this.worldSize,
          ranks: this.ranks,
          store: this.store,
          fds: this.shared.fds,
          storeTimeoutMs: this.shared.storeTimeoutMs,
          label: this.allocationLabel,
        },
        this.#allocations++,
        shape,
        dtype,
      );
    },
  };

  /** Frees the staging buffer. */
  protected async release(): Promise<void> {
    await this.#staging?.dispose();
  }
}
