// Memory shared between the rank processes of one host: an anonymous memory file (memfd) mapped into
// each process. The creator sends its descriptor to peers (src/distributed/fd-exchange.ts), as the GPU path
// sends its CUDA allocations; nothing has a name in /dev/shm, so nothing is left behind, even by a crash.
import { constants as bufferConstants } from "node:buffer";
import { InvalidArgumentError } from "../errors.js";
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

// Linux's mmap flags (the same on x86-64 and arm64).
const MAP_PRIVATE = 0x02;
const MAP_FIXED = 0x10;
const MAP_ANONYMOUS = 0x20;

/** Unmaps a region once nothing can reach its memory: its ArrayBuffer, and every view of it, are gone. */
const unmapWhenUnreachable = new FinalizationRegistry<{ ptr: Ptr; bytes: number }>(({ ptr, bytes }) => {
  libc().munmap(ptr, bytes);
});

export class SharedRegion {
  /** The largest region an ArrayBuffer can view on this Node. */
  static readonly MAX_BYTES: number = bufferConstants.MAX_LENGTH;
  readonly bytes: number;
  /**
   * The mapped memory, without copy. After close() it holds zeros that nobody else sees (reading a view
   * kept from before is wrong, but never a crash); HostTensor refuses access with DisposedError.
   */
  readonly buffer: ArrayBuffer;
  #ptr: Ptr;

  private constructor(ptr: Ptr, bytes: number) {
    this.#ptr = ptr;
    this.bytes = bytes;
    this.buffer = koffi.view(ptr, bytes);
    unmapWhenUnreachable.register(this.buffer, { ptr, bytes });
  }

  /** A new zero-filled region and its descriptor (the caller closes the descriptor). */
  static create(bytes: number, name: string): { region: SharedRegion; fd: number } {
    checkBytes(bytes);
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
    checkBytes(bytes);
    return new SharedRegion(mmap(null, bytes, MAP_SHARED, fd), bytes);
  }

  /**
   * Lets go of the shared memory. Views of the buffer may outlive this, and JavaScript cannot revoke
   * them: private zero pages take the shared mapping's place, at the same address, so that using them
   * never faults; the address range itself is unmapped once they are garbage.
   */
  close(): void {
    if (this.#ptr === 0n) return;
    mmap(this.#ptr, this.bytes, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1);
    this.#ptr = 0n;
  }
}

function checkBytes(bytes: number): void {
  if (!Number.isSafeInteger(bytes) || bytes <= 0 || bytes > SharedRegion.MAX_BYTES) {
    throw new InvalidArgumentError(
      `a shared region of ${bytes} bytes: it takes 1 to ${SharedRegion.MAX_BYTES} bytes, the most an ` +
        `ArrayBuffer can view on Node ${process.version}; use a smaller tensor`,
    );
  }
}

function mmap(addr: Ptr | null, bytes: number, flags: number, fd: number): Ptr {
  const p = libc().mmap(addr, bytes, PROT_READ | PROT_WRITE, flags, fd, 0);
  const errno = koffi.errno();
  const ptr = ptrOrZero(p);
  if (ptr === MAP_FAILED || ptr === 0n) throw new OsError(`mmap(${bytes} bytes)`, errno);
  return ptr;
}
