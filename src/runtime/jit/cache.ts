// On-disk cache of compiled kernels, keyed by content. Entries are written to a temporary name and
// renamed into place, so any number of processes compiling the same kernel at once never read a torn
// file: rename is atomic and every writer writes the same bytes.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { readEnvVar, type Env } from "../../settings.js";

export interface CachedKernel {
  readonly cubin: Uint8Array;
  /** Name expression -> lowered (mangled) name. */
  readonly lowered: Readonly<Record<string, string>>;
  readonly log: string;
}

const MAGIC = "SYMMKIT-KERNEL-2\n";
/** The entry's layout, part of every key (src/runtime/jit/compiler.ts): an entry of another layout is
 * never looked up, so it is never taken for a damaged one. */
export const CACHE_ENTRY_FORMAT = 2;

/** SYMMKIT_KERNEL_CACHE=off disables the cache; SYMMKIT_KERNEL_CACHE=<dir> moves it (src/settings.ts). */
export function cacheDirFromEnv(env: Env = process.env): string | null {
  return readEnvVar("SYMMKIT_KERNEL_CACHE", env);
}

export function cacheKey(parts: unknown): string {
  return crypto.createHash("sha256").update(JSON.stringify(parts)).digest("hex");
}

export class KernelCache {
  constructor(readonly dir: string | null) {}

  #file(key: string): string {
    return path.join(this.dir!, `${key}.kernel`);
  }

  /** The entry, or undefined when absent or unreadable (a damaged entry is rebuilt, and said so). */
  get(key: string): CachedKernel | undefined {
    if (!this.dir) return undefined;
    let bytes: Buffer;
    try {
      bytes = fs.readFileSync(this.#file(key));
    } catch {
      return undefined;
    }
    const entry = decodeEntry(bytes);
    if (!entry) process.emitWarning(`symmkit: damaged kernel cache entry ${this.#file(key)}; rebuilding it`);
    return entry;
  }

  put(key: string, entry: CachedKernel): void {
    if (!this.dir) return;
    fs.mkdirSync(this.dir, { recursive: true });
    const tmp = path.join(this.dir, `.${key}.${process.pid}.${crypto.randomBytes(6).toString("hex")}.tmp`);
    try {
      fs.writeFileSync(tmp, encodeEntry(entry));
      fs.renameSync(tmp, this.#file(key));
    } catch (e) {
      fs.rmSync(tmp, { force: true });
      throw e;
    }
  }
}

export function encodeEntry(entry: CachedKernel): Buffer {
  const meta = JSON.stringify({
    lowered: entry.lowered,
    log: entry.log,
    cubinBytes: entry.cubin.length,
    cubinCrc32: zlib.crc32(entry.cubin),
  });
  return Buffer.concat([Buffer.from(MAGIC + meta + "\n"), entry.cubin]);
}

export function decodeEntry(bytes: Buffer): CachedKernel | undefined {
  if (bytes.subarray(0, MAGIC.length).toString() !== MAGIC) return undefined;
  const nl = bytes.indexOf(10, MAGIC.length);
  if (nl < 0) return undefined;
  try {
    const meta = JSON.parse(bytes.subarray(MAGIC.length, nl).toString()) as {
      lowered: Record<string, string>;
      log: string;
      cubinBytes: number;
      cubinCrc32: number;
    };
    // A view, not a copy: copying a typed array element by element took 4-6 ms of a 0.9 MB entry's load.
    const cubin = new Uint8Array(bytes.buffer, bytes.byteOffset + nl + 1, bytes.length - nl - 1);
    if (cubin.length !== meta.cubinBytes) return undefined;
    // A CRC, not a digest: it guards against damage (writes are atomic renames, so a torn entry cannot
    // occur), and a 0.9 MB cubin's SHA-256 was half a millisecond of a module's first use.
    if (zlib.crc32(cubin) !== meta.cubinCrc32) return undefined;
    return { cubin, lowered: meta.lowered, log: meta.log };
  } catch {
    return undefined;
  }
}
