// init() and ProcessGroup: who this rank is, the store every rank shares, the GPU it drives (from
// LOCAL_RANK), NCCL, and symmetric memory. A group made by newGroup() shares the process's store
// connection and descriptor exchange; it has its own key space, communicator and allocations.
import { InvalidArgumentError, SymmkitError } from "../errors.js";
import { Device, deviceCount } from "../runtime/device.js";
import type { DType } from "../runtime/dtype.js";
import { defaultStream, type Stream } from "../runtime/stream.js";
import type { Shape } from "../runtime/tensor.js";
import { joinJob, type Job } from "./job.js";
import { NcclComm } from "./nccl-comm.js";
import { ScopedStore, subgroup } from "./scoped-store.js";
import { SymmetricTensor, type SymmetricOptions } from "./symmetric-memory.js";
import { SyncWatch, syncTimeoutFromEnv } from "./sync-watch.js";

export interface InitOptions {
  /** Only "cuda" exists so far; the CPU backend is its own piece of work. */
  readonly backend?: "cuda";
  /** Deadline of every store operation (default 300 s). */
  readonly storeTimeoutMs?: number;
  /** Deadline of every wait inside kernels (default 30 s, or SYMMKIT_SYNC_TIMEOUT_MS). */
  readonly syncTimeoutMs?: number;
}

/** What a group's collectives must offer the group: a collective dispose. */
export interface GroupCollectives {
  dispose(): Promise<void>;
}

/**
 * Makes a group's collectives. They live above this layer (src/ops); init() hands the factory in, and
 * every group, subgroups included, gets its own.
 */
export type CollectivesFactory<C extends GroupCollectives> = (group: ProcessGroup<C>) => Promise<C>;

/** What the world group owns and every subgroup shares. */
interface Shared<C extends GroupCollectives> extends Job {
  readonly device: Device;
  readonly watch: SyncWatch;
  readonly groupsMade: Map<string, number>;
  readonly makeCollectives: CollectivesFactory<C> | undefined;
}

export class ProcessGroup<C extends GroupCollectives = GroupCollectives> {
  readonly backend = "cuda" as const;
  /** Rank within this group. */
  readonly rank: number;
  readonly worldSize: number;
  /** Global rank of each member, in group-rank order. */
  readonly ranks: readonly number[];
  readonly store: ScopedStore;
  readonly #shared: Shared<C>;
  readonly #name: string;
  #comm: NcclComm | undefined;
  #collectives: C | undefined;
  #allocations = 0;
  #destroyed = false;

  private constructor(shared: Shared<C>, ranks: readonly number[], name: string, store: ScopedStore) {
    this.#shared = shared;
    this.ranks = ranks;
    this.rank = ranks.indexOf(shared.env.rank);
    this.worldSize = ranks.length;
    this.#name = name;
    this.store = store;
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

  get device(): Device {
    return this.#shared.device;
  }

  get watch(): SyncWatch {
    return this.#shared.watch;
  }

  /** The group's collectives (allReduce, allGather, reduceScatter), made when the group was. */
  get collectives(): C {
    if (!this.#collectives || this.#destroyed) {
      throw new SymmkitError(
        "SYMMKIT_INVALID_ARGUMENT",
        this.#destroyed
          ? "this process group was destroyed"
          : "this group has no collectives: join with init() from symmkit",
      );
    }
    return this.#collectives;
  }

  /** Collective: runs the collectives factory, then meets the other members. */
  async #ready(): Promise<this> {
    if (this.#shared.makeCollectives) this.#collectives = await this.#shared.makeCollectives(this);
    await this.barrier();
    return this;
  }

  /** Every member reaches this point (through the store; GPU work is not waited for). */
  barrier(): Promise<void> {
    return this.store.barrier("barrier");
  }

  /**
   * A group of the given global ranks, for its members (others get undefined). Members must call this
   * with the same list, in the same order relative to their other newGroup calls.
   */
  async newGroup(ranks: readonly number[]): Promise<ProcessGroup<C> | undefined> {
    const sub = subgroup(
      { name: this.#name, ranks: this.ranks, self: this.globalRank },
      ranks,
      this.#shared.groupsMade,
    );
    if (!sub) return undefined;
    const store = new ScopedStore(this.#shared.client, sub.name, sub.ranks.length);
    return new ProcessGroup<C>(this.#shared, sub.ranks, sub.name, store).#ready();
  }

  /** This group's NCCL communicator (collective on first use). */
  async nccl(): Promise<NcclComm> {
    this.#comm ??= await NcclComm.create(this.store, this.rank, this.worldSize, this.device, "comm");
    return this.#comm;
  }

  /** Symmetric allocations of this group. */
  readonly symmetric = {
    /** Collective: every member allocates the same shape and dtype, in the same order. */
    empty: (shape: Shape, dtype: DType, options: SymmetricOptions = {}): Promise<SymmetricTensor> => {
      const nodes = new Set(this.ranks.map((r) => Math.floor(r / this.localWorldSize)));
      if (nodes.size > 1) {
        throw new InvalidArgumentError(
          "symmetric memory spans the GPUs of one host; this group spans several (use NCCL between hosts)",
        );
      }
      return SymmetricTensor.allocate(
        {
          rank: this.rank,
          worldSize: this.worldSize,
          ranks: this.ranks,
          device: this.device,
          store: this.store,
          fds: this.#shared.fds,
          watch: this.#shared.watch,
          storeTimeoutMs: this.#shared.storeTimeoutMs,
        },
        this.#allocations++,
        shape,
        dtype,
        options,
      );
    },
  };

  /** Waits for `stream`; a kernel that gave up waiting for a peer becomes SymmTimeoutError naming it. */
  synchronize(stream: Stream = defaultStream(this.device)): void {
    this.#shared.watch.translate(() => stream.synchronize());
  }

  /** Collective. Frees the communicator; the world group also closes the store and the exchange. */
  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    await this.#collectives?.dispose();
    this.#comm?.destroy();
    await this.barrier();
    if (this.#name !== "world") return;
    for (const f of this.#shared.cleanup.reverse()) await f();
  }

  /** Made by init(). */
  static async world<C extends GroupCollectives = GroupCollectives>(
    options: InitOptions,
    makeCollectives?: CollectivesFactory<C>,
  ): Promise<ProcessGroup<C>> {
    if (options.backend !== undefined && options.backend !== "cuda") {
      throw new InvalidArgumentError(`backend ${String(options.backend)} is not the cuda backend`);
    }
    const job = await joinJob(
      options.storeTimeoutMs === undefined ? {} : { storeTimeoutMs: options.storeTimeoutMs },
    );
    const { env } = job;
    const visible = deviceCount();
    if (visible === 0)
      throw new SymmkitError(
        "SYMMKIT_NO_DEVICE",
        "no GPU is visible to this rank: the cuda backend needs one",
      );
    if (env.localRank >= visible) {
      throw new SymmkitError(
        "SYMMKIT_ENVIRONMENT",
        `LOCAL_RANK ${env.localRank} but this host shows ${visible} GPU(s): start at most ${visible} ranks per host`,
      );
    }
    const device = Device.get(env.localRank);
    Device.setDefault(device);
    const watch = SyncWatch.create(device, options.syncTimeoutMs ?? syncTimeoutFromEnv());
    job.cleanup.push(() => watch.dispose());
    const shared: Shared<C> = { ...job, device, watch, groupsMade: new Map(), makeCollectives };
    const ranks = Array.from({ length: env.worldSize }, (_, i) => i);
    return new ProcessGroup<C>(shared, ranks, "world", job.worldStore).#ready();
  }
}

/** Joins the job on the cuda backend: reads the environment, connects the store, takes LOCAL_RANK's GPU. */
export function initCuda(options: InitOptions = {}): Promise<ProcessGroup> {
  return ProcessGroup.world(options);
}
