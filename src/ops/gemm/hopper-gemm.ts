// symmkit's Hopper GEMM with its fusion hooks: D[m, n] = A[m, k] * B[n, k]^T. This is the layer the fused
// kernels drive directly (tile order, ready flags, where the tile goes); matmul() is the plain front end.
import { InvalidArgumentError, UnsupportedError } from "../../errors.js";
import type { Ptr } from "../../cuda/native.js";
import type { Device } from "../../runtime/device.js";
import { dtypeInfo } from "../../runtime/dtype.js";
import { defaultStream, type Stream } from "../../runtime/stream.js";
import { tensorMap2d } from "../../runtime/tensor-map.js";
import { sharedModule } from "../../runtime/module.js";
import type { Kernel } from "../../runtime/kernel.js";
import { SyncWatch } from "../../distributed/sync-watch.js";
import { SplitScratch } from "./split-scratch.js";
import {
  FUSION_PARAMS_LAYOUT as F,
  GEMM_ARGS_LAYOUT as L,
  GEMM_PARAMS,
  GEMM_NARROW_ROWS,
  GEMM_SHARED_BYTES,
  GEMM_SHARED_BYTES_NARROW,
  GEMM_STORE_BOX,
  GEMM_THREADS,
  GEMM_TILE_M,
  GEMM_TILE_N,
  gemmExpr,
  gemmProgram,
  type GemmElem,
  type GemmVariant,
} from "./programs.js";

const TILE_K_BYTES = 128;
const GROUP_M = 8;
const UNUSED_MAP = new Uint8Array(128);
/** Peers a fused launch can address (kMaxWorld in sync/barrier.cuh). */
export const GEMM_MAX_WORLD = 8;
const MAP_BYTES = 128;

/** A second home for some rows of A: rows [row0, row0 + rows) are read from `a2` (row-major, same k)
 * instead of `a`, without asking the ready policy (all-gather + GEMM reads its own shard in place). */
export interface GemmSecondA {
  readonly a2: Ptr;
  readonly row0: number;
  readonly rows: number;
}

/** GEMM + reduce-scatter (order "sharded" with a scatter-reduce epilogue): A's m rows are `world` shards
 * of shardRows; rank p's shard is reduced on rank p into d ([shardRows, n]). GEMM + all-reduce (epilogue
 * all-reduce) takes the same fields with shardRows = m: every rank's [m, n] partial reaches every rank. */
export interface GemmScatter {
  readonly rank: number;
  readonly world: number;
  readonly shardRows: number;
  /** Each rank's receive buffer as mapped here: world slots of [shardRows, n] bf16 (slot p: rank p's
   * partial of the owner's shard). */
  readonly recv: readonly Ptr[];
  /** Each rank's flags as mapped here: world x tilesPerShard x 2 u32 (tilesPerShard: the tiles of one
   * shard, of the whole output for all-reduce), zero at first. */
  readonly flags: readonly Ptr[];
  /** Two u32 of this rank's (zero at first, then kept by the kernel): the calls so far, and a count. */
  readonly epoch: Ptr;
}

/** What a launch of either symmkit GEMM (HopperGemm, DecodeGemm) names: operands, shape, output. */
export interface GemmOperandPtrs {
  /** Row-major [m, k]. */
  readonly a: Ptr;
  /** Row-major [n, k], or [k, n] for a HopperGemm variant with layoutB "kn". */
  readonly b: Ptr;
  /** Row-major [m, n] with row stride ldd elements: bf16, or f32 for the accumulate-f32 epilogue. */
  readonly d: Ptr;
  readonly m: number;
  readonly n: number;
  readonly k: number;
  /** Default n. */
  readonly ldd?: number;
  /** fp8: device addresses of one f32 each (default 1). */
  readonly scaleA?: Ptr;
  readonly scaleB?: Ptr;
}

export interface GemmLaunch extends GemmOperandPtrs {
  /** order "list": device array of u32 tile ids (tm * tilesN + tn), and how many to compute. */
  readonly tileList?: Ptr;
  readonly tileCount?: number;
  /** ready "row-flags": device array of u32 flags, one per flagRows rows of A; ready once >= readyValue. */
  readonly readyFlags?: Ptr;
  readonly flagRows?: number;
  readonly readyValue?: number;
  /** epilogue "signal": device array of u32, one per tile, incremented once the tile is stored. */
  readonly tileSignals?: Ptr;
  /** order "grouped": start at this tile-row and wrap around (default 0). */
  readonly rotateTileRows?: number;
  readonly secondA?: GemmSecondA;
  /** order "sharded" and epilogue "all-reduce": required. */
  readonly scatter?: GemmScatter;
  /** Slices of K per tile (split-K, see hopper_gemm.cuh): default 1; more needs a splitK variant, a power
   * of two at most the k-blocks (k x element bytes / 128), and tiles x splits at most the SMs (one wave).
   * splitsFor() picks a count that fills the GPU. */
  readonly splits?: number;
  /** The rank a timeout record names as the waiter (default 0). */
  readonly waitRank?: number;
  readonly stream?: Stream;
  /** CTAs of the persistent grid (default: one per SM, at most one per tile). */
  readonly ctas?: number;
}

/** Tiles of the output: tm in [0, tilesM), tn in [0, tilesN); tile id = tm * tilesN + tn. */
export function gemmTiles(m: number, n: number): { tilesM: number; tilesN: number } {
  return { tilesM: Math.ceil(m / GEMM_TILE_M), tilesN: Math.ceil(n / GEMM_TILE_N) };
}

/** K-blocks of a GEMM: 128 bytes of K each. */
export function gemmKBlocks(k: number, elementBytes: number): number {
  return Math.ceil((k * elementBytes) / TILE_K_BYTES);
}

/** Fewest k-blocks a split-K slice should get: enough to pay for the fix-up (on one H200, 1 x 8192 x 1024
 * ran 10.4 us unsplit and 12.1 in 2 slices of 8 k-blocks; 1 x 8192 x 3584 31.6 unsplit, 27.8 in 4 of
 * 14), and, for tiles of more than 32 rows, whose fix-up reads the slices pair by pair
 * (hopper_gemm.cuh split_fixup), many more (128 x 8192 x 3584: 38 us unsplit, 41 in 2 slices of 28;
 * 64 x 8192 x 14336: 80 us in 2 slices of 112, 100 in 4 of 56). */
const MIN_SPLIT_KBLOCKS = 12;
const MIN_SPLIT_KBLOCKS_MANY_ROWS = 64;
const MAX_SPLITS = 16;

/**
 * Split-K slices that fill `smCount` SMs with one CTA each: a problem of few tiles (small m) leaves most
 * SMs idle, and a memory-bound GEMM needs every SM streaming B. The largest power of two (hopper_gemm.cuh
 * maps steps to slices by shifts) that keeps tiles x slices within one wave and every slice long enough;
 * 1 once the tiles fill half the SMs.
 */
export function splitsFor(m: number, n: number, k: number, elementBytes: number, smCount: number): number {
  const { tilesM, tilesN } = gemmTiles(m, n);
  const byGrid = Math.floor(smCount / (tilesM * tilesN));
  const minKBlocks = m <= 32 ? MIN_SPLIT_KBLOCKS : MIN_SPLIT_KBLOCKS_MANY_ROWS;
  const byK = Math.floor(gemmKBlocks(k, elementBytes) / minKBlocks);
  const most = Math.min(byGrid, byK, MAX_SPLITS);
  return most < 2 ? 1 : 2 ** Math.floor(Math.log2(most));
}

/**
 * The kernel a GEMM of m rows in `splits` slices runs (GemmVariant's splitK and narrow): the split-K
 * kernel when it splits, and at m <= 64 even unsplit, since a tile of at most 64 rows leaves its second
 * consumer idle and only that kernel skips the idle consumer's MMAs (1 x 8192 x 14336 on one H200: 114
 * us against 133 with them); there, the narrow ring, whose fifth stage keeps more of B in flight.
 */
export function gemmKernelFor(m: number, splits: number): { splitK: boolean; narrow: boolean } {
  const narrow = m <= GEMM_NARROW_ROWS;
  return { splitK: splits > 1 || narrow, narrow };
}

/** An exchange's world, rank and per-rank buffers, else a typed error naming `what` (scatter, all-reduce). */
export function checkRanks(
  what: string,
  s: Pick<GemmScatter, "world" | "rank" | "recv"> & { readonly flags?: readonly Ptr[] },
): void {
  if (!Number.isInteger(s.world) || s.world < 1 || s.world > GEMM_MAX_WORLD)
    throw new InvalidArgumentError(`gemm: ${what} world ${s.world} must be in [1, ${GEMM_MAX_WORLD}]`);
  if (!Number.isInteger(s.rank) || s.rank < 0 || s.rank >= s.world)
    throw new InvalidArgumentError(`gemm: ${what} rank ${s.rank} is not in [0, ${s.world})`);
  if (s.recv.length !== s.world || (s.flags !== undefined && s.flags.length !== s.world))
    throw new InvalidArgumentError(`gemm: ${what} needs one receive buffer (and flag array) per rank`);
}

/** Flags one rank's scatter-reduce needs: world x tiles of one shard x 2 consumers. */
export function scatterFlagCount(shardRows: number, n: number, world: number): number {
  const { tilesM, tilesN } = gemmTiles(shardRows, n);
  return world * tilesM * tilesN * 2;
}

/** What both symmkit GEMM launchers (HopperGemm, DecodeGemm) hold: their GPU, which must be a Hopper, and
 * the watch that bounds their waits on flags. */
export abstract class HopperLauncher {
  readonly device: Device;
  #watch: SyncWatch | undefined;

  constructor(device: Device, watch: SyncWatch | undefined) {
    if (!device.props.arch.startsWith("sm_90"))
      throw new UnsupportedError(
        `the symmkit GEMM needs a Hopper GPU (sm_90a); ${device.props.name} is ${device.props.arch}: use impl "cublaslt"`,
      );
    this.device = device;
    this.#watch = watch;
  }

  /** The watch whose record explains a timed-out wait on a flag or a stalled pipeline (created on first use
   * if none was given). */
  get watch(): SyncWatch {
    this.#watch ??= SyncWatch.create(this.device);
    return this.#watch;
  }

  /**
   * Writes a launch's WaitEnv (`at` in `view`): the watch's timeout, abort flag and record, which bound the
   * launch's waits on flags and where a stalled pipeline records itself. A launch that waits on flags
   * (`waits`) creates the watch if need be; a plain one inside a CUDA graph capture, where pinned memory
   * cannot be allocated, takes it only if it exists, and without it a stalled pipeline traps unrecorded.
   */
  protected writeWaitEnv(
    view: DataView,
    at: GemmArgsCommon,
    rank: number,
    stream: Stream,
    waits: boolean,
  ): void {
    // The capture query only until the watch exists (a driver call per launch otherwise).
    const watch = waits || this.#watch !== undefined || !stream.capturing ? this.watch : undefined;
    view.setBigUint64(at.envTimeoutNs, watch?.timeoutNs ?? 0n, true);
    view.setBigUint64(at.envAbortFlag, watch?.abortFlagPtr ?? 0n, true);
    view.setBigUint64(at.envRecord, watch?.recordPtr ?? 0n, true);
    view.setUint32(at.envRank, rank, true);
  }
}

/** One GEMM variant, loaded on one device. Not thread-safe: one launch at a time (they may overlap on the GPU). */
export class HopperGemm extends HopperLauncher {
  readonly variant: GemmVariant;
  readonly kernel: Kernel<typeof GEMM_PARAMS>;
  readonly #args = new Uint8Array(L.bytes);
  readonly #view = new DataView(this.#args.buffer);
  readonly #fusion = new Uint8Array(F.bytes);
  readonly #fusionView = new DataView(this.#fusion.buffer);

  constructor(device: Device, variant: GemmVariant, watch?: SyncWatch) {
    super(device, watch);
    // Split-K's scratch and counters are laid out for the grouped order's tiles (every tile once); the
    // narrow ring leaves the second consumer without epilogue buffers, so its epilogue must be per consumer.
    if (variant.splitK && variant.order !== "grouped")
      throw new InvalidArgumentError(`gemm: splitK takes the grouped order, not ${variant.order}`);
    if (
      variant.narrow &&
      (!variant.splitK || !["store", "all-reduce", "accumulate-f32"].includes(variant.epilogue))
    )
      throw new InvalidArgumentError(
        `gemm: narrow needs splitK and the store, all-reduce or accumulate-f32 epilogue, not ${variant.epilogue}`,
      );
    this.variant = variant;
    this.kernel = sharedModule(gemmProgram(variant), device).kernel(gemmExpr(variant), GEMM_PARAMS);
  }

  launch(p: GemmLaunch): void {
    const v = this.variant;
    const es = dtypeInfo(v.elem).bytes;
    const { m, n, k } = p;
    checkGemmShape(p, v.elem);
    if (v.narrow && m > GEMM_NARROW_ROWS)
      throw new InvalidArgumentError(`gemm: a narrow variant takes m <= ${GEMM_NARROW_ROWS}, got ${m}`);
    if (v.layoutB === "kn" && (n * es) % 16 !== 0)
      throw new InvalidArgumentError(`gemm: n = ${n}: rows of B [k, n] must be a multiple of 16 bytes`);
    const ldd = p.ldd ?? n;
    const outBytes = v.epilogue === "accumulate-f32" ? 4 : 2;
    // TMA stores need 16-byte rows and base (all-reduce's rows of d are written 16 bytes at a time); the
    // pair stores of the other epilogues need 2 elements.
    const tma = v.epilogue === "store" || v.epilogue === "scatter-reduce" || v.epilogue === "all-reduce";
    const unit = tma ? 16 / outBytes : 2;
    if (!Number.isInteger(ldd) || ldd < n || ldd % unit !== 0 || n % 2 !== 0) {
      throw new InvalidArgumentError(
        `gemm: n = ${n} must be even and ldd = ${ldd} >= n a multiple of ${unit} for epilogue ${v.epilogue}`,
      );
    }
    if (p.d % BigInt(tma ? 16 : 2 * outBytes) !== 0n)
      throw new InvalidArgumentError(`gemm: d must be ${tma ? 16 : 2 * outBytes}-byte aligned`);
    const { tilesM, tilesN } = gemmTiles(m, n);
    const scatter =
      v.order === "sharded" ? this.#scatter(p) : v.epilogue === "all-reduce" ? this.#exchange(p) : undefined;
    const tileCount =
      v.order === "sharded" && scatter
        ? scatter.world * gemmTiles(scatter.shardRows, n).tilesM * tilesN
        : this.#tileCount(p, tilesM * tilesN);
    const splits = p.splits ?? 1;
    if (!Number.isInteger(splits) || splits < 1)
      throw new InvalidArgumentError(`gemm: splits = ${splits} must be a whole number >= 1`);
    if (splits !== 1) this.#checkSplits(splits, gemmKBlocks(k, es), tileCount, n);
    // A narrow ring's A slots hold 64 rows: a second A's 128-row boxes would overrun them.
    if (v.narrow && p.secondA) throw new InvalidArgumentError("gemm: a narrow variant takes no secondA");

    const rowBytes = k * es;
    const box = TILE_K_BYTES / es;
    const dataType = v.elem === "bf16" ? "BFLOAT16" : "UINT8";
    const mapA = tensorMap2d({
      address: p.a,
      dataType,
      elementBytes: es,
      rows: m,
      cols: k,
      rowStrideBytes: rowBytes,
      boxCols: box,
      boxRows: v.narrow ? GEMM_NARROW_ROWS : GEMM_TILE_M,
      swizzle: "B128",
    });
    // B [k, n] is loaded N-major in boxes of 64 n (128 bytes) by one k-block of rows.
    const mapB = tensorMap2d(
      v.layoutB === "nk"
        ? {
            address: p.b,
            dataType,
            elementBytes: es,
            rows: n,
            cols: k,
            rowStrideBytes: rowBytes,
            boxCols: box,
            boxRows: GEMM_TILE_N,
            swizzle: "B128",
          }
        : {
            address: p.b,
            dataType,
            elementBytes: es,
            rows: k,
            cols: n,
            rowStrideBytes: n * es,
            boxCols: TILE_K_BYTES / es,
            boxRows: box,
            swizzle: "B128",
          },
    );

    const mapD = tma
      ? tensorMap2d({
          address: p.d,
          dataType: "BFLOAT16",
          elementBytes: 2,
          rows: scatter ? scatter.shardRows : m,
          cols: n,
          rowStrideBytes: ldd * 2,
          boxCols: GEMM_STORE_BOX,
          boxRows: GEMM_STORE_BOX,
          swizzle: "B128",
        })
      : UNUSED_MAP;

    const a = this.#view;
    this.#args.fill(0);
    writeOperands(a, L, p, ldd);
    a.setUint32(L.tilesM, tilesM, true);
    a.setUint32(L.tilesN, tilesN, true);
    a.setUint32(L.groupM, GROUP_M, true);
    a.setBigUint64(L.tileList, p.tileList ?? 0n, true);
    a.setUint32(L.tileCount, tileCount, true);
    a.setUint32(L.tmRotate, this.#rotation(p, tilesM), true);
    if (v.ready === "row-flags") this.#writeReady(p);
    const stream = p.stream ?? defaultStream(this.device);
    this.writeWaitEnv(a, L, p.waitRank ?? 0, stream, v.ready === "row-flags" || scatter !== undefined);
    a.setUint32(L.splitLog2, Math.log2(splits), true);
    if (splits > 1) this.#writeSplitScratch(stream);
    this.#fusion.fill(0);
    if (p.secondA) this.#writeSecondA(p.secondA, dataType, es, k, box, m);
    if (scatter) this.#writeScatter(scatter, n, tilesN);
    if (v.epilogue === "signal") {
      if (!p.tileSignals) throw new InvalidArgumentError("gemm: epilogue signal needs tileSignals");
      a.setBigUint64(L.tileSignals, p.tileSignals, true);
    }
    const ctas = Math.min(p.ctas ?? this.device.props.smCount, tileCount * splits);
    // A split launch is one wave, one step per CTA: the scratch is sized for it, and GEMM + all-reduce waits
    // on the peers' slices of a tile, which must be on CTAs of their own.
    if (splits > 1 && ctas < tileCount * splits)
      throw new InvalidArgumentError(
        `gemm: split-K runs one CTA per tile slice: ctas = ${ctas} is fewer than ${tileCount} tiles x ${splits} slices`,
      );
    if (ctas < 1) return;
    this.kernel.launch(
      {
        grid: ctas,
        block: GEMM_THREADS,
        sharedBytes: v.narrow ? GEMM_SHARED_BYTES_NARROW : GEMM_SHARED_BYTES,
        stream,
      },
      mapA,
      mapB,
      mapD,
      this.#args,
      this.#fusion,
    );
  }

  #rotation(p: GemmLaunch, tilesM: number): number {
    const r = p.rotateTileRows ?? 0;
    if (r === 0) return 0;
    if (this.variant.order !== "grouped" || !Number.isInteger(r) || r < 0 || r >= tilesM)
      throw new InvalidArgumentError(
        `gemm: rotateTileRows ${r} needs order grouped and a tile-row in [0, ${tilesM})`,
      );
    return r;
  }

  #scatter(p: GemmLaunch): GemmScatter {
    const s = p.scatter;
    if (this.variant.order !== "sharded" || !s)
      throw new InvalidArgumentError("gemm: order sharded needs scatter");
    checkRanks("scatter", s);
    if (!Number.isInteger(s.shardRows) || s.shardRows < 1 || s.shardRows * s.world !== p.m)
      throw new InvalidArgumentError(
        `gemm: m = ${p.m} must be world x shardRows = ${s.world} x ${s.shardRows}`,
      );
    if ((p.ldd ?? p.n) !== p.n)
      throw new InvalidArgumentError("gemm: scatter writes a dense [shardRows, n] output");
    return s;
  }

  /** GEMM + all-reduce's exchange: world slots of the whole [m, n] output. */
  #exchange(p: GemmLaunch): GemmScatter {
    const s = p.scatter;
    if (!s || s.shardRows !== p.m)
      throw new InvalidArgumentError("gemm: epilogue all-reduce needs scatter with shardRows = m");
    checkRanks("all-reduce", s);
    return s;
  }

  #checkSplits(splits: number, kblocks: number, tiles: number, n: number): void {
    const sms = this.device.props.smCount;
    if (!this.variant.splitK)
      throw new InvalidArgumentError(`gemm: splits = ${splits} needs a variant with splitK compiled in`);
    // The fix-up sums slices by four columns at a time.
    if (n % 4 !== 0) throw new InvalidArgumentError(`gemm: split-K needs n = ${n} a multiple of 4`);
    if (!Number.isInteger(Math.log2(splits)) || splits > kblocks || tiles * splits > sms)
      throw new InvalidArgumentError(
        `gemm: splits = ${splits} must be a power of two at most the ${kblocks} k-blocks, with tiles x splits = ${tiles} x ${splits} at most the ${sms} SMs (one wave)`,
      );
  }

  /** Points the launch at its stream's split scratch. */
  #writeSplitScratch(stream: Stream): void {
    const sc = SplitScratch.of(this.device).on(stream);
    this.#view.setBigUint64(L.splitWs, sc.ws, true);
    this.#view.setBigUint64(L.splitCounters, sc.counters, true);
  }

  #writeSecondA(
    s: GemmSecondA,
    dataType: "BFLOAT16" | "UINT8",
    es: number,
    k: number,
    box: number,
    m: number,
  ): void {
    if (
      !Number.isInteger(s.row0) ||
      !Number.isInteger(s.rows) ||
      s.row0 < 0 ||
      s.rows < 1 ||
      s.row0 + s.rows > m
    )
      throw new InvalidArgumentError(`gemm: secondA rows [${s.row0}, +${s.rows}) are not a row range`);
    const map = tensorMap2d({
      address: s.a2,
      dataType,
      elementBytes: es,
      rows: s.rows,
      cols: k,
      rowStrideBytes: k * es,
      boxCols: box,
      boxRows: GEMM_TILE_M,
      swizzle: "B128",
    });
    this.#fusion.set(map, F.a2);
    this.#fusionView.setUint32(F.a2Row0, s.row0, true);
    this.#fusionView.setUint32(F.a2Rows, s.rows, true);
  }

  #writeScatter(s: GemmScatter, n: number, tilesN: number): void {
    const f = this.#fusionView;
    const slotBytes = BigInt(s.shardRows * n * 2);
    for (let r = 0; r < s.world; r++) {
      f.setBigUint64(F.recv + 8 * r, s.recv[r]!, true);
      f.setBigUint64(F.flags + 8 * r, s.flags[r]!, true);
      const map = tensorMap2d({
        address: s.recv[r]! + BigInt(s.rank) * slotBytes,
        dataType: "BFLOAT16",
        elementBytes: 2,
        rows: s.shardRows,
        cols: n,
        rowStrideBytes: n * 2,
        boxCols: GEMM_STORE_BOX,
        boxRows: GEMM_STORE_BOX,
        swizzle: "B128",
      });
      this.#fusion.set(map, F.toPeer + MAP_BYTES * r);
    }
    f.setUint32(F.shardRows, s.shardRows, true);
    f.setUint32(F.world, s.world, true);
    f.setUint32(F.rank, s.rank, true);
    f.setUint32(F.tilesPerShard, gemmTiles(s.shardRows, n).tilesM * tilesN, true);
    f.setBigUint64(F.epoch, s.epoch, true);
  }

  #tileCount(p: GemmLaunch, tiles: number): number {
    if (this.variant.order !== "list") return tiles;
    const count = p.tileCount ?? -1;
    if (!p.tileList || !Number.isInteger(count) || count < 0) {
      throw new InvalidArgumentError("gemm: order list needs tileList and tileCount");
    }
    return count;
  }

  #writeReady(p: GemmLaunch): void {
    const rows = p.flagRows ?? 0;
    const value = p.readyValue ?? -1;
    if (!p.readyFlags || !Number.isInteger(rows) || rows < 1 || value >>> 0 !== value) {
      throw new InvalidArgumentError(
        "gemm: ready row-flags needs readyFlags, flagRows >= 1 and a u32 readyValue",
      );
    }
    const a = this.#view;
    a.setBigUint64(L.readyFlags, p.readyFlags, true);
    a.setUint32(L.flagRows, rows, true);
    a.setUint32(L.readyValue, value, true);
  }
}

/** Offsets of the fields both GEMMs' argument structs (GemmArgs, DecodeArgs) share. */
export interface GemmArgsCommon {
  readonly d: number;
  readonly ldd: number;
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly scaleA: number;
  readonly scaleB: number;
  readonly envTimeoutNs: number;
  readonly envAbortFlag: number;
  readonly envRecord: number;
  readonly envRank: number;
}

/** m, n, k whole and in [1, 2^31), and rows of A and B ([n, k]) whole 16-byte units (TMA's strides). */
export function checkGemmShape(p: GemmOperandPtrs, elem: GemmElem): void {
  for (const [what, x] of [
    ["m", p.m],
    ["n", p.n],
    ["k", p.k],
  ] as const)
    if (!Number.isInteger(x) || x < 1 || x > 2 ** 31 - 1)
      throw new InvalidArgumentError(`gemm: ${what} = ${x} must be an integer in [1, 2^31)`);
  if ((p.k * dtypeInfo(elem).bytes) % 16 !== 0)
    throw new InvalidArgumentError(`gemm: k = ${p.k} ${elem} rows must be a multiple of 16 bytes`);
}

/** Writes the output, shape and fp8 scales of `p` into an argument struct laid out as `at`. */
export function writeOperands(view: DataView, at: GemmArgsCommon, p: GemmOperandPtrs, ldd: number): void {
  view.setBigUint64(at.d, p.d, true);
  view.setBigUint64(at.ldd, BigInt(ldd), true);
  view.setUint32(at.m, p.m, true);
  view.setUint32(at.n, p.n, true);
  view.setUint32(at.k, p.k, true);
  view.setBigUint64(at.scaleA, p.scaleA ?? 0n, true);
  view.setBigUint64(at.scaleB, p.scaleB ?? 0n, true);
}
