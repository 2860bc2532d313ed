// What every backend's process group shares, written once: who this rank is in the group and in the
// job, the store barrier, subgroups (newGroup), the collectives getter and the destroy order. A backend
// (ProcessGroup on GPUs, CpuProcessGroup) adds its memory, its collectives and what it releases.
import { DisposedError, InvalidArgumentError } from "../errors.js";
import type { DisposedLabel, TensorFactory } from "../runtime/tensor.js";
import type { Job } from "./job.js";
import { ScopedStore, subgroup } from "./scoped-store.js";

/** What the world group owns and every subgroup shares. */
export interface GroupShared extends Job {
  /** Subgroups made so far, by parent name (newGroup numbers them). */
  readonly groupsMade: Map<string, number>;
  /** Set when the world group is destroyed: the job is left, and every group of it is gone. */
  readonly left: { value: boolean };
}

/** The process group's interface, the same on every backend (`C`: its collectives). */
export interface ProcessGroupLike<C> {
  readonly backend: "cuda" | "cpu";
  /** Rank within this group. */
  readonly rank: number;
  readonly worldSize: number;
  /** Global rank of each member, in group-rank order. */
  readonly ranks: readonly number[];
  readonly store: ScopedStore;
  readonly globalRank: number;
  readonly localRank: number;
  readonly localWorldSize: number;
  readonly collectives: C;
  /** The tensor constructors of the group's backend: Tensor's on GPUs, HostTensor's on the CPU. */
  readonly tensors: TensorFactory;
  barrier(): Promise<void>;
  newGroup(ranks: readonly number[]): Promise<ProcessGroupLike<C> | undefined>;
  destroy(): Promise<void>;
}

export abstract class GroupBase<S extends GroupShared, C> implements ProcessGroupLike<C> {
  abstract readonly backend: "cuda" | "cpu";
  abstract readonly tensors: TensorFactory;
  readonly rank: number;
  readonly worldSize: number;
  readonly ranks: readonly number[];
  readonly store: ScopedStore;
  protected readonly shared: S;
  protected readonly name: string;
  #collectives: C | undefined;
  #destroyed = false;
  /** While the collectives are being made: what the memory they allocate is to the user. */
  #making: DisposedLabel | undefined;

  protected constructor(shared: S, ranks: readonly number[], name: string, store: ScopedStore) {
    this.shared = shared;
    this.ranks = ranks;
    this.rank = ranks.indexOf(shared.env.rank);
    this.worldSize = ranks.length;
    this.name = name;
    this.store = store;
  }

  get globalRank(): number {
    return this.shared.env.rank;
  }

  get localRank(): number {
    return this.shared.env.localRank;
  }

  get localWorldSize(): number {
    return this.shared.env.localWorldSize;
  }

  /** Throws DisposedError once the group, or the world group (the job), was destroyed. */
  protected checkAlive(): void {
    if (this.#destroyed)
      throw new DisposedError(
        `process group ${this.name}`,
        "it was destroyed (destroy()): make a new one with init(), or newGroup() of a group still alive",
      );
    if (this.shared.left.value)
      throw new DisposedError(
        `process group ${this.name}`,
        "the world group was destroyed (destroy()), which left the job: join again with init()",
      );
  }

  /** What a symmetric allocation is to the user: while the collectives are made, their memory (named
   * when collectives kept after destroy() are used); otherwise the tensor itself (undefined). */
  protected get allocationLabel(): DisposedLabel | undefined {
    return this.#making;
  }

  /** The group's collectives, made when the group was. */
  get collectives(): C {
    this.checkAlive();
    if (!this.#collectives)
      throw new InvalidArgumentError(
        "this group has no collectives (made by initCuda(), or by newGroupWith without a factory): " +
          "join with init() from symmkit for a group with collectives",
      );
    return this.#collectives;
  }

  /** Collective: makes the group's collectives (if the backend has them), then meets the members. */
  protected async ready(makeCollectives: (() => Promise<C>) | undefined): Promise<this> {
    if (makeCollectives) {
      this.#making = {
        what: `the memory of process group ${this.name}'s collectives`,
        todo:
          "the group was destroyed (destroy()), and collectives kept from it cannot be used: make a new " +
          "group with init() (or newGroup()) and use its collectives",
      };
      try {
        this.#collectives = await makeCollectives();
      } finally {
        this.#making = undefined;
      }
    }
    await this.#meet();
    return this;
  }

  #meet(): Promise<void> {
    return this.store.barrier("barrier");
  }

  /** Every member reaches this point (through the store; device work is not waited for). */
  async barrier(): Promise<void> {
    this.checkAlive();
    await this.#meet();
  }

  /**
   * A group of the given global ranks, for its members (others get undefined). Members must call this
   * with the same list, in the same order relative to their other newGroup calls.
   */
  async newGroup(ranks: readonly number[]): Promise<this | undefined> {
    const sub = this.subgroupOf(ranks);
    return sub && this.openSubgroup(sub.ranks, sub.name, sub.store);
  }

  /** newGroup's naming and store: undefined for a non-member. */
  protected subgroupOf(
    ranks: readonly number[],
  ): { readonly ranks: number[]; readonly name: string; readonly store: ScopedStore } | undefined {
    this.checkAlive();
    const sub = subgroup(
      { name: this.name, ranks: this.ranks, self: this.globalRank },
      ranks,
      this.shared.groupsMade,
    );
    return sub && { ...sub, store: new ScopedStore(this.shared.client, sub.name, sub.ranks.length) };
  }

  /** Opens the subgroup newGroup named, collectively (its members only). */
  protected abstract openSubgroup(ranks: readonly number[], name: string, store: ScopedStore): Promise<this>;

  /** What the backend releases when the group is destroyed, before the members meet. */
  protected abstract release(collectives: C | undefined): Promise<void>;

  /** Collective. Releases the group's resources; the world group also leaves the job. */
  async destroy(): Promise<void> {
    if (this.#destroyed || this.shared.left.value) return;
    this.#destroyed = true;
    await this.release(this.#collectives);
    await this.#meet();
    if (this.name !== "world") return;
    this.shared.left.value = true;
    for (const f of this.shared.cleanup.reverse()) await f();
  }
}
