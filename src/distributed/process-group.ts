// ProcessGroup, the cuda backend's group: the lifecycle every backend shares (group-base.ts), the GPU it
// drives (from LOCAL_RANK), NCCL, and symmetric memory. A group made by newGroup() shares the process's store
// connection and descriptor exchange; it has its own key space, communicator and allocations.
import { InvalidArgumentError, SymmkitError } from "../errors.js";
import { Device, deviceCount } from "../runtime/device.js";
import type { DType } from "../runtime/dtype.js";
import { defaultStream, type Stream } from "../runtime/stream.js";
import { Graph, type CaptureScope } from "../runtime/graph.js";
import { Tensor, type Shape } from "../runtime/tensor.js";
import { GroupBase, type GroupShared } from "./group-base.js";
import { joinJob } from "./job.js";
import { NcclComm } from "./nccl-comm.js";
import type { ScopedStore } from "./scoped-store.js";
import { SymmetricTensor, type SymmetricOptions } from "./symmetric-memory.js";
import { SyncWatch, syncTimeoutFromEnv } from "./sync-watch.js";

export interface InitOptions {
  /** This class is the cuda backend (init() picks a backend; src/cpu/ has the other). */
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
interface Shared<C extends GroupCollectives> extends GroupShared {
  readonly device: Device;
  readonly watch: SyncWatch;
  readonly makeCollectives: CollectivesFactory<C> | undefined;
}

export class ProcessGroup<C extends GroupCollectives = GroupCollectives> extends GroupBase<Shared<C>, C> {
  readonly backend = "cuda" as const;
  #comm: NcclComm | undefined;
  #allocations = 0;
  /** Captures that recorded this group's work: their graphs are released when the group goes. */
  readonly #captures = new Set<CaptureScope>();

  private constructor(shared: Shared<C>, ranks: readonly number[], name: string, store: ScopedStore) {
    super(shared, ranks, name, store);
  }

  get device(): Device {
    return this.shared.device;
  }

  get watch(): SyncWatch {
    return this.shared.watch;
  }

  /** Whether the job's ranks share GPUs (symmkit run --share-gpus): a peer's memory may be on this GPU. */
  get sharesGpus(): boolean {
    return this.shared.env.shareGpus;
  }

  /** Collective: runs the collectives factory, then meets the other members. */
  #open(): Promise<this> {
    const make = this.shared.makeCollectives;
    return this.ready(make && (() => make(this)));
  }

  protected openSubgroup(ranks: readonly number[], name: string, store: ScopedStore): Promise<this> {
    return (new ProcessGroup<C>(this.shared, ranks, name, store) as this).#open();
  }

  /** newGroup, with collectives made by `make` (none if undefined) instead of this group's factory: the
   * levels of a group across hosts (src/ops/hosts-collectives.ts). */
  async newGroupWith<D extends GroupCollectives>(
    ranks: readonly number[],
    make: CollectivesFactory<D> | undefined,
  ): Promise<ProcessGroup<D> | undefined> {
    const sub = this.subgroupOf(ranks);
    if (!sub) return undefined;
    const shared: Shared<D> = { ...this.shared, makeCollectives: make };
    return new ProcessGroup<D>(shared, sub.ranks, sub.name, sub.store).#open();
  }

  /** The hosts this group's members are on (a host per LOCAL_WORLD_SIZE consecutive global ranks), in
   * order, each with its members' global ranks. */
  get hosts(): number[][] {
    const byHost = new Map<number, number[]>();
    for (const r of this.ranks) {
      const h = Math.floor(r / this.localWorldSize);
      byHost.set(h, [...(byHost.get(h) ?? []), r]);
    }
    return [...byHost.keys()].sort((a, b) => a - b).map((h) => byHost.get(h)!);
  }

  /** This group's NCCL communicator (collective on first use), its waits bounded by a watchdog. */
  async nccl(): Promise<NcclComm> {
    const env = this.shared.env;
    this.#comm ??= await NcclComm.create(this.store, this.rank, this.worldSize, this.device, "comm", {
      watch: this.shared.watch,
      group: this.name,
      ranks: this.ranks,
      storeAddress:
        env.token === undefined
          ? undefined
          : { host: env.masterAddr, port: env.masterPort, token: env.token },
      onCapture: (scope) => this.#captures.add(scope),
    });
    return this.#comm;
  }

  /** Work of this group is being enqueued on `stream`: if into a capture, its graph is released when the
   * group is destroyed (it could not run without the group, and NCCL's destroy waits for it). */
  noteCapture(stream: Stream): void {
    const scope = Graph.activeCapture(stream);
    if (scope !== undefined) this.#captures.add(scope);
  }

  /** Tensor's constructors (on the group's GPU, the default device init() set): the tensors this group's
   * collectives take. */
  readonly tensors = Tensor;

  /** Symmetric allocations of this group. */
  readonly symmetric = {
    /** Collective: every member allocates the same shape and dtype, in the same order. */
    empty: async (shape: Shape, dtype: DType, options: SymmetricOptions = {}): Promise<SymmetricTensor> => {
      this.checkAlive();
      if (this.hosts.length > 1) {
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
          fds: this.shared.fds,
          watch: this.shared.watch,
          storeTimeoutMs: this.shared.storeTimeoutMs,
          label: this.allocationLabel,
        },
        this.#allocations++,
        shape,
        dtype,
        options,
      );
    },
  };

  /** Waits for `stream`; a kernel that gave up waiting for a peer becomes SymmTimeoutError naming it, and
   * a call the GPU refused since the last synchronize (allToAllV with device counts) InvalidArgumentError.
   * Ranks sharing a GPU poll the stream instead (SyncWatch.pollUntil): a trapped kernel there may never
   * end its stream. */
  synchronize(stream: Stream = defaultStream(this.device)): void {
    const watch = this.shared.watch;
    if (this.sharesGpus) {
      stream.device.makeCurrent();
      watch.translate(() => watch.pollUntil(() => stream.query()));
    } else watch.translate(() => stream.synchronize());
    watch.throwIfRefused();
  }

  /** Releases the graphs that captured the group's work, then frees the collectives and the
   * communicator (bounded: work that never finishes makes it abort instead). */
  protected async release(collectives: C | undefined): Promise<void> {
    for (const scope of this.#captures)
      scope.release(`released by destroy() of group ${this.name}: it captured that group's work`);
    this.#captures.clear();
    await collectives?.dispose();
    await this.#comm?.destroy(this.shared.watch.timeoutMs);
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
    if (env.localRank >= visible && !env.shareGpus) {
      throw new SymmkitError(
        "SYMMKIT_ENVIRONMENT",
        `LOCAL_RANK ${env.localRank} but this host shows ${visible} GPU(s): start at most ${visible} ranks ` +
          "per host (or, to test on fewer GPUs, let ranks share them: symmkit run --share-gpus)",
      );
    }
    const device = Device.get(env.localRank % visible);
    Device.setDefault(device);
    const watch = SyncWatch.create(device, options.syncTimeoutMs ?? syncTimeoutFromEnv());
    job.cleanup.push(() => watch.dispose());
    const shared: Shared<C> = {
      ...job,
      device,
      watch,
      groupsMade: new Map(),
      left: { value: false },
      makeCollectives,
    };
    const ranks = Array.from({ length: env.worldSize }, (_, i) => i);
    return new ProcessGroup<C>(shared, ranks, "world", job.worldStore).#open();
  }
}

/** Joins the job on the cuda backend: reads the environment, connects the store, takes LOCAL_RANK's GPU. */
export function initCuda(options: InitOptions = {}): Promise<ProcessGroup> {
  return ProcessGroup.world(options);
}
