import assert from "node:assert/strict";
import { fork } from "node:child_process";
import crypto from "node:crypto";
import { once } from "node:events";
import net from "node:net";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  StoreClient,
  StoreClosedError,
  StoreRefusedError,
  StoreTimeoutError,
} from "../src/distributed/store/client.js";
import {
  FrameSplitter,
  FrameWriter,
  MAX_HELLO_FRAME_BYTES,
  MAX_TOKEN_BYTES,
  Op,
  ProtocolError,
  Status,
} from "../src/distributed/store/protocol.js";
import { StoreServer } from "../src/distributed/store/server.js";
import { InvalidArgumentError } from "../src/errors.js";

const token = "t0k3n-for-tests";

async function withServer(f: (s: StoreServer) => Promise<void>): Promise<void> {
  const s = await StoreServer.start({ token });
  try {
    await f(s);
  } finally {
    await s.close();
  }
}

const connect = (s: StoreServer, timeoutMs = 5000): Promise<StoreClient> =>
  StoreClient.connect({ host: "127.0.0.1", port: s.port, token }, { timeoutMs });

test("set, get (blocking until set), tryGet, delete, wait", () =>
  withServer(async (s) => {
    const [a, b] = await Promise.all([connect(s), connect(s)]);
    const pending = b.get("k");
    await a.set("k", "v1");
    assert.equal((await pending).toString(), "v1");
    assert.equal(await a.tryGet("absent"), undefined);
    await a.set("bin", new Uint8Array([0, 255, 7]));
    assert.deepEqual([...(await b.get("bin"))], [0, 255, 7]);
    const waiting = b.wait(["x", "y"]);
    await a.set("x", "1");
    await a.set("y", "2");
    await waiting;
    assert.equal(await a.delete("x"), true);
    assert.equal(await a.delete("x"), false);
    assert.equal(s.host, "127.0.0.1", "listens on loopback unless told otherwise");
    a.close();
    b.close();
  }));

test("add and compare-and-set are atomic across concurrent clients", () =>
  withServer(async (s) => {
    const clients = await Promise.all(Array.from({ length: 8 }, () => connect(s)));
    const results = await Promise.all(
      clients.flatMap((c) => Array.from({ length: 50 }, () => c.add("counter", 1))),
    );
    assert.deepEqual(
      results.map(Number).sort((x, y) => x - y),
      Array.from({ length: 400 }, (_, i) => i + 1),
      "every add saw a distinct value",
    );
    const claims = await Promise.all(clients.map((c, i) => c.compareSet("leader", undefined, `rank${i}`)));
    const winner = claims[0]!.toString();
    assert.ok(
      claims.every((c) => c.toString() === winner),
      "every client sees the same winner",
    );
    assert.equal((await clients[1]!.compareSet("leader", winner, "next")).toString(), "next");
    assert.equal((await clients[2]!.compareSet("leader", "stale", "nope")).toString(), "next");
    await clients[0]!.set("text", "abc");
    await assert.rejects(clients[0]!.add("text"), StoreRefusedError);
    await Promise.all(clients.map((c) => c.barrier("all", clients.length)));
    await Promise.all(clients.map((c) => c.barrier("all", clients.length)));
    for (const c of clients) c.close();
  }));

test("deadlines name the missing keys", () =>
  withServer(async (s) => {
    const c = await connect(s);
    await c.set("present", "1");
    await assert.rejects(c.wait(["present", "absent"], { timeoutMs: 100 }), (e: unknown) => {
      assert.ok(e instanceof StoreTimeoutError);
      assert.equal(e.code, "SYMMKIT_STORE_TIMEOUT");
      assert.deepEqual(e.keys, ["absent"]);
      return true;
    });
    await assert.rejects(
      c.get("never", { timeoutMs: 50 }),
      /get\(never\) timed out after 50 ms waiting for never/,
    );
    await assert.rejects(c.barrier("lonely", 2, { timeoutMs: 100 }), /1 of 2 arrived/);
    assert.equal(await c.add("still-usable"), 1n, "the connection survives timeouts");
    c.close();
  }));

test("a wrong token is refused", () =>
  withServer(async (s) => {
    await assert.rejects(
      StoreClient.connect({ host: "127.0.0.1", port: s.port, token: "wrong" }, { timeoutMs: 2000 }),
      (e: unknown) => e instanceof StoreRefusedError && /wrong job token/.test(e.message),
    );
  }));

test("malformed and oversized frames close that connection only", () =>
  withServer(async (s) => {
    const good = await connect(s);
    const raw = (bytes: Buffer): Promise<void> =>
      new Promise((resolve) => {
        const sock = net.connect(s.port, "127.0.0.1", () => sock.write(bytes));
        sock.resume(); // read to the end, so that the server closing is seen
        sock.on("close", () => resolve());
        sock.on("error", () => undefined);
      });
    await raw(Buffer.from([0xff, 0xff, 0xff, 0x7f, 1, 2, 3])); // claims 2 GiB
    await raw(Buffer.from([3, 0, 0, 0, 1, 9, 9])); // a hello with a truncated token field
    await raw(Buffer.from([1, 0, 0, 0, 2])); // not a hello first: refused
    await good.set("after", "ok");
    assert.equal((await good.get("after")).toString(), "ok");
    good.close();
  }));

test("when the server dies, blocked clients fail with a clear error", async () => {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const child = fork(path.join(here, "fixtures", "store-server.js"), [token], {
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  const port = await new Promise<number>((resolve) => child.once("message", (m) => resolve(m as number)));
  const c = await StoreClient.connect({ host: "127.0.0.1", port, token }, { timeoutMs: 5000 });
  const blocked = c.get("never-set", { timeoutMs: 60_000 });
  child.kill("SIGKILL");
  await assert.rejects(
    blocked,
    (e: unknown) => e instanceof StoreClosedError && /Did the launcher or rank 0 exit/.test(e.message),
  );
  await assert.rejects(c.set("x", "y"), StoreClosedError);
});

const MiB = 1024 * 1024;

/** A raw connection to the store: `closedAt` resolves with the milliseconds from connect to close. */
async function rawSocket(s: StoreServer): Promise<{ sock: net.Socket; closedAt: Promise<number> }> {
  const sock = net.connect(s.port, "127.0.0.1");
  sock.on("error", () => undefined);
  sock.resume(); // read to the end, so that the server closing is seen
  await once(sock, "connect");
  const t0 = performance.now();
  const closedAt = new Promise<number>((resolve) =>
    sock.once("close", () => resolve(performance.now() - t0)),
  );
  return { sock, closedAt };
}

const lengthPrefix = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
};
const hello = (t: string): Buffer => new FrameWriter().u8(Op.Hello).str(t).frame();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

test("before the hello, a frame longer than a hello is refused at its length prefix, unbuffered", () =>
  withServer(async (s) => {
    const good = await connect(s);
    const { sock, closedAt } = await rawSocket(s);
    let closed = false;
    void closedAt.then(() => (closed = true));
    sock.write(lengthPrefix(60 * MiB));
    // Claims 60 MiB and offers 10 MiB of it, a write at a time, letting the server (in this process)
    // read between writes: it must hang up long before.
    const chunk = Buffer.alloc(64 * 1024);
    let sent = 0;
    while (!closed && sent < 10 * MiB) {
      await Promise.race([new Promise((r) => sock.write(chunk, r)), closedAt]);
      await new Promise(setImmediate);
      sent += chunk.length;
    }
    await closedAt;
    assert.ok(sent < 2 * MiB, `closed only after ${sent} bytes`);
    // A hello just over the bound is refused the same way; the token holder may send large frames.
    const big = await rawSocket(s);
    big.sock.write(Buffer.concat([lengthPrefix(MAX_HELLO_FRAME_BYTES + 1), Buffer.alloc(8)]));
    await big.closedAt;
    const value = crypto.randomBytes(8 * MiB);
    await good.set("big", value);
    assert.ok((await good.get("big")).equals(value), "an 8 MiB value round-trips");
    good.close();
  }));

test("a connection that has not presented the token within the hello deadline is closed", async () => {
  const s = await StoreServer.start({ token, helloTimeoutMs: 300 });
  try {
    const idle = await rawSocket(s);
    // A hello dripped a byte at a time, never finished in time.
    const drip = await rawSocket(s);
    const bytes = hello(token);
    void (async () => {
      for (const b of bytes) {
        if (drip.sock.destroyed) return;
        drip.sock.write(Buffer.from([b]));
        await sleep(100);
      }
    })();
    const client = await connect(s);
    for (const ms of [await idle.closedAt, await drip.closedAt])
      assert.ok(ms >= 250 && ms < 3000, `closed after ${ms} ms`);
    await sleep(400);
    await client.set("k", "idle past the hello deadline is fine once authenticated");
    client.close();
  } finally {
    await s.close();
  }
});

test("a frame begun must be finished within the frame deadline, counted from its first byte", async () => {
  const s = await StoreServer.start({ token, frameTimeoutMs: 300 });
  try {
    const authenticated = async (): Promise<Awaited<ReturnType<typeof rawSocket>>> => {
      const raw = await rawSocket(s);
      raw.sock.pause();
      raw.sock.write(hello(token));
      await once(raw.sock, "readable");
      assert.deepEqual([...(raw.sock.read() as Buffer)], [1, 0, 0, 0, Status.Ok]);
      raw.sock.resume();
      return raw;
    };
    const stalled = await authenticated();
    stalled.sock.write(Buffer.concat([lengthPrefix(100), Buffer.alloc(10)]));
    // Progress does not extend the deadline: a byte every 50 ms still fails.
    const drip = await authenticated();
    const frame = new FrameWriter().u8(Op.Set).str("k").bytes(Buffer.alloc(100)).frame();
    void (async () => {
      for (const b of frame) {
        if (drip.sock.destroyed) return;
        drip.sock.write(Buffer.from([b]));
        await sleep(50);
      }
    })();
    const idle = await authenticated();
    for (const ms of [await stalled.closedAt, await drip.closedAt])
      assert.ok(ms >= 250 && ms < 3000, `closed after ${ms} ms`);
    await sleep(300);
    assert.equal(idle.sock.destroyed, false, "an authenticated connection may idle between frames");
    idle.sock.destroy();
  } finally {
    await s.close();
  }
});

test("strangers beyond the cap make room, oldest first: they never keep a token holder out", async () => {
  const s = await StoreServer.start({
    token,
    maxUnauthenticated: 4,
    maxConnections: 6,
    helloTimeoutMs: 10_000,
  });
  try {
    const a = await connect(s);
    // One at a time, so that the server has taken each before the next: the oldest go first.
    const hostile = [];
    for (let i = 0; i < 10; i++) {
      hostile.push(await rawSocket(s));
      await sleep(10);
    }
    const closed = await Promise.all(
      hostile.map((h) => Promise.race([h.closedAt, sleep(300).then(() => -1)])),
    );
    assert.deepEqual(
      closed.map((ms) => ms >= 0),
      [true, true, true, true, true, true, false, false, false, false],
      "the 6 oldest closed, the 4 newest kept",
    );
    await a.set("during", "the flood");
    assert.equal((await a.get("during")).toString(), "the flood");
    // Newcomers get in at once while the 4 slots are held: each closes the oldest stranger.
    const t0 = performance.now();
    const b = await connect(s);
    const more = await Promise.all(Array.from({ length: 4 }, () => connect(s)));
    assert.ok(performance.now() - t0 < 1000, `took ${performance.now() - t0} ms to get in`);
    // Six token holders fill maxConnections: no stranger is left, and a seventh connection is turned away.
    for (const h of hostile) assert.ok(h.sock.destroyed || (await h.closedAt) >= 0);
    await assert.rejects(connect(s, 500), StoreTimeoutError, "7 connections in all");
    b.close();
    const late = await connect(s);
    await late.set("served", "yes");
    for (const c of [a, late, ...more]) c.close();
  } finally {
    await s.close();
  }
});

test("bad arguments of the store API: a typed error before anything is sent; the connection goes on", () =>
  withServer(async (s) => {
    const [c, peer] = await Promise.all([connect(s), connect(s)]);
    const invalid = (what: RegExp) => (e: unknown) =>
      e instanceof InvalidArgumentError && e.code === "SYMMKIT_INVALID_ARGUMENT" && what.test(e.message);
    const timeout = /timeoutMs must be a whole number of milliseconds from 0 to 2147483647/;
    for (const t of [NaN, -1, 2 ** 40, 1.5, Infinity, "100" as unknown as number]) {
      await assert.rejects(c.get("k", { timeoutMs: t }), invalid(timeout), `get timeoutMs ${t}`);
      await assert.rejects(c.wait(["k"], { timeoutMs: t }), invalid(timeout), `wait timeoutMs ${t}`);
      await assert.rejects(c.barrier("b", 2, { timeoutMs: t }), invalid(timeout), `barrier timeoutMs ${t}`);
      await assert.rejects(
        StoreClient.connect({ host: "127.0.0.1", port: s.port, token }, { timeoutMs: t }),
        invalid(timeout),
      );
    }
    const long = "k".repeat(4097);
    const keyTooLong = /makes a key of 4097 bytes \(UTF-8\), and the store takes keys of at most 4096/;
    await assert.rejects(c.set(long, "v"), invalid(keyTooLong));
    await assert.rejects(c.get(long), invalid(keyTooLong));
    await assert.rejects(c.tryGet(long), invalid(keyTooLong));
    await assert.rejects(c.add(long), invalid(keyTooLong));
    await assert.rejects(c.compareSet(long, undefined, "v"), invalid(keyTooLong));
    await assert.rejects(c.delete(long), invalid(keyTooLong));
    await assert.rejects(c.wait(["ok", long]), invalid(keyTooLong));
    // Multi-byte characters count as their UTF-8 bytes.
    await assert.rejects(c.set("\u00e9".repeat(2049), "v"), invalid(/4098 bytes/));
    await assert.rejects(c.barrier("b".repeat(4096), 2), invalid(/the barrier name makes a key of/));
    await assert.rejects(c.set(7 as unknown as string, "v"), invalid(/the key must be a string, got 7/));
    await assert.rejects(
      c.set("k", 7 as unknown as string),
      invalid(/value must be a string or a Uint8Array/),
    );
    await assert.rejects(c.compareSet("k", 1 as unknown as string, "v"), invalid(/expected must be/));
    for (const d of [NaN, 1.5, 2 ** 53, 2n ** 63n, -(2n ** 63n) - 1n])
      await assert.rejects(c.add("n", d), invalid(/delta must be a whole number/), `delta ${d}`);
    await assert.rejects(c.wait("k" as unknown as string[]), invalid(/keys must be an array/));
    for (const n of [0, -1, 1.5, NaN])
      await assert.rejects(c.barrier("b", n), invalid(/count must be a whole number >= 1/), `count ${n}`);
    await assert.rejects(
      StoreClient.connect({ host: "127.0.0.1", port: 0, token }),
      invalid(/port must be a whole number from 1 to 65535, got 0/),
    );
    // A value too large for one frame, refused before it is sent.
    await assert.rejects(c.set("big", Buffer.alloc(64 * MiB)), invalid(/more than 67108864 bytes/));
    // Nothing was sent: the connection and the barrier rounds are as they were.
    assert.equal(await c.add("n", 2n ** 62n), 2n ** 62n);
    await Promise.all([c.barrier("b", 2), peer.barrier("b", 2)]);
    await c.set("k", "still served");
    assert.equal((await peer.get("k", { timeoutMs: 0 })).toString(), "still served");
    assert.equal((await c.get("k", { timeoutMs: 2 ** 31 - 1 })).toString(), "still served");
    c.close();
    peer.close();
  }));

test("barriers keep one key per name in the store, however many rounds", () =>
  withServer(async (s) => {
    const clients = await Promise.all(Array.from({ length: 3 }, () => connect(s)));
    for (let round = 0; round < 1000; round++) await Promise.all(clients.map((c) => c.barrier("b", 3)));
    for (const name of ["once-a", "once-b"]) await Promise.all(clients.map((c) => c.barrier(name, 3)));
    assert.equal(s.size, 3, "the last round's done key of each name");
    for (const c of clients) c.close();
  }));

test("frame splitting is linear: an 8 MiB frame in 61-byte chunks is reassembled exactly", () => {
  const big = crypto.randomBytes(8 * MiB);
  const frames = [Buffer.from("a"), big, Buffer.alloc(0), Buffer.from("tail")];
  const stream = Buffer.concat(frames.flatMap((f) => [lengthPrefix(f.length), f]));
  const splitter = new FrameSplitter();
  const got: Buffer[] = [];
  const t0 = performance.now();
  for (let off = 0; off < stream.length; off += 61) {
    splitter.push(stream.subarray(off, off + 61));
    for (let body = splitter.next(); body; body = splitter.next()) got.push(Buffer.from(body));
  }
  const ms = performance.now() - t0;
  assert.equal(got.length, frames.length);
  got.forEach((g, i) => assert.ok(g.equals(frames[i]!), `frame ${i}`));
  assert.equal(splitter.partial, false);
  assert.ok(ms < 2000, `${ms} ms for ${stream.length} bytes`);
  const small = new FrameSplitter(MAX_HELLO_FRAME_BYTES);
  small.push(lengthPrefix(MAX_HELLO_FRAME_BYTES + 1));
  assert.throws(
    () => small.next(),
    (e: unknown) => e instanceof ProtocolError && e.code === "SYMMKIT_STORE_PROTOCOL",
  );
});

test("a token longer than the store takes is an InvalidArgumentError on both sides", async () => {
  const long = "x".repeat(MAX_TOKEN_BYTES + 1);
  await assert.rejects(StoreServer.start({ token: long }), InvalidArgumentError);
  await assert.rejects(
    StoreClient.connect({ host: "127.0.0.1", port: 1, token: long }),
    InvalidArgumentError,
  );
});
