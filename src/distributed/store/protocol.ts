// The rendezvous store's wire format. A frame is a u32 little-endian length followed by that many bytes:
// an op byte, then fields. Fields are length-prefixed byte strings (u32 length), u64/i64 integers, or a
// count followed by strings. Nothing received is ever evaluated: keys are UTF-8 text, values are bytes.
import { SymmkitError } from "../../errors.js";

export const MAX_FRAME_BYTES = 64 * 1024 * 1024;
export const MAX_KEY_BYTES = 4096;

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
    if (n > 65536) throw new ProtocolError(`${n} keys in one request`);
    return Array.from({ length: n }, () => this.key());
  }

  end(): void {
    if (this.#off !== this.body.length) throw new ProtocolError("trailing bytes in frame");
  }
}

/**
 * Splits a byte stream into frame bodies. Returns the bodies complete so far; the rest stays buffered.
 * A length beyond MAX_FRAME_BYTES is a ProtocolError before any of the body is buffered.
 */
export class FrameSplitter {
  #buf: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Buffer[] {
    this.#buf = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
    const out: Buffer[] = [];
    for (;;) {
      if (this.#buf.length < 4) break;
      const len = this.#buf.readUInt32LE(0);
      if (len > MAX_FRAME_BYTES) throw new ProtocolError(`frame length ${len} exceeds ${MAX_FRAME_BYTES}`);
      if (this.#buf.length < 4 + len) break;
      out.push(this.#buf.subarray(4, 4 + len));
      this.#buf = this.#buf.subarray(4 + len);
    }
    return out;
  }
}
