// symmkit's Hopper GEMM with its fusion hooks: D[m, n] = A[m, k] * B[n, k]^T. This is the layer the fused
// kernels drive directly (tile order, ready flags, where the tile goes); matmul() is the plain front end.
import { InvalidArgumentError, UnsupportedError } from "../errors.js";
import type { Ptr } from "../cuda/native.js";
import type { Device } from "../runtime/device.js";
import { dtypeInfo } from "../runtime/dtype.js";
import type { Stream } from "../runtime/stream.js";
import { encodeTensorMap2d } from "../runtime/tensor-map.js";
import { sharedModule } from "../runtime/module.js";
import type { Kernel } from "../runtime/kernel.js";
import { SyncWatch } from "../dist/sync-watch.js";
import {
  GEMM_ARGS_LAYOUT as L,
  GEMM_PARAMS,
  GEMM_SHARED_BYTES,
  GEMM_STORE_BOX,
  GEMM_THREADS,
  GEMM_TILE_M,
  GEMM_TILE_N,
  gemmExpr,
  gemmProgram,
  type GemmVariant,
} from "./gemm-programs.js";

const TILE_K_BYTES = 128;
const GROUP_M = 8;
const UNUSED_MAP = new Uint8Array(128);

export interface GemmLaunch {
  /** Row-major [m, k]. */
  readonly a: Ptr;
  /** Row-major [n, k], or [k, n] for a variant with layoutB "kn". */
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
  /** order "list": device array of u32 tile ids (tm * tilesN + tn), and how many to compute. */
  readonly tileList?: Ptr;
  readonly tileCount?: number;
  /** ready "row-flags": device array of u32 flags, one per flagRows rows of A; ready once >= readyValue. */
  readonly readyFlags?: Ptr;
  readonly flagRows?: number;
  readonly readyValue?: number;
  /** epilogue "signal": device array of u32, one per tile, incremented once the tile is stored. */
  readonly tileSignals?: Ptr;
  readonly stream?: Stream;
  /** CTAs of the persistent grid (default: one per SM, at most one per tile). */
  readonly ctas?: number;
}

/** Tiles of the output: tm in [0, tilesM), tn in [0, tilesN); tile id = tm * tilesN + tn. */
export function gemmTiles(m: number, n: number): { tilesM: number; tilesN: number } {
  return { tilesM: Math.ceil(m / GEMM_TILE_M), tilesN: Math.ceil(n / GEMM_TILE_N) };
}

/** One GEMM variant, loaded on one device. Not thread-safe: one launch at a time (they may overlap on the GPU). */
export class HopperGemm {
  readonly device: Device;
  readonly variant: GemmVariant;
  readonly kernel: Kernel<typeof GEMM_PARAMS>;
  readonly #args = new Uint8Array(L.bytes);
  readonly #view = new DataView(this.#args.buffer);
  #watch: SyncWatch | undefined;

  constructor(device: Device, variant: GemmVariant, watch?: SyncWatch) {
    if (!device.props.arch.startsWith("sm_90")) {
      throw new UnsupportedError(
        `the symmkit GEMM needs a Hopper GPU (sm_90a); ${device.props.name} is ${device.props.arch}: use impl "cublaslt"`,
      );
    }
    this.device = device;
    this.variant = variant;
    this.kernel = sharedModule(gemmProgram(variant), device).kernel(gemmExpr(variant), GEMM_PARAMS);
    this.#watch = watch;
  }

  launch(p: GemmLaunch): void {
    const v = this.variant;
    const es = dtypeInfo(v.elem).bytes;
    const { m, n, k } = p;
    for (const [what, x] of [
      ["m", m],
      ["n", n],
      ["k", k],
    ] as const) {
      if (!Number.isInteger(x) || x < 1 || x > 2 ** 31 - 1)
        throw new InvalidArgumentError(`gemm: ${what} = ${x} must be an integer in [1, 2^31)`);
    }
    if ((k * es) % 16 !== 0)
      throw new InvalidArgumentError(`gemm: k = ${k} ${v.elem} rows must be a multiple of 16 bytes`);
    if (v.layoutB === "kn" && (n * es) % 16 !== 0)
      throw new InvalidArgumentError(`gemm: n = ${n}: rows of B [k, n] must be a multiple of 16 bytes`);
    const ldd = p.ldd ?? n;
    const outBytes = v.epilogue === "accumulate-f32" ? 4 : 2;
    // TMA stores need 16-byte rows and base; the pair stores of the other epilogues need 2 elements.
    const tma = v.epilogue === "store";
    const unit = tma ? 16 / outBytes : 2;
    if (!Number.isInteger(ldd) || ldd < n || ldd % unit !== 0 || n % 2 !== 0) {
      throw new InvalidArgumentError(
        `gemm: n = ${n} must be even and ldd = ${ldd} >= n a multiple of ${unit} for epilogue ${v.epilogue}`,
      );
    }
    if (p.d % BigInt(tma ? 16 : 2 * outBytes) !== 0n)
      throw new InvalidArgumentError(`gemm: d must be ${tma ? 16 : 2 * outBytes}-byte aligned`);
    const { tilesM, tilesN } = gemmTiles(m, n);
    const tileCount = this.#tileCount(p, tilesM * tilesN);

    const rowBytes = k * es;
    const box = TILE_K_BYTES / es;
    const dataType = v.elem === "bf16" ? "BFLOAT16" : "UINT8";
    const mapA = encodeTensorMap2d({
      address: p.a,
      dataType,
      elementBytes: es,
      rows: m,
      cols: k,
      rowStrideBytes: rowBytes,
      boxCols: box,
      boxRows: GEMM_TILE_M,
      swizzle: "B128",
    });
    // B [k, n] is loaded N-major in boxes of 64 n (128 bytes) by one k-block of rows.
    const mapB = encodeTensorMap2d(
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
      ? encodeTensorMap2d({
          address: p.d,
          dataType: "BFLOAT16",
          elementBytes: 2,
          rows: m,
          cols: n,
          rowStrideBytes: ldd * 2,
          boxCols: GEMM_STORE_BOX,
          boxRows: GEMM_STORE_BOX,
          swizzle: "B128",
        })
      : UNUSED_MAP;

    const a = this.#view;
    this.#args.fill(0);
    a.setBigUint64(L.d, p.d, true);
    a.setBigUint64(L.ldd, BigInt(ldd), true);
    a.setUint32(L.m, m, true);
    a.setUint32(L.n, n, true);
    a.setUint32(L.k, k, true);
    a.setUint32(L.tilesM, tilesM, true);
    a.setUint32(L.tilesN, tilesN, true);
    a.setUint32(L.groupM, GROUP_M, true);
    a.setBigUint64(L.tileList, p.tileList ?? 0n, true);
    a.setUint32(L.tileCount, tileCount, true);
    a.setBigUint64(L.scaleA, p.scaleA ?? 0n, true);
    a.setBigUint64(L.scaleB, p.scaleB ?? 0n, true);
    if (v.ready === "row-flags") this.#writeReady(p);
    if (v.epilogue === "signal") {
      if (!p.tileSignals) throw new InvalidArgumentError("gemm: epilogue signal needs tileSignals");
      a.setBigUint64(L.tileSignals, p.tileSignals, true);
    }
    const ctas = Math.min(p.ctas ?? this.device.props.smCount, tileCount);
    if (ctas < 1) return;
    this.kernel.launch(
      {
        grid: ctas,
        block: GEMM_THREADS,
        sharedBytes: GEMM_SHARED_BYTES,
        ...(p.stream ? { stream: p.stream } : {}),
      },
      mapA,
      mapB,
      mapD,
      this.#args,
    );
  }

  /** The watch whose record explains a ready-flag timeout (created on first use if none was given). */
  get watch(): SyncWatch {
    this.#watch ??= SyncWatch.create(this.device);
    return this.#watch;
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
    const w = this.watch;
    a.setBigUint64(L.envTimeoutNs, w.timeoutNs, true);
    a.setBigUint64(L.envAbortFlag, w.abortFlagPtr, true);
    a.setBigUint64(L.envRecord, w.recordPtr, true);
    a.setUint32(L.envRank, 0, true);
  }
}
