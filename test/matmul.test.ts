// matmul's checks need no GPU: shapes, dtypes, layouts, alignment and overlap are judged from the
// tensors' descriptions, and every bad input is a typed error before anything could be launched.
import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidArgumentError } from "../src/errors.js";
import { checkMatmul, describePlan, gemmPlanFor } from "../src/ops/gemm/matmul.js";
import { GEMM_PROGRAMS, GEMM_VARIANTS, gemmExpr } from "../src/ops/gemm/programs.js";
import { gemmKernelFor, gemmTiles, splitsFor } from "../src/ops/gemm/hopper-gemm.js";
import { PROGRAMS } from "../src/catalog.js";
import {
  DECODE_PROGRAMS,
  DECODE_VARIANTS,
  decodeFits,
  decodeFlagCount,
  decodeMailboxFits,
  decodePasses,
  decodeShape,
  type DecodeShape,
  describeDecodeShape,
  decodeSharedBytes,
  decodePlan,
  decodeSplitsFor,
  decodeThreads,
  decodeTiles,
} from "../src/ops/gemm/decode-gemm.js";
import { coldCopies, parseShapes, relFrobenius } from "../src/bench/gemm.js";
import type { DType } from "../src/runtime/dtype.js";

const span = (ptr: bigint, shape: number[], dtype: DType = "bf16") => ({
  ptr,
  shape,
  dtype,
  nbytes: shape.reduce((x, y) => x * y, 1) * (dtype === "f32" ? 4 : dtype === "fp8e4m3" ? 1 : 2),
});

const A = span(0x10000n, [64, 32]);
const B = span(0x20000n, [48, 32]);
const OUT = span(0x30000n, [64, 48]);

test("checkMatmul accepts the plain cases", () => {
  assert.deepEqual(checkMatmul(A, B, OUT, {}), { elem: "bf16", m: 64, n: 48, k: 32, layoutB: "nk" });
  assert.deepEqual(checkMatmul(A, span(0x20000n, [32, 48]), undefined, { layoutB: "kn" }), {
    elem: "bf16",
    m: 64,
    n: 48,
    k: 32,
    layoutB: "kn",
  });
  const a8 = span(0x10000n, [64, 32], "fp8e4m3");
  const b8 = span(0x20000n, [48, 32], "fp8e4m3");
  const s = span(0x40000n, [1], "f32");
  assert.equal(checkMatmul(a8, b8, OUT, { scaleA: s, scaleB: s }).elem, "fp8e4m3");
});

test("checkMatmul rejects bad input with typed errors", () => {
  const bad: [string, () => unknown, new (m: string) => Error][] = [
    ["dtype mismatch", () => checkMatmul(A, span(0x20000n, [48, 32], "f32"), OUT, {}), InvalidArgumentError],
    ["k mismatch", () => checkMatmul(A, span(0x20000n, [48, 24]), OUT, {}), InvalidArgumentError],
    ["not 2-D", () => checkMatmul(span(0x10000n, [64, 32, 1]), B, OUT, {}), InvalidArgumentError],
    ["f32 inputs", () => checkMatmul(span(0x10000n, [64, 32], "f32"), B, OUT, {}), InvalidArgumentError],
    [
      "k rows not 16 bytes",
      () => checkMatmul(span(0x10000n, [64, 12]), span(0x20000n, [48, 12]), undefined, {}),
      InvalidArgumentError,
    ],
    [
      "n rows not 16 bytes",
      () => checkMatmul(A, span(0x20000n, [44, 32]), undefined, {}),
      InvalidArgumentError,
    ],
    ["misaligned a", () => checkMatmul(span(0x10002n, [64, 32]), B, OUT, {}), InvalidArgumentError],
    ["wrong out shape", () => checkMatmul(A, B, span(0x30000n, [48, 64]), {}), InvalidArgumentError],
    ["out not bf16", () => checkMatmul(A, B, span(0x30000n, [64, 48], "f32"), {}), InvalidArgumentError],
    ["out overlaps a", () => checkMatmul(A, B, span(0x10000n + 64n, [64, 48]), {}), InvalidArgumentError],
    [
      "scale on bf16",
      () => checkMatmul(A, B, OUT, { scaleA: span(0x40000n, [1], "f32") }),
      InvalidArgumentError,
    ],
    ["unknown impl", () => checkMatmul(A, B, OUT, { impl: "magic" as "symmkit" }), InvalidArgumentError],
    [
      "fp8 kn on symmkit",
      () =>
        checkMatmul(span(0x10000n, [64, 32], "fp8e4m3"), span(0x20000n, [32, 48], "fp8e4m3"), undefined, {
          layoutB: "kn",
        }),
      InvalidArgumentError,
    ],
    [
      "fp8 kn on cuBLASLt",
      () =>
        checkMatmul(span(0x10000n, [64, 32], "fp8e4m3"), span(0x20000n, [32, 48], "fp8e4m3"), undefined, {
          impl: "cublaslt",
          layoutB: "kn",
        }),
      InvalidArgumentError,
    ],
  ];
  for (const [what, f, cls] of bad) {
    assert.throws(f, (e: Error) => {
      assert.ok(e instanceof cls, `${what}: got ${e.constructor.name}: ${e.message}`);
      return true;
    });
  }
});

test("GEMM variants: one program per variant, distinct names", () => {
  // (bf16 with two layouts of B, fp8 with one) x (grouped and list orders x two ready policies x three
  // plain epilogues, plus the sharded order with the scatter-reduce epilogue, the grouped order with the
  // all-reduce epilogue and split-K, and the plain store with split-K; both split ones also narrow).
  assert.equal(GEMM_VARIANTS.length, (2 + 1) * (2 * 2 * 3 + 5));
  assert.ok(GEMM_VARIANTS.every((v) => (v.order === "sharded") === (v.epilogue === "scatter-reduce")));
  assert.ok(GEMM_VARIANTS.filter((v) => v.epilogue === "all-reduce").every((v) => v.splitK === true));
  assert.deepEqual(
    GEMM_VARIANTS.filter((v) => v.splitK).map((v) => `${v.order}-${v.ready}-${v.epilogue}`),
    Array.from({ length: 3 }, () => [
      "grouped-none-all-reduce",
      "grouped-none-all-reduce",
      "grouped-none-store",
      "grouped-none-store",
    ]).flat(),
  );
  assert.equal(new Set(GEMM_PROGRAMS.map((p) => p.name)).size, GEMM_PROGRAMS.length);
  assert.equal(new Set(GEMM_VARIANTS.map(gemmExpr)).size, GEMM_VARIANTS.length);
  assert.deepEqual(gemmTiles(129, 257), { tilesM: 2, tilesN: 2 });
});

test("split-K choice: powers of two filling one wave, slices long enough for the fix-up", () => {
  const h200 = (m: number, n: number, k: number): number => splitsFor(m, n, k, 2, 132);
  assert.equal(h200(1, 8192, 14336), 4); // 32 tiles: 4 x 32 = 128 CTAs
  assert.equal(h200(128, 8192, 14336), 2); // many rows: slices of at least 64 k-blocks
  assert.equal(h200(32, 8192, 14336), 4);
  assert.equal(h200(256, 8192, 14336), 2);
  assert.equal(h200(512, 8192, 14336), 1); // 128 tiles fill the SMs
  assert.equal(h200(1, 2048, 14336), 16);
  assert.equal(h200(1, 8192, 3584), 4); // 56 k-blocks: 4 slices of 14
  assert.equal(h200(1, 8192, 1024), 1); // 16 k-blocks: slices of 8 cost more than they give
  assert.equal(h200(128, 8192, 3584), 1); // many rows: slices of 14 k-blocks are too short
  assert.equal(splitsFor(1, 8192, 14336, 1, 132), 4); // fp8: k-blocks of 128 elements
  for (const m of [1, 7, 64, 300])
    for (const k of [512, 4096, 28672]) {
      const s = splitsFor(m, 8192, k, 2, 132);
      assert.ok(Number.isInteger(Math.log2(s)), `${m} x ${k}: ${s} is not a power of two`);
      const { tilesM, tilesN } = gemmTiles(m, 8192);
      assert.ok(s === 1 || tilesM * tilesN * s <= 132, `${m} x ${k}: ${s} slices overflow one wave`);
    }
  // The idle second consumer skips its MMAs, and the narrow ring streams more of B.
  assert.deepEqual(gemmKernelFor(64, 1), { splitK: true, narrow: true });
  assert.deepEqual(gemmKernelFor(64, 4), { splitK: true, narrow: true });
  assert.deepEqual(gemmKernelFor(65, 1), { splitK: false, narrow: false });
  assert.deepEqual(gemmKernelFor(300, 2), { splitK: true, narrow: false });
});

test("decode GEMM choice: tile shapes, slices, which problems it takes, its programs", () => {
  const h200Shape = (m: number, n = 8192) => describeDecodeShape(decodeShape(m, n, 132));
  assert.deepEqual(
    [1, 8, 9, 16, 17, 33, 64, 65, 128, 129, 160, 161, 192, 193, 256, 257, 320, 321, 384].map((m) =>
      h200Shape(m),
    ),
    [
      ...["8", "8", "16", "16", "32", "64", "64", "128", "128", "136", "160", "168", "192"].map(
        (c) => `${c} x 64`,
      ),
      ...["104", "128", "136", "160", "168", "192"].map((c) => `${c} x 128`),
    ],
  );
  // One-consumer tiles past one wave (n / 64 > 132 tiles) become wide tiles of the same rows of A.
  assert.equal(h200Shape(8, 8448), "8 x 64");
  assert.equal(h200Shape(8, 8456), "8 x 128");
  assert.equal(h200Shape(128, 14336), "128 x 128");
  assert.equal(h200Shape(192, 28672), "192 x 128");
  assert.equal(h200Shape(256, 28672), "128 x 128");
  // A pair's tile-rows come in twos, however few rows the second covers.
  const pairedTiles = (m: number, cols: 64 | 160) => decodeTiles(m, 8192, { cols, wide: true, paired: true });
  assert.deepEqual(pairedTiles(300, 160), { tilesM: 2, tilesN: 64 });
  assert.deepEqual(pairedTiles(333, 64), { tilesM: 6, tilesN: 64 });
  assert.deepEqual(pairedTiles(60, 64), { tilesM: 2, tilesN: 64 });
  const tiles = (m: number, n: number) => decodeTiles(m, n, decodeShape(m, n, 132));
  assert.deepEqual(tiles(150, 8200), { tilesM: 1, tilesN: 129 });
  assert.deepEqual(tiles(100, 8200), { tilesM: 1, tilesN: 129 });
  assert.deepEqual(tiles(200, 8200), { tilesM: 2, tilesN: 65 });
  assert.deepEqual(tiles(100, 20480), { tilesM: 1, tilesN: 160 }, "wide: 128 rows of B a tile");
  const h200 = (m: number, n: number, k: number): number =>
    decodeSplitsFor(m, n, k, 2, 132, decodeShape(m, n, 132));
  assert.equal(h200(1, 8192, 14336), 1); // 128 tiles of 64 rows of B fill the SMs
  assert.equal(h200(128, 8192, 14336), 1);
  assert.equal(h200(256, 8192, 14336), 1); // 2 x 64 tiles of 128 x 128
  assert.equal(h200(150, 4096, 14336), 2); // 64 tiles of 64 x 152
  assert.equal(h200(1, 2048, 14336), 4); // 32 tiles: 4 x 32 = 128 CTAs
  assert.equal(h200(1, 2560, 14336), 3); // 40 tiles: thirds, 120 CTAs
  assert.equal(h200(200, 10240, 8192), 1); // 80 tiles: no two waves of slices
  assert.equal(h200(1, 2560, 3072), 3); // 48 k-blocks: thirds of 16, the shortest slices taken
  assert.equal(h200(1, 2560, 1536), 1); // 24 k-blocks: no slice of 16
  assert.equal(h200(16, 1024, 8192), 8); // 16 tiles, 128 k-blocks: slices of 16
  assert.equal(h200(1, 1024, 1024), 1); // 16 k-blocks: no slice would be long enough
  for (const m of [1, 7, 64, 128, 200])
    for (const n of [512, 2048, 8192, 10240, 28672])
      for (const k of [512, 4096, 28672]) {
        const s = h200(m, n, k);
        const { tilesM, tilesN } = tiles(m, n);
        assert.ok(Number.isInteger(s) && s >= 1 && s <= 16, `${m}x${n}x${k}: ${s} slices`);
        assert.ok(s === 1 || tilesM * tilesN * s <= 132, `${m}x${n}x${k}: ${s} slices overflow one wave`);
        assert.ok(s === 1 || (k * 2) / 128 / s >= 16, `${m}x${n}x${k}: slices of fewer than 16 k-blocks`);
      }
  // matmul's plan on 132 SMs: the Hopper GEMM where the decode GEMM's wide tiles pass one wave and its
  // tile-rows of 128 cover m with no more rows.
  const plan = (m: number, n: number, k = 4096) =>
    describePlan(gemmPlanFor({ elem: "bf16", m, n, k, layoutB: "nk" }, 132));
  assert.equal(plan(128, 8192), "decode, 128 x 64 tiles, 1 slice");
  assert.equal(plan(128, 14336), "decode, 128 x 128 tiles, 1 slice");
  assert.equal(plan(128, 28672), "hopper, 1 slice");
  assert.equal(plan(64, 28672), "decode, 64 x 128 tiles, 1 slice", "a tile-row of 128 for 64 rows");
  assert.equal(plan(100, 28672), "hopper, 1 slice", "both span 128 rows of A");
  assert.equal(plan(192, 28672), "decode, 192 x 128 tiles, 1 slice", "two tile-rows of 128 for 192 rows");
  assert.equal(plan(129, 28672), "decode, 136 x 128 tiles, 1 slice", "m rounded up to 8 past 128 rows");
  assert.equal(plan(168, 8192, 14336), "decode, 168 x 64 tiles, 1 slice");
  assert.equal(plan(300, 28672), "decode, 152 x 128 tiles, 1 slice", "two tile-rows of half of m");
  assert.equal(plan(193, 28672), "decode, 200 x 128 tiles, 1 slice", "one tile-row of 200: 224 tiles");
  assert.equal(plan(200, 28672), "decode, 200 x 128 tiles, 1 slice");
  assert.equal(plan(201, 28672), "decode, 208 x 128 tiles, 1 slice", "m rounded up to 8");
  assert.equal(plan(216, 28672), "decode, 216 x 128 tiles, 1 slice");
  assert.equal(plan(224, 28672), "decode, 224 x 128 tiles, 1 slice");
  assert.equal(plan(225, 28672), "hopper, 1 slice", "past 224 rows: two tile-rows of 128");
  assert.equal(plan(200, 14336, 8192), "decode, 200 x 128 tiles, 1 slice", "two tile-rows of 128: 224 tiles");
  // Tall tiles at 193-208 rows where one tile-row of 128 rows of B leaves SMs idle: 108 tiles, not 80.
  assert.equal(
    plan(200, 10240),
    "decode, 104 x 192 tiles, 1 slice",
    "tall: 0.78x the busiest CTA's MMA work",
  );
  assert.equal(plan(193, 9216, 8192), "decode, 104 x 192 tiles, 1 slice");
  assert.equal(plan(208, 12288, 8192), "decode, 104 x 192 tiles, 1 slice", "128 tiles");
  assert.equal(plan(208, 6144, 8192), "decode, 104 x 192 tiles, 2 slices", "0.75x two tile-rows of 104");
  assert.equal(plan(209, 10240, 8192), "decode, 216 x 128 tiles, 1 slice", "two tile-rows of 104 end at 208");
  assert.equal(plan(200, 16896, 8192), "decode, 200 x 128 tiles, 1 slice", "tall: two waves");
  // Two wide tile-rows of 104 where two of 128 rows of B fit one wave, up to 208 rows of A.
  assert.equal(plan(200, 8192, 14336), "decode, 104 x 128 tiles, 1 slice", "two tile-rows of 104");
  assert.equal(plan(200, 8192), "decode, 104 x 128 tiles, 1 slice");
  assert.equal(plan(209, 8192, 14336), "decode, 128 x 128 tiles, 1 slice", "past 208 rows: two of 128");
  assert.equal(plan(200, 4096, 14336), "decode, 104 x 128 tiles, 2 slices", "not tall in thirds");
  assert.equal(plan(200, 5632, 14336), "decode, 104 x 192 tiles, 2 slices", "tall halves: 0.75x");
  assert.equal(plan(200, 8192, 1024), "decode, 104 x 128 tiles, 1 slice", "16 k-blocks: no slices");
  const fp8 = describePlan(gemmPlanFor({ elem: "fp8e4m3", m: 200, n: 8192, k: 14336, layoutB: "nk" }, 132));
  assert.equal(fp8, "decode, 104 x 128 tiles, 1 slice", "fp8: two tile-rows of 104");
  const fp8Tall = gemmPlanFor({ elem: "fp8e4m3", m: 200, n: 10240, k: 8192, layoutB: "nk" }, 132);
  assert.equal(describePlan(fp8Tall), "decode, 104 x 192 tiles, 1 slice", "fp8 tall too");
  const fp8Split = gemmPlanFor({ elem: "fp8e4m3", m: 200, n: 6144, k: 8192, layoutB: "nk" }, 132);
  assert.equal(describePlan(fp8Split), "decode, 104 x 128 tiles, 1 slice", "fp8: no tall tiles in slices");
  assert.equal(plan(256, 14336), "hopper, 1 slice");
  assert.equal(plan(256, 8192), "decode, 128 x 128 tiles, 1 slice");
  assert.equal(plan(320, 28672), "decode, 160 x 128 tiles, 1 slice");
  assert.equal(plan(384, 28672), "hopper, 1 slice");
  assert.equal(plan(385, 8192), "hopper, 1 slice");
  assert.ok(decodeFits(384, 8192, "nk"));
  assert.ok(!decodeFits(385, 8192, "nk"), "beyond 384 rows the 128 x 256 tiles win");
  assert.ok(!decodeFits(1, 8192, "kn"), "B as [k, n] would need an MN-major wgmma A operand");
  assert.ok(!decodeFits(1, 8196, "nk"), "rows of D are stored in 16-byte chunks");
  // Every plan the decode GEMM's launcher takes: slices of at least 16 k-blocks, one wave of tile slices.
  for (const elem of ["bf16", "fp8e4m3"] as const)
    for (const m of [1, 7, 64, 128, 150, 193, 200, 201, 208, 224, 300, 384])
      for (const n of [512, 2048, 4096, 5632, 6144, 8192, 10240, 12288, 28672])
        for (const k of [512, 4096, 14336]) {
          const p = gemmPlanFor({ elem, m, n, k, layoutB: "nk" }, 132);
          if (p.kernel !== "decode") continue;
          const { tilesM, tilesN } = decodeTiles(m, n, p);
          const what = `${elem} ${m}x${n}x${k}: ${describePlan(p)}`;
          assert.ok(p.splits === 1 || tilesM * tilesN * p.splits <= 132, `${what} overflows one wave`);
          assert.ok(p.splits === 1 || (k * (elem === "bf16" ? 2 : 1)) / 128 / p.splits >= 16, what);
        }
  assert.equal(decodeFlagCount(1, 8192, 2, decodeShape(1, 8192, 132)), 256);
  assert.equal(decodeFlagCount(200, 8192, 2, decodeShape(200, 8192, 132)), 2 * 2 * 64 * 2); // per consumer
  for (const v of DECODE_VARIANTS) {
    assert.ok(decodeSharedBytes(v) <= 227 * 1024, `${describeDecodeShape(v)}: shared memory`);
    assert.equal(decodeThreads(v), v.tall ? 512 : v.wide ? 384 : 256);
  }
  // Both dtypes: the 13 rows of A of the one-consumer tiles, one-consumer and wide, the 4 one-row wide
  // tiles (200 to 224 rows), and two-row wide and tall tiles of 104, with and without the all-reduce; no
  // pairs.
  assert.equal(DECODE_PROGRAMS.length, 2 * (13 * 2 + 4 + 2) * 2);
  assert.ok(DECODE_VARIANTS.every((v) => !v.paired));
  for (const m of [1, 100, 200, 213, 384])
    for (const n of [8192, 10240, 28672]) {
      const shape = decodePlan(m, n, 14336, 2, 132);
      for (const allReduce of [false, true])
        assert.ok(
          DECODE_VARIANTS.some(
            (v) => describeDecodeShape(v) === describeDecodeShape(shape) && v.allReduce === allReduce,
          ),
          `${m}x${n}: ${describeDecodeShape(shape)} ${allReduce ? "with" : "without"} the all-reduce is shipped`,
        );
    }
  // GEMM + all-reduce through the mailbox: one-pass tiles whose m x n x 2-byte partial fits a slot (the
  // default 4 MiB and its 32-byte header: up to 256 rows at n = 8192).
  const slot = 4 * 1024 * 1024 + 32;
  assert.ok(decodeMailboxFits(decodeShape(1, 8192, 132), 1, 8192, slot));
  assert.ok(decodeMailboxFits(decodePlan(256, 8192, 14336, 2, 132), 256, 8192, slot));
  assert.ok(!decodeMailboxFits(decodeShape(128, 8192, 132), 257, 8192, slot));
  assert.ok(!decodeMailboxFits(decodeShape(128, 16384, 132), 129, 16384, slot));
  const threePasses: DecodeShape = { cols: 216, wide: true, paired: false };
  assert.equal(decodePasses(threePasses), 3);
  assert.ok(!decodeMailboxFits(threePasses, 8, 8192, slot));
  assert.equal(new Set(DECODE_PROGRAMS.map((p) => p.name)).size, DECODE_PROGRAMS.length);
  assert.ok(PROGRAMS.includes(DECODE_PROGRAMS[0]!), "CI compiles the decode GEMM's programs");
});

test("bench gemm helpers", () => {
  assert.deepEqual(parseShapes("8192x8192x8192, 1x2x3"), [
    [8192, 8192, 8192],
    [1, 2, 3],
  ]);
  assert.throws(() => parseShapes("8192x8192"), /MxNxK/);
  assert.equal(relFrobenius(new Float32Array([3, 4]), new Float32Array([3, 4])), 0);
  assert.ok(Math.abs(relFrobenius(new Float32Array([0, 0]), new Float32Array([3, 4])) - 1) < 1e-12);
  // Cold weights: copies of B adding up to at least 3x L2, two at least, 64 at most.
  const l2 = 50 << 20;
  assert.equal(coldCopies(2560 * 8192 * 2, l2), 4);
  assert.equal(coldCopies(8192 * 8192 * 2, l2), 2);
  assert.equal(coldCopies(64 * 64, l2), 64);
  for (const b of [1 << 20, 10 << 20, 42 << 20, 49 << 20, 51 << 20])
    assert.ok(coldCopies(b, l2) * b >= 3 * l2 || coldCopies(b, l2) === 64);
});
