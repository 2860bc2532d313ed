// One rank of the symmetric-memory check, run under `symmkit run -n N` (test/gpu/distributed.test.ts):
// cross-GPU writes into every peer's buffer, barriers (10 000 in a row, 200 with ranks sharing a GPU, and
// replayed from a CUDA graph) leaving the pads idle, NCCL all-reduce against a host reference, and 100
// allocate/free cycles with GPU memory and open descriptors flat. Exits non-zero on the first wrong result.
import assert from "node:assert/strict";
import fs from "node:fs";
import { initCuda as init } from "../../../src/distributed/process-group.js";
import { SYNC_KERNELS, barrierLoopExpr, exchangeWord } from "../../../src/distributed/sync-kernels.js";
import { SYMM_VIEW_PARAM } from "../../../src/distributed/device-layouts.js";
import type { SymmetricTensor } from "../../../src/distributed/symmetric-memory.js";
import { copyDeviceToHost } from "../../../src/runtime/memory.js";
import { Graph } from "../../../src/runtime/graph.js";
import { sharedModule } from "../../../src/runtime/module.js";
import { hostRandInt, hostUniform } from "../../../src/runtime/random.js";
import { defaultStream } from "../../../src/runtime/stream.js";
import { freshSeed, Tensor } from "../../../src/runtime/tensor.js";
import { readEnvVar } from "../../../src/settings.js";
import { sectionTimer } from "./guards.js";

const group = await init();
const { rank, worldSize: world, device } = group;
const log = (s: string): void => console.log(s);
if (rank === 0) await group.store.set("seed", String(process.env.SYMMKIT_TEST_SEED ?? freshSeed()));
const seed = BigInt((await group.store.get("seed")).toString());
const mod = sharedModule(SYNC_KERNELS, device);
const stream = defaultStream(device);

async function exchangeCheck(n: number, rounds: number): Promise<void> {
  const sym = await group.symmetric.empty([world * n], "u32");
  const k = mod.kernel("symmkit::exchange_pattern", [SYMM_VIEW_PARAM, "u64", "u32"]);
  for (let round = 0; round < rounds; round++) {
    const salt = hostRandInt(1, seed, round, 0, 2 ** 32)[0]!;
    sym.tensor.fill(0xdeadbeef);
    stream.synchronize();
    await group.barrier(); // no rank writes into a peer before the peer's poison is in place
    k.launch({ grid: Math.min(64, Math.ceil(n / 256)), block: 256 }, sym.deviceView(), n, salt);
    group.synchronize(stream);
    const mine = sym.tensor.toHost() as Uint32Array;
    for (let src = 0; src < world; src++) {
      for (let i = 0; i < n; i++) {
        const want = exchangeWord(src, rank, i, salt);
        if (mine[src * n + i] !== want) {
          throw new Error(
            `n=${n} round ${round}: word ${i} from rank ${src} is ${mine[src * n + i]}, expected ${want} (seed ${seed})`,
          );
        }
      }
    }
    await group.barrier(); // nobody refills before everyone has checked
  }
  await sym.dispose();
  log(`exchange ok: n=${n}, ${rounds} rounds`);
}

function padsIdle(sym: SymmetricTensor): boolean {
  const pad = new Uint32Array(sym.padBytes / 4);
  copyDeviceToHost(pad, sym.padPtrs[rank]!, stream);
  return pad.every((x) => x === 0);
}

/** Barriers a loop kernel makes: ranks sharing a GPU (symmkit run --share-gpus) wait for a time slice at
 * every one, so there a few hundred. */
const LOOP = readEnvVar("SYMMKIT_SHARE_GPUS") ? 200 : 10_000;

async function barrierCheck(): Promise<void> {
  const sym = await group.symmetric.empty([1024], "u32");
  const blocks = 8;
  for (const [prev, next] of [
    [true, true],
    [false, true],
    [true, false],
    [false, false],
  ] as const) {
    const k = mod.kernel(barrierLoopExpr(prev, next), [SYMM_VIEW_PARAM, "u32"]);
    k.launch({ grid: blocks, block: 32 }, sym.deviceView(), LOOP);
    group.synchronize(stream);
    assert.ok(padsIdle(sym), `pads not idle after ${LOOP} barriers <${prev}, ${next}>`);
    await group.barrier();
  }
  const k = mod.kernel(barrierLoopExpr(true, true), [SYMM_VIEW_PARAM, "u32"]);
  const g = Graph.capture(stream, () => k.launch({ grid: blocks, block: 32, stream }, sym.deviceView(), 100));
  for (let r = 0; r < 4; r++) g.launch();
  group.synchronize(stream);
  assert.ok(padsIdle(sym), "pads not idle after 4 graph replays");
  g.dispose();
  await sym.dispose();
  log(`barriers ok: 4 patterns x ${LOOP}, graph replays x 4, pads idle`);
}

async function ncclCheck(): Promise<void> {
  const comm = await group.nccl();
  const n = 1_000_003;
  const x = Tensor.rand([n], "f32", { seed, offset: rank, low: -1, high: 1 });
  const y = Tensor.empty([n], "f32");
  comm.allReduce(x, y, "sum");
  comm.synchronize();
  const got = y.toHost();
  const inputs = Array.from({ length: world }, (_, r) => hostUniform(n, seed, r, -1, 1));
  let worst = 0;
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (const a of inputs) s += a[i]!;
    worst = Math.max(worst, Math.abs(got[i]! - s));
  }
  assert.ok(worst < 1e-5 * world, `NCCL all-reduce f32: max error ${worst}`);
  // Integers exactly representable in f32 sum exactly: 0 ulp.
  const ints = Tensor.fromHost(
    new Float32Array(4097).map((_, i) => ((i * 7 + rank * 13) % 1000) - 500),
    "f32",
  );
  comm.allReduce(ints, ints, "sum");
  comm.synchronize();
  const exact = ints.toHost();
  exact.forEach((v, i) => {
    let s = 0;
    for (let r = 0; r < world; r++) s += ((i * 7 + r * 13) % 1000) - 500;
    assert.equal(v, s, `exact all-reduce element ${i}`);
  });
  for (const t of [x, y, ints]) t.dispose();
  log(`nccl ok: all-reduce f32 max error ${worst.toExponential(2)}, exact integers 0 ulp`);
}

/** all-gather, reduce-scatter, broadcast and paired send/recv against host references (exact integers). */
async function ncclCollectivesCheck(): Promise<void> {
  const comm = await group.nccl();
  const n = 1031;
  const value = (r: number, i: number): number => ((r * 131 + i * 7) % 2000) - 1000;
  const mine = Tensor.fromHost(
    new Float32Array(n).map((_, i) => value(rank, i)),
    "f32",
  );
  const gathered = Tensor.full([n * world], NaN, "f32");
  comm.allGather(mine, gathered);
  const full = Tensor.fromHost(
    new Float32Array(n * world).map((_, i) => value(rank, i)),
    "f32",
  );
  const scattered = Tensor.full([n], NaN, "f32");
  comm.reduceScatter(full, scattered, "sum");
  const root = world - 1;
  const bcast = Tensor.full([n], NaN, "f32");
  comm.broadcast(mine, bcast, root);
  const right = (rank + 1) % world;
  const left = (rank + world - 1) % world;
  const fromLeft = Tensor.full([n], NaN, "f32");
  comm.group(() => {
    comm.send(mine, right);
    comm.recv(fromLeft, left);
  });
  comm.synchronize();
  const g = gathered.toHost();
  g.forEach((v, i) => assert.equal(v, value(Math.floor(i / n), i % n), `all-gather element ${i}`));
  const sc = scattered.toHost();
  sc.forEach((v, i) => {
    let s = 0;
    for (let r = 0; r < world; r++) s += value(r, rank * n + i);
    assert.equal(v, s, `reduce-scatter element ${i}`);
  });
  bcast.toHost().forEach((v, i) => assert.equal(v, value(root, i), `broadcast element ${i}`));
  fromLeft.toHost().forEach((v, i) => assert.equal(v, value(left, i), `recv element ${i}`));
  for (const t of [mine, gathered, full, scattered, bcast, fromLeft]) t.dispose();
  log("nccl collectives ok: all-gather, reduce-scatter, broadcast, send/recv exact");
}

/** A group of the even ranks: its own symmetric memory and barriers; odd ranks are not members. */
async function subgroupCheck(): Promise<void> {
  const evens = Array.from({ length: world }, (_, i) => i).filter((r) => r % 2 === 0);
  const sub = await group.newGroup(evens);
  if (rank % 2 === 1) {
    assert.equal(sub, undefined);
    log("subgroup ok: not a member");
    return;
  }
  assert.ok(sub);
  assert.deepEqual(sub.ranks, evens);
  assert.equal(sub.rank, evens.indexOf(rank));
  const n = 513;
  const sym = await sub.symmetric.empty([sub.worldSize * n], "u32");
  const k = mod.kernel("symmkit::exchange_pattern", [SYMM_VIEW_PARAM, "u64", "u32"]);
  k.launch({ grid: 2, block: 256 }, sym.deviceView(), n, 77);
  sub.synchronize();
  const got = sym.tensor.toHost() as Uint32Array;
  for (let src = 0; src < sub.worldSize; src++) {
    for (let i = 0; i < n; i++)
      assert.equal(got[src * n + i], exchangeWord(src, sub.rank, i, 77), `subgroup word ${i} from ${src}`);
  }
  await sym.dispose();
  await sub.destroy();
  log(`subgroup ok: ranks ${evens.join(",")} exchanged through their own symmetric buffer`);
}

async function cycleCheck(): Promise<void> {
  const fds = (): number => fs.readdirSync("/proc/self/fd").length;
  // A rank's physical memory is freed when the last peer that imported it lets go, so each rank measures
  // only once every rank has finished disposing.
  const warm = await group.symmetric.empty([1 << 20], "f32");
  await warm.dispose();
  device.synchronize();
  await group.barrier();
  const memBefore = device.memoryInfo().freeBytes;
  const fdsBefore = fds();
  for (let i = 0; i < 100; i++) {
    const s = await group.symmetric.empty([(1 << 20) + i * 4096], "f32");
    await s.dispose();
  }
  device.synchronize();
  await group.barrier();
  const memAfter = device.memoryInfo().freeBytes;
  const fdsAfter = fds();
  assert.equal(memAfter, memBefore, `GPU memory moved by ${memBefore - memAfter} bytes over 100 cycles`);
  assert.equal(fdsAfter, fdsBefore, `open descriptors went from ${fdsBefore} to ${fdsAfter}`);
  log(`alloc/free ok: 100 cycles, free memory ${memAfter} and ${fdsAfter} descriptors unchanged`);
}

log(`rank ${rank}/${world} on ${device.props.name} (cuda:${device.ordinal}), seed ${seed}`);
const lap = sectionTimer(rank);
await exchangeCheck(1, 3);
await exchangeCheck(4097, 20);
await exchangeCheck(1_000_003, 3);
lap("exchange");
await barrierCheck();
lap("barriers");
await ncclCheck();
await ncclCollectivesCheck();
lap("nccl");
await subgroupCheck();
lap("subgroup");
await cycleCheck();
lap("alloc/free cycles");
await group.destroy();
log("all symmetric checks passed");
