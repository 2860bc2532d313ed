// A group's view of the rendezvous store: every key under the group's prefix, barriers counted over the
// group's members.
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
