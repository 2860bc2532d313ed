// File descriptors between processes of one host: a Unix-domain datagram socket per process, each
// message carrying one descriptor (SCM_RIGHTS) and a small tag saying what it is. Node cannot pass
// arbitrary descriptors, so this goes through libc. Sending never blocks (a full receiver queue is
// reported, for the caller to retry); receiving either takes what is queued at once, or blocks on
// koffi's thread pool, never on the main thread, and always with a deadline (SO_RCVTIMEO).
import { InvalidArgumentError, SymmkitError } from "../errors.js";
import { koffi, NativeBlock, type Ptr } from "../cuda/native.js";
import {
  AF_UNIX,
  check,
  libc,
  MSG_CMSG_CLOEXEC,
  MSG_CTRUNC,
  MSG_DONTWAIT,
  MSG_TRUNC,
  OsError,
  SCM_RIGHTS,
  SO_RCVTIMEO,
  SOCK_CLOEXEC,
  SOCK_DGRAM,
  SOL_SOCKET,
} from "../cuda/libc.js";

const MSGHDR = 56;
const IOVEC = 16;
const CMSG_SPACE_ONE_FD = 24;
const CMSG_LEN_ONE_FD = 20;
const SOCKADDR_UN = 110;
const MAX_PATH = 107;
export const MAX_TAG_BYTES = 256;

const EAGAIN = koffi.os.errno.EAGAIN ?? 11;

export interface ReceivedFd {
  readonly fd: number;
  readonly tag: Buffer;
}

export class FdTimeoutError extends SymmkitError {
  constructor(timeoutMs: number, path: string) {
    super(
      "SYMMKIT_STORE_TIMEOUT",
      `no file descriptor arrived on ${path} within ${timeoutMs} ms; did a peer rank fail?`,
    );
  }
}

function writeSockaddr(block: NativeBlock, offset: number, path: string): number {
  const bytes = Buffer.from(path, "utf8");
  if (bytes.length > MAX_PATH)
    throw new InvalidArgumentError(`socket path ${path} is longer than ${MAX_PATH} bytes`);
  block.view.setUint16(offset, AF_UNIX, true);
  block.u8.set(bytes, offset + 2);
  block.u8[offset + 2 + bytes.length] = 0;
  return 2 + bytes.length + 1;
}

/** Points msghdr at one iovec (the tag) and one control message (one fd). */
function layoutMessage(b: NativeBlock, payload: number, payloadBytes: number): { msg: Ptr } {
  const v = b.view;
  const iov = MSGHDR;
  const cmsg = MSGHDR + IOVEC;
  v.setBigUint64(16, b.ptr + BigInt(iov), true);
  v.setBigUint64(24, 1n, true);
  v.setBigUint64(32, b.ptr + BigInt(cmsg), true);
  v.setBigUint64(40, BigInt(CMSG_SPACE_ONE_FD), true);
  v.setBigUint64(iov, b.ptr + BigInt(payload), true);
  v.setBigUint64(iov + 8, BigInt(payloadBytes), true);
  return { msg: b.ptr };
}

export class FdChannel {
  readonly path: string;
  #sock: number;

  private constructor(sock: number, path: string) {
    this.#sock = sock;
    this.path = path;
  }

  /** Binds a datagram socket at `path` (in a directory only this user can enter). */
  static bind(path: string): FdChannel {
    const c = libc();
    const sock = check(c.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0), "socket(AF_UNIX, SOCK_DGRAM)");
    const addr = new NativeBlock(SOCKADDR_UN);
    try {
      check(c.bind(sock, addr.ptr, writeSockaddr(addr, 0, path)), `bind(${path})`);
    } catch (e) {
      c.close(sock);
      throw e;
    } finally {
      addr.free();
    }
    return new FdChannel(sock, path);
  }

  /**
   * Sends `fd` (which stays open here) with `tag` to the channel bound at `to`; false, sending nothing,
   * when the receiver's queue is full (it holds a few messages until its owner receives them).
   */
  trySend(to: string, fd: number, tag: Uint8Array): boolean {
    if (tag.length > MAX_TAG_BYTES)
      throw new InvalidArgumentError(`tag of ${tag.length} bytes exceeds ${MAX_TAG_BYTES}`);
    const name = MSGHDR + IOVEC + CMSG_SPACE_ONE_FD;
    const payload = name + SOCKADDR_UN + 2;
    const b = new NativeBlock(payload + Math.max(1, tag.length));
    try {
      const { msg } = layoutMessage(b, payload, tag.length);
      b.view.setBigUint64(0, b.ptr + BigInt(name), true);
      b.view.setUint32(8, writeSockaddr(b, name, to), true);
      const cmsg = MSGHDR + IOVEC;
      b.view.setBigUint64(cmsg, BigInt(CMSG_LEN_ONE_FD), true);
      b.view.setInt32(cmsg + 8, SOL_SOCKET, true);
      b.view.setInt32(cmsg + 12, SCM_RIGHTS, true);
      b.view.setInt32(cmsg + 16, fd, true);
      b.u8.set(tag, payload);
      const n = Number(libc().sendmsg(this.handle, msg, MSG_DONTWAIT));
      if (n < 0 && koffi.errno() === EAGAIN) return false;
      check(n, `sendmsg(fd ${fd} to ${to})`);
      return true;
    } finally {
      b.free();
    }
  }

  /** A descriptor already queued on this channel (opened close-on-exec), or undefined: never waits. */
  tryReceive(): ReceivedFd | undefined {
    const payload = MSGHDR + IOVEC + CMSG_SPACE_ONE_FD;
    const b = new NativeBlock(payload + MAX_TAG_BYTES);
    try {
      const { msg } = layoutMessage(b, payload, MAX_TAG_BYTES);
      const n = Number(libc().recvmsg(this.handle, msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT));
      if (n < 0 && koffi.errno() === EAGAIN) return undefined;
      if (n < 0) throw new OsError("recvmsg", koffi.errno());
      return received(b, payload, n);
    } finally {
      b.free();
    }
  }

  /** The next descriptor sent to this channel (opened close-on-exec), or FdTimeoutError. */
  receive(timeoutMs: number): Promise<ReceivedFd> {
    const c = libc();
    const sock = this.handle;
    const tv = new NativeBlock(16);
    tv.view.setBigInt64(0, BigInt(Math.floor(timeoutMs / 1000)), true);
    tv.view.setBigInt64(8, BigInt((timeoutMs % 1000) * 1000), true);
    try {
      check(c.setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, tv.ptr, 16), "setsockopt(SO_RCVTIMEO)");
    } finally {
      tv.free();
    }
    const payload = MSGHDR + IOVEC + CMSG_SPACE_ONE_FD;
    const b = new NativeBlock(payload + MAX_TAG_BYTES);
    const { msg } = layoutMessage(b, payload, MAX_TAG_BYTES);
    return new Promise<ReceivedFd>((resolve, reject) => {
      c.recvmsg.async(sock, msg, MSG_CMSG_CLOEXEC, (err, res) => {
        const errno = koffi.errno();
        try {
          if (err) throw err instanceof Error ? err : new Error(JSON.stringify(err));
          const n = Number(res);
          if (n < 0)
            throw errno === EAGAIN ? new FdTimeoutError(timeoutMs, this.path) : new OsError("recvmsg", errno);
          resolve(received(b, payload, n));
        } catch (e) {
          reject(e instanceof Error ? e : new Error(String(e)));
        } finally {
          b.free();
        }
      });
    });
  }

  get handle(): number {
    if (this.#sock < 0) throw new SymmkitError("SYMMKIT_DISPOSED", `FdChannel ${this.path} was closed`);
    return this.#sock;
  }

  /** Closes the socket; the caller removes the socket file with its directory. */
  close(): void {
    if (this.#sock < 0) return;
    libc().close(this.#sock);
    this.#sock = -1;
  }
}

/** The descriptor and tag of a message recvmsg put into `b` (its `n` payload bytes at `payload`). */
function received(b: NativeBlock, payload: number, n: number): ReceivedFd {
  const flags = b.view.getInt32(48, true);
  if (flags & (MSG_CTRUNC | MSG_TRUNC))
    throw new SymmkitError("SYMMKIT_OS_ERROR", "recvmsg: message truncated");
  const cmsg = MSGHDR + IOVEC;
  const cmsgLen = Number(b.view.getBigUint64(cmsg, true));
  if (
    cmsgLen < CMSG_LEN_ONE_FD ||
    b.view.getInt32(cmsg + 8, true) !== SOL_SOCKET ||
    b.view.getInt32(cmsg + 12, true) !== SCM_RIGHTS
  ) {
    throw new SymmkitError("SYMMKIT_OS_ERROR", "recvmsg: a message arrived without a file descriptor");
  }
  return { fd: b.view.getInt32(cmsg + 16, true), tag: Buffer.from(b.u8.subarray(payload, payload + n)) };
}

/** Closes a descriptor received or exported (through libc: Node does not own it). */
export function closeFd(fd: number): void {
  check(libc().close(fd), `close(${fd})`);
}
