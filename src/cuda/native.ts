// Thin helpers over koffi shared by every binding: native memory that never moves (for argument
// blocks the driver reads by address), typed views on it, and declaration binding.
import koffi from "koffi";
import type { LibraryHandle as KoffiLibrary } from "koffi";
import { SymmkitError } from "../errors.js";

export { koffi };
export type LibraryHandle = KoffiLibrary;
/** A native address (host or device). koffi hands pointers over as BigInt. */
export type Ptr = bigint;

/**
 * Native memory from koffi.alloc: its address is stable for its whole life, unlike a Buffer's, so the
 * driver may keep pointers into it between calls. Freed explicitly.
 */
export class NativeBlock {
  readonly ptr: Ptr;
  readonly bytes: number;
  readonly view: DataView;
  readonly u8: Uint8Array;
  #freed = false;

  constructor(bytes: number) {
    if (!Number.isInteger(bytes) || bytes <= 0) throw new RangeError(`NativeBlock size ${bytes}`);
    this.bytes = bytes;
    this.ptr = koffi.alloc("uint8_t", bytes) as Ptr;
    const ab = koffi.view(this.ptr, bytes);
    this.view = new DataView(ab);
    this.u8 = new Uint8Array(ab);
    this.u8.fill(0);
  }

  free(): void {
    if (this.#freed) return;
    this.#freed = true;
    koffi.free(this.ptr);
  }
}

/** koffi returns `void *` as BigInt, or null for NULL. */
export function ptrOrZero(p: unknown): Ptr {
  if (p === null || p === undefined) return 0n;
  if (typeof p === "bigint") return p;
  if (typeof p === "number") return BigInt(p);
  throw new TypeError(`expected a pointer, got ${typeof p}`);
}

/** koffi returns 64-bit integers as number when they fit in 53 bits and as BigInt otherwise. */
export function toBigInt(v: unknown): bigint {
  if (typeof v === "bigint") return v;
  if (typeof v === "number") return BigInt(v);
  throw new TypeError(`expected an integer, got ${typeof v}`);
}

/** Decodes a NUL-terminated C string written into a Buffer. */
export function cString(buf: Uint8Array): string {
  const end = buf.indexOf(0);
  return Buffer.from(buf.buffer, buf.byteOffset, end < 0 ? buf.length : end).toString("utf8");
}

export type Declarations = Readonly<Record<string, string>>;

/**
 * Binds every prototype of `decls` in `lib`. A symbol the library lacks becomes a function that throws
 * when called, naming the library and the symbol, so one missing optional entry point does not make the
 * whole library unusable and its absence is never silent.
 */
export function bindAll<T>(lib: LibraryHandle, libPath: string, decls: Declarations, upgradeHint: string): T {
  const out: Record<string, unknown> = {};
  for (const [name, proto] of Object.entries(decls)) {
    try {
      out[name] = lib.func(proto);
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      out[name] = () => {
        throw new SymmkitError(
          "SYMMKIT_SYMBOL_MISSING",
          `${name} is not available in ${libPath} (${why}); ${upgradeHint}`,
        );
      };
    }
  }
  return out as T;
}

/** Registers koffi type aliases once per process (koffi keeps one global name table). */
export function defineAliases(aliases: Readonly<Record<string, string>>): void {
  for (const [name, target] of Object.entries(aliases)) {
    try {
      koffi.type(name);
    } catch {
      koffi.alias(name, target);
    }
  }
}
