// The launcher's multi-host flow on loopback: two `symmkit run` processes as two hosts (--nnodes 2,
// --node-rank 0 and 1, one store served by node 0, a shared SYMMKIT_JOB_TOKEN). The CPU backend shares
// memory within one host only, so init() refuses with a typed error naming the limit, and both launchers
// end with a failure; nothing is left running. A rank failing on one host stops the other host's ranks
// (the job's failure key in node 0's store).
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { freePort, launchHost } from "./support/hosts.js";

const here = path.dirname(fileURLToPath(import.meta.url));

const node = (
  nodeRank: number,
  port: number,
  token: string,
  fixture = "init-cpu.js",
  perNode = 2,
  env: Record<string, string> = {},
): Promise<{ status: number | null; out: string }> =>
  launchHost({ nodeRank, port, token, perNode, env, command: [path.join(here, "fixtures", fixture)] });

test("two hosts on loopback: the CPU backend refuses on every rank of both, naming the limit", async () => {
  const port = await freePort();
  const token = crypto.randomBytes(16).toString("hex");
  const [a, b] = await Promise.all([node(0, port, token), node(1, port, token)]);
  const limit = /shares memory between the rank processes of one host, and this job spans 2 hosts/;
  for (const [i, r] of [a, b].entries()) {
    assert.notEqual(r.status, 0, `node ${i} exited 0:\n${r.out}`);
    assert.doesNotMatch(r.out, /joined as rank/, `node ${i}`);
    // A host whose ranks were slower may have been stopped by the other host's failure first.
    if (!/node \d failed the job/.test(r.out)) {
      assert.match(r.out, /SYMMKIT_UNSUPPORTED|UnsupportedError/, `node ${i}:\n${r.out}`);
      assert.match(r.out, limit, `node ${i}`);
    }
  }
  assert.match(a.out + b.out, limit, "neither host reported the limit");
});

test("two hosts on loopback: a rank failing on one host stops the other host's ranks", async (t) => {
  const port = await freePort();
  const token = crypto.randomBytes(16).toString("hex");
  // Rank 1 fails once rank 0 waits (this file written), however late rank 0 starts.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-host-fail-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const env = { HOST_FAIL_READY: path.join(dir, "rank-0-waits") };
  const start = Date.now();
  const [a, b] = await Promise.all([
    node(0, port, token, "host-fail.js", 1, env),
    node(1, port, token, "host-fail.js", 1, env),
  ]);
  assert.equal(b.status, 3, `node 1 should end with its rank's code:\n${b.out}`);
  assert.equal(a.status, 1, `node 0 should fail the job:\n${a.out}`);
  assert.match(a.out, /\[rank 0\] rank 0 waiting/);
  assert.match(a.out, /node 1 failed the job: rank 1 \(pid \d+\) exited with code 3/, a.out);
  assert.doesNotMatch(a.out, /was never stopped/);
  // Node 0's rank would have waited a minute: it was stopped within the store's wake-up and the grace.
  assert.ok(Date.now() - start < 30_000, `took ${Date.now() - start} ms`);
});

test("two hosts on loopback: init() on the cuda backend refuses before joining, saying acrossHosts", async () => {
  const port = await freePort();
  const token = crypto.randomBytes(16).toString("hex");
  const [a, b] = await Promise.all([
    node(0, port, token, "init-cuda.js"),
    node(1, port, token, "init-cuda.js"),
  ]);
  for (const [i, r] of [a, b].entries()) {
    assert.notEqual(r.status, 0, `node ${i} exited 0:\n${r.out}`);
    assert.doesNotMatch(r.out, /joined as rank/, `node ${i}`);
    if (!/node \d failed the job/.test(r.out))
      assert.match(r.out, /this job spans 2 hosts.*acrossHosts: true/, `node ${i}:\n${r.out}`);
  }
  assert.match(a.out + b.out, /this job spans 2 hosts.*acrossHosts: true/, "neither host reported the limit");
});
