// Several hosts, simulated on this machine (NCCL between hosts, symmkit inside each): two
// `symmkit run --nnodes 2` launchers, two ranks each, init({ acrossHosts: true }) and every
// HostsCollectives call exact (test/gpu/ranks/hosts.ts). With 2 or more GPUs each host gets a GPU of
// its own (CUDA_VISIBLE_DEVICES) and its two ranks share it; with one GPU all four ranks share it.
// --share-gpus gives every rank an NCCL host id of its own, so NCCL connects them through its network
// (socket) transport, as between real hosts. A rank killed on one host: both launchers fail and no rank
// outlives it. And `symmkit demo` run on both hosts.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { deviceCount } from "../../src/runtime/device.js";
import { freePort, launchHost } from "../support/hosts.js";
import { showOutput, skipReason } from "./gpu.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const gpus = skipReason ? 0 : deviceCount();

const cli = path.join(here, "..", "..", "src", "cli.js");

async function twoHosts(
  env: Record<string, string> = {},
  command = [path.join(here, "ranks", "hosts.js")],
  nodeEnv: (nodeRank: number) => Record<string, string> = () => ({}),
): Promise<{ status: number | null; out: string }[]> {
  const port = await freePort();
  const token = crypto.randomBytes(16).toString("hex");
  const results = await Promise.all(
    [0, 1].map((nodeRank) =>
      launchHost({
        nodeRank,
        port,
        token,
        command,
        launcherArgs: ["--share-gpus"],
        env: {
          ...env,
          ...nodeEnv(nodeRank),
          ...(gpus > 1 ? { CUDA_VISIBLE_DEVICES: String(nodeRank) } : {}),
        },
        timeoutMs: 500_000,
      }),
    ),
  );
  for (const [i, r] of results.entries()) showOutput(`node ${i} exited ${r.status}\n${r.out}`);
  return results;
}

test(
  "two hosts x 2 ranks: every HostsCollectives call exact, subgroups, a graph (calls checked between hosts)",
  { skip: skipReason },
  async () => {
    const results = await twoHosts({ SYMMKIT_CHECK_CALLS: "1" });
    for (const r of results) assert.equal(r.status, 0);
    const out = results.map((r) => r.out).join("\n");
    assert.equal(out.match(/gpu hosts ok rank \d/g)?.length, 4);
  },
);

test(
  "two hosts: a rank killed on one host fails both launchers, and no rank outlives it",
  { skip: skipReason },
  async () => {
    const start = Date.now();
    const results = await twoHosts({ HOSTS_FAULT: "kill" });
    for (const r of results) {
      assert.notEqual(r.status, 0);
      assert.doesNotMatch(r.out, /outlived the killed rank/);
    }
    assert.match(results[1]!.out, /rank 3 \(pid \d+\) was killed by SIGKILL/);
    assert.ok(Date.now() - start < 120_000, `took ${Date.now() - start} ms`);
  },
);

for (const algorithm of ["hierarchical", "nccl", "route"])
  test(
    `two hosts, SYMMKIT_CHECK_CALLS=1: an all-reduce that differs between the hosts (${algorithm === "route" ? "hierarchical on one, nccl on the other" : `${algorithm}, the reduction`}) ends in CollectiveMismatchError on every rank`,
    { skip: skipReason },
    async () => {
      const results = await twoHosts({
        HOSTS_FAULT: "mismatch",
        HOSTS_ALGORITHM: algorithm,
        SYMMKIT_CHECK_CALLS: "1",
      });
      for (const r of results) assert.equal(r.status, 0);
      const out = results.map((r) => r.out).join("\n");
      assert.equal(out.match(new RegExp(`${algorithm} mismatch caught`, "g"))?.length, 4);
    },
  );

test(
  "two hosts, SYMMKIT_CHECK_CALLS set on one host only: init refuses on every rank, naming the setting",
  { skip: skipReason },
  async () => {
    const results = await twoHosts({ HOSTS_FAULT: "mismatch" }, undefined, (node) =>
      node === 1 ? { SYMMKIT_CHECK_CALLS: "1" } : {},
    );
    for (const r of results) assert.notEqual(r.status, 0);
    const out = results.map((r) => r.out).join("\n");
    assert.match(
      out,
      /SYMMKIT_CHECK_CALLS is (set|unset) on rank \d and (set|unset) on rank \d: set it alike on every rank/,
    );
    assert.doesNotMatch(out, /mismatch caught/);
  },
);

test(
  "symmkit demo on two hosts: the all-reduce across hosts, then the MLP block inside each",
  { skip: skipReason },
  async () => {
    const results = await twoHosts({}, ["--", process.execPath, cli, "demo"]);
    for (const r of results) assert.equal(r.status, 0);
    const out = results.map((r) => r.out).join("\n");
    assert.match(out, /2 hosts x 2 x .*: bf16 all-reduce across hosts/);
    assert.match(out, /hierarchical matched each host's rank-order sum, then the hosts' sum, bit for bit/);
    assert.match(out, /demo: every result matched its reference/);
  },
);
