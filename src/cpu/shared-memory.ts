// Memory shared between the rank processes of one host: an anonymous memory file (memfd) mapped into
// each process. The creator sends its descriptor to peers (src/distributed/fd-exchange.ts), as the GPU path
// sends its CUDA allocations; nothing has a name in /dev/shm, so nothing is left behind, even by a crash.
import { SymmkitError } from "../errors.js";
import {
  check,
  libc,
  MAP_FAILED,
  MAP_SHARED,
  MFD_CLOEXEC,
  OsError,
  PROT_READ,
  PROT_WRITE,
} from "../cuda/libc.js";
import { koffi, ptrOrZero, type Ptr } from "../cuda/native.js";

export class SharedRegion {
  readonly bytes: number;
  /** The mapped memory, without copy; invalid after close(). */
  readonly buffer: ArrayBuffer;
  #ptr: Ptr;

  private constructor(ptr: Ptr, bytes: number) {
    this.#ptr = ptr;
    this.bytes = bytes;
    this.buffer = koffi.view(ptr, bytes);
  }

  /** A new zero-filled region and its descriptor (the caller closes the descriptor). */
  static create(bytes: number, name: string): { region: SharedRegion; fd: number } {
    const c = libc();
    const fd = check(c.memfd_create(name, MFD_CLOEXEC), "memfd_create");
    try {
      check(c.ftruncate(fd, bytes), `ftruncate(${bytes})`);
      return { region: SharedRegion.map(fd, bytes), fd };
    } catch (e) {
      c.close(fd);
      throw e;
    }
  }

  /** Maps a region another process created (from its descriptor). */
  static map(fd: number, bytes: number): SharedRegion {
    if (!Number.isSafeInteger(bytes) || bytes <= 0)
      throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", `region of ${bytes} bytes`);
    const p = libc().mmap(null, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const errno = koffi.errno();
    const ptr = ptrOrZero(p);
    if (ptr === MAP_FAILED || ptr === 0n) throw new OsError(`mmap(${bytes} bytes)`, errno);
    return new SharedRegion(ptr, bytes);
  }

  close(): void {
    if (this.#ptr === 0n) return;
    check(libc().munmap(this.#ptr, this.bytes), "munmap");
    this.#ptr = 0n;
  }
}
