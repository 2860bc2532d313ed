// The rendezvous store's wire format. A frame is a u32 little-endian length followed by that many bytes:
// an op byte, then fields. Fields are length-prefixed byte strings (u32 length), u64/i64 integers, or a
// count followed by strings. Nothing received is ever evaluated: keys are UTF-8 text, values are bytes.
import { SymmkitError } from "../../errors.js";

export const MAX_FRAME_BYTES = 64 * 1024 * 1024;
export const MAX_KEY_BYTES = 4096;
export const MAX_TOKEN_BYTES = 1024;
/** The most keys one wait request names. */
export const MAX_KEYS_PER_REQUEST = 65536;
/**
 * The largest frame an unauthenticated connection may send: a hello (op byte, token length, token) fits;
 * anything longer is refused before its body is read, so nobody without the token can make the server
 * buffer more than this.
 */
export const MAX_HELLO_FRAME_BYTES = 2048;

export enum Op {
  Hello = 1,
  Set = 2,
  Get = 3,
  Add = 4,
  CompareSet = 5,
  Wait = 6,
  Delete = 7,
  TryGet = 8,
}

export enum Status {
  Ok = 0,
  Timeout = 1,
  Missing = 2,
  Refused = 3,
}

export class ProtocolError extends SymmkitError {
  constructor(message: string) {
    super("SYMMKIT_STORE_PROTOCOL", message);
  }
}

/** Builds a frame (length prefix included) field by field. */
export class FrameWriter {
  #parts: Buffer[] = [];

  u8(v: number): this {
    this.#parts.push(Buffer.from([v]));
    return this;
  }

  u32(v: number): this {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.#parts.push(b);
    return this;
  }

  i64(v: bigint): this {
    const b = Buffer.alloc(8);
    b.writeBigInt64LE(v);
    this.#parts.push(b);
    return this;
  }

  bytes(v: Uint8Array): this {
    this.u32(v.length);
    this.#parts.push(Buffer.from(v.buffer, v.byteOffset, v.length));
    return this;
  }

  str(v: string): this {
    return this.bytes(Buffer.from(v, "utf8"));
  }

  strings(vs: readonly string[]): this {
    this.u32(vs.length);
    for (const v of vs) this.str(v);
    return this;
  }

  frame(): Buffer {
    const body = Buffer.concat(this.#parts);
    if (body.length > MAX_FRAME_BYTES)
      throw new ProtocolError(`frame of ${body.length} bytes exceeds ${MAX_FRAME_BYTES}`);
    const len = Buffer.alloc(4);
    len.writeUInt32LE(body.length);
    return Buffer.concat([len, body]);
  }
}

/** Reads the fields of one frame body; any overrun is a ProtocolError. */
export class FrameReader {
  #off = 0;
  constructor(readonly body: Buffer) {}

  #need(n: number): void {
    if (this.#off + n > this.body.length) throw new ProtocolError("truncated frame");
  }

  u8(): number {
    this.#need(1);
    return this.body[this.#off++]!;
  }

  u32(): number {
    this.#need(4);
    const v = this.body.readUInt32LE(this.#off);
    this.#off += 4;
    return v;
  }

  i64(): bigint {
    this.#need(8);
    const v = this.body.readBigInt64LE(this.#off);
    this.#off += 8;
    return v;
  }

  bytes(max = MAX_FRAME_BYTES): Buffer {
    const n = this.u32();
    if (n > max) throw new ProtocolError(`field of ${n} bytes exceeds ${max}`);
    this.#need(n);
    const v = this.body.subarray(this.#off, this.#off + n);
    this.#off += n;
    return v;
  }

  key(): string {
    return this.bytes(MAX_KEY_BYTES).toString("utf8");
  }

  keys(): string[] {
    const n = this.u32();
    if (n > MAX_KEYS_PER_REQUEST) throw new ProtocolError(`${n} keys in one request`);
    return Array.from({ length: n }, () => this.key());
  }

  end(): void {
    if (this.#off !== this.body.length) throw new ProtocolError("trailing bytes in frame");
  }
}

/**
 * Splits a byte stream into frame bodies. Chunks are kept in a list with a running total and a frame is
 * assembled with at most one copy once all of it has arrived, so buffering is linear in the bytes
 * received however finely they are split. A declared length above `limit` is a ProtocolError as soon as
 * the length prefix is read, before any of the body is buffered.
 */
export class FrameSplitter {
  #chunks: Buffer[] = [];
  #total = 0;
  /** The body length of the frame under way, once its prefix has been read. */
  #bodyLength: number | undefined;

  /** The largest frame body accepted; the server raises it once a connection has authenticated. */
  constructor(public limit = MAX_FRAME_BYTES) {}

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.#chunks.push(chunk);
    this.#total += chunk.length;
  }

  /** Whether part of a frame (prefix or body) has arrived and the rest has not. */
  get partial(): boolean {
    return this.#total > 0 || this.#bodyLength !== undefined;
  }

  /** The next complete frame body, or undefined until one has arrived. Checks `limit` as it is now. */
  next(): Buffer | undefined {
    if (this.#bodyLength === undefined) {
      if (this.#total < 4) return undefined;
      const len = this.#take(4).readUInt32LE(0);
      if (len > this.limit) throw new ProtocolError(`frame length ${len} exceeds ${this.limit}`);
      this.#bodyLength = len;
    }
    if (this.#total < this.#bodyLength) return undefined;
    const body = this.#take(this.#bodyLength);
    this.#bodyLength = undefined;
    return body;
  }

  /** Removes the first `n` buffered bytes (n <= #total): a view when one chunk holds them, else one copy. */
  #take(n: number): Buffer {
    this.#total -= n;
    const first = this.#chunks[0];
    if (first === undefined || n === 0) return Buffer.alloc(0);
    if (first.length >= n) {
      if (first.length === n) this.#chunks.shift();
      else this.#chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let off = 0;
    let used = 0;
    while (off < n) {
      const c = this.#chunks[used]!;
      const k = Math.min(c.length, n - off);
      c.copy(out, off, 0, k);
      off += k;
      if (k === c.length) used++;
      else this.#chunks[used] = c.subarray(k);
    }
    this.#chunks.splice(0, used);
    return out;
  }
}
