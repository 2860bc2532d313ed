// The CPU backend's process group: the cuda group's interface (rank, worldSize, ranks, store, barrier,
// newGroup, symmetric, destroy) plus the collectives, on rank processes that share memory. Each group
// owns a symmetric staging buffer, made when the group is.
import { InvalidArgumentError } from "../errors.js";
import type { DType } from "../runtime/dtype.js";
import type { Shape } from "../runtime/tensor.js";
import { stagingBytesFromEnv } from "../distributed/env.js";
import { joinJob, type Job } from "../distributed/job.js";
import { ScopedStore, subgroup } from "../distributed/scoped-store.js";
import { syncTimeoutFromEnv } from "../distributed/sync-watch.js";
import { CpuCollectives } from "./collectives.js";
import { CpuSymmetricTensor } from "./symmetric.js";

export const DEFAULT_CPU_STAGING_BYTES = 8 * 1024 * 1024;

export interface CpuInitOptions {
  readonly backend?: "cpu";
  readonly storeTimeoutMs?: number;
  readonly syncTimeoutMs?: number;
  /** Bytes of each rank's staging buffer: the largest tensor a collective takes (default 8 MiB). */
  readonly stagingBytes?: number;
}

interface Shared extends Job {
  readonly syncTimeoutMs: number;
  readonly stagingBytes: number;
  readonly groupsMade: Map<string, number>;
}

export class CpuProcessGroup {
  readonly backend = "cpu" as const;
  readonly rank: number;
  readonly worldSize: number;
  readonly ranks: readonly number[];
  readonly store: ScopedStore;
  readonly #shared: Shared;
  readonly #name: string;
  #allocations = 0;
  #collectives: CpuCollectives | undefined;
  #staging: CpuSymmetricTensor | undefined;
  #destroyed = false;

  private constructor(shared: Shared, ranks: readonly number[], name: string, store: ScopedStore) {
    this.#shared = shared;
    this.ranks = ranks;
    this.rank = ranks.indexOf(shared.env.rank);
    this.worldSize = ranks.length;
    this.#name = name;
    this.store = store;
  }

  static async world(options: CpuInitOptions = {}): Promise<CpuProcessGroup> {
    const job = await joinJob(
      options.storeTimeoutMs === undefined ? {} : { storeTimeoutMs: options.storeTimeoutMs },
    );
    const stagingBytes = options.stagingBytes ?? stagingBytesFromEnv() ?? DEFAULT_CPU_STAGING_BYTES;
    const shared: Shared = {
      ...job,
      syncTimeoutMs: options.syncTimeoutMs ?? syncTimeoutFromEnv(),
      stagingBytes,
      groupsMade: new Map(),
    };
    const ranks = Array.from({ length: job.env.worldSize }, (_, i) => i);
    return CpuProcessGroup.#open(shared, ranks, "world", job.worldStore);
  }

  static async #open(
    shared: Shared,
    ranks: readonly number[],
    name: string,
    store: ScopedStore,
  ): Promise<CpuProcessGroup> {
    const g = new CpuProcessGroup(shared, ranks, name, store);
    g.#staging = await g.symmetric.empty([shared.stagingBytes], "u8");
    g.#collectives = new CpuCollectives(
      { rank: g.rank, world: g.worldSize, pads: g.#staging.pads, timeoutMs: shared.syncTimeoutMs },
      g.#staging,
    );
    await g.barrier();
    return g;
  }

  get globalRank(): number {
    return this.#shared.env.rank;
  }

  get localRank(): number {
    return this.#shared.env.localRank;
  }

  get localWorldSize(): number {
    return this.#shared.env.localWorldSize;
  }

  /** The collectives: allReduce, allGather, reduceScatter, broadcast, send, recv, barrier. */
  get collectives(): CpuCollectives {
    if (!this.#collectives || this.#destroyed)
      throw new InvalidArgumentError("this process group was destroyed");
    return this.#collectives;
  }

  /** Every member reaches this point (through the store). */
  barrier(): Promise<void> {
    return this.store.barrier("barrier");
  }

  readonly symmetric = {
    /** Collective: every member allocates the same shape and dtype, in the same order. */
    empty: (shape: Shape, dtype: DType): Promise<CpuSymmetricTensor> =>
      CpuSymmetricTensor.allocate(
        {
          rank: this.rank,
          worldSize: this.worldSize,
          ranks: this.ranks,
          store: this.store,
          fds: this.#shared.fds,
          storeTimeoutMs: this.#shared.storeTimeoutMs,
        },
        this.#allocations++,
        shape,
        dtype,
      ),
  };

  /** A group of the given global ranks, for its members (others get undefined); see ProcessGroup.newGroup. */
  async newGroup(ranks: readonly number[]): Promise<CpuProcessGroup | undefined> {
    const sub = subgroup(
      { name: this.#name, ranks: this.ranks, self: this.globalRank },
      ranks,
      this.#shared.groupsMade,
    );
    if (!sub) return undefined;
    const store = new ScopedStore(this.#shared.client, sub.name, sub.ranks.length);
    return CpuProcessGroup.#open(this.#shared, sub.ranks, sub.name, store);
  }

  /** Collective. Frees the staging buffer; the world group also leaves the job. */
  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    await this.#staging?.dispose();
    await this.barrier();
    if (this.#name !== "world") return;
    for (const f of this.#shared.cleanup.reverse()) await f();
  }
}
