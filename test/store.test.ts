import assert from "node:assert/strict";
import { fork } from "node:child_process";
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
import { StoreServer } from "../src/distributed/store/server.js";

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
