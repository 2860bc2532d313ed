// What the rank programs of the CPU and GPU tests share: the run's seed, and ranks agreeing on a result
// (each rank publishes a hash of its raw elements through the store and checks every other rank's).
import assert from "node:assert/strict";
import crypto from "node:crypto";
import type { RawArray } from "../../src/runtime/dtype.js";
import { readEnvVar } from "../../src/settings.js";

export const rawHash = (raw: RawArray): string =>
  crypto
    .createHash("sha256")
    .update(new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength))
    .digest("hex");

interface Store {
  set(key: string, value: string): Promise<unknown>;
  get(key: string): Promise<Buffer>;
}

/** agree(raw, what): every rank's `raw` hashes the same, else an assertion naming the rank that differs. */
export function agreement(
  store: Store,
  rank: number,
  world: number,
): (raw: RawArray, what: string) => Promise<void> {
  let calls = 0;
  return async (raw, what) => {
    const key = `agree/${calls++}`;
    const h = rawHash(raw);
    await store.set(`${key}/${rank}`, h);
    for (let r = 0; r < world; r++)
      assert.equal((await store.get(`${key}/${r}`)).toString(), h, `${what}: rank ${r} differs`);
  };
}

/** The run's seed: SYMMKIT_TEST_SEED, else a fresh one from rank 0; printed by rank 0 for a replay. */
export async function sharedSeed(store: Store, rank: number): Promise<bigint> {
  if (rank === 0)
    await store.set(
      "seed",
      String(readEnvVar("SYMMKIT_TEST_SEED") ?? crypto.randomBytes(6).readUIntLE(0, 6)),
    );
  const seed = BigInt((await store.get("seed")).toString());
  if (rank === 0) console.log(`seed ${seed} (replay with SYMMKIT_TEST_SEED=${seed})`);
  return seed;
}

/** `got` holds bitwise the elements of `want`, else an assertion naming the first that differs. */
export function assertSameBits(got: RawArray, want: RawArray, what: string, seed: bigint): void {
  assert.equal(got.length, want.length, `${what}: length`);
  const g = new Uint8Array(got.buffer, got.byteOffset, got.byteLength);
  const w = new Uint8Array(want.buffer, want.byteOffset, want.byteLength);
  if (Buffer.compare(g, w) !== 0) {
    const at = got.findIndex((v, k) => !Object.is(v, want[k]));
    assert.fail(`${what}: element ${at} is ${got[at]}, expected ${want[at]} (seed ${seed})`);
  }
}
