// The rendezvous store's server: an in-memory key-value map behind a TCP port. A connection must first
// present the job's token; each connection's requests are served in order (a blocking wait holds only
// its own connection). A malformed or oversized frame closes that connection; the server keeps serving.
import crypto from "node:crypto";
import net from "node:net";
import {
  FrameReader,
  FrameSplitter,
  FrameWriter,
  MAX_FRAME_BYTES,
  Op,
  ProtocolError,
  Status,
} from "./protocol.js";

export interface StoreServerOptions {
  /** Interface to listen on: loopback unless a multi-node job names one. */
  readonly host?: string;
  /** 0 picks a free port. */
  readonly port?: number;
  readonly token: string;
}

interface Waiter {
  readonly keys: readonly string[];
  readonly done: () => void;
}

export class StoreServer {
  readonly #server: net.Server;
  readonly #token: Buffer;
  readonly #data = new Map<string, Buffer>();
  readonly #waiters = new Set<Waiter>();
  readonly #sockets = new Set<net.Socket>();

  private constructor(server: net.Server, token: string) {
    this.#server = server;
    this.#token = Buffer.from(token, "utf8");
  }

  static start(options: StoreServerOptions): Promise<StoreServer> {
    const server = net.createServer();
    const store = new StoreServer(server, options.token);
    server.on("connection", (s) => store.#serve(s));
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => {
        server.off("error", reject);
        resolve(store);
      });
    });
  }

  get port(): number {
    return (this.#server.address() as net.AddressInfo).port;
  }

  get host(): string {
    return (this.#server.address() as net.AddressInfo).address;
  }

  /** Stops listening and drops every connection (clients then fail with StoreClosedError). */
  close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }

  #serve(socket: net.Socket): void {
    this.#sockets.add(socket);
    socket.setNoDelay(true);
    const splitter = new FrameSplitter();
    let authenticated = false;
    let chain = Promise.resolve();
    const drop = (): void => void socket.destroy();
    socket.on("error", drop);
    socket.on("close", () => this.#sockets.delete(socket));
    socket.on("data", (chunk: Buffer) => {
      let frames: Buffer[];
      try {
        frames = splitter.push(chunk);
      } catch {
        return drop();
      }
      for (const body of frames) {
        chain = chain.then(async () => {
          if (socket.destroyed) return;
          try {
            const r = new FrameReader(body);
            const op = r.u8() as Op;
            if (!authenticated) {
              if (op !== Op.Hello || !this.#tokenMatches(r.bytes(1024))) {
                socket.end(new FrameWriter().u8(Status.Refused).str("wrong job token").frame());
                return;
              }
              r.end();
              authenticated = true;
              socket.write(new FrameWriter().u8(Status.Ok).frame());
              return;
            }
            socket.write(await this.#handle(op, r));
          } catch (e) {
            if (!(e instanceof ProtocolError)) throw e;
            drop();
          }
        });
      }
    });
  }

  #tokenMatches(given: Buffer): boolean {
    return given.length === this.#token.length && crypto.timingSafeEqual(given, this.#token);
  }

  async #handle(op: Op, r: FrameReader): Promise<Buffer> {
    const ok = (): FrameWriter => new FrameWriter().u8(Status.Ok);
    switch (op) {
      case Op.Set: {
        const key = r.key();
        const value = Buffer.from(r.bytes(MAX_FRAME_BYTES));
        r.end();
        this.#put(key, value);
        return ok().frame();
      }
      case Op.Get: {
        const key = r.key();
        const timeoutMs = r.u32();
        r.end();
        const missing = await this.#waitFor([key], timeoutMs);
        if (missing.length > 0) return new FrameWriter().u8(Status.Timeout).strings(missing).frame();
        return ok().bytes(this.#data.get(key)!).frame();
      }
      case Op.TryGet: {
        const key = r.key();
        r.end();
        const v = this.#data.get(key);
        return v ? ok().bytes(v).frame() : new FrameWriter().u8(Status.Missing).frame();
      }
      case Op.Add: {
        const key = r.key();
        const delta = r.i64();
        r.end();
        const cur = this.#data.get(key);
        const text = cur?.toString("utf8") ?? "0";
        if (!/^-?\d+$/.test(text))
          return new FrameWriter().u8(Status.Refused).str(`${key} does not hold a counter`).frame();
        const next = BigInt.asIntN(64, BigInt(text) + delta);
        this.#put(key, Buffer.from(next.toString(), "utf8"));
        return ok().i64(next).frame();
      }
      case Op.CompareSet: {
        const key = r.key();
        const hasExpected = r.u8() === 1;
        const expected = hasExpected ? r.bytes() : undefined;
        const desired = Buffer.from(r.bytes());
        r.end();
        const cur = this.#data.get(key);
        const matches = cur === undefined ? !hasExpected : hasExpected && cur.equals(expected!);
        if (matches) this.#put(key, desired);
        return ok()
          .bytes(this.#data.get(key) ?? Buffer.alloc(0))
          .frame();
      }
      case Op.Wait: {
        const keys = r.keys();
        const timeoutMs = r.u32();
        r.end();
        const missing = await this.#waitFor(keys, timeoutMs);
        return missing.length > 0
          ? new FrameWriter().u8(Status.Timeout).strings(missing).frame()
          : ok().frame();
      }
      case Op.Delete: {
        const key = r.key();
        r.end();
        return ok()
          .u8(this.#data.delete(key) ? 1 : 0)
          .frame();
      }
      default:
        throw new ProtocolError(`unknown op ${String(op)}`);
    }
  }

  #put(key: string, value: Buffer): void {
    this.#data.set(key, value);
    for (const w of this.#waiters) if (w.keys.every((k) => this.#data.has(k))) w.done();
  }

  /** Resolves with the keys still missing at the deadline (none when all arrived). */
  #waitFor(keys: readonly string[], timeoutMs: number): Promise<string[]> {
    const missing = (): string[] => keys.filter((k) => !this.#data.has(k));
    if (missing().length === 0) return Promise.resolve([]);
    return new Promise((resolve) => {
      const waiter: Waiter = {
        keys,
        done: () => {
          clearTimeout(timer);
          this.#waiters.delete(waiter);
          resolve([]);
        },
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(waiter);
        resolve(missing());
      }, timeoutMs);
      this.#waiters.add(waiter);
    });
  }
}
