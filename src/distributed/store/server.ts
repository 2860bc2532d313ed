// The rendezvous store's server: an in-memory key-value map behind a TCP port. A connection must first
// present the job's token; each connection's requests are served in order (a blocking wait holds only
// its own connection). A malformed or oversized frame closes that connection; the server keeps serving.
// Whoever lacks the token can cost the server little and can never keep a token holder out: a connection
// may send only a small hello before it authenticates and must do so within a deadline; only so many may
// be waiting to, and a newcomer beyond that closes the one that has waited longest rather than being
// turned away. Every connection has a deadline to finish a frame it has begun.
import crypto from "node:crypto";
import net from "node:net";
import { InvalidArgumentError } from "../../errors.js";
import {
  FrameReader,
  FrameSplitter,
  FrameWriter,
  MAX_FRAME_BYTES,
  MAX_HELLO_FRAME_BYTES,
  MAX_TOKEN_BYTES,
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
  /** A new connection that has not presented the token within this is closed (default 5 s). */
  readonly helloTimeoutMs?: number;
  /** A connection that began a frame and has not sent all of it within this is closed (default 60 s). */
  readonly frameTimeoutMs?: number;
  /**
   * Connections yet to present the token, at most (default 64); a newcomer beyond closes the oldest of
   * them, so that strangers cannot hold the store shut.
   */
  readonly maxUnauthenticated?: number;
  /**
   * Connections in all, at most (default 4096); a newcomer beyond closes the oldest connection yet to
   * present the token, or, if every one has, is closed at once.
   */
  readonly maxConnections?: number;
}

const DEFAULTS = {
  helloTimeoutMs: 5000,
  frameTimeoutMs: 60_000,
  maxUnauthenticated: 64,
  maxConnections: 4096,
};

/** Authenticated connections may idle for hours; keepalive probes find a peer whose host went away. */
const KEEPALIVE_DELAY_MS = 60_000;
/** setTimeout's ceiling; a wait asked for longer (a u32 allows 49 days) waits this long. */
const MAX_TIMER_MS = 2 ** 31 - 1;

interface Waiter {
  readonly keys: readonly string[];
  /** Resolves the wait with the keys still missing and forgets it. */
  readonly finish: (missing: string[]) => void;
}

export class StoreServer {
  readonly #server: net.Server;
  readonly #token: Buffer;
  readonly #limits: typeof DEFAULTS;
  readonly #data = new Map<string, Buffer>();
  readonly #waiters = new Set<Waiter>();
  readonly #sockets = new Set<net.Socket>();
  /** Connections yet to present the token, oldest first. */
  readonly #strangers = new Set<net.Socket>();

  private constructor(server: net.Server, token: Buffer, limits: typeof DEFAULTS) {
    this.#server = server;
    this.#token = token;
    this.#limits = limits;
  }

  static async start(options: StoreServerOptions): Promise<StoreServer> {
    const token = Buffer.from(options.token, "utf8");
    if (token.length > MAX_TOKEN_BYTES)
      throw new InvalidArgumentError(
        `the job token is ${token.length} bytes; the store takes at most ${MAX_TOKEN_BYTES}: choose a shorter SYMMKIT_JOB_TOKEN`,
      );
    const limits = { ...DEFAULTS };
    for (const k of Object.keys(DEFAULTS) as (keyof typeof DEFAULTS)[]) {
      const v = options[k];
      if (v === undefined) continue;
      if (!Number.isInteger(v) || v < 1)
        throw new InvalidArgumentError(`StoreServer option ${k} must be a positive integer, got ${v}`);
      limits[k] = v;
    }
    const server = net.createServer();
    const store = new StoreServer(server, token, limits);
    server.on("connection", (s) => store.#serve(s));
    // A failed accept (out of file descriptors, a connection reset before it was taken) costs only that
    // connection: its client retries; the store goes on serving the others.
    const listening = (): void => void server.on("error", () => undefined);
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => {
        server.off("error", reject);
        listening();
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

  /** How many keys the store holds. */
  get size(): number {
    return this.#data.size;
  }

  /** Stops listening and drops every connection (clients then fail with StoreClosedError). */
  close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }

  #serve(socket: net.Socket): void {
    const { maxConnections, maxUnauthenticated, helloTimeoutMs, frameTimeoutMs } = this.#limits;
    // Strangers never keep a token holder out: when a cap is reached, the stranger that has waited longest
    // makes room. Only authenticated connections alone filling maxConnections turn a newcomer away.
    if (this.#strangers.size >= maxUnauthenticated) this.#evictOldestStranger();
    if (this.#sockets.size >= maxConnections && !this.#evictOldestStranger()) {
      socket.destroy();
      return;
    }
    this.#sockets.add(socket);
    socket.setNoDelay(true);
    // Until the hello, the splitter holds at most one hello's bytes (its limit), and nothing once it is
    // refused: what a stranger costs is bounded, and freed when it goes.
    let splitter: FrameSplitter | undefined = new FrameSplitter(MAX_HELLO_FRAME_BYTES);
    const waits = new Set<Waiter>();
    let authenticated = false;
    let chain = Promise.resolve();
    let frameTimer: NodeJS.Timeout | undefined;
    const drop = (): void => void socket.destroy();
    const helloTimer = setTimeout(drop, helloTimeoutMs);
    this.#strangers.add(socket);
    socket.on("error", drop);
    socket.on("close", () => {
      clearTimeout(helloTimer);
      clearTimeout(frameTimer);
      this.#sockets.delete(socket);
      this.#strangers.delete(socket);
      splitter = undefined;
      // Nobody reads the answers now: end the waits with what is still missing.
      for (const w of waits) w.finish(w.keys.filter((k) => !this.#data.has(k)));
    });
    socket.on("data", (chunk: Buffer) => {
      if (splitter === undefined || socket.destroyed) return;
      splitter.push(chunk);
      let completed = false;
      try {
        for (let body = splitter.next(); body; body = splitter?.next()) {
          completed = true;
          if (authenticated) {
            chain = chain.then(() => this.#answer(socket, body, waits));
            continue;
          }
          // The hello is answered here and now, so that the frames behind it in this chunk already get
          // the authenticated limit.
          const r = new FrameReader(body);
          const op = r.u8() as Op;
          if (op !== Op.Hello || !this.#tokenMatches(r.bytes(MAX_TOKEN_BYTES))) {
            // Whatever else it sent is dropped unread; the hello deadline (or eviction) closes it if the
            // peer does not, which lets the refusal reach a client that reads it.
            splitter = undefined;
            const why =
              op === Op.Hello ? "wrong job token" : "the first request must be a hello with the job token";
            socket.end(new FrameWriter().u8(Status.Refused).str(why).frame());
            return;
          }
          r.end();
          authenticated = true;
          this.#strangers.delete(socket);
          clearTimeout(helloTimer);
          splitter.limit = MAX_FRAME_BYTES;
          socket.setKeepAlive(true, KEEPALIVE_DELAY_MS);
          socket.write(new FrameWriter().u8(Status.Ok).frame());
        }
      } catch (e) {
        if (!(e instanceof ProtocolError)) throw e;
        return drop();
      }
      // A frame under way must be finished within the bound, counted from its first byte.
      if (completed || !splitter?.partial) {
        clearTimeout(frameTimer);
        frameTimer = undefined;
      }
      if (splitter?.partial && frameTimer === undefined) frameTimer = setTimeout(drop, frameTimeoutMs);
    });
  }

  /** Closes the stranger that connected first, if any; whether there was one. */
  #evictOldestStranger(): boolean {
    const oldest = this.#strangers.values().next();
    if (oldest.done) return false;
    // Forgotten now, not at its "close": the newcomer takes its place at once.
    this.#strangers.delete(oldest.value);
    this.#sockets.delete(oldest.value);
    oldest.value.destroy();
    return true;
  }

  /** Serves one request of an authenticated connection; a malformed one closes the connection. */
  async #answer(socket: net.Socket, body: Buffer, waits: Set<Waiter>): Promise<void> {
    if (socket.destroyed) return;
    try {
      const r = new FrameReader(body);
      const reply = await this.#handle(r.u8(), r, waits);
      if (!socket.destroyed) socket.write(reply);
    } catch (e) {
      if (!(e instanceof ProtocolError)) throw e;
      socket.destroy();
    }
  }

  #tokenMatches(given: Buffer): boolean {
    return given.length === this.#token.length && crypto.timingSafeEqual(given, this.#token);
  }

  async #handle(op: Op, r: FrameReader, waits: Set<Waiter>): Promise<Buffer> {
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
        const missing = await this.#waitFor([key], timeoutMs, waits);
        // A key deleted again before this answer counts as missing.
        const value = this.#data.get(key);
        if (missing.length > 0 || value === undefined)
          return new FrameWriter().u8(Status.Timeout).strings([key]).frame();
        return ok().bytes(value).frame();
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
        const missing = await this.#waitFor(keys, timeoutMs, waits);
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
    for (const w of this.#waiters) if (w.keys.every((k) => this.#data.has(k))) w.finish([]);
  }

  /**
   * Resolves with the keys still missing at the deadline (none when all arrived). The wait is also in
   * `waits`, its connection's, which ends it early when the connection closes.
   */
  #waitFor(keys: readonly string[], timeoutMs: number, waits: Set<Waiter>): Promise<string[]> {
    const missing = (): string[] => keys.filter((k) => !this.#data.has(k));
    if (missing().length === 0) return Promise.resolve([]);
    return new Promise((resolve) => {
      const waiter: Waiter = {
        keys,
        finish: (left) => {
          clearTimeout(timer);
          this.#waiters.delete(waiter);
          waits.delete(waiter);
          resolve(left);
        },
      };
      const timer = setTimeout(() => waiter.finish(missing()), Math.min(timeoutMs, MAX_TIMER_MS));
      this.#waiters.add(waiter);
      waits.add(waiter);
    });
  }
}
