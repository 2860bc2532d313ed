// A group's view of the rendezvous store: every key under the group's prefix, barriers counted over the
// group's members.
import { InvalidArgumentError } from "../errors.js";
import type { StoreClient } from "./store/client.js";

export class ScopedStore {
  constructor(
    readonly client: StoreClient,
    readonly prefix: string,
    readonly size: number,
  ) {}

  key(k: string): string {
    return `${this.prefix}/${k}`;
  }

  set(k: string, v: string | Uint8Array): Promise<void> {
    return this.client.set(this.key(k), v);
  }

  get(k: string, options: { timeoutMs?: number } = {}): Promise<Buffer> {
    return this.client.get(this.key(k), options);
  }

  add(k: string, delta: number | bigint = 1): Promise<bigint> {
    return this.client.add(this.key(k), delta);
  }

  delete(k: string): Promise<boolean> {
    return this.client.delete(this.key(k));
  }

  wait(keys: readonly string[], options: { timeoutMs?: number } = {}): Promise<void> {
    return this.client.wait(
      keys.map((k) => this.key(k)),
      options,
    );
  }

  /** Every member of the group reaches `name`. */
  barrier(name: string, options: { timeoutMs?: number } = {}): Promise<void> {
    return this.client.barrier(this.key(name), this.size, options);
  }

  scope(sub: string, size: number): ScopedStore {
    return new ScopedStore(this.client, this.key(sub), size);
  }
}

/**
 * newGroup's rule for both backends: `ranks` must be distinct members of the parent; a member gets the
 * sorted ranks and a name unique per (parent, ranks, how many such groups it made), so that members that
 * call newGroup in the same order agree on it; a non-member gets undefined.
 */
export function subgroup(
  parent: { readonly name: string; readonly ranks: readonly number[]; readonly self: number },
  ranks: readonly number[],
  made: Map<string, number>,
): { readonly name: string; readonly ranks: number[] } | undefined {
  const sorted = [...new Set(ranks)].sort((a, b) => a - b);
  if (
    sorted.length !== ranks.length ||
    sorted.some((r) => !Number.isInteger(r) || !parent.ranks.includes(r))
  ) {
    throw new InvalidArgumentError(
      `newGroup(${JSON.stringify(ranks)}): ranks must be distinct members of this group ${JSON.stringify(parent.ranks)}`,
    );
  }
  if (!sorted.includes(parent.self)) return undefined;
  const base = `${parent.name}/g${sorted.join("-")}`;
  const n = (made.get(base) ?? 0) + 1;
  made.set(base, n);
  return { name: `${base}.${n}`, ranks: sorted };
}
