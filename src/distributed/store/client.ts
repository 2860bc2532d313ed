// The rendezvous store's client. Requests are pipelined on one connection and answered in order. Every
// blocking call has a deadline, enforced by the server (which names the keys still missing) and again by
// the client, so that a server that hangs or dies never hangs a rank.
import net from "node:net";
import { InvalidArgumentError, SymmkitError } from "../../errors.js";
import { FrameReader, FrameSplitter, FrameWriter, MAX_TOKEN_BYTES, Op, Status } from "./protocol.js";

export const DEFAULT_STORE_TIMEOUT_MS = 300_000;
const KEEPALIVE_DELAY_MS = 60_000;

export class StoreTimeoutError extends SymmkitError {
  constructor(
    readonly what: string,
    readonly keys: readonly string[],
    readonly timeoutMs: number,
  ) {
    super(
      "SYMMKIT_STORE_TIMEOUT",
      `${what} timed out after ${timeoutMs} ms waiting for ${keys.length ? keys.join(", ") : "the store"}; ` +
        `a rank that should have set them may have failed or not started (see the launcher's output)`,
    );
  }
}

export class StoreClosedError extends SymmkitError {
  constructor(detail: string) {
    super(
      "SYMMKIT_STORE_CLOSED",
      `the rendezvous store connection closed: ${detail}. Did the launcher or rank 0 exit?`,
    );
  }
}

export class StoreRefusedError extends SymmkitError {
  constructor(detail: string) {
    super("SYMMKIT_STORE_REFUSED", `the rendezvous store refused the request: ${detail}`);
  }
}

export interface StoreAddress {
  readonly host: string;
  readonly port: number;
  readonly token: string;
}

interface Reply {
  readonly status: Status;
  readonly reader: FrameReader;
}

interface Pending {
  readonly resolve: (r: Reply) => void;
  readonly reject: (e: Error) => void;
}

export class StoreClient {
  readonly #socket: net.Socket;
  readonly #pending: Pending[] = [];
  readonly timeoutMs: number;
  readonly #barrierRounds = new Map<string, number>();
  #closed: Error | undefined;

  private constructor(socket: net.Socket, timeoutMs: number) {
    this.#socket = socket;
    this.timeoutMs = timeoutMs;
    // A rank may go hours between requests: keepalive probes notice a store host that went away.
    socket.setKeepAlive(true, KEEPALIVE_DELAY_MS);
    const splitter = new FrameSplitter();
    socket.on("data", (chunk: Buffer) => {
      splitter.push(chunk);
      try {
        for (let body = splitter.next(); body; body = splitter.next()) {
          const reader = new FrameReader(body);
          const status = reader.u8() as Status; // an empty frame fails the connection, this request included
          this.#pending.shift()?.resolve({ status, reader });
        }
      } catch (e) {
        this.#fail(e as Error);
      }
    });
    socket.on("error", (e) => this.#fail(new StoreClosedError(e.message)));
    socket.on("close", () => this.#fail(new StoreClosedError("the server went away")));
  }

  /**
   * Connects, retrying until `timeoutMs` (the server may still be starting), then presents the token.
   */
  static async connect(address: StoreAddress, options: { timeoutMs?: number } = {}): Promise<StoreClient> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
    const tokenBytes = Buffer.byteLength(address.token, "utf8");
    if (tokenBytes > MAX_TOKEN_BYTES)
      throw new InvalidArgumentError(
        `the job token is ${tokenBytes} bytes; the store takes at most ${MAX_TOKEN_BYTES}: choose a shorter SYMMKIT_JOB_TOKEN`,
      );
    const deadline = Date.now() + timeoutMs;
    let lastError = "";
    for (let delay = 10; Date.now() < deadline; delay = Math.min(delay * 2, 500)) {
      try {
        const socket = await connectOnce(address.host, address.port, Math.max(1, deadline - Date.now()));
        const client = new StoreClient(socket, timeoutMs);
        const r = await client.#request(
          new FrameWriter().u8(Op.Hello).str(address.token),
          "hello",
          [],
          timeoutMs,
        );
        if (r.status !== Status.Ok) {
          client.close();
          throw new StoreRefusedError(r.reader.key());
        }
        return client;
      } catch (e) {
        if (e instanceof StoreRefusedError) throw e;
        lastError = (e as Error).message;
        await new Promise((res) => setTimeout(res, Math.min(delay, Math.max(0, deadline - Date.now()))));
      }
    }
    throw new StoreTimeoutError(
      `connecting to the store at ${address.host}:${address.port} (${lastError})`,
      [],
      timeoutMs,
    );
  }

  close(): void {
    this.#closed ??= new StoreClosedError("closed by this process");
    this.#socket.destroy();
  }

  async set(key: string, value: string | Uint8Array): Promise<void> {
    await this.#ok(new FrameWriter().u8(Op.Set).str(key).bytes(toBytes(value)), `set(${key})`);
  }

  /** The value of `key`, waiting up to the timeout for some rank to set it. */
  async get(key: string, options: { timeoutMs?: number } = {}): Promise<Buffer> {
    const t = options.timeoutMs ?? this.timeoutMs;
    return (await this.#ok(new FrameWriter().u8(Op.Get).str(key).u32(t), `get(${key})`, [key], t)).bytes();
  }

  /** The value of `key`, or undefined at once if it is not set. */
  async tryGet(key: string): Promise<Buffer | undefined> {
    const r = await this.#request(
      new FrameWriter().u8(Op.TryGet).str(key),
      `tryGet(${key})`,
      [key],
      this.timeoutMs,
    );
    return r.status === Status.Missing ? undefined : Buffer.from(r.reader.bytes());
  }

  /** Atomically adds `delta` to the counter at `key` (missing counts as 0); returns the new value. */
  async add(key: string, delta: number | bigint = 1): Promise<bigint> {
    return (await this.#ok(new FrameWriter().u8(Op.Add).str(key).i64(BigInt(delta)), `add(${key})`)).i64();
  }

  /**
   * Sets `key` to `desired` if it currently equals `expected` (undefined: if it is missing). Returns the
   * value after the operation, so the caller sees whether its write won.
   */
  async compareSet(
    key: string,
    expected: string | Uint8Array | undefined,
    desired: string | Uint8Array,
  ): Promise<Buffer> {
    const w = new FrameWriter().u8(Op.CompareSet).str(key);
    if (expected === undefined) w.u8(0);
    else w.u8(1).bytes(toBytes(expected));
    return Buffer.from((await this.#ok(w.bytes(toBytes(desired)), `compareSet(${key})`)).bytes());
  }

  /** Waits until every key is set; StoreTimeoutError names those still missing. */
  async wait(keys: readonly string[], options: { timeoutMs?: number } = {}): Promise<void> {
    const t = options.timeoutMs ?? this.timeoutMs;
    await this.#ok(new FrameWriter().u8(Op.Wait).strings(keys).u32(t), `wait`, keys, t);
  }

  async delete(key: string): Promise<boolean> {
    return (await this.#ok(new FrameWriter().u8(Op.Delete).str(key), `delete(${key})`)).u8() === 1;
  }

  /**
   * Waits until `count` participants have reached barrier `name`. Reusable: each call of this client
   * with the same name is a new round (one at a time), and every participant must call it the same
   * number of times. The store keeps one key per name: the last to arrive at round r deletes r's counter
   * (everyone has counted) and round r-1's `done` (everyone has returned from waiting on it, or they
   * would not have arrived at round r).
   */
  async barrier(name: string, count: number, options: { timeoutMs?: number } = {}): Promise<void> {
    const round = (this.#barrierRounds.get(name) ?? 0) + 1;
    this.#barrierRounds.set(name, round);
    const key = (r: number, what: "arrived" | "done"): string => `symmkit/barrier/${name}/${r}/${what}`;
    if ((await this.add(key(round, "arrived"))) === BigInt(count)) {
      await Promise.all([
        this.set(key(round, "done"), "1"),
        this.delete(key(round, "arrived")),
        round > 1 && this.delete(key(round - 1, "done")),
      ]);
    }
    await this.wait([key(round, "done")], options).catch(async (e: unknown) => {
      if (!(e instanceof StoreTimeoutError)) throw e;
      const arrived = (await this.tryGet(key(round, "arrived")))?.toString() ?? "0";
      throw new StoreTimeoutError(
        `barrier ${name} (round ${round}): ${arrived} of ${count} arrived`,
        e.keys,
        e.timeoutMs,
      );
    });
  }

  async #ok(
    w: FrameWriter,
    what: string,
    keys: readonly string[] = [],
    timeoutMs = this.timeoutMs,
  ): Promise<FrameReader> {
    const r = await this.#request(w, what, keys, timeoutMs);
    if (r.status === Status.Timeout) throw new StoreTimeoutError(what, r.reader.keys(), timeoutMs);
    if (r.status === Status.Refused) throw new StoreRefusedError(r.reader.key());
    return r.reader;
  }

  #request(w: FrameWriter, what: string, keys: readonly string[], timeoutMs: number): Promise<Reply> {
    if (this.#closed) return Promise.reject(this.#closed);
    const frame = w.frame();
    return new Promise((resolve, reject) => {
      // The server answers a blocking request at its deadline; past that plus a margin, it is gone.
      const timer = setTimeout(
        () => {
          const e = new StoreTimeoutError(`${what} (no answer from the store)`, keys, timeoutMs);
          this.#fail(e);
        },
        Math.min(timeoutMs + 5000, 2 ** 31 - 1),
      );
      this.#pending.push({
        resolve: (reply) => {
          clearTimeout(timer);
          resolve(reply);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.#socket.write(frame);
    });
  }

  #fail(e: Error): void {
    this.#closed ??= e;
    this.#socket.destroy();
    for (const p of this.#pending.splice(0)) p.reject(this.#closed);
  }
}

function toBytes(v: string | Uint8Array): Uint8Array {
  return typeof v === "string" ? Buffer.from(v, "utf8") : v;
}

function connectOnce(host: string, port: number, timeoutMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host, port });
    s.setNoDelay(true);
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error("connect timed out"));
    }, timeoutMs);
    s.once("connect", () => {
      clearTimeout(timer);
      s.off("error", reject);
      resolve(s);
    });
    s.once("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}
