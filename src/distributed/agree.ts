// What every rank of a group holds, through the group's store: for settings and facts the ranks must agree
// on before their kernels or NCCL calls pair up (a disagreement found there is a typed error on every rank,
// where found later it would be a hang).

/** What gatherValues needs of a group (ProcessGroup's members of those names). */
export interface StoreGroup {
  readonly rank: number;
  readonly ranks: readonly number[];
  readonly store: {
    set(k: string, v: string): Promise<void>;
    get(k: string): Promise<Buffer | Uint8Array>;
  };
}

/** Collective over `group`: every rank's `value` under `key`, in group-rank order. */
export async function gatherValues(group: StoreGroup, key: string, value: string): Promise<string[]> {
  await group.store.set(`${key}/${group.rank}`, value);
  return Promise.all(
    group.ranks.map(async (_, r) => Buffer.from(await group.store.get(`${key}/${r}`)).toString()),
  );
}
