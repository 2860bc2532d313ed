// The decode GEMM (A and B swapped, tiles of 64 rows of B by 8 to 192 rows of A, wide tiles of 128 rows of
// B alone or paired in clusters) on one GPU: on exact inputs it must give the bits of symmkit's other GEMM
// and of the CPU backend's reference for every tile width, pairing and slice count (powers of two or not;
// odd rows and columns,
// rows past 128, several pairs of tile-rows, bf16 and fp8 with scales), leave the guards
// around its output alone, leave its split counters at zero (launched twice), replay in a graph with A
// changed between replays, walk more tiles than SMs (a persistent grid), run its all-reduce epilogue at
// world 1 (the sum of one partial is that partial), and refuse what it cannot do with typed errors.
import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidArgumentError } from "../../src/errors.js";
import { Device } from "../../src/runtime/device.js";
import { Graph } from "../../src/runtime/graph.js";
import { Stream } from "../../src/runtime/stream.js";
import { Tensor } from "../../src/runtime/tensor.js";
import { HopperGemm } from "../../src/ops/gemm/hopper-gemm.js";
import {
  DecodeGemm,
  describeDecodeShape,
  soloExchange,
  decodeShape,
  decodeTiles,
  type DecodeShape,
} from "../../src/ops/gemm/decode-gemm.js";
import { HostTensor } from "../../src/cpu/host-tensor.js";
import { hostMatmul } from "../../src/cpu/matmul.js";
import { skipReason, testSeed } from "./gpu.js";
import { exactInts, Guarded } from "./gemm-support.js";

const hopper = !skipReason && Device.get(0).props.arch.startsWith("sm_90");
const skip = skipReason || (!hopper && "the symmkit GEMM needs a Hopper GPU (sm_90a)");
if (skip && !skipReason) console.log(`# decode GEMM tests skipped: ${skip}`);
const seed = skip ? 0n : testSeed();

type Elem = "bf16" | "fp8e4m3";
const decoders = new Map<string, DecodeGemm>();
function decoder(elem: Elem, shape: DecodeShape, allReduce = false): DecodeGemm {
  const key = `${elem}/${describeDecodeShape(shape)}/${allReduce}`;
  let g = decoders.get(key);
  if (!g) decoders.set(key, (g = new DecodeGemm(Device.get(0), { elem, ...shape, allReduce })));
  return g;
}
const narrow8: DecodeShape = { cols: 8, wide: false, paired: false };
const paired = (cols: DecodeShape["cols"]): DecodeShape => ({ cols, wide: true, paired: true });
/** Tall tiles: 192 rows of B on three consumers. */
const tall = (cols: DecodeShape["cols"]): DecodeShape => ({ cols, wide: true, paired: false, tall: true });

/** Exact operands on the device and the reference bits (symmkit's other GEMM, checked against the CPU's). */
function problem(m: number, n: number, k: number, elem: Elem, salt: number, scale?: Tensor) {
  const device = Device.get(0);
  const [ai, bi] = [exactInts(m * k, seed, salt), exactInts(n * k, seed, salt + 1)];
  const a = Tensor.fromHost(ai, elem, { device, shape: [m, k] });
  const b = Tensor.fromHost(bi, elem, { device, shape: [n, k] });
  const want = Tensor.empty([m, n], "bf16", { device });
  const scales = scale ? { scaleA: scale.ptr, scaleB: scale.ptr } : {};
  new HopperGemm(device, { elem, layoutB: "nk", order: "grouped", ready: "none", epilogue: "store" }).launch({
    a: a.ptr,
    b: b.ptr,
    d: want.ptr,
    m,
    n,
    k,
    ...scales,
  });
  const bits = want.toHost();
  if (!scale) {
    const cpu = hostMatmul(
      { elem, m, n, k, layoutB: "nk" },
      HostTensor.fromHost(ai, elem, { shape: [m, k] }),
      HostTensor.fromHost(bi, elem, { shape: [n, k] }),
      HostTensor.empty([m, n], "bf16"),
    );
    assert.deepEqual(cpu.raw, bits, `${m}x${n}x${k}: the CPU reference GEMM gives other bits`);
  }
  want.dispose();
  return { device, a, b, bits, scales };
}

test(
  "every tile width and slice count gives the reference bits on exact inputs, twice, guards intact",
  { skip },
  () => {
    const cases: [string, Elem, number, number, number, number[], boolean][] = [
      ["one row", "bf16", 1, 1040, 4096, [1, 2, 3, 4], false],
      ["odd rows", "bf16", 7, 520, 2048, [1, 2, 5, 8], false],
      ["rows 17-32", "bf16", 29, 776, 3072, [1, 4], false],
      ["rows 33-64", "bf16", 50, 1032, 1024, [1, 2], false],
      ["rows 65-128, many tiles", "bf16", 100, 8200, 1024, [1], false],
      ["rows 129-256 (wide tiles)", "bf16", 200, 2056, 1024, [1, 3, 4], false],
      ["rows 193-208, many tile-columns", "bf16", 205, 10248, 1024, [1], false],
      ["rows past 256", "bf16", 300, 2048, 256, [1], false],
      ["rows past 256 in slices (pairs of tile-rows)", "bf16", 333, 1032, 2048, [1, 2], false],
      ["more tiles than SMs (persistent)", "bf16", 3, 20480, 256, [1], false],
      ["fp8", "fp8e4m3", 5, 512, 4096, [1, 2, 8], false],
      ["fp8 with scales", "fp8e4m3", 40, 520, 1024, [1, 4], true],
      ["fp8 rows 129-256", "fp8e4m3", 150, 1032, 1024, [1, 2], true],
    ];
    let salt = 1;
    for (const [what, elem, m, n, k, splitsList, scaled] of cases) {
      const scale = scaled ? Tensor.fromHost([0.5], "f32", { device: Device.get(0) }) : undefined;
      const { device, a, b, bits, scales } = problem(m, n, k, elem, (salt += 2), scale);
      // The shape the host picks and its other width, the wider ones (more zero rows of A in each tile, or
      // several tile-rows past 128 rows; from 80 rows their transposed tile lies in a hole of the ring),
      // wide tiles (two consumers, 128 rows of B), and paired wide tiles (one tile-row pair, or several, or
      // a pair whose second tile-row lies past m). The unpaired wide tiles of 208 to 256 rows of A transpose
      // in passes (3 at 216 rows). Tall tiles (three consumers, 192 rows of B) of 104 and 168 rows of A.
      const chosen = decodeShape(m, n, device.props.smCount);
      const shapes: DecodeShape[] = [
        chosen,
        ...(chosen.cols <= 192 ? [{ ...chosen, wide: !chosen.wide }] : []),
        ...([80, 96, 112, 128, 136, 160, 184, 192] as const).map((cols) => ({
          cols,
          wide: false,
          paired: false,
        })),
        ...([8, 16, 32, 64, 104, 128, 136, 160, 184, 192, 200, 208, 216, 224, 256] as const).map((cols) => ({
          cols,
          wide: true,
          paired: false,
        })),
        ...([64, 80, 96, 112, 128, 160, 192] as const).map(paired),
        ...([104, 168] as const).map(tall),
      ];
      for (const shape of shapes.filter(
        (x, i) => shapes.findIndex((y) => describeDecodeShape(y) === describeDecodeShape(x)) === i,
      ))
        for (const splits of splitsList) {
          const { tilesM, tilesN } = decodeTiles(m, n, shape);
          if (splits > 1 && tilesM * tilesN * splits > decoder(elem, shape).resident()) continue;
          const label = `${what} ${m}x${n}x${k} ${elem}, ${describeDecodeShape(shape)} tiles, ${splits} slices`;
          const got = new Guarded([m, n], "bf16", device);
          for (let r = 0; r < 2; r++)
            decoder(elem, shape).launch({
              a: a.ptr,
              b: b.ptr,
              d: got.t.ptr,
              m,
              n,
              k,
              splits,
              ...scales,
            });
          assert.deepEqual(got.t.toHost(), bits, `${label}: other bits than the reference`);
          got.check(label);
          got.dispose();
        }
      for (const t of [a, b, scale]) t?.dispose();
    }
  },
);

test(
  "graph replays with A changed between them, split and not, narrow, 160-row and paired tiles",
  { skip },
  () => {
    const [m, n, k] = [3, 2048, 8192];
    const first = problem(m, n, k, "bf16", 101);
    const second = problem(m, n, k, "bf16", 103);
    const { device } = first;
    const stream = Stream.create(device);
    const a = Tensor.empty([m, k], "bf16", { device });
    for (const [splits, g] of [
      [1, decoder("bf16", narrow8)],
      [4, decoder("bf16", narrow8)],
      [3, decoder("bf16", narrow8)],
      [1, decoder("bf16", { cols: 160, wide: false, paired: false })],
      [1, decoder("bf16", paired(64))],
      [2, decoder("bf16", paired(64))],
    ] as const) {
      const out = Tensor.empty([m, n], "bf16", { device });
      const launch = () => g.launch({ a: a.ptr, b: first.b.ptr, d: out.ptr, m, n, k, splits, stream });
      a.copyFrom(first.a, stream);
      launch(); // the split scratch is allocated outside the capture
      const graph = Graph.capture(stream, launch);
      for (const [r, src] of [first, second, first].entries()) {
        // B stays the first problem's; the second's A times it is the second's reference only if B is
        // shared, so compare against an eager launch on the same operands.
        a.copyFrom(src.a, stream);
        out.fill(NaN, stream);
        graph.launch(stream);
        stream.synchronize();
        const eager = Tensor.empty([m, n], "bf16", { device });
        g.launch({ a: a.ptr, b: first.b.ptr, d: eager.ptr, m, n, k, splits, stream });
        stream.synchronize();
        assert.deepEqual(
          out.toHost(),
          eager.toHost(),
          `${g.kernel.name}, ${splits} slices, replay ${r}: other bits than eager`,
        );
        if (src === first)
          assert.deepEqual(
            out.toHost(),
            first.bits,
            `${g.kernel.name}, ${splits} slices, replay ${r}: wrong bits`,
          );
        eager.dispose();
      }
      graph.dispose();
      out.dispose();
    }
    stream.dispose();
    for (const t of [a, first.a, first.b, second.a, second.b]) t.dispose();
  },
);

test("the all-reduce epilogue at world 1: the plain bits, call after call", { skip }, () => {
  // 24 tiles in up to 4 slices, 160 wide tiles (two consumers) walked by a persistent grid, 320 narrow
  // ones, 64 wide tiles past 128 rows, 16 and 160 wide tiles of few rows (32, 16 and 64 rows of A), the one-row
  // wide tiles (200 rows of A picked by the plan; 208 and 224 in 2 passes, 216 in 3), paired wide tiles: 64 pairs,
  // and 160 pairs walked by a persistent grid of clusters, and thirds; tall tiles walked by a persistent grid
  // (214 tiles) and in halves (66 tiles).
  const wide = (cols: DecodeShape["cols"]): DecodeShape => ({ cols, wide: true, paired: false });
  for (const [m, n, k, splitsList, shape] of [
    [24, 1536, 2048, [1, 2, 4, 1], undefined],
    [5, 20480, 512, [1, 1], undefined],
    [5, 20480, 512, [1], narrow8],
    [12, 20480, 512, [1], wide(16)],
    [160, 4096, 1024, [1, 2], undefined],
    [30, 2048, 1024, [1, 4], wide(32)],
    [64, 20480, 512, [1], wide(64)],
    [160, 8192, 1024, [1, 1], paired(80)],
    [200, 20480, 512, [1], paired(112)],
    [200, 20480, 512, [1], undefined],
    [205, 20480, 512, [1], wide(208)],
    [213, 4096, 1024, [1, 2], wide(216)],
    [200, 20480, 512, [1], wide(224)],
    [250, 4096, 1024, [1, 2], wide(256)],
    [213, 4096, 1024, [3], wide(216)],
    [205, 20480, 512, [1], tall(104)],
    [193, 6152, 1024, [1, 2], tall(104)],
  ] as const) {
    const { device, a, b, bits } = problem(m, n, k, "bf16", 201 + m);
    const tiles = shape ?? decodeShape(m, n, device.props.smCount);
    const exchange = soloExchange(device, m, n, tiles);
    for (const splits of splitsList) {
      const label = `${m}x${n}x${k} all-reduce, ${describeDecodeShape(tiles)} tiles, ${splits} slices`;
      const got = new Guarded([m, n], "bf16", device);
      decoder("bf16", tiles, true).launch({
        a: a.ptr,
        b: b.ptr,
        d: got.t.ptr,
        m,
        n,
        k,
        splits,
        exchange,
      });
      assert.deepEqual(got.t.toHost(), bits, `${label}: other bits than the plain GEMM`);
      got.check(label);
      got.dispose();
    }
    assert.deepEqual(
      [...(exchange.counts.toHost() as Uint32Array)],
      [splitsList.length, 0],
      "one epoch per call, readers reset",
    );
    exchange.dispose();
    for (const t of [a, b]) t.dispose();
  }
});

test("bad input: typed errors before anything runs", { skip }, () => {
  const device = Device.get(0);
  const a = Tensor.zeros([4, 64], "bf16", { device });
  const b = Tensor.zeros([64, 64], "bf16", { device });
  const d = Tensor.empty([4, 64], "bf16", { device });
  const ok = { a: a.ptr, b: b.ptr, d: d.ptr, m: 4, n: 64, k: 64 };
  const g = decoder("bf16", narrow8);
  for (const [why, p] of [
    ["n not a multiple of 8", { ...ok, n: 60 }],
    ["ldd below n", { ...ok, ldd: 32 }],
    ["k rows not 16 bytes", { ...ok, k: 60 }],
    ["splits not an integer", { ...ok, splits: 1.5 }],
    ["more slices than k-blocks", { ...ok, splits: 2 }],
    ["d misaligned", { ...ok, d: d.ptr + 2n }],
    [
      "exchange on a plain variant",
      { ...ok, exchange: { rank: 0, world: 1, shardRows: 4, recv: [d.ptr], flags: [d.ptr], epoch: d.ptr } },
    ],
  ] as const)
    assert.throws(() => g.launch(p), InvalidArgumentError, why);
  // 320 tiles of 16 k-blocks in halves: 640 tile slices, past one wave; and one tile more than a wave's
  // third in thirds.
  const bigB = Tensor.zeros([20480, 1024], "bf16", { device });
  const bigA = Tensor.zeros([4, 1024], "bf16", { device });
  const bigD = Tensor.empty([4, 20480], "bf16", { device });
  const big = { a: bigA.ptr, b: bigB.ptr, d: bigD.ptr, m: 4, n: 20480, k: 1024 };
  assert.throws(() => g.launch({ ...big, splits: 2 }), /runs one wave/, "halves past one wave");
  const third = 64 * (Math.floor(g.resident() / 3) + 1);
  assert.throws(() => g.launch({ ...big, n: third, splits: 3 }), /runs one wave/, "thirds past one wave");
  g.launch({ ...big, n: third - 64, splits: 3 }); // thirds of a wave's third: taken
  device.synchronize();
  for (const t of [bigA, bigB, bigD]) t.dispose();
  assert.throws(
    () => decoder("bf16", narrow8, true).launch(ok),
    InvalidArgumentError,
    "all-reduce without exchange",
  );
  assert.throws(
    () => new DecodeGemm(device, { elem: "bf16", cols: 64, wide: false, paired: true, allReduce: false }),
    InvalidArgumentError,
    "one-consumer tiles do not pair",
  );
  assert.throws(
    () => new DecodeGemm(device, { elem: "bf16", cols: 224, wide: false, paired: false, allReduce: false }),
    InvalidArgumentError,
    "224 rows of A on one consumer",
  );
  for (const t of [a, b, d]) t.dispose();
});
