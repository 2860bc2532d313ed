// libc: the few system calls Node does not offer: Unix-domain datagram sockets that carry file
// descriptors (SCM_RIGHTS), the parent-death signal, and an exit without exit handlers. Linux layouts
// (LP64), checked against the system headers: struct msghdr 56 bytes, cmsghdr 16, sockaddr_un 110.
import { SymmkitError } from "../errors.js";
import { bindAll, koffi, type Ptr } from "./native.js";

export const LIBC_DECLARATIONS = {
  socket: "int socket(int domain, int type, int protocol)",
  bind: "int bind(int fd, void *addr, uint32_t len)",
  setsockopt: "int setsockopt(int fd, int level, int name, void *value, uint32_t len)",
  sendmsg: "intptr_t sendmsg(int fd, void *msg, int flags)",
  recvmsg: "intptr_t recvmsg(int fd, void *msg, int flags)",
  close: "int close(int fd)",
  prctl:
    "int prctl(int option, unsigned long arg2, unsigned long arg3, unsigned long arg4, unsigned long arg5)",
  strerror: "const char *strerror(int errnum)",
  memfd_create: "int memfd_create(const char *name, unsigned int flags)",
  ftruncate: "int ftruncate(int fd, int64_t length)",
  mmap: "void *mmap(void *addr, size_t length, int prot, int flags, int fd, int64_t offset)",
  munmap: "int munmap(void *addr, size_t length)",
  _exit: "void _exit(int status)",
} as const;

export interface Libc {
  socket(domain: number, type: number, protocol: number): number;
  bind(fd: number, addr: Ptr, len: number): number;
  setsockopt(fd: number, level: number, name: number, value: Ptr, len: number): number;
  sendmsg(fd: number, msg: Ptr, flags: number): number | bigint;
  recvmsg: ((fd: number, msg: Ptr, flags: number) => number | bigint) & {
    async(fd: number, msg: Ptr, flags: number, cb: (err: unknown, res: number | bigint) => void): void;
  };
  close(fd: number): number;
  prctl(option: number, a2: number, a3: number, a4: number, a5: number): number;
  memfd_create(name: string, flags: number): number;
  ftruncate(fd: number, length: number): number;
  mmap(addr: Ptr | null, length: number, prot: number, flags: number, fd: number, offset: number): Ptr | null;
  munmap(addr: Ptr, length: number): number;
  _exit(status: number): void;
  strerror(errnum: number): string;
}

export const AF_UNIX = 1;
export const SOCK_DGRAM = 2;
export const SOCK_CLOEXEC = 0x80000;
export const SOL_SOCKET = 1;
export const SCM_RIGHTS = 1;
export const SO_RCVTIMEO = 20;
export const MSG_CMSG_CLOEXEC = 0x40000000;
export const MSG_DONTWAIT = 0x40;
export const MSG_CTRUNC = 0x8;
export const MSG_TRUNC = 0x20;
export const PR_SET_PDEATHSIG = 1;
export const MFD_CLOEXEC = 1;
export const PROT_READ = 1;
export const PROT_WRITE = 2;
export const MAP_SHARED = 1;
/** mmap's failure value, (void *) -1. */
export const MAP_FAILED = 0xffffffffffffffffn;

let bound: Libc | undefined;

export function libc(): Libc {
  if (!bound) {
    if (process.platform !== "linux") {
      throw new SymmkitError(
        "SYMMKIT_UNSUPPORTED",
        `symmkit's process plumbing needs Linux, not ${process.platform}`,
      );
    }
    bound = bindAll<Libc>(koffi.load("libc.so.6"), "libc.so.6", LIBC_DECLARATIONS, "this libc is too old");
  }
  return bound;
}

const errnoNames = new Map<number, string>(Object.entries(koffi.os.errno).map(([k, v]) => [v, k]));

export class OsError extends SymmkitError {
  constructor(
    readonly call: string,
    readonly errno: number,
  ) {
    super(
      "SYMMKIT_OS_ERROR",
      `${call} failed: ${errnoNames.get(errno) ?? `errno ${errno}`} (${libc().strerror(errno)})`,
    );
  }
}

/** Throws OsError (with errno) when a libc call returned -1. The one place libc results are judged. */
export function check<T extends number | bigint>(result: T, call: string, errno = koffi.errno()): T {
  if (Number(result) < 0) throw new OsError(call, errno);
  return result;
}
