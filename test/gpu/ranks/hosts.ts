// One rank of the several-hosts check (test/gpu/hosts.test.ts): a job started as several hosts (symmkit run
// --nnodes H, any number of ranks per host), init({ acrossHosts: true }), and every HostsCollectives call
// against the closed form. Inputs are small integers (a seeded shuffle per rank), so every sum is exact in
// every dtype and the result must be exactly the closed form on every rank, whatever order NCCL adds in:
// hierarchical, nccl and auto; sum, max and min; f32, bf16 and f16; sizes below, at and past a multiple of
// the ranks per host; outputs poisoned inside guards; subgroups of one rank per host and of one host; a CUDA
// graph replayed with the inputs changed in between; the fused matmuls on collectives.local (host 1's local
// ranks are not its world ranks); send/recv around the ring and sendRecv between pairs (peers on this host
// and on another), allToAll, and the symmetric-memory ops refused with UnsupportedError. HOSTS_FAULT=kill:
// the last rank kills itself after init, and the others must not outlive it (the launchers stop them).
// HOSTS_FAULT=mismatch (with SYMMKIT_CHECK_CALLS=1): the other hosts' ranks ask for max where host 0's ask
// for sum, in either algorithm (HOSTS_ALGORITHM hierarchical or nccl; each host agrees within itself, so only
// the check between hosts can tell), or (HOSTS_ALGORITHM=route) host 0 asks for hierarchical and the others
// for nccl, and every rank must end with CollectiveMismatchError before the call runs.
import assert from "node:assert/strict";
import { assertSameBits, sharedSeed } from "../../support/agree.js";
import { init, type HostsProcessGroup } from "../../../src/init.js";
import { UnsupportedError } from "../../../src/errors.js";
import { CollectiveMismatchError } from "../../../src/distributed/fingerprint.js";
import { HOSTS_ALGORITHMS } from "../../../src/ops/hosts-records.js";
import { encode, type DType } from "../../../src/runtime/dtype.js";
import { Graph } from "../../../src/runtime/graph.js";
import { Stream } from "../../../src/runtime/stream.js";
import { Tensor } from "../../../src/runtime/tensor.js";
import { guardsIntact, poisoned, sectionTimer } from "./guards.js";

const group = await init({ acrossHosts: true });
const c = group.collectives;
const { rank, worldSize: world } = group;
const seed = await sharedSeed(group.store, rank);
assert.ok(c.hosts >= 2, `this job should span hosts: ${c.hosts}`);
assert.equal(c.hosts * c.perHost, world);
if (rank === 0) console.log(`${c.hosts} hosts x ${c.perHost} ranks`);
const lap = sectionTimer(rank);

if (process.env.HOSTS_FAULT === "kill") {
  group.synchronize();
  if (rank === world - 1) process.kill(process.pid, "SIGKILL");
  // The others wait in a collective for it: their launchers must stop them.
  c.allReduce(Tensor.full([1024], 1, "f32"));
  group.synchronize();
  console.log("outlived the killed rank");
  process.exit(4);
}

if (process.env.HOSTS_FAULT === "mismatch") {
  const host = Math.floor(rank / c.perHost);
  const mode = process.env.HOSTS_ALGORITHM ?? "hierarchical";
  const route = mode === "route";
  const algorithm = route
    ? host === 0
      ? "hierarchical"
      : "nccl"
    : mode === "nccl"
      ? "nccl"
      : "hierarchical";
  const x = Tensor.full([4096], 1, "f32");
  const y = Tensor.full([4096], NaN, "f32");
  group.synchronize();
  try {
    c.allReduce(x, { output: y, op: route || host === 0 ? "sum" : "max", algorithm });
    group.synchronize();
    console.log(`rank ${rank}: the mismatched call ran (${y.toHost()[0]})`);
    process.exit(5);
  } catch (e) {
    assert.ok(e instanceof CollectiveMismatchError, `rank ${rank}: ${String(e)}`);
    assert.match(
      e.message,
      route
        ? /ours all-reduce\/(hierarchical|nccl), theirs all-reduce\/(nccl|hierarchical)/
        : /reduction: ours (sum|max), theirs (max|sum)/,
    );
    console.log(`rank ${rank}: ${mode} mismatch caught: ${e.message.split(".")[0]}`);
    process.exit(0);
  }
}

const salt = Number(seed % 1000n);
/** Rank r's input: small integers, different on every rank and every call. */
const values = (r: number, n: number, call: number): number[] =>
  Array.from({ length: n }, (_, i) => ((i * 7 + r * 13 + call * 5 + salt) % 17) - 8);
const OPS = {
  sum: (xs: number[]) => xs.reduce((a, b) => a + b, 0),
  max: (xs: number[]) => Math.max(...xs),
  min: (xs: number[]) => Math.min(...xs),
};
type Op = keyof typeof OPS;
const DTYPES: DType[] = ["f32", "bf16", "f16"];

const upload = (dtype: DType, v: number[]): Tensor =>
  Tensor.fromHost(encode(dtype, v), dtype, { shape: [v.length] });

function checkInto(whole: Tensor, out: Tensor, want: number[], dtype: DType, what: string): void {
  assertSameBits(out.toHost(), encode(dtype, want), what, seed);
  guardsIntact(whole, what);
}

let call = 0;
function allReduceCase(g: HostsProcessGroup, n: number, dtype: DType, op: Op, algorithm: string): void {
  const gr = g.ranks;
  const k = call++;
  const x = upload(dtype, values(g.globalRank, n, k));
  const [whole, out] = poisoned(dtype, [n]);
  g.collectives.allReduce(x, { output: out, op, algorithm: algorithm as "auto" });
  const vs = gr.map((r) => values(r, n, k));
  const want = Array.from({ length: n }, (_, i) => OPS[op](vs.map((v) => v[i]!)));
  checkInto(whole, out, want, dtype, `allReduce ${op} ${dtype} n=${n} ${algorithm} ranks ${gr.join(",")}`);
  x.dispose();
  whole.dispose();
}

function allGatherCase(g: HostsProcessGroup, n: number, dtype: DType, algorithm: string): void {
  const gr = g.ranks;
  const k = call++;
  const x = upload(dtype, values(g.globalRank, n, k));
  const [whole, out] = poisoned(dtype, [n * gr.length]);
  g.collectives.allGather(x, out, { algorithm: algorithm as "auto" });
  const want = gr.flatMap((r) => values(r, n, k));
  checkInto(whole, out, want, dtype, `allGather ${dtype} n=${n} ${algorithm} ranks ${gr.join(",")}`);
  x.dispose();
  whole.dispose();
}

function reduceScatterCase(g: HostsProcessGroup, n: number, dtype: DType, op: Op, algorithm: string): void {
  const gr = g.ranks;
  const k = call++;
  const total = n * gr.length;
  const x = upload(dtype, values(g.globalRank, total, k));
  const [whole, out] = poisoned(dtype, [n]);
  g.collectives.reduceScatter(x, out, { op, algorithm: algorithm as "auto" });
  const all = gr.map((r) => values(r, total, k));
  const want = Array.from({ length: n }, (_, i) => OPS[op](all.map((v) => v[g.rank * n + i]!)));
  checkInto(
    whole,
    out,
    want,
    dtype,
    `reduceScatter ${op} ${dtype} n=${n} ${algorithm} ranks ${gr.join(",")}`,
  );
  x.dispose();
  whole.dispose();
}

function everyCall(g: HostsProcessGroup, sizes: readonly number[]): number {
  const before = call;
  for (const algorithm of HOSTS_ALGORITHMS)
    for (const dtype of DTYPES)
      for (const n of sizes) {
        for (const op of Object.keys(OPS) as Op[]) {
          allReduceCase(g, n, dtype, op, algorithm);
          reduceScatterCase(g, n, dtype, op, algorithm);
        }
        allGatherCase(g, n, dtype, algorithm);
      }
  return call - before;
}

// Sizes: one element (fewer than the ranks per host), odd, a multiple of the ranks per host (4096 when
// that is a power of two) and one past it, large.
const multiple = c.perHost * Math.ceil(4096 / c.perHost);
const SIZES = [1, 7, multiple, multiple + 1, (1 << 16) + 3];
const calls = everyCall(group, SIZES);
// In place (output = input), every algorithm, with a tail past the equal parts.
for (const algorithm of HOSTS_ALGORITHMS) {
  const n = 4097;
  const k = call++;
  const [whole, x] = poisoned("f32", [n]);
  const input = upload("f32", values(rank, n, k));
  x.copyFrom(input);
  c.allReduce(x, { output: x, algorithm });
  const vs = group.ranks.map((r) => values(r, n, k));
  const want = Array.from({ length: n }, (_, i) => OPS.sum(vs.map((v) => v[i]!)));
  checkInto(whole, x, want, "f32", `allReduce in place ${algorithm}`);
  for (const t of [input, whole]) t.dispose();
}
if (rank === 0) console.log(`every call exact on the world group: ${calls} calls`);
lap("every call on the world group");

// Point to point around the ring (the next rank is on this host or the next one), and all-to-all, every
// algorithm; then the symmetric-memory ops, refused.
{
  const n = 4097;
  const next = (rank + 1) % world;
  const prev = (rank + world - 1) % world;
  for (const algorithm of HOSTS_ALGORITHMS) {
    const k = call++;
    const x = upload("f32", values(rank, n, k));
    const [whole, out] = poisoned("f32", [n]);
    // Even ranks send first and odd ones receive first, so that no pair waits on itself.
    if (rank % 2 === 0) {
      c.send(x, next, { algorithm });
      c.recv(out, prev, { algorithm });
    } else {
      c.recv(out, prev, { algorithm });
      c.send(x, next, { algorithm });
    }
    group.synchronize();
    checkInto(whole, out, values(prev, n, k), "f32", `send/recv ${algorithm}`);
    // A peer on this host, then one on another host (the same position there). Pairs must be mutual:
    // local ranks 2i and 2i + 1, hosts 2j and 2j + 1; with an odd count the last one sits that pair out.
    const [host, local] = [Math.floor(rank / c.perHost), rank % c.perHost];
    const peers = [
      ...((local ^ 1) < c.perHost ? [host * c.perHost + (local ^ 1)] : []),
      ...((host ^ 1) < c.hosts ? [(host ^ 1) * c.perHost + local] : []),
    ];
    for (const peer of peers) {
      out.fill(Number.NaN);
      c.sendRecv(x, out, peer, { algorithm });
      group.synchronize();
      checkInto(whole, out, values(peer, n, k), "f32", `sendRecv ${algorithm} with ${peer}`);
    }
    x.dispose();
    whole.dispose();
  }
  for (const algorithm of ["auto", "nccl"] as const) {
    const k = call++;
    const x = upload("bf16", values(rank, n * world, k));
    const [whole, out] = poisoned("bf16", [n * world]);
    c.allToAll(x, out, { algorithm });
    group.synchronize();
    const want = group.ranks.flatMap((r) => values(r, n * world, k).slice(rank * n, (rank + 1) * n));
    checkInto(whole, out, want, "bf16", `allToAll ${algorithm}`);
    x.dispose();
    whole.dispose();
  }
  for (const op of ["matmulReduceScatter", "allReduceRmsNorm", "dispatch"] as const)
    assert.throws(
      () => c[op](),
      (e: unknown) => e instanceof UnsupportedError && /collectives\.local/.test(e.message),
      op,
    );
  if (rank === 0) console.log("send, recv, sendRecv and allToAll exact; the symmetric-memory ops refused");
}
lap("point to point, all-to-all");

// A subgroup of one rank per host (the rails alone), and one of one host (no NCCL level).
const perHost = group.localWorldSize;
const railRanks = Array.from({ length: c.hosts }, (_, h) => h * perHost);
const rail = await group.newGroup(railRanks);
if (rail) {
  assert.equal(rail.collectives.perHost, 1);
  everyCall(rail, [1, 4097]);
  if (rail.rank === 0) console.log(`subgroup ${railRanks.join(",")} (one rank per host): exact`);
  await rail.destroy();
}
// Only members ran the rail's calls: every rank's inputs start from the same call number again.
call = 10_000;
const hostRanks = Array.from({ length: perHost }, (_, i) => i);
const host0 = await group.newGroup(hostRanks);
if (host0) {
  assert.equal(host0.collectives.hosts, 1);
  everyCall(host0, [1, 4097]);
  if (host0.rank === 0) console.log(`subgroup ${hostRanks.join(",")} (one host): exact`);
  await host0.destroy();
}

// The symmetric-memory ops on this host's group (collectives.local): its ranks are not the world's
// (host 1's start at world rank perHost), so every rank and peer index must be the local group's. The fused
// matmuls bit for bit against the unfused path, at a shape of the demo's kind and a small odd one.
{
  const local = c.local;
  const lw = local.worldSize;
  for (const [m, k, n] of [
    [128 * lw, 512, 384],
    // More tiles than SMs: the GEMM holds every SM while it waits for the peers' rows.
    [2048 * lw, 4096, 4096],
  ] as const) {
    const gen = (shape: [number, number], salt: number): Tensor =>
      Tensor.rand(shape, "bf16", {
        seed,
        offset: (BigInt(salt) << 40n) + (BigInt(rank) << 32n),
        low: -1,
        high: 1,
      });
    const shard = gen([m / lw, k], 1);
    const w = gen([n, k], 2);
    const ag = (["fused", "sequential"] as const).map(
      (algorithm) => local.collectives.allGatherMatmul(shard, w, { algorithm }).out,
    );
    const z = gen([m, k], 3);
    const rs = (["fused", "sequential"] as const).map((algorithm) =>
      local.collectives.matmulReduceScatter(z, w, { algorithm }),
    );
    local.synchronize();
    assertSameBits(ag[0]!.toHost(), ag[1]!.toHost(), `local allGatherMatmul fused ${m}x${k}x${n}`, seed);
    assertSameBits(rs[0]!.toHost(), rs[1]!.toHost(), `local matmulReduceScatter fused ${m}x${k}x${n}`, seed);
    for (const t of [shard, w, z, ...ag, ...rs]) t.dispose();
  }
  if (rank === 0) console.log("the fused matmuls on collectives.local: the same bits as the unfused path");
}
lap("subgroups, fused matmuls on collectives.local");

// A graph of all three, hierarchical, replayed with the inputs changed in between.
call = 20_000;
{
  const n = 4097;
  const stream = Stream.create(group.device);
  const x = Tensor.empty([n], "bf16");
  const xs = Tensor.empty([n * world], "bf16");
  const ar = Tensor.empty([n], "bf16");
  const ag = Tensor.empty([n * world], "bf16");
  const rs = Tensor.empty([n], "bf16");
  const record = (): void => {
    c.allReduce(x, { output: ar, stream, algorithm: "hierarchical" });
    c.allGather(x, ag, { stream, algorithm: "hierarchical" });
    c.reduceScatter(xs, rs, { stream, algorithm: "hierarchical" });
  };
  // The scratch of a size is made by an eager call first; a capture cannot allocate it.
  const fresh = Stream.create(group.device);
  assert.throws(
    () => Graph.capture(fresh, () => void c.allGather(x, ag, { stream: fresh, algorithm: "hierarchical" })),
    (e: unknown) => e instanceof UnsupportedError && /before capturing/.test(e.message),
  );
  fresh.dispose();
  record();
  stream.synchronize();
  const graph = Graph.capture(stream, record);
  for (let replay = 0; replay < 4; replay++) {
    const k = call++;
    const inputs = [upload("bf16", values(rank, n, k)), upload("bf16", values(rank, n * world, k))];
    x.copyFrom(inputs[0]!, stream);
    xs.copyFrom(inputs[1]!, stream);
    graph.launch(stream);
    group.synchronize(stream);
    for (const t of inputs) t.dispose();
    const short = group.ranks.map((r) => values(r, n, k));
    const long = group.ranks.map((r) => values(r, n * world, k));
    const sum = (vs: number[][], i: number): number => OPS.sum(vs.map((v) => v[i]!));
    const want = {
      allReduce: Array.from({ length: n }, (_, i) => sum(short, i)),
      allGather: short.flat(),
      reduceScatter: Array.from({ length: n }, (_, i) => sum(long, rank * n + i)),
    };
    for (const [name, got] of [
      ["allReduce", ar],
      ["allGather", ag],
      ["reduceScatter", rs],
    ] as const)
      assertSameBits(got.toHost(), encode("bf16", want[name]), `graph replay ${replay} ${name}`, seed);
  }
  // A larger eager call on the capture stream grows its scratch: the graph's scratch must stay alive.
  {
    const big = Tensor.full([4 * n], 1, "bf16");
    const bigOut = Tensor.empty([4 * n * world], "bf16");
    c.allGather(big, bigOut, { stream, algorithm: "hierarchical" });
    group.synchronize(stream);
    assert.ok(
      bigOut.toHost().every((v) => v === 0x3f80),
      "allGather of ones after growth",
    );
    for (const t of [big, bigOut]) t.dispose();
    const k = call++;
    const input = upload("bf16", values(rank, n, k));
    x.copyFrom(input, stream);
    graph.launch(stream);
    group.synchronize(stream);
    input.dispose();
    assertSameBits(
      ag.toHost(),
      encode(
        "bf16",
        group.ranks.flatMap((r) => values(r, n, k)),
      ),
      "graph replay after the scratch grew: allGather",
      seed,
    );
  }
  graph.dispose();
  stream.dispose();
  for (const t of [x, xs, ar, ag, rs]) t.dispose();
  if (rank === 0) console.log("a CUDA graph of the three, replayed 4 times with the inputs changed: exact");
}
lap("graph");

c.barrier();
group.synchronize();
await group.destroy();
console.log(`gpu hosts ok rank ${rank}`);
