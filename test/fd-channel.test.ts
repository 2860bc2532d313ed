import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { closeFd, FdChannel, FdTimeoutError } from "../src/distributed/fd-channel.js";

const here = path.dirname(fileURLToPath(import.meta.url));

test("a file descriptor crosses between two processes in both directions and reads back", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-fd-"));
  fs.chmodSync(dir, 0o700);
  const ch = FdChannel.bind(path.join(dir, "parent.sock"));
  const child = spawn(process.execPath, [path.join(here, "fixtures", "fd-peer.js"), dir], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise((r) => child.once("exit", r)); // listen now: the child may be gone before we look
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  assert.equal((await lines.next()).value, "ready");

  const secret = `hello from ${process.pid} ${crypto.randomUUID()}`;
  const file = path.join(dir, "from-parent.txt");
  fs.writeFileSync(file, secret);
  const fd = fs.openSync(file, "r");
  assert.equal(ch.trySend(path.join(dir, "child.sock"), fd, Buffer.from("file-1")), true);
  fs.closeSync(fd);
  fs.unlinkSync(file); // the descriptor keeps the file alive for the receiver
  assert.deepEqual(JSON.parse((await lines.next()).value as string), { tag: "file-1", content: secret });

  const back = await ch.receive(10_000);
  assert.equal(back.tag.toString(), "reply");
  const buf = Buffer.alloc(64);
  const n = fs.readSync(back.fd, buf, 0, 64, 0);
  assert.equal(buf.subarray(0, n).toString(), `child ${child.pid}`);
  closeFd(back.fd);
  await exited;
  ch.close();
  fs.rmSync(dir, { recursive: true });
});

test("receiving with nothing sent times out with a clear error", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-fd-"));
  const ch = FdChannel.bind(path.join(dir, "idle.sock"));
  const t0 = Date.now();
  await assert.rejects(
    ch.receive(200),
    (e: unknown) => e instanceof FdTimeoutError && /within 200 ms/.test(e.message),
  );
  assert.ok(Date.now() - t0 < 2000);
  assert.throws(
    () => ch.trySend(path.join(dir, "nobody.sock"), 0, Buffer.from("x")),
    /sendmsg.*(ENOENT|ECONNREFUSED)/,
  );
  assert.equal(ch.tryReceive(), undefined);
  ch.close();
  fs.rmSync(dir, { recursive: true });
});

test("a full receiver queue is reported, not waited on; what was queued is taken without waiting", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-fd-"));
  const rx = FdChannel.bind(path.join(dir, "rx.sock"));
  const tx = FdChannel.bind(path.join(dir, "tx.sock"));
  const fd = fs.openSync(fileURLToPath(import.meta.url), "r");
  let sent = 0;
  while (sent < 10_000 && tx.trySend(rx.path, fd, Buffer.from(`m${sent}`))) sent++;
  assert.ok(sent > 0 && sent < 10_000, `the queue took ${sent} messages before it was full`);
  for (let i = 0; i < sent; i++) {
    const got = rx.tryReceive();
    assert.equal(got?.tag.toString(), `m${i}`);
    closeFd(got.fd);
  }
  assert.equal(rx.tryReceive(), undefined);
  assert.equal(tx.trySend(rx.path, fd, Buffer.from("again")), true);
  closeFd(rx.tryReceive()!.fd);
  fs.closeSync(fd);
  for (const c of [rx, tx]) c.close();
  fs.rmSync(dir, { recursive: true });
});
