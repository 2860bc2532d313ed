// The rendezvous store under attack. A CPU job started by launch() in this process (which therefore
// serves the store, from a thread of its own) runs rounds of a store barrier, an all-reduce and a store counter, each checked,
// while this process throws hostile frames at the job's store: random bytes, huge declared lengths,
// wrong and oversized tokens, requests without a hello, truncated frames, slow drips, connection floods,
// and garbage after a valid hello (a rank with a bug). The job must finish with exit code 0.
//
//   node --expose-gc dist/src/bench/store-fuzz.js [out.json]   the job under 10 000 frames, then as many
//   rounds alone; the figures to out.json (bench/results/cpu/store-fuzz.json)
//
// The ranks are this file too, run by the launcher with the argument "rank".
import crypto from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { launch } from "../distributed/launcher.js";
import { StoreClient } from "../distributed/store/client.js";
import {
  FrameWriter,
  MAX_HELLO_FRAME_BYTES,
  MAX_TOKEN_BYTES,
  Op,
  Status,
} from "../distributed/store/protocol.js";
import { readEnvVar } from "../settings.js";
import { hostEnvironment } from "./report.js";

const HERE = fileURLToPath(import.meta.url);
/** The key rank 0 polls: once set, and the minimum rounds done, every rank stops after this round. */
const STOP_KEY = "fuzz/stop";

export interface StoreFuzzOptions {
  /** Hostile frames to send; 0 runs the job alone. */
  readonly frames: number;
  readonly seed: bigint;
  readonly ranks?: number;
  /** Rounds every rank runs at least; with a fuzz, they go on until it ends. */
  readonly minRounds?: number;
}

const KINDS = [
  "random-bytes",
  "huge-length",
  "wrong-token",
  "oversized-token",
  "ops-without-hello",
  "truncated",
  "slow-drip",
  "stalled",
  "flood",
  "garbage-after-hello",
] as const;
type Kind = (typeof KINDS)[number];
const perKind = (): Record<Kind, number> =>
  Object.fromEntries(KINDS.map((k) => [k, 0])) as Record<Kind, number>;

/** Relative frequencies; slow drips, stalls and floods hold connections for long, so they are rare. */
const WEIGHTS: Record<Kind, number> = {
  "random-bytes": 25,
  "huge-length": 15,
  "wrong-token": 15,
  "oversized-token": 5,
  "ops-without-hello": 15,
  truncated: 10,
  "slow-drip": 1,
  stalled: 1,
  flood: 0.3,
  "garbage-after-hello": 8,
};

export interface StoreFuzzResult {
  readonly seed: string;
  readonly exitCode: number;
  readonly framesSent: number;
  readonly framesByKind: Record<Kind, number>;
  readonly connections: number;
  /** Hostile connections the server closed, by kind (the others the fuzzer closed itself). */
  readonly closedByServer: Record<Kind, number>;
  /** Replies with status Refused the hostile connections got. */
  readonly refusals: number;
  /** Rounds each rank completed, by rank. */
  readonly rounds: number[];
  readonly jobMs: number;
  readonly fuzzMs: number;
  /** Job time per round (of rank 0), start-up excluded. */
  readonly msPerRound: number;
  /** This process's resident memory (it runs the store server and the fuzzer). */
  readonly rssMiB: { readonly before: number; readonly peak: number; readonly after: number };
  /** Live heap after a full collection, before and after (null unless Node runs with --expose-gc). */
  readonly heapAfterGcMiB: { readonly before: number; readonly after: number } | null;
  readonly output: string[];
}

/** mulberry32: uniform in [0, 1), reproducible from the seed. */
function seededRandom(seed: bigint): () => number {
  let a = Number(BigInt.asUintN(32, seed ^ (seed >> 32n)));
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** What the heap holds after a full collection, to 0.1 MiB: what RSS cannot tell from pages kept. */
function liveHeapMiB(): number | null {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) return null;
  gc();
  return Math.round(process.memoryUsage().heapUsed / 2 ** 20 / 0.1) / 10;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** Hostile connections to one port; counts what was sent and who closed what. */
class Fuzzer {
  readonly framesByKind = perKind();
  readonly closedByServer = perKind();
  connections = 0;
  refusals = 0;
  readonly #open = new Set<net.Socket>();
  /** Sockets this side closed; any other close was the server's. */
  readonly #closedHere = new WeakSet<net.Socket>();
  readonly #pool: Buffer;
  /** Slow drips and stalls under way: a few of each at a time, so that the workers keep sending. */
  readonly #slow = { "slow-drip": 0, stalled: 0 };
  #lastFlood = 0;

  constructor(
    readonly port: number,
    readonly token: string,
    readonly rand: () => number,
  ) {
    // Random bytes for bodies and garbage, drawn once: slices of it are as random as fresh draws.
    this.#pool = Buffer.alloc(1 << 20);
    for (let i = 0; i < this.#pool.length; i++) this.#pool[i] = Math.floor(rand() * 256);
  }

  get framesSent(): number {
    return Object.values(this.framesByKind).reduce((a, b) => a + b, 0);
  }

  int(lo: number, hi: number): number {
    return lo + Math.floor(this.rand() * (hi - lo + 1));
  }

  bytes(n: number): Buffer {
    const off = this.int(0, this.#pool.length - n);
    return this.#pool.subarray(off, off + n);
  }

  /** A connection; resolves once connected (undefined if it could not be). */
  connect(kind: Kind): Promise<net.Socket | undefined> {
    return new Promise((resolve) => {
      const s = net.connect(this.port, "127.0.0.1");
      let buffered = Buffer.alloc(0);
      s.on("data", (d: Buffer) => {
        // The first reply, if any: a Refused status is what a hostile hello should get.
        if (buffered.length < 5) {
          buffered = Buffer.concat([buffered, d]);
          if (buffered.length >= 5 && buffered[4] === Status.Refused) this.refusals++;
        }
      });
      s.on("error", () => resolve(undefined));
      s.once("connect", () => {
        this.connections++;
        this.#open.add(s);
        resolve(s);
      });
      s.once("close", () => {
        this.#open.delete(s);
        if (!this.#closedHere.has(s)) this.closedByServer[kind]++;
      });
    });
  }

  #close(s: net.Socket): void {
    this.#closedHere.add(s);
    s.destroy();
  }

  /** Waits up to `ms` for the server to close `s`, then closes it. */
  async settle(s: net.Socket, ms: number): Promise<void> {
    if (!s.destroyed)
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          s.off("close", done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        s.once("close", done);
      });
    if (!s.destroyed) this.#close(s);
  }

  /** Closes whatever is still open. */
  stop(): void {
    for (const s of this.#open) this.#close(s);
  }

  pick(): Kind {
    const total = Object.values(WEIGHTS).reduce((a, b) => a + b, 0);
    let x = this.rand() * total;
    for (const k of KINDS) if ((x -= WEIGHTS[k]) < 0) return k;
    return "random-bytes";
  }

  /** A well-formed request of some op other than hello, with plausible fields. */
  request(): Buffer {
    const w = new FrameWriter();
    const key = `fuzz/${this.int(0, 99)}`;
    switch (this.int(0, 6)) {
      case 0:
        return w
          .u8(Op.Set)
          .str(key)
          .bytes(this.bytes(this.int(0, 64)))
          .frame();
      case 1:
        return w.u8(Op.Get).str(key).u32(this.int(0, 100)).frame();
      case 2:
        return w.u8(Op.Add).str(key).i64(1n).frame();
      case 3:
        return w.u8(Op.CompareSet).str(key).u8(0).bytes(this.bytes(8)).frame();
      case 4:
        return w.u8(Op.Wait).strings([key, "symmkit/barrier/x"]).u32(this.int(0, 100)).frame();
      case 5:
        return w.u8(Op.Delete).str("world/fuzz/stop").frame();
      default:
        return w.u8(Op.TryGet).str(key).frame();
    }
  }

  hello(token: string | Buffer): Buffer {
    return new FrameWriter().u8(Op.Hello).bytes(Buffer.from(token)).frame();
  }

  async attack(kind: Kind): Promise<void> {
    const count = (n: number): void => void (this.framesByKind[kind] += n);
    const lengthPrefix = (n: number): Buffer => {
      const b = Buffer.alloc(4);
      b.writeUInt32LE(n);
      return b;
    };
    if (kind === "flood") {
      // Beyond the server's cap on connections awaiting their hello: each newcomer closes the oldest.
      if (Date.now() - this.#lastFlood < 1000) kind = "random-bytes";
      else {
        this.#lastFlood = Date.now();
        const socks = await Promise.all(Array.from({ length: this.int(80, 150) }, () => this.connect(kind)));
        const connected = socks.filter((s) => s !== undefined);
        for (const s of connected) s.write(this.hello(this.token).subarray(0, 3));
        count(connected.length);
        await sleep(this.int(50, 300));
        for (const s of connected) if (!s.destroyed) this.#close(s);
        return;
      }
    }
    if ((kind === "slow-drip" || kind === "stalled") && this.#slow[kind] >= 3) kind = "wrong-token";
    const s = await this.connect(kind);
    if (!s) return;
    switch (kind) {
      case "random-bytes":
        for (let i = this.int(1, 3); i > 0; i--) s.write(this.bytes(this.int(1, 300)));
        count(1);
        return this.settle(s, this.int(0, 50));
      case "huge-length":
        s.write(
          Buffer.concat([
            lengthPrefix(this.int(MAX_HELLO_FRAME_BYTES + 1, 2 ** 32 - 1)),
            this.bytes(this.int(0, 65536)),
          ]),
        );
        count(1);
        return this.settle(s, 200);
      case "wrong-token":
        s.write(this.hello(this.bytes(this.int(0, MAX_TOKEN_BYTES))));
        count(1);
        return this.settle(s, 200);
      case "oversized-token":
        s.write(this.hello(this.bytes(this.int(MAX_TOKEN_BYTES + 1, MAX_HELLO_FRAME_BYTES - 5))));
        count(1);
        return this.settle(s, 200);
      case "ops-without-hello": {
        const n = this.int(1, 20);
        s.write(Buffer.concat(Array.from({ length: n }, () => this.request())));
        count(n);
        return this.settle(s, 200);
      }
      case "truncated": {
        const whole = this.rand() < 0.5 ? this.hello(this.token) : this.request();
        s.write(whole.subarray(0, this.int(1, whole.length - 1)));
        count(1);
        if (this.rand() < 0.5) s.end(); // half-closed: the server must not wait on it
        return this.settle(s, this.int(0, 100));
      }
      case "slow-drip": {
        // A wrong hello a few bytes at a time, some slower than the server's hello deadline.
        this.#slow[kind]++;
        const frame = this.hello(this.bytes(this.int(200, MAX_TOKEN_BYTES)));
        count(1);
        for (let off = 0; off < frame.length && !s.destroyed; off += 2) {
          s.write(frame.subarray(off, off + 2));
          await sleep(20);
        }
        await this.settle(s, 200);
        this.#slow[kind]--;
        return;
      }
      case "stalled": {
        // The start of a hello, then nothing: only the server's hello deadline (5 s) ends it.
        this.#slow[kind]++;
        s.write(this.hello(this.token).subarray(0, this.int(0, 6)));
        count(1);
        await this.settle(s, 8000);
        this.#slow[kind]--;
        return;
      }
      case "garbage-after-hello": {
        // A rank with a bug: the right token, then frames of random ops and bytes.
        const n = this.int(1, 10);
        const garbage = Array.from({ length: n }, () => {
          const body = Buffer.concat([Buffer.from([this.int(0, 255)]), this.bytes(this.int(0, 200))]);
          return Buffer.concat([lengthPrefix(body.length), body]);
        });
        s.write(Buffer.concat([this.hello(this.token), ...garbage]));
        count(1 + n);
        return this.settle(s, 100);
      }
    }
  }
}

/** Runs the job, with `options.frames` hostile frames thrown at its store while it runs. */
export async function runStoreFuzz(options: StoreFuzzOptions): Promise<StoreFuzzResult> {
  const ranks = options.ranks ?? 2;
  const minRounds = options.minRounds ?? 300;
  const port = await freePort();
  const mib = (): number => process.memoryUsage().rss / 2 ** 20;
  const rssBefore = mib();
  const heapBefore = liveHeapMiB();
  let rssPeak = rssBefore;
  const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, mib())), 20);
  const output: string[] = [];
  // The ranks print the job's token, so that this process can tell them to stop (and play a buggy rank).
  let tokenSeen: ((token: string) => void) | undefined;
  const token = new Promise<string>((resolve) => (tokenSeen = resolve));
  const t0 = performance.now();
  let jobMs = 0;
  const job = launch({
    nprocPerNode: ranks,
    nnodes: 1,
    nodeRank: 0,
    masterAddr: "127.0.0.1",
    masterPort: port,
    command: [HERE, "rank", String(minRounds)],
    graceMs: 1000,
    stdout: (l) => {
      const m = /^\[rank \d+\] store-fuzz token (\S+)$/.exec(l);
      if (m) tokenSeen?.(m[1]!);
      else output.push(l);
    },
    stderr: (l) => output.push(l),
  }).then((code) => {
    jobMs = performance.now() - t0;
    return code;
  });
  let done = false;
  void job.then(() => (done = true));
  let fuzzer: Fuzzer | undefined;
  try {
    const started = await Promise.race([token, job]);
    if (typeof started === "number") return result(started);
    const f = (fuzzer = new Fuzzer(port, started, seededRandom(options.seed)));
    const f0 = performance.now();
    const control = await StoreClient.connect(
      { host: "127.0.0.1", port, token: started },
      { timeoutMs: 30_000 },
    );
    const worker = async (): Promise<void> => {
      while (!done && f.framesSent < options.frames) await f.attack(f.pick());
    };
    await Promise.all(Array.from({ length: options.frames > 0 ? 16 : 0 }, worker));
    f.stop();
    const fuzzMs = performance.now() - f0;
    // The store goes away only when the job has ended; then there is nobody left to tell.
    await control.set(`world/${STOP_KEY}`, "1").catch(() => undefined);
    control.close();
    return result(await job, f, fuzzMs);
  } finally {
    fuzzer?.stop();
    clearInterval(sampler);
  }

  function result(exitCode: number, f?: Fuzzer, fuzzMs = 0): StoreFuzzResult {
    const rounds: number[] = [];
    let rank0Ms = 0;
    for (const l of output) {
      const m = /^\[rank (\d+)\] store-fuzz: (\d+) rounds ok in (\d+) ms$/.exec(l);
      if (!m) continue;
      rounds[Number(m[1])] = Number(m[2]);
      if (m[1] === "0") rank0Ms = Number(m[3]);
    }
    return {
      seed: options.seed.toString(),
      exitCode,
      framesSent: f?.framesSent ?? 0,
      framesByKind: f?.framesByKind ?? perKind(),
      connections: f?.connections ?? 0,
      closedByServer: f?.closedByServer ?? perKind(),
      refusals: f?.refusals ?? 0,
      rounds,
      jobMs: Math.round(jobMs),
      fuzzMs: Math.round(fuzzMs),
      msPerRound: rounds[0] ? Number((rank0Ms / rounds[0]).toFixed(3)) : NaN,
      rssMiB: { before: Math.round(rssBefore), peak: Math.round(rssPeak), after: Math.round(mib()) },
      heapAfterGcMiB: heapBefore === null ? null : { before: heapBefore, after: liveHeapMiB()! },
      output,
    };
  }
}

/** One rank: rounds of a store barrier, an all-reduce and a store counter, until told to stop. */
async function rank(minRounds: number): Promise<void> {
  const { init } = await import("../init.js");
  const { HostTensor } = await import("../cpu/host-tensor.js");
  console.log(`store-fuzz token ${readEnvVar("SYMMKIT_JOB_TOKEN")}`);
  const group = await init({ backend: "cpu", stagingBytes: 1 << 16, storeTimeoutMs: 60_000 });
  const { rank: me, worldSize: world } = group;
  const fail = (what: string): never => {
    throw new Error(`rank ${me}: ${what}`);
  };
  const t0 = performance.now();
  let round = 0;
  for (let stop = false; !stop;) {
    round++;
    await group.barrier();
    await group.store.add("fuzz/count");
    const asked =
      me === 0 && round >= minRounds && (await group.store.client.tryGet(group.store.key(STOP_KEY)));
    // Rank 0's decision reaches every rank through the all-reduce, so that all stop after the same round.
    const x = HostTensor.fromHost([me + 1, round, asked ? 1 : 0], "f32");
    const sum = group.collectives.allReduce(x).raw;
    if (sum[0] !== (world * (world + 1)) / 2 || sum[1] !== round * world)
      fail(`all-reduce of round ${round} gave ${String([...sum])}`);
    stop = sum[2] === 1;
  }
  await group.barrier();
  const count = Number((await group.store.get("fuzz/count")).toString());
  if (count !== round * world) fail(`the store counter is ${count} after ${round} rounds of ${world} ranks`);
  console.log(`store-fuzz: ${round} rounds ok in ${Math.round(performance.now() - t0)} ms`);
  await group.destroy();
}

if (process.argv[1] === HERE) {
  if (process.argv[2] === "rank") await rank(Number(process.argv[3]));
  else {
    const seed = BigInt(readEnvVar("SYMMKIT_TEST_SEED") ?? crypto.randomBytes(6).readUIntLE(0, 6));
    const loadBefore = os.loadavg()[0];
    const strip = ({
      output,
      ...r
    }: StoreFuzzResult): Omit<StoreFuzzResult, "output"> & { failed?: string[] } =>
      r.exitCode === 0 ? r : { ...r, failed: output.slice(-20) };
    // Pairs, one after the other, so that whatever else loads the machine weighs on both alike.
    const runs = [];
    for (let i = 0n; i < 3n; i++) {
      const fuzzed = await runStoreFuzz({ frames: 10_000, seed: seed + i });
      const alone = await runStoreFuzz({ frames: 0, seed: seed + i, minRounds: fuzzed.rounds[0] ?? 300 });
      runs.push({ fuzzed: strip(fuzzed), alone: strip(alone) });
    }
    const median = (xs: number[]): number => xs.sort((a, b) => a - b)[xs.length >> 1]!;
    const record = {
      description:
        "The rendezvous store under a fuzz (src/bench/store-fuzz.ts): a 2-rank CPU job started by launch() in " +
        "this process, which serves the store from a thread of its own (src/distributed/store/thread.ts), runs " +
        "rounds of a store barrier, a store counter and a checked " +
        "all-reduce, while 16 concurrent workers throw 10 000 hostile frames at the store (random bytes, huge " +
        "declared lengths, wrong and oversized tokens, requests without a hello, truncated frames, slow drips, " +
        "floods beyond the unauthenticated cap, garbage after a valid hello), the ranks going on until the fuzz " +
        "ends; then the same number of rounds alone. Three such pairs (seeds seed, seed+1, seed+2). jobMs " +
        "includes start-up (about 1 s); msPerRound is rank 0's time per round. rssMiB is this process's (the " +
        "store's thread and the fuzzer); heapAfterGcMiB the main thread's live heap after a full collection " +
        "(run with node --expose-gc; the launcher's and the fuzzer's, the store's thread has a heap of its own). " +
        `Replay with SYMMKIT_TEST_SEED=${seed}.`,
      ...hostEnvironment(loadBefore),
      median: {
        fuzzed: {
          jobMs: median(runs.map((r) => r.fuzzed.jobMs)),
          msPerRound: median(runs.map((r) => r.fuzzed.msPerRound)),
        },
        alone: {
          jobMs: median(runs.map((r) => r.alone.jobMs)),
          msPerRound: median(runs.map((r) => r.alone.msPerRound)),
        },
      },
      runs,
    };
    const text = JSON.stringify(record, null, 2) + "\n";
    if (process.argv[2]) fs.writeFileSync(process.argv[2], text);
    process.stdout.write(text);
    if (runs.some((r) => r.fuzzed.exitCode !== 0 || r.alone.exitCode !== 0)) process.exitCode = 1;
  }
}
