// The runtime on a real GPU: kernels on random data with poisoned outputs and guard regions, every
// dtype through the device and back, events, graphs, the kernel cache, memory that really comes back,
// and a faulting kernel surfacing as CudaError.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { CudaError, DisposedError, InvalidArgumentError, UnsupportedError } from "../../src/errors.js";
import { Device, deviceCount } from "../../src/runtime/device.js";
import { decodeToF32, DTYPES, encode, type DType, type RawArray } from "../../src/runtime/dtype.js";
import { Event } from "../../src/runtime/event.js";
import { Graph } from "../../src/runtime/graph.js";
import { KernelCache } from "../../src/runtime/jit/cache.js";
import { compileProgram } from "../../src/runtime/jit/compiler.js";
import { copy2d, PinnedMemory } from "../../src/runtime/memory.js";
import { MemoryPool } from "../../src/runtime/memory-pool.js";
import { compileRequest, Module, type ProgramSpec } from "../../src/runtime/module.js";
import { hostNormal, hostRandInt, hostUniform } from "../../src/runtime/random.js";
import { Stream } from "../../src/runtime/stream.js";
import { encodeTensorMap2d, tensorMap2d } from "../../src/runtime/tensor-map.js";
import { Tensor } from "../../src/runtime/tensor.js";
import { skipReason as skip, testSeed } from "./gpu.js";

const ALL: DType[] = Object.keys(DTYPES) as DType[];
const FLOATS = ALL.filter((d) => DTYPES[d].float);
const seed = skip ? 0n : testSeed();

const TEST_PROGRAM: ProgramSpec = {
  name: "symmkit/test/runtime",
  source: `#include "symmkit/core/types.cuh"
using namespace symmkit;
template <typename T>
__global__ void axpby(T* out, const T* x, const T* y, float a, float b, u64 n) {
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
    out[i] = from_float<T>(a * to_float(x[i]) + b * to_float(y[i]));
}
__global__ void reverse_in_shared(float* out, const float* in, u32 n) {
  extern __shared__ float s[];
  for (u32 i = threadIdx.x; i < n; i += blockDim.x) s[i] = in[i];
  __syncthreads();
  for (u32 i = threadIdx.x; i < n; i += blockDim.x) out[i] = s[n - 1 - i];
}
__global__ void cluster_rank(u32* out) {
  u32 r, n;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  if (threadIdx.x == 0) out[blockIdx.x] = (n << 16) | r;
}
struct Blob { u32 words[32]; };
__global__ void read_blob(const __grid_constant__ Blob b, u32* out) { out[threadIdx.x] = b.words[threadIdx.x]; }
__global__ void write_host(u32* mapped, u32 v) { mapped[threadIdx.x] = v + threadIdx.x; }
__global__ void add_one(int* x, u32 n) { for (u32 i = threadIdx.x; i < n; i += blockDim.x) x[i] += 1; }
`,
  nameExpressions: [
    ...FLOATS.map((d) => `axpby<${DTYPES[d].cType}>`),
    "reverse_in_shared",
    "cluster_rank",
    "read_blob",
    "write_host",
    "add_one",
  ],
};

const AXPBY = ["ptr", "ptr", "ptr", "f32", "f32", "u64"] as const;
/**
 * Error bound of out = round_T(a*x + b*y) computed in f32 (a product and an FMA: two f32 roundings) and
 * rounded once to T: unit roundoff of T relative to the result, plus half of T's subnormal spacing near
 * zero. [unit roundoff of T, half the smallest subnormal of T]
 */
const ROUNDING: Record<string, [number, number]> = {
  f32: [0, 0],
  f16: [2 ** -11, 2 ** -25],
  bf16: [2 ** -8, 2 ** -134],
  fp8e4m3: [2 ** -4, 2 ** -10],
  fp8e5m2: [2 ** -3, 2 ** -17],
};
const GUARD = 64;

function rawEqual(a: RawArray, b: RawArray): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : a.length;
}

test("axpby on random data: every float dtype, odd sizes, poisoned outputs, guards intact", { skip }, () => {
  const device = Device.get(0);
  using mod = Module.compile(TEST_PROGRAM, device);
  for (const dtype of FLOATS) {
    for (const n of [1, 7, 4097, 1_000_003]) {
      using x = Tensor.rand([n], dtype, { seed, offset: 1, low: -2, high: 2 });
      using y = Tensor.randn([n], dtype, { seed, offset: 2 });
      using buf = Tensor.full([n + 2 * GUARD], NaN, dtype); // poison: NaN in every float format
      const out = buf.slice(GUARD, GUARD + n);
      const k = mod.kernel(`axpby<${DTYPES[dtype].cType}>`, AXPBY);
      k.launch({ grid: Math.min(1024, Math.ceil(n / 256)), block: 256 }, out, x, y, 1.5, -0.75, n);
      const got = decodeToF32(dtype, out.toHost());
      const xs = x.toHost({ decode: true });
      const ys = y.toHost({ decode: true });
      const [u, halfSub] = ROUNDING[dtype]!;
      for (let i = 0; i < n; i++) {
        const ref = 1.5 * xs[i]! - 0.75 * ys[i]!;
        const bound =
          u * Math.abs(ref) + 2 * 2 ** -24 * (Math.abs(1.5 * xs[i]!) + Math.abs(0.75 * ys[i]!)) + halfSub;
        assert.ok(Number.isFinite(got[i]!), `${dtype} n=${n}: element ${i} not written (${got[i]})`);
        assert.ok(
          Math.abs(got[i]! - ref) <= bound,
          `${dtype} n=${n}: element ${i} = ${got[i]}, reference ${ref}`,
        );
      }
      const nanBits = encode(dtype, [NaN])[0];
      const all = buf.toHost();
      const guards = [...all.subarray(0, GUARD), ...all.subarray(GUARD + n)] as number[];
      assert.ok(
        guards.every((g) => Object.is(g, nanBits)),
        `${dtype} n=${n}: guard region overwritten`,
      );
    }
  }
});

test("rand on the device equals the host's Philox, bit for bit, for every dtype", { skip }, () => {
  const n = 10_007;
  for (const dtype of ALL) {
    using t = Tensor.rand([n], dtype, {
      seed,
      offset: 5,
      ...(DTYPES[dtype].float ? { low: -3, high: 7 } : { low: 3, high: 250 }),
    });
    const want = DTYPES[dtype].float
      ? encode(dtype, hostUniform(n, seed, 5, -3, 7))
      : encode(dtype, hostRandInt(n, seed, 5, 3, 247));
    const bad = rawEqual(t.toHost(), want);
    assert.equal(bad, -1, `${dtype}: element ${bad}`);
  }
  using wide = Tensor.rand([999], "i32", { seed });
  assert.equal(rawEqual(wide.toHost(), encode("i32", hostRandInt(999, seed, 0, -(2 ** 31), 2 ** 32))), -1);
});

test("randn agrees with the host to libm rounding and has the requested moments", { skip }, () => {
  const n = 200_001;
  using t = Tensor.randn([n], "f32", { seed, mean: 1, std: 2 });
  const got = t.toHost();
  const want = hostNormal(n, seed, 0, 1, 2);
  let worst = 0;
  for (let i = 0; i < n; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!));
  assert.ok(worst < 1e-4, `max |device - host| = ${worst}`);
  const mean = got.reduce((a, v) => a + v, 0) / n;
  assert.ok(Math.abs(mean - 1) < 0.02, `mean ${mean}`);
});

test("fromHost/toHost round-trip every dtype; full, views and slices", { skip }, () => {
  for (const dtype of ALL) {
    const values = Array.from({ length: 37 }, (_, i) => (DTYPES[dtype].float ? (i - 18) * 0.25 : i * 3));
    const raw = encode(dtype, values);
    using t = Tensor.fromHost(raw, dtype, { shape: [37] });
    assert.equal(rawEqual(t.toHost(), raw), -1, dtype);
    assert.deepEqual([...t.toHost({ decode: true })], [...decodeToF32(dtype, raw)], dtype);
    t.fill(DTYPES[dtype].float ? -1.5 : 9);
    assert.ok(
      [...t.toHost({ decode: true })].every((v) => v === (DTYPES[dtype].float ? -1.5 : 9)),
      `fill ${dtype}`,
    );
  }
  using m = Tensor.fromHost(new Float32Array(Array.from({ length: 12 }, (_, i) => i)), "f32", {
    shape: [4, 3],
  });
  const rows = m.slice(1, 3);
  assert.deepEqual(rows.shape, [2, 3]);
  assert.deepEqual([...rows.toHost()], [3, 4, 5, 6, 7, 8]);
  rows.fill(-1);
  assert.deepEqual([...m.view([12]).toHost()], [0, 1, 2, -1, -1, -1, -1, -1, -1, 9, 10, 11]);
  assert.throws(() => m.view([5]), InvalidArgumentError);
  using big = Tensor.full([3], 2n ** 40n + 5n, "i64");
  assert.deepEqual([...big.toHost()], [2n ** 40n + 5n, 2n ** 40n + 5n, 2n ** 40n + 5n]);
  const owner = Tensor.zeros([8], "f32");
  const v = owner.slice(2, 4);
  owner.dispose();
  assert.throws(() => v.toHost(), DisposedError, "a view of freed memory refuses to be used");
});

test(
  "dynamic shared memory above 48 KiB, clusters, a 128-byte by-value parameter, mapped host memory",
  { skip },
  () => {
    const device = Device.get(0);
    using mod = Module.compile(TEST_PROGRAM, device);
    const n = 50_000; // 200 KB of floats in shared memory
    using input = Tensor.rand([n], "f32", { seed });
    using out = Tensor.empty([n], "f32");
    mod
      .kernel("reverse_in_shared", ["ptr", "ptr", "u32"])
      .launch({ grid: 1, block: 1024, sharedBytes: n * 4 }, out, input, n);
    const a = input.toHost();
    const b = out.toHost();
    assert.ok(b.every((v, i) => v === a[n - 1 - i]));
    assert.throws(
      () =>
        mod
          .kernel("reverse_in_shared", ["ptr", "ptr", "u32"])
          .launch({ grid: 1, block: 32, sharedBytes: 1 << 20 }, out, input, 1),
      /at most/,
    );

    using ranks = Tensor.zeros([8], "u32");
    mod.kernel("cluster_rank", ["ptr"]).launch({ grid: 8, block: 32, cluster: 4 }, ranks);
    assert.deepEqual(
      [...ranks.toHost()],
      [0, 1, 2, 3, 0, 1, 2, 3].map((r) => (4 << 16) | r),
    );

    const blob = new Uint8Array(128);
    new Uint32Array(blob.buffer).forEach((_, i, arr) => (arr[i] = 1000 + i * i));
    using words = Tensor.zeros([32], "u32");
    mod.kernel("read_blob", [{ bytes: 128, align: 64 }, "ptr"]).launch({ grid: 1, block: 32 }, blob, words);
    assert.deepEqual([...words.toHost()], [...new Uint32Array(blob.buffer)]);

    using pinned = PinnedMemory.alloc(64 * 4, { mapped: true });
    const stream = Stream.create(device);
    mod.kernel("write_host", ["ptr", "u32"]).launch({ grid: 1, block: 64, stream }, pinned.devicePtr, 77);
    stream.synchronize();
    stream.dispose();
    assert.deepEqual(
      [...new Uint32Array(pinned.buffer)],
      Array.from({ length: 64 }, (_, i) => 77 + i),
    );
  },
);

test("events time GPU work; graph capture of 100 launches replays exactly", { skip }, () => {
  const device = Device.get(0);
  using mod = Module.compile(TEST_PROGRAM, device);
  using stream = Stream.create(device);
  using x = Tensor.zeros([1 << 20], "i32", { stream });
  const addOne = mod.kernel("add_one", ["ptr", "u32"]);
  using start = Event.create(device);
  using end = Event.create(device);
  using g = Graph.capture(stream, () => {
    for (let i = 0; i < 100; i++) addOne.launch({ grid: 1, block: 1024, stream }, x, x.numel);
  });
  start.record(stream);
  for (let r = 0; r < 3; r++) g.launch();
  end.record(stream);
  end.synchronize();
  const ms = end.elapsedMsSince(start);
  assert.ok(ms > 0, `elapsed ${ms} ms`);
  const v = x.toHost({ stream });
  assert.ok(
    v.every((e) => e === 300),
    `after 3 replays of 100 increments: ${v[0]}, ${v[v.length - 1]}`,
  );
  assert.throws(
    () =>
      Graph.capture(stream, () => {
        throw new Error("inside capture");
      }),
    /inside capture/,
  );
  addOne.launch({ grid: 1, block: 32, stream }, x, 1); // the stream is usable again after a failed capture
  stream.synchronize();
});

test("the second compile of the same kernel is a cache hit, at least 10x faster", { skip }, (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-gpu-cache-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cache = new KernelCache(dir);
  const spec: ProgramSpec = { ...TEST_PROGRAM, source: `// ${crypto.randomUUID()}\n${TEST_PROGRAM.source}` };
  const arch = Device.get(0).props.arch;
  const cold = compileProgram(compileRequest(spec, arch), cache);
  const warm = compileProgram(compileRequest(spec, arch), cache);
  console.log(`# compile: cold ${cold.ms.toFixed(1)} ms, cached ${warm.ms.toFixed(2)} ms`);
  assert.equal(cold.cacheHit, false);
  assert.equal(warm.cacheHit, true);
  assert.ok(warm.ms * 10 <= cold.ms, `cold ${cold.ms} ms, cached ${warm.ms} ms`);
  using m = Module.load(warm, Device.get(0));
  assert.ok(m.kernel("add_one", ["ptr", "u32"]).attributes().registers > 0);
});

test("1000 allocate/free cycles leave device memory where it was", { skip }, () => {
  const device = Device.get(0);
  Tensor.empty([1 << 20], "f32").dispose();
  device.synchronize();
  const before = device.memoryInfo().freeBytes;
  for (let i = 0; i < 1000; i++) {
    const t = Tensor.empty([(1 << 18) + i * 1024], "f32");
    t.dispose();
  }
  device.synchronize();
  const after = device.memoryInfo().freeBytes;
  assert.equal(after, before, `free memory moved by ${before - after} bytes`);
});

test(
  "tensors made on a stream come from the pool: reused, handed back in stream order, trimmed",
  { skip },
  () => {
    const device = Device.get(0);
    const pool = MemoryPool.of(device);
    using s = Stream.create(device);
    device.synchronize();
    pool.trim();
    const free0 = device.memoryInfo().freeBytes;
    const used0 = pool.usedBytes;
    // Each tensor is written on the stream and disposed at once, its kernel still queued: the next one may
    // take the same memory only behind that kernel, so every value read back is its own.
    const seen: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t = Tensor.full([(1 << 18) + i * 1024], i, "u32", { device, stream: s });
      if (i % 50 === 49) seen.push(...new Set(t.toHost({ stream: s })));
      t.dispose();
    }
    assert.deepEqual(seen, [49, 99, 149, 199]);
    // The same size again and again: a freed block is kept for the stream's next tensor of that size, and
    // still each one is its own, behind the kernel of the one before.
    const same: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t = Tensor.full([(1 << 16) + 3], i, "u32", { device, stream: s });
      if (i % 50 === 49) same.push(...new Set(t.toHost({ stream: s })));
      t.dispose();
    }
    assert.deepEqual(same, [49, 99, 149, 199]);
    s.synchronize();
    assert.equal(pool.usedBytes, used0, "every pooled tensor was handed back");
    assert.ok(pool.reservedBytes >= 1 << 20, "the pool keeps what it mapped");
    pool.trim();
    assert.equal(device.memoryInfo().freeBytes, free0, "trim gives the device its memory back");
    // While the stream is being captured a pooled allocation would belong to the graph: refused, and so is
    // a pooled free there; the capture is left intact.
    const early = Tensor.empty([16], "f32", { device, stream: s });
    assert.throws(
      () => Graph.capture(s, () => Tensor.empty([16], "f32", { device, stream: s })),
      UnsupportedError,
    );
    assert.throws(() => Graph.capture(s, () => early.dispose()), UnsupportedError);
    early.dispose();
    // A tensor used on another stream (recordStream), and one that outlives its stream: both go back.
    const other = Stream.create(device);
    const t = Tensor.full([1 << 20], 7, "u32", { device, stream: other });
    const u = Tensor.empty([1 << 20], "u32", { device, stream: s });
    u.copyFrom(t, other);
    u.recordStream(other);
    u.dispose();
    other.dispose();
    t.dispose();
    device.synchronize();
    assert.equal(pool.usedBytes, used0, "tensors used on another stream, or past their stream, go back");
  },
);

// Peer access to pooled memory (Device.enablePeerAccess grants it with cuMemPoolSetAccess): another
// project saw a driver write zeros into a pool after such a grant (CUDA.jl, NVIDIA bug 6098762), so the
// bytes are checked both ways, by the copy engines and by kernels, with exact values.
const pairSkip =
  skip ||
  (deviceCount() < 2
    ? `needs two GPUs in one process (this machine has ${deviceCount()})`
    : !Device.get(0).canAccessPeer(Device.get(1)) && "GPUs 0 and 1 cannot access each other's memory");
test(
  "two GPUs: pooled memory read and written by the peer's copies and kernels, and freed after the peer's use",
  { skip: pairSkip },
  () => {
    const [d0, d1] = [Device.get(0), Device.get(1)];
    d0.enablePeerAccess(d1);
    d1.enablePeerAccess(d0);
    using mod = Module.compile(TEST_PROGRAM, d0);
    const axpby = mod.kernel("axpby<float>", AXPBY);
    using s0 = Stream.create(d0);
    using s1 = Stream.create(d1);
    const used = [MemoryPool.of(d0).usedBytes, MemoryPool.of(d1).usedBytes];
    const n = (1 << 20) + 7;
    const x = Tensor.full([n], 3, "f32", { device: d1, stream: s1 }); // pooled on GPU 1
    const y = Tensor.full([n], 5, "f32", { device: d0, stream: s0 }); // pooled on GPU 0
    const out = Tensor.full([n], NaN, "f32", { device: d1, stream: s1 });
    s1.synchronize();
    // A kernel on GPU 0 reads GPU 1's pool and writes into it; GPU 1's pool then goes back after GPU 0's use.
    axpby.launch({ grid: 256, block: 256, stream: s0 }, out, x, y, 2, 1, n);
    out.recordStream(s0);
    x.recordStream(s0);
    s0.synchronize();
    assert.ok(
      out.toHost({ stream: s1 }).every((v) => v === 11),
      "GPU 0's kernel: 2 x 3 + 5 in GPU 1's pooled memory",
    );
    // The copy engines both ways between the pools.
    const back = Tensor.full([n], NaN, "f32", { device: d0, stream: s0 });
    back.copyFrom(out, s0);
    x.copyFrom(y, s0);
    back.recordStream(s0);
    s0.synchronize();
    assert.ok(
      back.toHost({ stream: s0 }).every((v) => v === 11),
      "GPU 1's pool to GPU 0's",
    );
    assert.ok(
      x.toHost({ stream: s1 }).every((v) => v === 5),
      "GPU 0's pool to GPU 1's",
    );
    for (const t of [x, y, out, back]) t.dispose();
    d0.synchronize();
    d1.synchronize();
    assert.deepEqual(
      [MemoryPool.of(d0).usedBytes, MemoryPool.of(d1).usedBytes],
      used,
      "every tensor went back",
    );
  },
);

test("copy2d copies rows between pitches, and refuses a pitch narrower than a row", { skip }, () => {
  const device = Device.get(0);
  using s = Stream.create(device);
  // 5 rows of 3 u32 from a source of pitch 7 words into a destination of pitch 4 words (poisoned).
  const src = Tensor.fromHost(
    Uint32Array.from({ length: 35 }, (_, i) => i),
    "u32",
    { device },
  );
  const dst = Tensor.full([20], 0xdeadbeef, "u32", { device });
  copy2d(dst.ptr, 16, src.ptr + 8n, 28, 12, 5, s);
  const got = [...dst.toHost({ stream: s })];
  const want = Array.from({ length: 20 }, (_, i) =>
    i % 4 === 3 ? 0xdeadbeef : 7 * Math.floor(i / 4) + 2 + (i % 4),
  );
  assert.deepEqual(got, want);
  assert.throws(() => copy2d(dst.ptr, 8, src.ptr, 28, 12, 5, s), InvalidArgumentError);
  for (const t of [src, dst]) t.dispose();
});

test(
  "a tensor map is encoded once per distinct map, and a change of any field encodes another",
  { skip },
  () => {
    const t = Tensor.empty([64, 256], "bf16", { device: Device.get(0) });
    const fields = {
      address: t.ptr,
      dataType: "BFLOAT16",
      elementBytes: 2,
      rows: 64,
      cols: 256,
      rowStrideBytes: 512,
      boxCols: 64,
      boxRows: 64,
      swizzle: "B128",
    } as const;
    const first = tensorMap2d(fields);
    assert.equal(tensorMap2d({ ...fields }), first, "the same map again comes from the cache");
    const copy = encodeTensorMap2d(fields);
    assert.ok(
      copy !== first && Buffer.from(copy).equals(Buffer.from(first)),
      "the public call returns a copy",
    );
    for (const change of [
      { address: t.ptr + 512n },
      { rows: 32 },
      { boxRows: 32 },
      { boxCols: 32, swizzle: "B64" }, // a 64-byte swizzle takes rows of 64 bytes at most
    ] as const) {
      const other = tensorMap2d({ ...fields, ...change });
      assert.notEqual(other, first);
      assert.ok(
        !Buffer.from(other).equals(Buffer.from(first)),
        `${Object.keys(change).join(", ")} changed: other bytes`,
      );
    }
    t.dispose();
  },
);

/** Runs `body` (ESM, after imports of Module, Device, defaultStream and SyncWatch from dist) in a child
 * process, since what it tests ends the CUDA context; the body exits 3 once it has printed the error. */
function inChild(body: string): { status: number | null; stdout: string; stderr: string } {
  const dist = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "src");
  const script = `
    import { Module } from ${JSON.stringify(path.join(dist, "runtime/module.js"))};
    import { Device } from ${JSON.stringify(path.join(dist, "runtime/device.js"))};
    import { defaultStream } from ${JSON.stringify(path.join(dist, "runtime/stream.js"))};
    import { SyncWatch } from ${JSON.stringify(path.join(dist, "distributed/sync-watch.js"))};
    ${body}
  `;
  return spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    encoding: "utf8",
    timeout: 120_000,
  });
}

test("a kernel that faults surfaces as a CudaError, not a crash", { skip }, () => {
  const r = inChild(`
    const m = Module.compile({ name: "symmkit/test/fault", source: "__global__ void oob(unsigned* p) { p[1ull << 40] = 1; }\\n", nameExpressions: ["oob"] }, Device.get(0));
    m.kernel("oob", ["ptr"]).launch({ grid: 1, block: 1 }, 1n << 20n);
    try { defaultStream().synchronize(); console.log("NO ERROR"); }
    catch (e) { console.log(e.constructor.name, e.code, e.errorName); process.exit(3); }
  `);
  assert.equal(r.status, 3, `${r.stdout}\n${r.stderr}`);
  assert.match(
    r.stdout,
    /^CudaError SYMMKIT_CUDA_ERROR CUDA_ERROR_(ILLEGAL_ADDRESS|ILLEGAL_INSTRUCTION|LAUNCH_FAILED)/m,
  );
  void CudaError;
});

test(
  "a GEMM pipeline wait that stalls records which wait it was: KernelStallError, not a bare trap",
  { skip },
  () => {
    // A stage barrier nobody arrives at, waited on by gemm/tma.cuh's mbar_wait with a 50 ms bound.
    const source = `#include "symmkit/gemm/tma.cuh"
    using namespace symmkit;
    __global__ void stall(u64 timeout_ns, const u32* abort_flag, TimeoutRecord* record) {
      __shared__ alignas(8) u64 bar;
      if (threadIdx.x == 0) { gemm::mbar_init(&bar, 1); gemm::mbar_init_fence(); }
      __syncthreads();
      const WaitEnv env{timeout_ns, abort_flag, record, 5};
      if (threadIdx.x == 32) gemm::mbar_wait(&bar, 0, 50000000ull, env, gemm::stall_phase(gemm::kStallStageFull, 3));
    }
  `;
    const r = inChild(`
    const device = Device.get(0);
    const watch = SyncWatch.create(device);
    const m = Module.compile({ name: "symmkit/test/stall", source: ${JSON.stringify(source)}, nameExpressions: ["stall"] }, device);
    m.kernel("stall", ["u64", "ptr", "ptr"]).launch({ grid: 1, block: 64 }, watch.timeoutNs, watch.abortFlagPtr, watch.recordPtr);
    try { watch.translate(() => defaultStream().synchronize()); console.log("NO ERROR"); }
    catch (e) { console.log(e.constructor.name, e.code, e.message); process.exit(3); }
  `);
    assert.equal(r.status, 3, `${r.stdout}\n${r.stderr}`);
    assert.match(
      r.stdout,
      /^KernelStallError SYMMKIT_KERNEL_STALL rank 5 \(block 0, thread 32\) stalled \d+ ms in a consumer's wait for the loads of stage 3 \(waiting for 0\)/m,
    );
  },
);
