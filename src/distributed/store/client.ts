// The rendezvous store's client. Requests are pipelined on one connection and answered in order. Every
// blocking call has a deadline, enforced by the server (which names the keys still missing) and again by
// the client, so that a server that hangs or dies never hangs a rank. Every argument is checked before
// anything is sent: a bad one is an InvalidArgumentError and the connection goes on as before (the server
// would drop a connection that sent it, and every later call on it would fail).
import net from "node:net";
import { InvalidArgumentError, SymmkitError } from "../../errors.js";
import { DEFAULT_STORE_TIMEOUT_MS } from "../../settings.js";
import {
  FrameReader,
  FrameSplitter,
  FrameWriter,
  MAX_FRAME_BYTES,
  MAX_KEY_BYTES,
  MAX_KEYS_PER_REQUEST,
  MAX_TOKEN_BYTES,
  Op,
  ProtocolError,
  Status,
} from "./protocol.js";

/** The longest deadline a store call takes: as long as a timer can count (about 24.8 days). */
export const MAX_STORE_TIMEOUT_MS = 2 ** 31 - 1;
const KEEPALIVE_DELAY_MS = 60_000;
/** How long past a blocking request's deadline the client waits for the server's own answer. */
const ANSWER_MARGIN_MS = 5000;

export class StoreTimeoutError extends SymmkitError {
  /** `why`: what the caller knows of the keys' absence, in place of the general guess. */
  constructor(
    readonly what: string,
    readonly keys: readonly string[],
    readonly timeoutMs: number,
    why?: string,
  ) {
    super(
      "SYMMKIT_STORE_TIMEOUT",
      `${what} timed out after ${timeoutMs} ms waiting for ${keys.length ? keys.join(", ") : "the store"}; ` +
        (why ??
          "a rank that should have set them may have failed or not started (see the launcher's output)"),
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
    const timeoutMs = checkTimeout("StoreClient.connect", options.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS);
    const { host, port, token } = address;
    if (typeof host !== "string" || host === "")
      throw new InvalidArgumentError(
        `StoreClient.connect: host must be a host name or address, got ${show(host)}`,
      );
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      throw new InvalidArgumentError(
        `StoreClient.connect: port must be a whole number from 1 to 65535, got ${show(port)}`,
      );
    if (typeof token !== "string")
      throw new InvalidArgumentError(
        `StoreClient.connect: token must be a string (the job's SYMMKIT_JOB_TOKEN), got ${show(token)}`,
      );
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
    const what = "set";
    const w = new FrameWriter()
      .u8(Op.Set)
      .str(checkKey(what, key))
      .bytes(checkValue(what, "value", value));
    await this.#ok(w, `set(${key})`);
  }

  /** The value of `key`, waiting up to the timeout for some rank to set it. */
  async get(key: string, options: { timeoutMs?: number } = {}): Promise<Buffer> {
    checkKey("get", key);
    const t = checkTimeout("get", options.timeoutMs ?? this.timeoutMs);
    return (await this.#ok(new FrameWriter().u8(Op.Get).str(key).u32(t), `get(${key})`, [key], t)).bytes();
  }

  /** The value of `key`, or undefined at once if it is not set. */
  async tryGet(key: string): Promise<Buffer | undefined> {
    const r = await this.#request(
      new FrameWriter().u8(Op.TryGet).str(checkKey("tryGet", key)),
      `tryGet(${key})`,
      [key],
      this.timeoutMs,
    );
    return r.status === Status.Missing ? undefined : Buffer.from(r.reader.bytes());
  }

  /** Atomically adds `delta` to the counter at `key` (missing counts as 0); returns the new value. */
  async add(key: string, delta: number | bigint = 1): Promise<bigint> {
    const w = new FrameWriter().u8(Op.Add).str(checkKey("add", key)).i64(checkDelta(delta));
    return (await this.#ok(w, `add(${key})`)).i64();
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
    const what = "compareSet";
    const w = new FrameWriter().u8(Op.CompareSet).str(checkKey(what, key));
    if (expected === undefined) w.u8(0);
    else w.u8(1).bytes(checkValue(what, "expected", expected));
    w.bytes(checkValue(what, "desired", desired));
    return Buffer.from((await this.#ok(w, `compareSet(${key})`)).bytes());
  }

  /** Waits until every key is set; StoreTimeoutError names those still missing. */
  async wait(keys: readonly string[], options: { timeoutMs?: number } = {}): Promise<void> {
    if (!Array.isArray(keys) || keys.length > MAX_KEYS_PER_REQUEST)
      throw new InvalidArgumentError(
        `StoreClient.wait: keys must be an array of at most ${MAX_KEYS_PER_REQUEST} keys, got ${
          Array.isArray(keys) ? `${keys.length} keys` : show(keys)
        }: wait for fewer at a time`,
      );
    for (const k of keys) checkKey("wait", k);
    const t = checkTimeout("wait", options.timeoutMs ?? this.timeoutMs);
    await this.#ok(new FrameWriter().u8(Op.Wait).strings(keys).u32(t), `wait`, keys, t);
  }

  async delete(key: string): Promise<boolean> {
    const w = new FrameWriter().u8(Op.Delete).str(checkKey("delete", key));
    return (await this.#ok(w, `delete(${key})`)).u8() === 1;
  }

  /**
   * Waits until `count` participants have reached barrier `name`. Reusable: each call of this client
   * with the same name is a new round (one at a time), and every participant must call it the same
   * number of times. The store keeps one key per name: the last to arrive at round r deletes r's counter
   * (everyone has counted) and round r-1's `done` (everyone has returned from waiting on it, or they
   * would not have arrived at round r).
   */
  async barrier(name: string, count: number, options: { timeoutMs?: number } = {}): Promise<void> {
    if (typeof name !== "string")
      throw new InvalidArgumentError(`StoreClient.barrier: name must be a string, got ${show(name)}`);
    if (!Number.isSafeInteger(count) || count < 1)
      throw new InvalidArgumentError(
        `StoreClient.barrier: count must be a whole number >= 1 (the participants), got ${show(count)}`,
      );
    checkTimeout("barrier", options.timeoutMs ?? this.timeoutMs);
    const round = (this.#barrierRounds.get(name) ?? 0) + 1;
    const key = (r: number, what: "arrived" | "done"): string => `symmkit/barrier/${name}/${r}/${what}`;
    // The longest key this barrier will use, checked before its round is counted.
    checkKey("barrier", key(Number.MAX_SAFE_INTEGER, "arrived"), "barrier name");
    this.#barrierRounds.set(name, round);
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
    let frame: Buffer;
    try {
      frame = w.frame();
    } catch (e) {
      if (!(e instanceof ProtocolError)) throw e;
      return Promise.reject(
        new InvalidArgumentError(
          `StoreClient: ${what} is a request of more than ${MAX_FRAME_BYTES} bytes, the most the store ` +
            "takes in one: store the value in parts under several keys",
        ),
      );
    }
    return new Promise((resolve, reject) => {
      // The server answers a blocking request at its deadline; past that plus a margin, it is gone.
      const cancel = after(timeoutMs + ANSWER_MARGIN_MS, () => {
        const e = new StoreTimeoutError(`${what} (no answer from the store)`, keys, timeoutMs);
        this.#fail(e);
      });
      this.#pending.push({
        resolve: (reply) => {
          cancel();
          resolve(reply);
        },
        reject: (e) => {
          cancel();
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

/** A value as the error messages show it. */
function show(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v);
  if (typeof v === "bigint") return `${v}n`;
  if (v === null || typeof v !== "object") return String(v);
  return Array.isArray(v) ? "an array" : `a ${v.constructor?.name ?? "object"}`;
}

/** `key` if the store takes it; else an InvalidArgumentError saying why. */
function checkKey(call: string, key: unknown, what = "key"): string {
  if (typeof key !== "string")
    throw new InvalidArgumentError(`StoreClient.${call}: the ${what} must be a string, got ${show(key)}`);
  const bytes = Buffer.byteLength(key, "utf8");
  if (bytes > MAX_KEY_BYTES)
    throw new InvalidArgumentError(
      `StoreClient.${call}: the ${what} makes a key of ${bytes} bytes (UTF-8), and the store takes keys of at ` +
        `most ${MAX_KEY_BYTES}: use a shorter one (a long name can be hashed)`,
    );
  return key;
}

/** `v`'s bytes if it is a value the store takes. */
function checkValue(call: string, what: string, v: unknown): Uint8Array {
  if (typeof v === "string") return Buffer.from(v, "utf8");
  if (v instanceof Uint8Array) return v;
  throw new InvalidArgumentError(
    `StoreClient.${call}: ${what} must be a string or a Uint8Array (a Buffer), got ${show(v)}`,
  );
}

/** `t` if it is a deadline a store call takes (0: do not wait). */
function checkTimeout(call: string, t: unknown): number {
  if (typeof t !== "number" || !Number.isInteger(t) || t < 0 || t > MAX_STORE_TIMEOUT_MS)
    throw new InvalidArgumentError(
      `StoreClient.${call}: timeoutMs must be a whole number of milliseconds from 0 to ` +
        `${MAX_STORE_TIMEOUT_MS} (about 24.8 days), got ${show(t)}`,
    );
  return t;
}

const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;

/** `delta` as the signed 64-bit integer the store adds. */
function checkDelta(delta: unknown): bigint {
  if (typeof delta === "number" && Number.isSafeInteger(delta)) return BigInt(delta);
  if (typeof delta === "bigint" && delta >= I64_MIN && delta <= I64_MAX) return delta;
  throw new InvalidArgumentError(
    `StoreClient.add: delta must be a whole number (a safe integer, or a bigint within 64 bits), got ${show(delta)}`,
  );
}

/** Calls `f` after `ms`, which may be longer than one timer can count; returns what cancels it. */
function after(ms: number, f: () => void): () => void {
  const MAX_TIMER_MS = 2 ** 31 - 1;
  let timer = setTimeout(step, Math.min(ms, MAX_TIMER_MS));
  let left = ms - Math.min(ms, MAX_TIMER_MS);
  function step(): void {
    if (left <= 0) return f();
    const next = Math.min(left, MAX_TIMER_MS);
    left -= next;
    timer = setTimeout(step, next);
  }
  return () => clearTimeout(timer);
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
