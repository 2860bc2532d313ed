// File descriptors between the ranks of one host, addressed by global rank. Each rank binds a socket in
// a private directory (mode 0700): the one symmkit run made for the host (SYMMKIT_FD_DIR, removed by
// the launcher even when ranks crash), or else one local rank 0 makes and publishes through the store. Messages are tagged
// with (key, sender); a message for a key nobody is waiting for yet is kept until asked for, so ranks
// may run ahead of each other. A receiver's socket queues only a few messages: a sender that finds it
// full takes in what was sent to itself meanwhile and tries again, so no number of ranks sending to each
// other at once can deadlock, and gives up at the deadline naming the receiver.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { InvalidArgumentError, SymmkitError } from "../errors.js";
import { readEnvVar } from "../settings.js";
import { closeFd, FdChannel } from "./fd-channel.js";
import type { ScopedStore } from "./scoped-store.js";

export class FdExchange {
  readonly #channel: FdChannel;
  readonly #dir: string;
  readonly #store: ScopedStore;
  readonly #ownsDir: boolean;
  readonly #ready = new Set<number>();
  readonly #stash = new Map<string, number>();

  private constructor(channel: FdChannel, dir: string, store: ScopedStore, ownsDir: boolean) {
    this.#channel = channel;
    this.#dir = dir;
    this.#store = store;
    this.#ownsDir = ownsDir;
  }

  /** `store` is the world's; `node` numbers the host. Collective over the ranks of the host. */
  static async open(
    store: ScopedStore,
    globalRank: number,
    localRank: number,
    node: number,
  ): Promise<FdExchange> {
    const dirKey = `fd/node${node}/dir`;
    let dir: string;
    const given = readEnvVar("SYMMKIT_FD_DIR");
    if (given) {
      dir = given;
    } else if (localRank === 0) {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-fd-"));
      fs.chmodSync(dir, 0o700);
      await store.set(dirKey, dir);
    } else {
      dir = (await store.get(dirKey)).toString();
    }
    const channel = FdChannel.bind(path.join(dir, `rank${globalRank}.sock`));
    await store.set(`fd/ready/${globalRank}`, "1");
    return new FdExchange(channel, dir, store, !given && localRank === 0);
  }

  /** Sends `fd` (still ours afterwards) to `to` under `key`, within `timeoutMs`. */
  async send(to: number, fd: number, key: string, from: number, timeoutMs: number): Promise<void> {
    if (!this.#ready.has(to)) {
      await this.#store.wait([`fd/ready/${to}`]);
      this.#ready.add(to);
    }
    const dest = path.join(this.#dir, `rank${to}.sock`);
    const tag = Buffer.from(JSON.stringify({ key, from }));
    const deadline = Date.now() + timeoutMs;
    while (!this.#channel.trySend(dest, fd, tag)) {
      // Its queue is full: take in what was sent to us (a peer may be waiting on our queue in turn).
      for (let got = this.#channel.tryReceive(); got; got = this.#channel.tryReceive()) this.#keep(got);
      if (Date.now() > deadline)
        throw new SymmkitError(
          "SYMMKIT_STORE_TIMEOUT",
          `rank ${to} took no descriptor for ${timeoutMs} ms (its queue stayed full); is it alive?`,
        );
      await new Promise((r) => setTimeout(r, 1));
    }
  }

  #keep(got: { fd: number; tag: Buffer }): void {
    const tag = JSON.parse(got.tag.toString()) as { key: string; from: number };
    this.#stash.set(`${tag.key}|${tag.from}`, got.fd);
  }

  /** The descriptor `from` sent under `key` (ours to close). */
  async receive(key: string, from: number, timeoutMs: number): Promise<number> {
    const want = `${key}|${from}`;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const fd = this.#stash.get(want);
      if (fd !== undefined) {
        this.#stash.delete(want);
        return fd;
      }
      const left = deadline - Date.now();
      if (left <= 0)
        throw new SymmkitError(
          "SYMMKIT_STORE_TIMEOUT",
          `rank ${from} never sent ${key} (waited ${timeoutMs} ms)`,
        );
      this.#keep(await this.#channel.receive(left));
    }
  }

  /**
   * Collective over a group's members, for memory each of them allocated: checks that every member made
   * the same allocation (`signature`), sends `fd` to each peer, and hands each peer's descriptor to
   * `take` (closed right after: what `take` imports or maps keeps the memory alive). Returns once every
   * member has taken every descriptor, so that each may then close its own `fd`.
   */
  async share(
    group: {
      readonly store: ScopedStore;
      readonly rank: number;
      readonly worldSize: number;
      readonly ranks: readonly number[];
      readonly storeTimeoutMs: number;
    },
    key: string,
    signature: string,
    fd: number,
    take: (rank: number, fd: number) => void,
  ): Promise<void> {
    const { store, rank, worldSize, ranks } = group;
    await store.set(`${key}/sig/${rank}`, signature);
    // Starting at the next rank, so that the ranks' first messages go to different receivers.
    for (let k = 1; k < worldSize; k++) {
      const r = (rank + k) % worldSize;
      const theirs = (await store.get(`${key}/sig/${r}`)).toString();
      if (theirs !== signature) {
        throw new InvalidArgumentError(
          `rank ${r} allocated ${theirs} where this rank allocated ${signature}; symmetric allocations must match`,
        );
      }
      await this.send(ranks[r]!, fd, key, ranks[rank]!, group.storeTimeoutMs);
    }
    for (let r = 0; r < worldSize; r++) {
      if (r === rank) continue;
      const theirs = await this.receive(key, ranks[r]!, group.storeTimeoutMs);
      try {
        take(r, theirs);
      } finally {
        closeFd(theirs);
      }
    }
    await store.barrier(`${key}/taken`);
    // Every member read every signature before that barrier: ours is no longer needed.
    await store.delete(`${key}/sig/${rank}`);
  }

  /** Closes the socket, any descriptor nobody asked for, and (local rank 0, after all) the directory. */
  async close(hostBarrier: () => Promise<void>): Promise<void> {
    for (const fd of this.#stash.values()) closeFd(fd);
    this.#stash.clear();
    this.#channel.close();
    await hostBarrier();
    if (this.#ownsDir) fs.rmSync(this.#dir, { recursive: true, force: true });
  }
}
