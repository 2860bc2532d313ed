// symmkit's Hopper GEMM and the cuBLASLt binding on one GPU: relative error against an fp64 host
// reference and against each other on fresh random inputs, odd shapes, poisoned outputs with guard
// bytes around them, fp8 with scales, CUDA graph capture, every fusion hook (tile list, ready flags
// raised by a second stream after a delay, signalling store into another buffer, f32 accumulation), and
// split-K (the unsplit bits, and the CPU backend's reference GEMM's, on exact inputs for any slice
// count, behind every plain epilogue).
import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidArgumentError } from "../../src/errors.js";
import { Device } from "../../src/runtime/device.js";
import { copyDeviceToDevice, DeviceMemory, writeValue32 } from "../../src/runtime/memory.js";
import { Graph } from "../../src/runtime/graph.js";
import { Module } from "../../src/runtime/module.js";
import { Stream } from "../../src/runtime/stream.js";
import { Tensor } from "../../src/runtime/tensor.js";
import { decodeToF32, encode } from "../../src/runtime/dtype.js";
import { matmul } from "../../src/ops/gemm/matmul.js";
import { gemmTiles, HopperGemm } from "../../src/ops/gemm/hopper-gemm.js";
import { CublasLtMatmul } from "../../src/ops/gemm/cublaslt-matmul.js";
import { relFrobenius } from "../../src/bench/gemm.js";
import { HostTensor } from "../../src/cpu/host-tensor.js";
import { hostMatmul } from "../../src/cpu/matmul.js";
import { skipReason, testSeed } from "./gpu.js";
import { exactInts, Guarded } from "./gemm-support.js";

const hopper = !skipReason && Device.get(0).props.arch.startsWith("sm_90");
const skip = skipReason || (!hopper && "the symmkit GEMM needs a Hopper GPU (sm_90a)");
if (skip && !skipReason) console.log(`# GEMM tests skipped: ${skip}`);
const seed = skip ? 0n : testSeed();
let offset = 0n;
const nextOffset = (): bigint => (offset += 1n << 40n);

function reference(
  a: Float32Array,
  b: Float32Array,
  m: number,
  n: number,
  k: number,
  bKn = false,
): Float64Array {
  const out = new Float64Array(m * n);
  const bt = new Float64Array(n * k);
  for (let j = 0; j < n; j++) for (let p = 0; p < k; p++) bt[j * k + p] = bKn ? b[p * n + j]! : b[j * k + p]!;
  for (let i = 0; i < m; i++) {
    const row = i * k;
    for (let j = 0; j < n; j++) {
      let s = 0;
      const col = j * k;
      for (let p = 0; p < k; p++) s += a[row + p]! * bt[col + p]!;
      out[i * n + j] = s;
    }
  }
  return out;
}

function relError(x: Float32Array, ref: Float64Array, scale = 1): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < x.length; i++) {
    const r = ref[i]! * scale;
    num += (x[i]! - r) ** 2;
    den += r * r;
  }
  return Math.sqrt(num / den);
}

function noNaN(x: Float32Array, what: string): void {
  const i = x.findIndex((v) => Number.isNaN(v));
  assert.equal(i, -1, `${what}: element ${i} was never written`);
}

function inputs(m: number, n: number, k: number, elem: "bf16" | "fp8e4m3", range = 1) {
  const device = Device.get(0);
  const opts = { device, seed, low: -range, high: range };
  const a = Tensor.rand([m, k], elem, { ...opts, offset: nextOffset() });
  const b = Tensor.rand([n, k], elem, { ...opts, offset: nextOffset() });
  return { device, a, b, ha: a.toHost({ decode: true }), hb: b.toHost({ decode: true }) };
}

const BF16_SHAPES: [number, number, number][] = [
  [128, 256, 64],
  [1, 8, 16],
  [200, 264, 72],
  [333, 520, 1000],
  [5000, 16, 64],
  [8, 4104, 136],
  [300, 296, 16],
  [129, 257 + 7, 4104],
];

test("bf16: symmkit and cuBLASLt against fp64, odd shapes, guards", { skip }, () => {
  for (const [m, n, k] of BF16_SHAPES) {
    const { device, a, b, ha, hb } = inputs(m, n, k, "bf16");
    const ref = reference(ha, hb, m, n, k);
    const outS = new Guarded([m, n], "bf16", device);
    const outL = new Guarded([m, n], "bf16", device);
    matmul(a, b, { out: outS.t });
    matmul(a, b, { out: outL.t, impl: "cublaslt" });
    const s = outS.values();
    const l = outL.values();
    noNaN(s, `symmkit ${m}x${n}x${k}`);
    noNaN(l, `cuBLASLt ${m}x${n}x${k}`);
    outS.check(`symmkit ${m}x${n}x${k}`);
    outL.check(`cuBLASLt ${m}x${n}x${k}`);
    const eS = relError(s, ref);
    const eL = relError(l, ref);
    const eSL = relFrobenius(s, l);
    console.log(
      `# bf16 ${m}x${n}x${k}: symmkit ${eS.toExponential(2)}, cuBLASLt ${eL.toExponential(2)} vs fp64; apart ${eSL.toExponential(2)}`,
    );
    // Rounding the output to bf16 alone costs about 2^-9 / sqrt(3) = 1.1e-3.
    assert.ok(eS < 4e-3, `symmkit ${m}x${n}x${k}: relative error ${eS}`);
    assert.ok(eL < 4e-3, `cuBLASLt ${m}x${n}x${k}: relative error ${eL}`);
    assert.ok(eSL < 6e-3, `symmkit vs cuBLASLt ${m}x${n}x${k}: ${eSL}`);
    for (const t of [a, b]) t.dispose();
    outS.dispose();
    outL.dispose();
  }
});

test("bf16 with B as [k, n]: symmkit and cuBLASLt against fp64", { skip }, () => {
  for (const [m, n, k] of [
    [96, 200, 136],
    [128, 256, 64],
    [333, 520, 1000],
    [1, 8, 16],
  ] as [number, number, number][]) {
    const { device, a, ha, hb, b } = inputs(m, n, k, "bf16");
    // B^T from the [n, k] values: exact (a permutation of bf16 values).
    const kn = new Float32Array(k * n);
    for (let j = 0; j < n; j++) for (let p = 0; p < k; p++) kn[p * n + j] = hb[j * k + p]!;
    const bKn = Tensor.fromHost(encode("bf16", kn), "bf16", { shape: [k, n], device });
    const ref = reference(ha, kn, m, n, k, true);
    for (const impl of ["symmkit", "cublaslt"] as const) {
      const out = new Guarded([m, n], "bf16", device);
      matmul(a, bKn, { impl, layoutB: "kn", out: out.t });
      const v = out.values();
      noNaN(v, `${impl} [k, n] ${m}x${n}x${k}`);
      out.check(`${impl} [k, n] ${m}x${n}x${k}`);
      const e = relError(v, ref);
      console.log(`# bf16 B [k, n] ${m}x${n}x${k}: ${impl} ${e.toExponential(2)} vs fp64`);
      assert.ok(e < 4e-3, `${impl} B [k, n] ${m}x${n}x${k}: relative error ${e}`);
      out.dispose();
    }
    for (const t of [a, b, bKn]) t.dispose();
  }
});

test("fp8 e4m3 with per-tensor scales: symmkit and cuBLASLt against fp64", { skip }, () => {
  for (const [m, n, k] of [
    [256, 512, 128],
    [200, 264, 1008],
    [77, 8, 32],
  ] as [number, number, number][]) {
    const { device, a, b, ha, hb } = inputs(m, n, k, "fp8e4m3", 2);
    const scaleA = Tensor.fromHost([0.5], "f32", { device });
    const scaleB = Tensor.fromHost([3], "f32", { device });
    const ref = reference(ha, hb, m, n, k);
    const outS = new Guarded([m, n], "bf16", device);
    const outL = new Guarded([m, n], "bf16", device);
    matmul(a, b, { out: outS.t, scaleA, scaleB });
    matmul(a, b, { out: outL.t, scaleA, scaleB, impl: "cublaslt" });
    const s = outS.values();
    const l = outL.values();
    noNaN(s, "symmkit fp8");
    outS.check("symmkit fp8");
    outL.check("cuBLASLt fp8");
    const eS = relError(s, ref, 1.5);
    const eL = relError(l, ref, 1.5);
    console.log(
      `# fp8 ${m}x${n}x${k}: symmkit ${eS.toExponential(2)}, cuBLASLt ${eL.toExponential(2)} vs fp64`,
    );
    assert.ok(eS < 1e-2, `symmkit fp8 ${m}x${n}x${k}: relative error ${eS}`);
    assert.ok(eL < 1e-2, `cuBLASLt fp8 ${m}x${n}x${k}: relative error ${eL}`);
    for (const t of [a, b, scaleA, scaleB]) t.dispose();
    outS.dispose();
    outL.dispose();
  }
});

test("graph capture: both implementations replayed", { skip }, () => {
  const [m, n, k] = [384, 768, 512];
  const { device, a, b } = inputs(m, n, k, "bf16");
  const eagerS = matmul(a, b);
  const eagerL = matmul(a, b, { impl: "cublaslt" });
  const stream = Stream.create(device);
  const gS = Tensor.empty([m, n], "bf16", { device });
  const gL = Tensor.empty([m, n], "bf16", { device });
  const g = Graph.capture(stream, () => {
    matmul(a, b, { out: gS, stream });
    matmul(a, b, { out: gL, stream, impl: "cublaslt" });
  });
  for (let r = 0; r < 3; r++) {
    gS.fill(NaN, stream);
    gL.fill(NaN, stream);
    g.launch(stream);
    stream.synchronize();
    assert.deepEqual(gS.toHost(), eagerS.toHost(), `symmkit replay ${r} differs from the eager run`);
    assert.deepEqual(gL.toHost(), eagerL.toHost(), `cuBLASLt replay ${r} differs from the eager run`);
  }
  g.dispose();
  stream.dispose();
  for (const t of [a, b, eagerS, eagerL, gS, gL]) t.dispose();
});

test("hook: tile list (reversed, then a subset)", { skip }, () => {
  const [m, n, k] = [640, 1000, 256];
  const { device, a, b } = inputs(m, n, k, "bf16");
  const plain = matmul(a, b).toHost() as Uint16Array;
  const { tilesM, tilesN } = gemmTiles(m, n);
  const all = [...Array(tilesM * tilesN).keys()];
  const g = new HopperGemm(device, {
    elem: "bf16",
    layoutB: "nk",
    order: "list",
    ready: "none",
    epilogue: "store",
  });
  for (const ids of [all.reverse(), all.filter((t) => t % 3 === 1)]) {
    const list = Tensor.fromHost(new Uint32Array(ids), "u32");
    const out = new Guarded([m, n], "bf16", device);
    g.launch({
      a: a.ptr,
      b: b.ptr,
      d: out.t.ptr,
      m,
      n,
      k,
      tileList: list.ptr,
      tileCount: ids.length,
      ctas: 5,
    });
    const got = out.t.toHost() as Uint16Array;
    out.check("tile list");
    const chosen = new Set(ids);
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        const tile = Math.floor(i / 128) * tilesN + Math.floor(j / 256);
        const want = chosen.has(tile) ? plain[i * n + j] : 0xffff;
        if (got[i * n + j] !== want)
          assert.fail(`tile list: (${i}, ${j}) in tile ${tile} is ${got[i * n + j]}, expected ${want}`);
      }
    }
    list.dispose();
    out.dispose();
  }
  for (const t of [a, b]) t.dispose();
});

const SPIN = {
  name: "symmkit/test/spin",
  source: `#include "symmkit/core/memory.cuh"
__global__ void spin_ns(unsigned long long ns) {
  const unsigned long long t0 = symmkit::global_timer_ns();
  while (symmkit::global_timer_ns() - t0 < ns) {}
}`,
  nameExpressions: ["spin_ns"],
};

test("hook: ready flags raised by another stream after a delay", { skip }, () => {
  const [m, n, k] = [512, 512, 256];
  const flagRows = 64;
  const { device, a, b, ha, hb } = inputs(m, n, k, "bf16");
  const ref = reference(ha, hb, m, n, k);
  // The GEMM reads `late`, which holds zeros until the second stream copies A in and raises the flags.
  const late = Tensor.zeros([m, k], "bf16", { device });
  const flags = Tensor.zeros([m / flagRows], "u32", { device });
  device.synchronize();
  const spin = Module.compile(SPIN, device).kernel("spin_ns", ["u64"] as const);
  const gemmStream = Stream.create(device);
  const copyStream = Stream.create(device);
  const g = new HopperGemm(device, {
    elem: "bf16",
    layoutB: "nk",
    order: "grouped",
    ready: "row-flags",
    epilogue: "store",
  });
  const out = new Guarded([m, n], "bf16", device);
  device.synchronize();
  g.launch({
    a: late.ptr,
    b: b.ptr,
    d: out.t.ptr,
    m,
    n,
    k,
    readyFlags: flags.ptr,
    flagRows,
    readyValue: 7,
    stream: gemmStream,
  });
  spin.launch({ grid: 1, block: 1, stream: copyStream }, 50_000_000);
  copyDeviceToDevice(late.ptr, a.ptr, a.nbytes, copyStream);
  for (let f = 0; f < m / flagRows; f++) writeValue32(flags.ptr + BigInt(4 * f), 7, copyStream);
  g.watch.translate(() => gemmStream.synchronize());
  const e = relError(out.values(), ref);
  out.check("ready flags");
  assert.ok(e < 4e-3, `ready flags: relative error ${e} (the GEMM read A before it arrived?)`);
  for (const s of [gemmStream, copyStream]) s.dispose();
  for (const t of [a, b, late, flags]) t.dispose();
  out.dispose();
});

test("hook: signalling store into another buffer, and f32 accumulation", { skip }, () => {
  const [m, n, k] = [300, 600, 192];
  const { device, a, b, ha, hb } = inputs(m, n, k, "bf16");
  const ref = reference(ha, hb, m, n, k);
  const plain = matmul(a, b).toHost() as Uint16Array;
  const { tilesM, tilesN } = gemmTiles(m, n);
  const signals = Tensor.zeros([tilesM * tilesN], "u32", { device });
  const sg = new HopperGemm(device, {
    elem: "bf16",
    layoutB: "nk",
    order: "grouped",
    ready: "none",
    epilogue: "signal",
  });
  const other = new Guarded([m, n], "bf16", device);
  for (let r = 0; r < 2; r++)
    sg.launch({ a: a.ptr, b: b.ptr, d: other.t.ptr, m, n, k, tileSignals: signals.ptr });
  assert.deepEqual(other.t.toHost(), plain, "the signalling store wrote other values than the plain store");
  other.check("signalling store");
  assert.deepEqual(
    [...signals.toHost()],
    Array(tilesM * tilesN).fill(2),
    "each tile signals once per launch",
  );

  const acc = new Guarded([m, n], "f32", device);
  acc.t.fill(0);
  const ag = new HopperGemm(device, {
    elem: "bf16",
    layoutB: "nk",
    order: "grouped",
    ready: "none",
    epilogue: "accumulate-f32",
  });
  for (let r = 0; r < 2; r++) ag.launch({ a: a.ptr, b: b.ptr, d: acc.t.ptr, m, n, k });
  const e = relError(acc.values(), ref, 2);
  acc.check("f32 accumulation");
  assert.ok(e < 1e-5, `f32 accumulation of two GEMMs: relative error ${e}`);
  for (const t of [a, b, signals]) t.dispose();
  other.dispose();
  acc.dispose();
});

/** Integers in [-2, 2] from the seed: every sum of products is exact in f32, whatever its order. */
test(
  "split-K: every slice count gives the unsplit bits on exact inputs, every epilogue, odd shapes, replays",
  { skip },
  () => {
    const device = Device.get(0);
    const variant = (
      elem: "bf16" | "fp8e4m3",
      layoutB: "nk" | "kn",
      epilogue: "store" | "signal" | "accumulate-f32",
      splitK = true,
      narrow = false,
    ) => new HopperGemm(device, { elem, layoutB, order: "grouped", ready: "none", epilogue, splitK, narrow });
    const cases: [string, "bf16" | "fp8e4m3", "nk" | "kn", number, number, number, number[]][] = [
      ["decode row", "bf16", "nk", 1, 1040, 4096, [1, 2, 4, 8, 16]],
      ["odd rows and columns", "bf16", "nk", 130, 520, 2048, [2, 4, 8]],
      ["B as [k, n]", "bf16", "kn", 33, 776, 3072, [2, 4]],
      ["fp8", "fp8e4m3", "nk", 5, 512, 4096, [2, 8]],
    ];
    let salt = 1;
    for (const [what, elem, layoutB, m, n, k, splitsList] of cases) {
      const [ai, bi] = [exactInts(m * k, seed, salt++), exactInts(n * k, seed, salt++)];
      const shapeB = layoutB === "nk" ? [n, k] : [k, n];
      const a = Tensor.fromHost(ai, elem, { device, shape: [m, k] });
      const b = Tensor.fromHost(bi, elem, { device, shape: shapeB });
      // Up to 64 rows, the narrow ring (64-row A boxes, a fifth stage) as well.
      const stores = [
        variant(elem, layoutB, "store"),
        ...(m <= 64 ? [variant(elem, layoutB, "store", true, true)] : []),
      ];
      const want = new Guarded([m, n], "bf16", device);
      // The reference: the kernel without split-K compiled in.
      variant(elem, layoutB, "store", false).launch({ a: a.ptr, b: b.ptr, d: want.t.ptr, m, n, k });
      const plain = want.t.toHost() as Uint16Array;
      noNaN(want.values(), `${what} unsplit`);
      // The CPU backend's reference GEMM gives these bits too: every partial sum is exact.
      const cpu = hostMatmul(
        { elem, m, n, k, layoutB },
        HostTensor.fromHost(ai, elem, { shape: [m, k] }),
        HostTensor.fromHost(bi, elem, { shape: shapeB }),
        HostTensor.empty([m, n], "bf16"),
      );
      assert.deepEqual(cpu.raw, plain, `${what}: the CPU reference GEMM gives other bits`);
      for (const store of stores)
        for (const splits of splitsList) {
          const ring = store.variant.narrow ? "narrow" : "wide";
          const label = `${what} ${m}x${n}x${k} ${elem} B ${layoutB}, ${splits} slices, ${ring} ring`;
          const got = new Guarded([m, n], "bf16", device);
          // Twice: the tile counters must be left at zero for the next launch.
          for (let r = 0; r < 2; r++) store.launch({ a: a.ptr, b: b.ptr, d: got.t.ptr, m, n, k, splits });
          assert.deepEqual(got.t.toHost(), plain, `${label}: other bits than unsplit`);
          got.check(label);
          got.dispose();
        }
      // The epilogues that are not a TMA store, behind the fix-up.
      const splits = splitsList.at(-1)!;
      const { tilesM, tilesN } = gemmTiles(m, n);
      const signals = Tensor.zeros([tilesM * tilesN], "u32", { device });
      const other = new Guarded([m, n], "bf16", device);
      variant(elem, layoutB, "signal").launch({
        a: a.ptr,
        b: b.ptr,
        d: other.t.ptr,
        m,
        n,
        k,
        splits,
        tileSignals: signals.ptr,
      });
      assert.deepEqual(other.t.toHost(), plain, `${what}: signalling store with ${splits} slices`);
      assert.ok(
        signals.toHost().every((v) => v === 1),
        `${what}: each tile signals once`,
      );
      const acc = new Guarded([m, n], "f32", device);
      acc.t.fill(0);
      variant(elem, layoutB, "accumulate-f32").launch({ a: a.ptr, b: b.ptr, d: acc.t.ptr, m, n, k, splits });
      const f = acc.values();
      const p = decodeToF32("bf16", plain);
      // The exact sums, rounded to bf16 by the store: equal wherever bf16 holds the integer.
      for (let i = 0; i < f.length; i++)
        if (Math.abs(f[i]!) <= 256)
          assert.equal(f[i], p[i], `${what}: f32 accumulation with ${splits} slices, element ${i}`);
      acc.check(`${what} f32 accumulation`);
      for (const t of [a, b, signals]) t.dispose();
      for (const g of [want, other, acc]) g.dispose();
    }

    // Random inputs at the decode shape matmul() splits by itself, in a graph replayed with new inputs,
    // captured first on a fresh stream: the split's scratch is allocated inside the capture.
    const [m, n, k] = [4, 2048, 8192];
    const stream = Stream.create(device);
    const a = Tensor.empty([m, k], "bf16", { device });
    const b = Tensor.empty([n, k], "bf16", { device });
    const out = new Guarded([m, n], "bf16", device);
    const graph = Graph.capture(stream, () => void matmul(a, b, { out: out.t, stream }));
    for (let replay = 0; replay < 3; replay++) {
      const x = inputs(m, n, k, "bf16");
      a.copyFrom(x.a);
      b.copyFrom(x.b);
      graph.launch();
      stream.synchronize();
      const e = relError(out.values(), reference(x.ha, x.hb, m, n, k));
      assert.ok(e < 4e-3, `split matmul in a graph, replay ${replay}: relative error ${e}`);
      for (const t of [x.a, x.b]) t.dispose();
    }
    out.check("split matmul in a graph");
    graph.dispose();
    for (const t of [a, b]) t.dispose();
    out.dispose();
    stream.dispose();

    // Refused: more slices than k-blocks, not a power of two, more than one wave, no split-K compiled in,
    // and the variants split-K's scratch or the narrow ring cannot serve.
    const g = variant("bf16", "nk", "store");
    const t = Tensor.zeros([512, 1024], "bf16", { device });
    const launch = (gemm: HopperGemm, m: number, n: number, k: number, splits: number) => () =>
      gemm.launch({ a: t.ptr, b: t.ptr, d: t.ptr, m, n, k, splits });
    for (const [what, call] of [
      ["beyond the k-blocks", launch(g, 64, 64, 64, 2)],
      ["zero", launch(g, 64, 64, 1024, 0)],
      ["not a power of two", launch(g, 64, 64, 1024, 3)],
      ["two waves", launch(g, 512, 1024, 1024, 16)],
      ["no split-K kernel", launch(variant("bf16", "nk", "store", false), 64, 64, 1024, 2)],
      ["narrow beyond 64 rows", launch(variant("bf16", "nk", "store", true, true), 65, 64, 1024, 1)],
      ["a fraction", launch(g, 64, 64, 1024, 0.5)],
      [
        "narrow with a second A",
        () =>
          variant("bf16", "nk", "store", true, true).launch({
            a: t.ptr,
            b: t.ptr,
            d: t.ptr,
            m: 64,
            n: 64,
            k: 1024,
            secondA: { a2: t.ptr, row0: 0, rows: 32 },
          }),
      ],
      [
        "split-K with the list order",
        () =>
          new HopperGemm(device, {
            elem: "bf16",
            layoutB: "nk",
            order: "list",
            ready: "none",
            epilogue: "store",
            splitK: true,
          }),
      ],
      [
        "narrow with the signalling store",
        () =>
          new HopperGemm(device, {
            elem: "bf16",
            layoutB: "nk",
            order: "grouped",
            ready: "none",
            epilogue: "signal",
            splitK: true,
            narrow: true,
          }),
      ],
    ] as const)
      assert.throws(call, InvalidArgumentError, what);
    t.dispose();
  },
);

test("bad input: typed errors before anything runs", { skip }, () => {
  const device = Device.get(0);
  const mem = DeviceMemory.alloc(1 << 16, device);
  const a = Tensor.fromMemory(mem, [64, 32], "bf16", 0);
  const b = Tensor.fromMemory(mem, [48, 32], "bf16", 8192);
  const out = Tensor.fromMemory(mem, [64, 48], "bf16", 16384);
  const misaligned = Tensor.fromMemory(mem, [64, 32], "bf16", 32768 + 2);
  const overlapping = Tensor.fromMemory(mem, [64, 48], "bf16", 4096);
  const f32 = Tensor.fromMemory(mem, [48, 32], "f32", 32768);
  const narrow = Tensor.fromMemory(mem, [48, 24], "bf16", 8192);
  const wrongOut = Tensor.fromMemory(mem, [64, 40], "bf16", 16384);
  out.fill(1);
  assert.throws(() => matmul(a, f32), InvalidArgumentError);
  assert.throws(() => matmul(a, narrow), InvalidArgumentError);
  assert.throws(() => matmul(a, b, { out: wrongOut }), InvalidArgumentError);
  assert.throws(() => matmul(misaligned, b), InvalidArgumentError);
  assert.throws(() => matmul(a, b, { out: overlapping }), InvalidArgumentError);
  assert.throws(() => matmul(a, b, { scaleA: f32.view([48 * 32]).slice(0, 1) }), InvalidArgumentError);
  assert.ok(
    [...decodeToF32("bf16", out.toHost())].every((v) => v === 1),
    "out was written",
  );
  mem.dispose();
});

test("cuBLASLt context is one per device", { skip }, () => {
  assert.equal(CublasLtMatmul.for(Device.get(0)), CublasLtMatmul.for(Device.get(0)));
});
