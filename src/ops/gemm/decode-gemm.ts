// symmkit's GEMM for few rows of A (device/include/symmkit/gemm/decode_gemm.cuh): D[m, n] = A[m, k] * B[n, k]^T
// computed as D^T = B * A^T, in tiles of 64 rows of B by 8 to 192 rows of A (or 128 rows of B by up to 256
// of A, two consumers, alone or paired in clusters of two CTAs that share B by multicast, or 192 rows of B
// by 104 of A, three consumers), with split-K for problems
// of few tiles and, optionally, GEMM + all-reduce's exchange in its epilogue. matmul() and the fused GEMM +
// all-reduce run it at decode sizes (decodeFits) unless HopperGemm's tiles do better there
// (symmkitGemmPlan, matmul.ts); HopperGemm runs everything else.
import { InvalidArgumentError } from "../../errors.js";
import type { Ptr } from "../../cuda/native.js";
import type { Device } from "../../runtime/device.js";
import { dtypeInfo } from "../../runtime/dtype.js";
import { defaultStream, type Stream } from "../../runtime/stream.js";
import { tensorMap2d } from "../../runtime/tensor-map.js";
import { Tensor } from "../../runtime/tensor.js";
import { sharedModule, type ProgramSpec } from "../../runtime/module.js";
import type { Kernel } from "../../runtime/kernel.js";
import type { SyncWatch } from "../../distributed/sync-watch.js";
import { GEMM_ELEMS, type GemmElem } from "./programs.js";
import {
  checkGemmShape,
  checkRanks,
  gemmKBlocks,
  writeOperands,
  type GemmOperandPtrs,
  type GemmScatter,
  HopperLauncher,
} from "./hopper-gemm.js";
import { SplitScratch } from "./split-scratch.js";
import type { CallTag } from "../../distributed/fingerprint.js";
import { MAILBOX_HEADER_BYTES } from "../../distributed/device-layouts.js";

/** Rows of A a tile takes (wgmma's N side); 200 to 256 in wide tiles only (the tiles past 192 rows that
 * were built and tested: DecodeGemm refuses them on one consumer). */
export const DECODE_COLS = [
  8, 16, 32, 64, 80, 96, 104, 112, 128, 136, 144, 152, 160, 168, 176, 184, 192, 200, 208, 216, 224, 256,
] as const;
export type DecodeCols = (typeof DECODE_COLS)[number];
/** Rows of B one consumer warpgroup takes (kDecodeRowsB); a wide tile has two consumers, a tall one three. */
export const DECODE_ROWS_B = 64;
const MAX_STAGES = 16;
/** kDecodeHoleBelowStages: fewer stages beside the transposed tiles than this, and a plain one-consumer
 * kernel transposes in a hole of its ring instead. */
const HOLE_BELOW_STAGES = 12;
const SHARED_MAX = 227 * 1024;
const TILE_K_BYTES = 128;

/** A tile's shape: `cols` rows of A by 64 rows of B, or 128 with `wide` (two consumer warpgroups), or 192
 * with `tall` too (three; unpaired, at most 168 rows of A: split-K's scratch holds a tile slice of 128 x
 * 256 floats); wide tiles `paired` run in clusters of two CTAs on neighbouring tile-rows of A, each loading
 * half of their block of B multicast to both (decode_gemm.cuh kPair). matmul() runs no paired tiles: on the
 * ring of stages as [B | A] the unpaired wide tiles measured level with them or faster on an H200. */
export interface DecodeShape {
  readonly cols: DecodeCols;
  readonly wide: boolean;
  readonly paired: boolean;
  readonly tall?: boolean;
}

/** A shape in words: "160 x 64", "128 x 128", "96 x 128 paired", "104 x 192". */
export function describeDecodeShape(s: DecodeShape): string {
  return `${s.cols} x ${s.tall ? 192 : s.wide ? 128 : 64}${s.paired ? " paired" : ""}`;
}

export interface DecodeVariant extends DecodeShape {
  readonly elem: GemmElem;
  /** GEMM + all-reduce's exchange in the epilogue (decode_gemm.cuh kAllReduce). */
  readonly allReduce: boolean;
}

/** The variant that runs `shape`'s tiles (a plan's other fields, such as its slices, left out): every place
 * that turns a plan into a kernel goes through it, so that no field of the shape is dropped. */
export function decodeVariant(shape: DecodeShape, elem: GemmElem, allReduce: boolean): DecodeVariant {
  const { cols, wide, paired, tall } = shape;
  return { elem, cols, wide, paired, ...(tall ? { tall } : {}), allReduce };
}

const consumers = (s: DecodeShape): number => (s.tall ? 3 : s.wide ? 2 : 1);
const pairOf = (s: DecodeShape): number => (s.paired ? 2 : 1);

/** Threads of a launch: the producer's warpgroup and one per consumer. */
export function decodeThreads(s: DecodeShape): number {
  return 128 * (1 + consumers(s));
}

/** Shared memory of `rows` transposed rows of A in every consumer's share. */
const transposedBytes = (s: DecodeShape, rows: number): number =>
  consumers(s) * rows * (DECODE_ROWS_B + 8) * 2;

/** Stages of a tile's ring with `beside` bytes of shared memory taken beside it. */
const ringRoom = (s: DecodeShape, beside: number): number =>
  Math.floor(
    (SHARED_MAX - beside - 1024 - 2 * MAX_STAGES * 8) /
      ((s.cols + consumers(s) * DECODE_ROWS_B) * TILE_K_BYTES),
  );

/** decodePasses by rows of A and consumers (a fused call asks on every launch). */
const passesByTile = new Map<number, number>();

/** The passes a consumer's transposition takes (DecodeRing::kPasses): the fewest of whole groups of 8 rows
 * of A that leave the ring 4 stages. GEMM + all-reduce goes through the Lamport mailbox in one pass only. */
export function decodePasses(s: DecodeShape): number {
  const key = 4 * s.cols + consumers(s);
  let passes = passesByTile.get(key);
  if (passes === undefined) {
    const groups = s.cols / 8;
    passes = groups;
    for (let p = 1; p < groups; p++)
      if (groups % p === 0 && ringRoom(s, transposedBytes(s, s.cols / p)) >= 4) {
        passes = p;
        break;
      }
    passesByTile.set(key, passes);
  }
  return passes;
}

/** Dynamic shared memory of a launch (DecodeRing<cols, consumers, allReduce>::kSharedBytes): the ring, and
 * the transposed tiles beside it unless one consumer of a plain GEMM transposes in a hole of the ring. */
export function decodeSharedBytes(v: DecodeVariant): number {
  const stage = (v.cols + consumers(v) * DECODE_ROWS_B) * TILE_K_BYTES;
  const transposed = transposedBytes(v, v.cols / decodePasses(v));
  const hole = consumers(v) === 1 && !v.allReduce && ringRoom(v, transposed) < HOLE_BELOW_STAGES;
  const beside = hole ? 0 : transposed;
  const stages = Math.min(MAX_STAGES, ringRoom(v, beside));
  return stages * stage + beside + 2 * stages * 8 + 1024;
}

/** The tile for m rows of A and n rows of B on `sms` SMs: the narrowest one-consumer tile that covers the
 * rows up to 192 (8 to 128 rows of A by powers of two, then m rounded up to 8), or, where its tiles would
 * take more than one wave, the wide tile of the same rows of A (two consumers: half as many tiles, each
 * reading A once for 128 rows of B); beyond 192 rows, one wide tile-row of m rounded up to 8 (200 to 224)
 * where two tile-rows of 128 rows of B would pass one wave, else two wide tile-rows (twoRowCols: 104 rows
 * of A each up to 208 rows, else half of m rounded up to 8, 128 to 192). Widths of m rounded up to 8 ran
 * 0-10% faster than the next of 160, 192 or 224 (bf16 on an H200; least on the one-consumer tiles, most in
 * two tile-rows). Timed side by side
 * on an H200 (bench/decode-shapes.mjs; docs/perf-notes.md: the decode GEMM): the wide tiles beat the
 * one-consumer ones by 6-15% at n = 14336 and 28672 and lose by 3-30% where the one-consumer tiles fit one
 * wave; unpaired wide tiles matched or beat the paired ones (0-4%) at every shape past 192 rows. */
export function decodeShape(m: number, n: number, sms: number): DecodeShape {
  const cols = NARROW_COLS.find((c) => c >= m);
  if (cols === undefined) {
    // One tile-row of m rounded up to 8 where two tile-rows of 128 would pass one wave: B read once, no
    // MMA on more than 7 rows past m. On an H200, timed side by side (bf16), 200 x 28672 x 4096: 86.3 µs
    // against the 224-row tile's 92.5, the Hopper GEMM's 100.3 and two tile-rows of 128's 102.8 (an earlier
    // run); 200 x 14336 / 10240 x 8192: 83.5 / 70.0 against 90.2 / 75.5 (224) and 100.1 / 83.7 (Hopper); at
    // 8192 x 14336 two tile-rows of 128 fill one wave and beat one tile-row unsplit (85.6 against 137.7 for
    // 224 rows; two tile-rows of 104 do better still up to 208 rows: twoRowCols). 256 rows of A lost to
    // the Hopper GEMM at m = 256.
    const oneRow = ONE_ROW_WIDE_COLS.find((c) => c >= m);
    if (oneRow !== undefined && 2 * Math.ceil(n / (2 * DECODE_ROWS_B)) > sms)
      return { cols: oneRow, wide: true, paired: false };
    return { cols: twoRowCols(m), wide: true, paired: false };
  }
  const narrow: DecodeShape = { cols, wide: false, paired: false };
  const { tilesM, tilesN } = decodeTiles(m, n, narrow);
  return tilesM * tilesN > sms ? { cols, wide: true, paired: false } : narrow;
}
/** One-consumer tiles' rows of A: no 80, 96 or 112 below 128 (wide tiles of 80 and 112 measured 20-30%
 * slower than 96 and 128), by 8 from 128 to 192. */
const NARROW_COLS: readonly DecodeCols[] = [8, 16, 32, 64, 128, 136, 144, 152, 160, 168, 176, 184, 192];
/** Rows of A of each of two wide tile-rows past 192 rows: 104 up to 208 rows, else half of m rounded up to
 * 8, at least 128. At 193-208 rows two tile-rows of 104 beat two of 128 in every case timed on an H200
 * (4-8%, bf16 and fp8, n = 2048-8192, k = 4096-14336; bench/decode-shapes.mjs), and one tile-row of 200
 * in halves of K too (81.9 against 83.3 µs at 200 x 8192 x 14336). */
function twoRowCols(m: number): DecodeCols {
  if (m <= 2 * TALL_COLS) return TALL_COLS;
  const cols = Math.max(128, Math.ceil(m / 16) * 8);
  return NARROW_COLS.find((c) => c >= cols) ?? 192;
}
/** The wide tiles that cover 193-224 rows of A in one tile-row, by 8 rows: the MMA no wider than m. */
export const ONE_ROW_WIDE_COLS: readonly DecodeCols[] = [200, 208, 216, 224];

/** Rows of A's box (decode_box_rows): the tile's, or m rounded up to 8 when A has fewer rows, so that
 * little of a box lies past A (TMA's zero fill of a box mostly past the tensor is slow). */
export function decodeBoxRows(m: number, cols: DecodeCols): number {
  return m < cols ? Math.ceil(m / 8) * 8 : cols;
}

/** Tile-rows of A (a multiple of the pair) and tile-columns of B. */
export function decodeTiles(m: number, n: number, s: DecodeShape): { tilesM: number; tilesN: number } {
  const pair = pairOf(s);
  return {
    tilesM: pair * Math.ceil(m / (pair * s.cols)),
    tilesN: Math.ceil(n / (consumers(s) * DECODE_ROWS_B)),
  };
}

/** The most rows matmul() and GEMM + all-reduce give the decode GEMM (two wide tile-rows of 192): beyond,
 * HopperGemm's 128 x 256 tiles reuse B across more rows of A in shared memory and win
 * (bench/decode-shapes.mjs). */
export const DECODE_MAX_ROWS = 384;

/** Whether the decode GEMM takes this problem: few rows, B as [n, k], whole 16-byte chunks of D's rows. */
export function decodeFits(m: number, n: number, layoutB: "nk" | "kn"): boolean {
  return m <= DECODE_MAX_ROWS && layoutB === "nk" && n % 8 === 0;
}

/** Fewest k-blocks per slice: below, the fix-up costs more than the SMs the split fills. */
const MIN_SPLIT_KBLOCKS = 16;
const MAX_SPLITS = 16;

/** Split-K slices of `shape`'s tiles that fill the `resident` CTAs (the SMs, or DecodeGemm.resident()) with
 * one tile slice each: as many as fit one wave, any count (thirds of 40 tiles: 1 x 2560 x 14336 on an H200
 * 22.0 µs, halves 26.7), 1 once the tiles fill half of them (n >= 4224 at m <= 128 on 132 SMs). Never two
 * waves: 80 tiles in thirds on 132 SMs, 200 x 10240 x 8192, ran 79.4 µs against 70.3 unsplit, and 64 x
 * 10240 x 8192 55.2 against 46.4, though the busiest CTA's k-blocks fell by a third. */
export function decodeSplitsFor(
  m: number,
  n: number,
  k: number,
  elementBytes: number,
  resident: number,
  shape: DecodeShape,
): number {
  const { tilesM, tilesN } = decodeTiles(m, n, shape);
  const byGrid = Math.floor(resident / (tilesM * tilesN));
  const byK = Math.floor(gemmKBlocks(k, elementBytes) / MIN_SPLIT_KBLOCKS);
  return Math.max(1, Math.min(byGrid, byK, MAX_SPLITS));
}

/** The decode GEMM's tile and slices of K for an m x n x k problem on `resident` CTAs: decodeShape's tile in
 * decodeSplitsFor's slices, except at 193-208 rows of A, where the tall tiles (two tile-rows of 104 by 192
 * rows of B, three consumers) replace it where its busiest CTA would do much more MMA work (TALL_BELOW):
 * where one tile-row of 128 rows of B leaves SMs idle, 72-96 tile-columns at n = 9216-12288 (on an H200,
 * 200 x 10240 x 8192: 61.7 µs against 69.0 for one tile-row of 200, cuBLASLt 53.8), and in halves of K at
 * 5632 x 14336 (bf16 63.2 against 69.8 for two wide tile-rows of 104). One tile-row of 200 in halves of K,
 * which beat two tile-rows of 128 at 200 x 8192 x 14336 (81.5 against 85.6 µs), lost to two of 104 wherever
 * both were timed (83.3 against 81.9 µs there; 35.2 against 26.1 at 200 x 8192 x 4096). */
export function decodePlan(
  m: number,
  n: number,
  k: number,
  elementBytes: number,
  resident: number,
): DecodeShape & { readonly splits: number } {
  const planned = (shape: DecodeShape) => ({
    ...shape,
    splits: decodeSplitsFor(m, n, k, elementBytes, resident, shape),
  });
  const chosen = planned(decodeShape(m, n, resident));
  if (m <= 192 || m > 2 * TALL_COLS) return chosen;
  const tall = planned({ cols: TALL_COLS, wide: true, paired: false, tall: true });
  const work = (p: typeof chosen) => busiestWork(m, n, k, elementBytes, resident, p);
  const fits = tall.splits === 1 || elementBytes === 2;
  return fits && work(tall) <= TALL_BELOW * work(chosen) ? tall : chosen;
}

/** Rows of A of the tall tiles (two tile-rows cover 193-208 rows, cuBLASLt's 192 x 104 tiles there). */
const TALL_COLS: DecodeCols = 104;
/** The tall tiles replace the plan's tile where their busiest CTA's MMA work is at most this share of its.
 * On an H200, at 0.75-0.78: 10-13% faster than one tile-row of 200-208 (193-208 x 9216-12288 x 4096-14336,
 * bf16 and fp8) and than two wide tile-rows of 104 (bf16 200 x 5632 x 14336 in halves), but 2% slower than
 * those at 200 x 6144 x 8192 (42.4 against 41.6 µs). Split in fp8 they lose (200 x 6144 x 8192: halves
 * 27.4 µs, two tile-rows of 104 23.0): fp8's MMAs take half bf16's time, the fix-up does not. */
const TALL_BELOW = 0.8;

/** The MMA work of a plan's busiest CTA, in rows of B x rows of A x k-blocks: the waves of tile slices, each
 * a tile's rows of B by its rows of A over a slice's k-blocks. */
function busiestWork(
  m: number,
  n: number,
  k: number,
  elementBytes: number,
  resident: number,
  plan: DecodeShape & { readonly splits: number },
): number {
  const { tilesM, tilesN } = decodeTiles(m, n, plan);
  const waves = Math.ceil((tilesM * tilesN * plan.splits) / resident);
  const kblocks = Math.ceil(gemmKBlocks(k, elementBytes) / plan.splits);
  return waves * consumers(plan) * DECODE_ROWS_B * plan.cols * kblocks;
}

const ELEM_TYPES: Record<GemmElem, string> = { bf16: "__nv_bfloat16", fp8e4m3: "symmkit::fp8e4m3" };

export function decodeExpr(v: DecodeVariant): string {
  return `symmkit::gemm::decode_gemm<${ELEM_TYPES[v.elem]}, ${v.cols}, ${consumers(v)}, ${pairOf(v)}, ${v.allReduce}>`;
}

export function decodeProgram(v: DecodeVariant): ProgramSpec {
  return {
    name: `symmkit/gemm/decode/${v.elem}-n${v.cols}${v.tall ? "-tall" : v.wide ? "-wide" : ""}${v.paired ? "-paired" : ""}${v.allReduce ? "-all-reduce" : ""}`,
    source: '#include "symmkit/gemm/decode_gemm.cuh"\n',
    nameExpressions: [decodeExpr(v)],
  };
}

/** The variants matmul() and GEMM + all-reduce may run (decodePlan's), in both dtypes, each plain and with
 * the all-reduce: the one-consumer tiles, the wide tiles of the same rows of A, the one-row wide tiles and
 * the tall tiles. */
export const DECODE_VARIANTS: readonly DecodeVariant[] = GEMM_ELEMS.flatMap((elem) =>
  [
    ...NARROW_COLS.flatMap((cols): DecodeShape[] =>
      [false, true].map((wide) => ({ cols, wide, paired: false })),
    ),
    ...ONE_ROW_WIDE_COLS.map((cols): DecodeShape => ({ cols, wide: true, paired: false })),
    { cols: TALL_COLS, wide: true, paired: false } satisfies DecodeShape,
    { cols: TALL_COLS, wide: true, paired: false, tall: true } satisfies DecodeShape,
  ].flatMap((shape) => [false, true].map((allReduce) => ({ ...shape, elem, allReduce }))),
);
export const DECODE_PROGRAMS: readonly ProgramSpec[] = DECODE_VARIANTS.map(decodeProgram);

/** Byte offsets of DecodeArgs' fields (decode_gemm.cuh asserts its size; test/gemm-layout.test.ts
 * compares every offset). */
export const DECODE_ARGS_LAYOUT = {
  d: 0,
  ldd: 8,
  m: 16,
  n: 20,
  k: 24,
  tilesN: 28,
  tilesM: 32,
  splits: 36,
  splitWs: 40,
  splitCounters: 48,
  scaleA: 56,
  scaleB: 64,
  envTimeoutNs: 72,
  envAbortFlag: 80,
  envRecord: 88,
  envRank: 96,
  recv: 104,
  flags: 168,
  epoch: 232,
  world: 240,
  rank: 244,
  mailbox: 248,
  cap: 256,
  tagWord: 264,
  tagShape: 272,
  bytes: 280,
} as const;
const L = DECODE_ARGS_LAYOUT;

/** decode_gemm's parameters: the CUtensorMaps of A and B by value, then DecodeArgs. */
export const DECODE_PARAMS = [
  { bytes: 128, align: 64 },
  { bytes: 128, align: 64 },
  { bytes: L.bytes, align: 8 },
] as const;

/** Flags one rank's GEMM + all-reduce needs in the decode GEMM with `shape`'s tiles: world x tiles x
 * consumers. */
export function decodeFlagCount(m: number, n: number, world: number, shape: DecodeShape): number {
  const { tilesM, tilesN } = decodeTiles(m, n, shape);
  return world * tilesM * tilesN * consumers(shape);
}

/** The exchange of an all-reduce variant at world 1 (its own receive buffer, zeroed flags and epoch), with
 * `epoch` to read the call count back and dispose() to free it: what the tests and bench/decode-ar.mjs
 * run the epilogue with when there is no peer. */
export function soloExchange(
  device: Device,
  m: number,
  n: number,
  shape = decodeShape(m, n, device.props.smCount),
): GemmScatter & { epoch: Ptr; counts: Tensor; dispose(): void } {
  const recv = Tensor.empty([m, n], "bf16", { device });
  const flags = Tensor.zeros([decodeFlagCount(m, n, 1, shape)], "u32", { device });
  const counts = Tensor.zeros([2], "u32", { device });
  return {
    rank: 0,
    world: 1,
    shardRows: m,
    recv: [recv.ptr],
    flags: [flags.ptr],
    epoch: counts.ptr,
    counts,
    dispose: () => [recv, flags, counts].forEach((t) => t.dispose()),
  };
}

/** GEMM + all-reduce through the group's Lamport mailbox (coll/mailbox.cuh's protocol, which the kernel
 * speaks as one more Lamport call: no barrier before it, no flags). */
export interface DecodeMailbox {
  readonly rank: number;
  readonly world: number;
  /** Every rank's mailbox as mapped here. */
  readonly buffers: readonly Ptr[];
  /** This rank's MailboxState. */
  readonly state: Ptr;
  /** Bytes a slot spans, its header included (the partial, m x n x 2 bytes, fills the rest). */
  readonly stride: number;
  readonly tag: CallTag;
}

/** Whether GEMM + all-reduce of m x n in variant `v` can go through a mailbox of slots spanning `stride`
 * bytes: one-pass tiles whose partial fits a slot. */
export function decodeMailboxFits(v: DecodeShape, m: number, n: number, stride: number): boolean {
  return decodePasses(v) === 1 && m * n * 2 <= stride - MAILBOX_HEADER_BYTES;
}

/** B as [n, k]; d bf16 with n and ldd multiples of 8 and 16-byte aligned rows. */
export interface DecodeLaunch extends GemmOperandPtrs {
  /** Slices of K per tile: at most the k-blocks, tiles x splits at most resident() (default 1). */
  readonly splits?: number;
  /** allReduce variants: the exchange through the staging buffer (shardRows = m; flags: decodeFlagCount of
   * them per rank), launched behind a barrier over the ranks; or `mailbox`. */
  readonly exchange?: GemmScatter;
  /** allReduce variants: the exchange through the Lamport mailbox (decodeMailboxFits). */
  readonly mailbox?: DecodeMailbox;
  /** The rank a timeout record names as the waiter (default 0). */
  readonly waitRank?: number;
  readonly stream?: Stream;
}

/** One decode GEMM variant, loaded on one device. One launch at a time from the host (they may overlap on
 * the GPU, on different streams). */
export class DecodeGemm extends HopperLauncher {
  readonly variant: DecodeVariant;
  readonly kernel: Kernel<typeof DECODE_PARAMS>;
  /** decodeSharedBytes(variant), worked out once rather than on every launch. */
  readonly #sharedBytes: number;
  readonly #args = new Uint8Array(L.bytes);
  readonly #view = new DataView(this.#args.buffer);
  #resident: number | undefined;

  constructor(device: Device, variant: DecodeVariant, watch?: SyncWatch) {
    super(device, watch);
    if (variant.paired && !variant.wide)
      throw new InvalidArgumentError(
        "gemm: only wide decode tiles pair (two CTAs sharing B); one-consumer tiles run unpaired",
      );
    if (!variant.wide && variant.cols > 192)
      throw new InvalidArgumentError(
        `gemm: decode tiles of ${variant.cols} rows of A are wide only (two consumers); one-consumer tiles take at most 192`,
      );
    if (variant.tall && (!variant.wide || variant.paired || variant.cols > 168))
      throw new InvalidArgumentError(
        "gemm: tall decode tiles (three consumers) are wide, unpaired and at most 168 rows of A (split-K's scratch holds 128 x 256 floats a tile slice)",
      );
    this.variant = variant;
    this.#sharedBytes = decodeSharedBytes(variant);
    this.kernel = sharedModule(decodeProgram(variant), device).kernel(decodeExpr(variant), DECODE_PARAMS);
  }

  launch(p: DecodeLaunch): void {
    const v = this.variant;
    const es = dtypeInfo(v.elem).bytes;
    const { m, n, k } = p;
    checkGemmShape(p, v.elem);
    const ldd = p.ldd ?? n;
    if (n % 8 !== 0 || !Number.isInteger(ldd) || ldd < n || ldd % 8 !== 0)
      throw new InvalidArgumentError(
        `gemm: the decode GEMM stores 16-byte chunks: n = ${n} and ldd = ${ldd} >= n must be multiples of 8`,
      );
    if (p.d % 16n !== 0n) throw new InvalidArgumentError("gemm: d must be 16-byte aligned");
    const { tilesM, tilesN } = decodeTiles(m, n, v);
    const tiles = tilesM * tilesN;
    const splits = p.splits ?? 1;
    const kblocks = gemmKBlocks(k, es);
    const sms = this.resident();
    if (!Number.isInteger(splits) || splits < 1 || splits > kblocks)
      throw new InvalidArgumentError(
        `gemm: splits = ${splits} must be an integer from 1 to the ${kblocks} k-blocks`,
      );
    // A split launch's scratch holds one wave.
    if (splits > 1 && tiles * splits > sms)
      throw new InvalidArgumentError(
        `gemm: the decode GEMM in slices runs one wave: tiles x splits = ${tiles} x ${splits} exceeds the ${sms} CTAs resident at once; take fewer splits`,
      );
    const exchanges = Number(p.exchange !== undefined) + Number(p.mailbox !== undefined);
    if (exchanges !== (v.allReduce ? 1 : 0))
      throw new InvalidArgumentError(
        `gemm: ${v.allReduce ? "an all-reduce variant needs an exchange or a mailbox, one of them" : "a plain variant takes no exchange and no mailbox"}`,
      );
    if (p.mailbox && !decodeMailboxFits(v, m, n, p.mailbox.stride))
      throw new InvalidArgumentError(
        `gemm: the mailbox's all-reduce needs one-pass tiles and m x n x 2 = ${m * n * 2} bytes within a slot of ${p.mailbox.stride - MAILBOX_HEADER_BYTES}`,
      );

    const dataType = v.elem === "bf16" ? "BFLOAT16" : "UINT8";
    const map = (address: Ptr, rows: number, boxRows: number) =>
      tensorMap2d({
        address,
        dataType,
        elementBytes: es,
        rows,
        cols: k,
        rowStrideBytes: k * es,
        boxCols: TILE_K_BYTES / es,
        boxRows,
        swizzle: "B128",
      });
    const a = this.#view;
    this.#args.fill(0);
    writeOperands(a, L, p, ldd);
    a.setUint32(L.tilesN, tilesN, true);
    a.setUint32(L.tilesM, tilesM, true);
    a.setUint32(L.splits, splits, true);
    const stream = p.stream ?? defaultStream(this.device);
    if (splits > 1) {
      const sc = SplitScratch.of(this.device).on(stream);
      a.setBigUint64(L.splitWs, sc.ws, true);
      a.setBigUint64(L.splitCounters, sc.counters, true);
    }
    if (p.exchange) this.#writeExchange(p.exchange, m);
    if (p.mailbox) this.#writeMailbox(p.mailbox);
    this.writeWaitEnv(a, L, p.waitRank ?? 0, stream, v.allReduce);
    this.kernel.launch(
      {
        grid: Math.min(tiles * splits, sms),
        block: decodeThreads(v),
        sharedBytes: this.#sharedBytes,
        ...(v.paired ? { cluster: 2 } : {}),
        stream,
        // The exchange through the staging buffer waits (griddepcontrol.wait) for the kernel before it, the
        // barrier over the ranks, only before its first push: the main loop runs under the barrier.
        programmatic: p.exchange !== undefined,
      },
      map(p.a, m, decodeBoxRows(m, v.cols)),
      map(p.b, n, (consumers(v) / pairOf(v)) * DECODE_ROWS_B),
      this.#args,
    );
  }

  /** CTAs of this variant resident at once, one per SM: the SMs, or for pairs the clusters of two that
   * fit (cuOccupancyMaxActiveClusters), twice. A persistent grid holds no more. */
  resident(): number {
    if (this.#resident === undefined) {
      const sms = this.device.props.smCount;
      this.#resident = this.variant.paired
        ? 2 *
          this.kernel.maxActiveClusters({
            grid: 2 * Math.floor(sms / 2),
            block: decodeThreads(this.variant),
            sharedBytes: this.#sharedBytes,
            cluster: 2,
          })
        : sms;
      if (this.#resident < 2)
        throw new InvalidArgumentError(`gemm: no cluster of two ${this.kernel.name} CTAs fits on this GPU`);
    }
    return this.#resident;
  }

  #writeExchange(s: GemmScatter, m: number): void {
    checkRanks("all-reduce", s);
    if (s.shardRows !== m)
      throw new InvalidArgumentError("gemm: all-reduce needs scatter with shardRows = m");
    const a = this.#view;
    for (let r = 0; r < s.world; r++) {
      a.setBigUint64(L.recv + 8 * r, s.recv[r]!, true);
      a.setBigUint64(L.flags + 8 * r, s.flags[r]!, true);
    }
    a.setBigUint64(L.epoch, s.epoch, true);
    a.setUint32(L.world, s.world, true);
    a.setUint32(L.rank, s.rank, true);
  }

  #writeMailbox(s: DecodeMailbox): void {
    checkRanks("all-reduce", { ...s, recv: s.buffers });
    const a = this.#view;
    for (let r = 0; r < s.world; r++) a.setBigUint64(L.recv + 8 * r, s.buffers[r]!, true);
    a.setUint32(L.world, s.world, true);
    a.setUint32(L.rank, s.rank, true);
    a.setBigUint64(L.mailbox, s.state, true);
    a.setBigUint64(L.cap, BigInt(s.stride), true);
    s.tag.writeParam(a, L.tagWord); // the word, then the shape (tagShape)
  }
}
