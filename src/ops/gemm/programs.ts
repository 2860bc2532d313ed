// The Hopper GEMM kernels symmkit ships (device/include/symmkit/gemm/hopper_gemm.cuh): one program per
// (element type, layout of B, tile order, ready policy, epilogue), so a process compiles only the variants it uses;
// CI compiles all of them (src/catalog.ts).
import type { ProgramSpec } from "../../runtime/module.js";

export const GEMM_ELEMS = ["bf16", "fp8e4m3"] as const;
export type GemmElem = (typeof GEMM_ELEMS)[number];
/** grouped: groups of tile-rows for L2 reuse (optionally rotated); list: the caller's tile ids, in the
 * caller's order; sharded: GEMM + reduce-scatter, per destination rank (with a scatter-reduce epilogue). */
export const GEMM_ORDERS = ["grouped", "list", "sharded"] as const;
export type GemmOrder = (typeof GEMM_ORDERS)[number];
/** none: A is there; row-flags: wait per tile for flags covering its rows of A. */
export const GEMM_READY = ["none", "row-flags"] as const;
export type GemmReady = (typeof GEMM_READY)[number];
/** store: bf16 into d by TMA stores; signal: bf16 into d, then +1 on the tile's signal; accumulate-f32:
 * atomic f32 adds; scatter-reduce: GEMM + reduce-scatter, every tile kept as a flagged bf16 partial and
 * each rank's shard reduced by its owner in rank order (hopper_gemm.cuh, ScatterReduce); all-reduce: GEMM +
 * all-reduce, every tile's bf16 partial pushed to every rank and summed there in rank order
 * (AllReduceTiles). */
export const GEMM_EPILOGUES = ["store", "signal", "accumulate-f32", "scatter-reduce", "all-reduce"] as const;
export type GemmEpilogue = (typeof GEMM_EPILOGUES)[number];

/** How B is stored: "nk" row-major [n, k] (K-major), "kn" row-major [k, n] (bf16 only). */
export const GEMM_B_LAYOUTS = ["nk", "kn"] as const;
export type GemmBLayout = (typeof GEMM_B_LAYOUTS)[number];

export interface GemmVariant {
  readonly elem: GemmElem;
  readonly layoutB: GemmBLayout;
  readonly order: GemmOrder;
  readonly ready: GemmReady;
  readonly epilogue: GemmEpilogue;
  /** Split-K compiled in (hopper_gemm.cuh kSplitK): launches may split K. Default false: the kernel
   * keeps every register for the accumulators. */
  readonly splitK?: boolean;
  /** With splitK, for m <= 64 (hopper_gemm.cuh Ring<true>): A's boxes 64 rows high and a fifth stage. */
  readonly narrow?: boolean;
}

const ELEM_TYPES: Record<GemmElem, string> = { bf16: "__nv_bfloat16", fp8e4m3: "symmkit::fp8e4m3" };
const ORDER_TYPES: Record<GemmOrder, string> = {
  grouped: "symmkit::gemm::GroupedOrder",
  list: "symmkit::gemm::ListOrder",
  sharded: "symmkit::gemm::ShardedOrder",
};
const READY_TYPES: Record<GemmReady, string> = {
  none: "symmkit::gemm::NoWait",
  "row-flags": "symmkit::gemm::RowFlagsReady",
};
const EPILOGUE_TYPES: Record<GemmEpilogue, string> = {
  store: "symmkit::gemm::StoreBf16",
  signal: "symmkit::gemm::SignalingStore",
  "accumulate-f32": "symmkit::gemm::AccumulateF32",
  "scatter-reduce": "symmkit::gemm::ScatterReduce",
  "all-reduce": "symmkit::gemm::AllReduceTiles",
};

export function gemmExpr(v: GemmVariant): string {
  const kMajor = v.layoutB === "nk" ? "true" : "false";
  const split = v.narrow ? ", true, true" : v.splitK ? ", true" : "";
  return `symmkit::gemm::hopper_gemm<${ELEM_TYPES[v.elem]}, ${ORDER_TYPES[v.order]}, ${READY_TYPES[v.ready]}, ${EPILOGUE_TYPES[v.epilogue]}, ${kMajor}${split}>`;
}

export function gemmProgram(v: GemmVariant): ProgramSpec {
  return {
    name: `symmkit/gemm/hopper/${v.elem}-${v.layoutB}/${v.order}-${v.ready}-${v.epilogue}${v.splitK ? "-splitk" : ""}${v.narrow ? "-narrow" : ""}`,
    source: '#include "symmkit/gemm/hopper_gemm.cuh"\n',
    nameExpressions: [gemmExpr(v)],
  };
}

/** The epilogues that exchange tiles between ranks, each with one order and no ready flags (all-reduce
 * with split-K compiled in: its problems are the small ones). */
const EXCHANGE_EPILOGUES: Partial<Record<GemmEpilogue, GemmOrder>> = {
  "scatter-reduce": "sharded",
  "all-reduce": "grouped",
};

/** wgmma reads fp8 operands K-major only, so fp8 ships with B as [n, k] alone. The hook variants take
 * every order, ready policy and plain epilogue; the exchanging epilogues come with their own order (the
 * sharded order only with scatter-reduce) and no ready flags; split-K comes with the plain store and
 * with all-reduce. */
export const GEMM_VARIANTS: readonly GemmVariant[] = GEMM_ELEMS.flatMap((elem) =>
  GEMM_B_LAYOUTS.filter((l) => elem === "bf16" || l === "nk").flatMap((layoutB): GemmVariant[] => [
    ...(["grouped", "list"] as const).flatMap((order) =>
      GEMM_READY.flatMap((ready) =>
        GEMM_EPILOGUES.filter((e) => EXCHANGE_EPILOGUES[e] === undefined).map((epilogue) => ({
          elem,
          layoutB,
          order,
          ready,
          epilogue,
        })),
      ),
    ),
    ...Object.entries(EXCHANGE_EPILOGUES).map(([epilogue, order]) => ({
      elem,
      layoutB,
      order,
      ready: "none" as const,
      epilogue: epilogue as GemmEpilogue,
      ...(epilogue === "all-reduce" ? { splitK: true } : {}),
    })),
    { elem, layoutB, order: "grouped", ready: "none", epilogue: "all-reduce", splitK: true, narrow: true },
    // matmul()'s split-K GEMM, for problems of few tiles, and its narrow ring for m <= 64.
    { elem, layoutB, order: "grouped", ready: "none", epilogue: "store", splitK: true },
    { elem, layoutB, order: "grouped", ready: "none", epilogue: "store", splitK: true, narrow: true },
  ]),
);

export const GEMM_PROGRAMS: readonly ProgramSpec[] = GEMM_VARIANTS.map(gemmProgram);

/** Tile shape, threads and dynamic shared memory of hopper_gemm (kTileM, kTileN, kThreads, kSharedBytes). */
export const GEMM_TILE_M = 128;
export const GEMM_TILE_N = 256;
export const GEMM_THREADS = 384;
export const GEMM_SHARED_BYTES = 4 * (128 + 256) * 128 + 4 * 64 * 64 * 2 + 2 * 4 * 8 + 1024;
/** The narrow ring's (Ring<true>): five stages of 64 rows of A and 256 of B, one consumer's buffers. */
export const GEMM_SHARED_BYTES_NARROW = 5 * (64 + 256) * 128 + 2 * 64 * 64 * 2 + 2 * 5 * 8 + 1024;
/** Rows of A a narrow ring's boxes hold: the most rows a narrow launch takes. */
export const GEMM_NARROW_ROWS = 64;
/** The TMA-store epilogue's sub-tile: 64 rows by 64 columns. */
export const GEMM_STORE_BOX = 64;

/** hopper_gemm's parameters: CUtensorMaps of A, B and D by value, GemmArgs (152 bytes), FusionParams. */
export const GEMM_PARAMS = [
  { bytes: 128, align: 64 },
  { bytes: 128, align: 64 },
  { bytes: 128, align: 64 },
  { bytes: 152, align: 8 },
  { bytes: 1344, align: 64 },
] as const;

/** Byte offsets of GemmArgs' fields (hopper_gemm.cuh asserts them; test/gemm-layout.test.ts compares). */
export const GEMM_ARGS_LAYOUT = {
  d: 0,
  ldd: 8,
  m: 16,
  n: 20,
  k: 24,
  tilesM: 28,
  tilesN: 32,
  groupM: 36,
  tileList: 40,
  tileCount: 48,
  flagRows: 52,
  readyFlags: 56,
  readyValue: 64,
  tmRotate: 68,
  tileSignals: 72,
  scaleA: 80,
  scaleB: 88,
  envTimeoutNs: 96,
  envAbortFlag: 104,
  envRecord: 112,
  envRank: 120,
  splitWs: 128,
  splitCounters: 136,
  splitLog2: 144,
  bytes: 152,
} as const;

/** Byte offsets of FusionParams' fields (hopper_gemm.cuh asserts them): tensor maps of 128 bytes, then
 * per-rank pointer arrays of MAX_WORLD entries. */
export const FUSION_PARAMS_LAYOUT = {
  a2: 0,
  toPeer: 128,
  recv: 1152,
  flags: 1216,
  a2Row0: 1280,
  a2Rows: 1284,
  shardRows: 1288,
  world: 1292,
  rank: 1296,
  tilesPerShard: 1300,
  epoch: 1304,
  bytes: 1344,
} as const;
