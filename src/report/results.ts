// The kinds of result the report charts: each JSON shape src/bench/*.ts writes (alone, or inside
// `symmkit tune --json`), the tune tables, and the CPU-side suites' records under bench/results/cpu/.
// Checked field by field, since a results folder also holds files of other tools, older formats and
// hand edits: what is not recognised comes back as the reason, for the report to list.

/** Where a GPU benchmark ran (src/bench/report.ts BenchEnvironment). */
export interface Environment {
  readonly device: string;
  readonly deviceCount: number;
  readonly worldSize: number;
  readonly gitRevision: string;
  readonly date: string;
}

/** Where a CPU-side suite ran (src/bench/report.ts hostEnvironment): the host and the world sizes it ran. */
export interface CpuEnvironment {
  /** "AMD EPYC, 2 CPUs". */
  readonly device: string;
  readonly node: string;
  /** Every world size the suite ran; none where the record does not say. */
  readonly worldSizes: readonly number[];
  readonly gitRevision: string;
  readonly date: string;
}

export type AnyEnvironment = Environment | CpuEnvironment;

export interface Source {
  /** As shown in the report: relative to the working directory when inside it. */
  readonly label: string;
  /** For the names of the files made from it: the path under the inputs' common folder. */
  readonly slug: string;
}

export const COLLECTIVES = ["all-reduce", "all-gather", "reduce-scatter"] as const;
export type CollectiveKind = (typeof COLLECTIVES)[number];

/** The sections size sweeps go to. */
export const SWEEP_FAMILIES = [...COLLECTIVES, "all-to-all", "send-recv", "hosts"] as const;
export type SweepFamily = (typeof SWEEP_FAMILIES)[number];

type Us = Readonly<Record<string, number>>;

/**
 * Latency against size, several implementations measured in one run beside a baseline: the collectives
 * (src/bench/collectives.ts, and `symmkit tune`'s), all-to-all, send/recv one way or both, and a
 * collective across hosts.
 */
export interface SweepResult {
  readonly kind: "sweep";
  readonly source: Source;
  readonly environment: Environment;
  readonly family: SweepFamily;
  /** What is measured, for titles: "all-reduce", "send/recv, one way". */
  readonly op: string;
  /** The page's group within its section: world size, or hosts and ranks per host. */
  readonly group: { readonly title: string; readonly order: number };
  readonly dtype: string;
  /** What a row's bytes are. */
  readonly sizeTitle: string;
  /** GB/s = bytes / µs / 1000 x factor: its name, its axis's title, and `key`, naming the chart's file. */
  readonly bandwidth: {
    readonly name: string;
    readonly title: string;
    readonly factor: number;
    readonly key: string;
  };
  /** The implementation symmkit's best is compared with, and its name in words. */
  readonly baseline: { readonly name: string; readonly label: string };
  /** Every implementation with a time, the baseline among them, in the file's order. */
  readonly implementations: readonly string[];
  readonly rows: readonly { readonly bytes: number; readonly us: Us }[];
}

export interface GemmResult {
  readonly kind: "gemm";
  readonly source: Source;
  readonly environment: Environment;
  readonly rows: readonly {
    readonly m: number;
    readonly n: number;
    readonly k: number;
    readonly elem: string;
    readonly layoutB: string;
    /** "cold" where the timed GEMMs cycled through copies of B that L2 cannot hold; "" in older files (hot). */
    readonly weights: string;
    readonly tflops: { readonly symmkit: number; readonly cublaslt: number };
    /** The plain Hopper kernel unsplit, where matmul() runs another plan. */
    readonly unsplitUs: number | undefined;
  }[];
}

export const FUSED_BENCHES = ["ag-gemm", "gemm-rs", "gemm-ar"] as const;
export type FusedBench = (typeof FUSED_BENCHES)[number];

export interface FusedResult {
  readonly kind: "fused";
  readonly source: Source;
  readonly environment: Environment;
  readonly bench: FusedBench;
  readonly dtype: string;
  readonly implementations: readonly string[];
  readonly rows: readonly {
    readonly m: number;
    readonly n: number;
    readonly k: number;
    readonly rankFlops: number;
    readonly us: Us;
  }[];
}

/** allReduceRmsNorm against the plain all-reduces and NCCL + norm (src/bench/ar-norm.ts). */
export interface ArNormResult {
  readonly kind: "ar-norm";
  readonly source: Source;
  readonly environment: Environment;
  readonly dtype: string;
  readonly rows: readonly {
    readonly tokens: number;
    readonly hidden: number;
    readonly bytes: number;
    readonly us: Us;
  }[];
}

/** MoE dispatch and combine (src/bench/moe.ts); the graph-timed variants are absent in older files. */
export interface MoeResult {
  readonly kind: "moe";
  readonly source: Source;
  readonly environment: Environment;
  readonly rows: readonly {
    readonly tokens: number;
    readonly hidden: number;
    readonly topk: number;
    readonly experts: number;
    readonly rows: number;
    readonly dispatchUs: number;
    readonly dispatchDeviceUs: number | undefined;
    readonly dispatchEagerDeviceUs: number | undefined;
    readonly combineUs: number;
    readonly combineInPlaceUs: number | undefined;
    readonly combineByRankUs: number | undefined;
    readonly dispatchFp8Us: number | undefined;
  }[];
}

export interface EagerResult {
  readonly kind: "eager";
  readonly source: Source;
  readonly environment: Environment;
  readonly bytes: number;
  /** Host microseconds of one bare kernel launch, measured in the same run. */
  readonly launchUs: number;
  readonly rows: readonly {
    readonly collective: string;
    readonly algorithm: string;
    readonly hostUs: number;
    readonly wallUs: number;
  }[];
}

/** One kernel launch's cost (src/bench/launch.ts). */
export interface LaunchResult {
  readonly kind: "launch";
  readonly source: Source;
  readonly environment: Environment;
  /** Host µs per launch, by how the launch was made. */
  readonly hostUs: Us;
  readonly gpuUsInGraph: number;
}

export interface BarrierResult {
  readonly kind: "barrier";
  readonly source: Source;
  readonly environment: Environment;
  readonly rows: readonly { readonly measure: string; readonly blocks: number; readonly usPerOp: number }[];
}

export interface LinkResult {
  readonly kind: "link";
  readonly source: Source;
  readonly environment: Environment;
  readonly bytesPerPeer: number;
  readonly rows: readonly {
    readonly engine: string;
    readonly direction: string;
    readonly blocks: number;
    readonly threads: number;
    readonly unroll: number;
    readonly gbPerS: number;
  }[];
}

/** The CPU fault suite's times per fault (test/cpu-faults.test.ts). */
export interface FaultsResult {
  readonly kind: "faults";
  readonly source: Source;
  readonly environment: CpuEnvironment;
  readonly syncTimeoutMs: number | undefined;
  readonly rows: readonly {
    readonly fault: string;
    readonly measure: string;
    readonly n: number;
    readonly min: number;
    readonly median: number;
    readonly max: number;
  }[];
}

type Resources = Readonly<Record<"rssMiB" | "heapMiB" | "arrayBuffersMiB", number>>;

/** The CPU soak (test/cpu-soak.test.ts): per rank, memory over the calls and the descriptors held. */
export interface SoakResult {
  readonly kind: "soak";
  readonly source: Source;
  readonly environment: CpuEnvironment;
  readonly calls: number;
  readonly ranks: readonly {
    readonly rank: number;
    readonly usPerCall: number;
    readonly fds: readonly [number, number];
    readonly samples: readonly (Resources & { readonly calls: number })[];
  }[];
}

/** The store fuzz (src/bench/store-fuzz.ts): each run's rounds under the fuzz and alone. */
export interface StoreFuzzResult {
  readonly kind: "store-fuzz";
  readonly source: Source;
  readonly environment: CpuEnvironment;
  readonly runs: readonly {
    readonly seed: string;
    readonly framesSent: number;
    readonly fuzzedMsPerRound: number;
    readonly aloneMsPerRound: number;
  }[];
}

/** PyTorch's figures on symmkit's benchmarks' default shapes (bench/torch-baselines.py), by section. */
export interface PytorchResult {
  readonly kind: "pytorch";
  readonly source: Source;
  readonly environment: Environment;
  readonly rows: readonly {
    /** Which of symmkit's benchmarks the row stands beside: "ar-norm", "gemm-rs", "send-recv", ... */
    readonly section: string;
    readonly impl: string;
    /** The problem in words: "8192×8192×8192", "128" (tokens), "1 MiB". */
    readonly problem: string;
    /** What else tells the row's series apart: "hidden 8192" (all-reduce + RMSNorm); "" for nothing. */
    readonly series: string;
    readonly us: number;
    /** "graph" (CUDA-graph replays) or "eager". */
    readonly mode: string;
  }[];
}

/** A result with too few numbers to chart (a tune table), shown as a table. */
export interface TableResult {
  readonly kind: "table";
  readonly source: Source;
  readonly title: string;
  readonly environment: Environment;
  readonly header: readonly string[];
  readonly rows: readonly (readonly string[])[];
}

export type Recognised =
  | SweepResult
  | GemmResult
  | FusedResult
  | ArNormResult
  | MoeResult
  | EagerResult
  | LaunchResult
  | BarrierResult
  | LinkResult
  | FaultsResult
  | SoakResult
  | StoreFuzzResult
  | PytorchResult
  | TableResult;

type Json = Record<string, unknown>;

const isObject = (x: unknown): x is Json => typeof x === "object" && x !== null && !Array.isArray(x);
const isNumber = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x);
const isString = (x: unknown): x is string => typeof x === "string";
const isTimes = (x: unknown): x is Record<string, number> =>
  isObject(x) && Object.keys(x).length > 0 && Object.values(x).every((v) => isNumber(v) && v > 0);
const optionalNumber = (x: unknown): number | undefined => (isNumber(x) ? x : undefined);

/** Every element of `rows` passes `check`, and there is at least one. */
function rowsOf<T>(rows: unknown, check: (row: Json) => boolean): T[] | undefined {
  return Array.isArray(rows) && rows.length > 0 && rows.every((r) => isObject(r) && check(r))
    ? (rows as T[])
    : undefined;
}

function environmentOf(x: unknown): Environment | undefined {
  if (!isObject(x)) return undefined;
  const { device, deviceCount, worldSize, gitRevision, date } = x;
  if (!isString(device) || !isNumber(worldSize) || !isString(gitRevision)) return undefined;
  return {
    device,
    deviceCount: isNumber(deviceCount) ? deviceCount : worldSize,
    worldSize,
    gitRevision,
    date: isString(date) ? date : "",
  };
}

/** "262144" -> "256 KiB". */
export function formatBytes(b: number): string {
  for (const [unit, size] of [
    ["GiB", 2 ** 30],
    ["MiB", 2 ** 20],
    ["KiB", 2 ** 10],
  ] as const)
    if (b >= size) return `${+(b / size).toFixed(2)} ${unit}`;
  return `${b} B`;
}

/** Every implementation with a time, in the order the file lists them, then in the rows' order. */
const namesOf = (listed: unknown, rows: readonly { us: Us }[]): string[] => [
  ...new Set([
    ...(Array.isArray(listed) ? listed.filter(isString) : []).filter((n) => rows.some((r) => n in r.us)),
    ...rows.flatMap((r) => Object.keys(r.us)),
  ]),
];

const worldGroup = (e: Environment) => ({ title: `World size ${e.worldSize}`, order: e.worldSize });

/** nccl-tests' bus bandwidth factor: all-reduce 2(W-1)/W, all-gather and reduce-scatter (W-1)/W. */
export function busFactor(collective: string, world: number): number {
  return ((collective === "all-reduce" ? 2 : 1) * (world - 1)) / world;
}

/** What the collective benchmarks count as a row's bytes (src/bench/collectives.ts): nccl-tests' size. */
const NCCL_TESTS_SIZE: Record<CollectiveKind, string> = {
  "all-reduce": "size per rank (bytes)",
  "all-gather": "output size per rank (bytes)",
  "reduce-scatter": "input size per rank (bytes)",
};

const bytesAndTimes = (r: Json): boolean => isNumber(r.bytes) && r.bytes > 0 && isTimes(r.us);

function collective(x: Json, environment: Environment, source: Source): SweepResult | string {
  const name = x.collective as CollectiveKind;
  const rows = rowsOf<{ bytes: number; us: Us; dtype?: unknown }>(x.rows, bytesAndTimes);
  if (!rows) return `${name} result without rows of bytes and times`;
  const dtype = rows[0]!.dtype;
  return {
    kind: "sweep",
    source,
    environment,
    family: name,
    op: name,
    group: worldGroup(environment),
    dtype: isString(dtype) ? dtype : "",
    sizeTitle: NCCL_TESTS_SIZE[name],
    bandwidth: {
      name: "bus bandwidth",
      title: "bus bandwidth (GB/s)",
      factor: busFactor(name, environment.worldSize),
      key: "busbw",
    },
    baseline: { name: "nccl", label: "NCCL" },
    implementations: namesOf(x.implementations, rows),
    rows: rows.map((r) => ({ bytes: r.bytes, us: r.us })),
  };
}

function allToAll(x: Json, environment: Environment, source: Source): SweepResult | string {
  const rows = rowsOf<{ bytes: number; us: Us }>(x.rows, bytesAndTimes);
  if (!rows) return "all-to-all result without rows of bytes and times";
  const w = environment.worldSize;
  return {
    kind: "sweep",
    source,
    environment,
    family: "all-to-all",
    op: "all-to-all",
    group: worldGroup(environment),
    dtype: "u8",
    sizeTitle: "input size per rank (bytes)",
    // What crosses the links per rank: every chunk but its own.
    bandwidth: {
      name: "bandwidth",
      title: "GB/s per rank over the links",
      factor: (w - 1) / w,
      key: "bandwidth",
    },
    baseline: { name: "nccl_raw", label: "NCCL grouped send/recv" },
    implementations: namesOf([], rows),
    rows,
  };
}

/** send-recv's `uni_<algorithm>` and `bi_<algorithm>` times as two sweeps. */
function sendRecv(x: Json, environment: Environment, source: Source): (SweepResult | string)[] {
  const rows = rowsOf<{ bytes: number; us: Us }>(x.rows, bytesAndTimes);
  if (!rows) return ["send-recv result without rows of bytes and times"];
  const modes = [
    ["uni", "send/recv one way"],
    ["bi", "sendRecv both ways"],
  ] as const;
  return modes.flatMap(([mode, op]): SweepResult[] => {
    const part = rows.flatMap((r) => {
      const us = Object.fromEntries(
        Object.entries(r.us).flatMap(([k, v]) =>
          k.startsWith(`${mode}_`) ? [[k.slice(mode.length + 1), v]] : [],
        ),
      );
      return Object.keys(us).length ? [{ bytes: r.bytes, us }] : [];
    });
    if (part.length === 0) return [];
    return [
      {
        kind: "sweep",
        source: { label: source.label, slug: `${source.slug}-${mode}` },
        environment,
        family: "send-recv",
        op,
        group: worldGroup(environment),
        dtype: "u8",
        sizeTitle: "message size (bytes)",
        bandwidth: { name: "bandwidth", title: "GB/s, one direction", factor: 1, key: "bandwidth" },
        baseline: { name: "nccl", label: "NCCL" },
        implementations: namesOf([], part),
        rows: part,
      },
    ];
  });
}

/** `bench hosts`: per collective, hierarchical against flat NCCL; sizes made nccl-tests' (the benchmark
 * counts all-gather's input and reduce-scatter's output), so that bus bandwidth means the same. */
function hosts(x: Json, environment: Environment, source: Source): (SweepResult | string)[] {
  const rows = rowsOf<{ collective: CollectiveKind; bytes: number; us: Us }>(
    x.rows,
    (r) => COLLECTIVES.includes(r.collective as CollectiveKind) && bytesAndTimes(r),
  );
  if (!rows || !isNumber(x.hosts) || !isNumber(x.perHost))
    return ["hosts result without hosts, ranks per host or rows of bytes and times"];
  const w = environment.worldSize;
  const group = { title: `${x.hosts} hosts × ${x.perHost} ranks`, order: w * 1000 + x.hosts };
  return COLLECTIVES.flatMap((name): SweepResult[] => {
    const mine = rows.filter((r) => r.collective === name);
    if (mine.length === 0) return [];
    return [
      {
        kind: "sweep",
        source: { label: source.label, slug: `${source.slug}-${name}` },
        environment,
        family: "hosts",
        op: `${name} across ${x.hosts as number} hosts`,
        group,
        dtype: "bf16",
        sizeTitle: NCCL_TESTS_SIZE[name],
        bandwidth: {
          name: "bus bandwidth",
          title: "bus bandwidth (GB/s)",
          factor: busFactor(name, w),
          key: "busbw",
        },
        baseline: { name: "nccl", label: "flat NCCL" },
        implementations: namesOf([], mine),
        rows: mine.map((r) => ({ bytes: name === "all-reduce" ? r.bytes : r.bytes * w, us: r.us })),
      },
    ];
  });
}

function fused(x: Json, environment: Environment, source: Source): FusedResult | string {
  const rows = rowsOf<FusedResult["rows"][number]>(
    x.rows,
    (r) =>
      isNumber(r.m) &&
      isNumber(r.n) &&
      isNumber(r.k) &&
      isNumber(r.rankFlops) &&
      r.rankFlops > 0 &&
      isTimes(r.us),
  );
  if (!rows) return `${String(x.bench)} result without rows of shapes, flops and times`;
  return {
    kind: "fused",
    source,
    environment,
    bench: x.bench as FusedBench,
    dtype: isString(x.dtype) ? x.dtype : "",
    implementations: namesOf(x.implementations, rows),
    rows: rows.map(({ m, n, k, rankFlops, us }) => ({ m, n, k, rankFlops, us })),
  };
}

function arNorm(x: Json, environment: Environment, source: Source): ArNormResult | string {
  const rows = rowsOf<ArNormResult["rows"][number]>(
    x.rows,
    (r) => isNumber(r.tokens) && isNumber(r.hidden) && bytesAndTimes(r),
  );
  if (!rows) return "ar-norm result without rows of tokens, hidden size and times";
  return {
    kind: "ar-norm",
    source,
    environment,
    dtype: isString(x.dtype) ? x.dtype : "",
    rows: rows.map(({ tokens, hidden, bytes, us }) => ({ tokens, hidden, bytes, us })),
  };
}

function moe(x: Json, environment: Environment, source: Source): MoeResult | string {
  const rows = rowsOf<Json & Record<"tokens" | "hidden" | "topk" | "experts" | "rows", number>>(x.rows, (r) =>
    ["tokens", "hidden", "topk", "experts", "rows", "dispatchUs", "combineUs"].every((k) => isNumber(r[k])),
  );
  if (!rows) return "moe result without rows of shapes, dispatch and combine times";
  return {
    kind: "moe",
    source,
    environment,
    rows: rows.map((r) => ({
      tokens: r.tokens,
      hidden: r.hidden,
      topk: r.topk,
      experts: r.experts,
      rows: r.rows,
      dispatchUs: r.dispatchUs as number,
      dispatchDeviceUs: optionalNumber(r.dispatchDeviceUs),
      dispatchEagerDeviceUs: optionalNumber(r.dispatchEagerDeviceUs),
      combineUs: r.combineUs as number,
      combineInPlaceUs: optionalNumber(r.combineInPlaceUs),
      combineByRankUs: optionalNumber(r.combineByRankUs),
      dispatchFp8Us: optionalNumber(r.dispatchFp8Us),
    })),
  };
}

function gemm(x: Json, environment: Environment, source: Source): GemmResult | string {
  const rows = rowsOf<
    Json & Record<"m" | "n" | "k", number> & { tflops: GemmResult["rows"][number]["tflops"] }
  >(
    x.rows,
    (r) =>
      isNumber(r.m) &&
      isNumber(r.n) &&
      isNumber(r.k) &&
      isObject(r.tflops) &&
      isNumber(r.tflops.symmkit) &&
      isNumber(r.tflops.cublaslt),
  );
  if (!rows) return "GEMM result without rows of TFLOP/s";
  return {
    kind: "gemm",
    source,
    environment,
    rows: rows.map((r) => ({
      m: r.m,
      n: r.n,
      k: r.k,
      elem: isString(r.elem) ? r.elem : "",
      layoutB: isString(r.layoutB) ? r.layoutB : "",
      weights: isString(r.weights) ? r.weights : "",
      tflops: { symmkit: r.tflops.symmkit, cublaslt: r.tflops.cublaslt },
      unsplitUs: isObject(r.us) ? optionalNumber(r.us.unsplit) : undefined,
    })),
  };
}

function eager(x: Json, environment: Environment, source: Source): EagerResult | string {
  const rows = rowsOf<EagerResult["rows"][number]>(
    x.rows,
    (r) => isString(r.collective) && isString(r.algorithm) && isNumber(r.hostUs) && isNumber(r.wallUs),
  );
  const launch = isObject(x.launch) && isObject(x.launch.hostUsPerLaunch) ? x.launch.hostUsPerLaunch : {};
  if (!rows || !isNumber(x.bytes) || !isNumber(launch.kernelApi))
    return "eager-call result without rows, bytes or the launch floor";
  return {
    kind: "eager",
    source,
    environment,
    bytes: x.bytes,
    launchUs: launch.kernelApi,
    rows: rows.map(({ collective, algorithm, hostUs, wallUs }) => ({
      collective,
      algorithm,
      hostUs,
      wallUs,
    })),
  };
}

function launch(x: Json, environment: Environment, source: Source): LaunchResult | string {
  if (!isTimes(x.hostUsPerLaunch) || !isNumber(x.gpuUsPerLaunchInGraph))
    return "launch result without host and GPU times";
  return {
    kind: "launch",
    source,
    environment,
    hostUs: x.hostUsPerLaunch,
    gpuUsInGraph: x.gpuUsPerLaunchInGraph,
  };
}

function link(x: Json, environment: Environment, source: Source): LinkResult | string {
  const rows = rowsOf<LinkResult["rows"][number]>(
    x.rows,
    (r) =>
      isString(r.engine) &&
      isString(r.direction) &&
      isNumber(r.blocks) &&
      isNumber(r.threads) &&
      isNumber(r.unroll) &&
      isNumber(r.gbPerS),
  );
  if (!rows || !isNumber(x.bytesPerPeer)) return "link result without rows or bytesPerPeer";
  return {
    kind: "link",
    source,
    environment,
    bytesPerPeer: x.bytesPerPeer,
    rows: rows.map(({ engine, direction, blocks, threads, unroll, gbPerS }) => ({
      engine,
      direction,
      blocks,
      threads,
      unroll,
      gbPerS,
    })),
  };
}

function barrier(x: Json, environment: Environment, source: Source): BarrierResult | string {
  const rows = rowsOf<BarrierResult["rows"][number]>(
    x.rows,
    (r) => isString(r.measure) && isNumber(r.blocks) && isNumber(r.usPerOp),
  );
  if (!rows) return "barrier result without rows";
  return {
    kind: "barrier",
    source,
    environment,
    rows: rows.map(({ measure, blocks, usPerOp }) => ({ measure, blocks, usPerOp })),
  };
}

/** A PyTorch row's problem in words and its series beside the implementation: m×n×k, tokens (series:
 * hidden), or bytes; undefined for none of them. */
function pytorchProblem(r: Json): { problem: string; series: string } | undefined {
  if (isNumber(r.m) && isNumber(r.n) && isNumber(r.k)) return { problem: `${r.m}×${r.n}×${r.k}`, series: "" };
  if (isNumber(r.tokens) && isNumber(r.hidden))
    return { problem: String(r.tokens), series: `hidden ${r.hidden}` };
  if (isNumber(r.bytes)) return { problem: formatBytes(r.bytes), series: "" };
  return undefined;
}

function pytorch(x: Json, environment: Environment, source: Source): PytorchResult | string {
  const rows = rowsOf<Json>(
    x.rows,
    (r) =>
      isString(r.section) &&
      isString(r.impl) &&
      isNumber(r.us) &&
      r.us > 0 &&
      isString(r.mode) &&
      pytorchProblem(r) !== undefined,
  );
  if (!rows) return "pytorch result without rows of section, implementation, problem, time and mode";
  return {
    kind: "pytorch",
    source,
    environment,
    rows: rows.map((r) => ({
      section: r.section as string,
      impl: r.impl as string,
      ...pytorchProblem(r)!,
      us: r.us as number,
      mode: r.mode as string,
    })),
  };
}

/** A tune table (src/ops/tune-table.ts): which algorithm `auto` picks up to which size. */
function tuneTable(x: Json, source: Source): TableResult | string {
  const rules = x.rules;
  if (!isObject(rules) || !isString(x.device) || !isNumber(x.worldSize) || !isString(x.gitRevision))
    return "tune table without device, world size, revision or rules";
  const rows: string[][] = [];
  const add = (op: string, list: unknown, key: "maxBytes" | "maxRows"): boolean => {
    const checked = rowsOf<Json>(list, (r) => isNumber(r[key]) && isString(r.algorithm));
    if (!checked) return false;
    const up = (r: Json): string =>
      key === "maxBytes" ? formatBytes(r[key] as number) : `${r[key] as number} rows`;
    rows.push([op, checked.map((r) => `up to ${up(r)}: ${r.algorithm as string}`).join("; ")]);
    return true;
  };
  for (const [op, list] of Object.entries(rules))
    if (!add(op, list, "maxBytes")) return `tune table: malformed rules for ${op}`;
  if (isObject(x.fused))
    for (const [op, list] of Object.entries(x.fused))
      if (Array.isArray(list) && !add(op, list, "maxRows")) return `tune table: malformed rules for ${op}`;
  if (isObject(x.arNorm) && !add("all-reduce-rms-norm", x.arNorm.rules, "maxBytes"))
    return "tune table: malformed rules for all-reduce-rms-norm";
  return {
    kind: "table",
    source,
    title: `Tune table (${isString(x.dtype) ? x.dtype : "?"}): what algorithm "auto" picks`,
    environment: {
      device: x.device,
      deviceCount: x.worldSize,
      worldSize: x.worldSize,
      gitRevision: x.gitRevision,
      date: isString(x.date) ? x.date : "",
    },
    header: ["operation", "rules (above the last: the last)"],
    rows,
  };
}

function cpuEnvironmentOf(x: Json, worldSizes: readonly number[]): CpuEnvironment | undefined {
  const m = x.machine;
  if (!isObject(m) || !isString(m.cpu) || !isNumber(m.cpus) || !isString(x.gitRevision)) return undefined;
  return {
    device: `${m.cpu}, ${m.cpus} CPUs`,
    node: isString(m.node) ? m.node : "",
    worldSizes: [...new Set(worldSizes)].sort((a, b) => a - b),
    gitRevision: x.gitRevision,
    date: isString(x.date) ? x.date : "",
  };
}

type Summary = Record<"n" | "min" | "median" | "max", number>;
const isSummary = (x: unknown): x is Summary =>
  isObject(x) && isNumber(x.n) && isNumber(x.min) && isNumber(x.median) && isNumber(x.max);

function faults(x: Json, source: Source): FaultsResult | string {
  const byFault = x.byFault as Json;
  const entries = Object.entries(byFault);
  // "w2 allReduce/one_shot skip/msToError": the world sizes the cases ran.
  const worlds = Object.keys(isObject(x.cases) ? x.cases : {}).flatMap((k) => {
    const m = /^w(\d+) /.exec(k);
    return m ? [Number(m[1])] : [];
  });
  const environment = cpuEnvironmentOf(x, worlds);
  if (!environment || entries.length === 0 || !entries.every(([k, v]) => k.includes("/") && isSummary(v)))
    return "fault-suite record without its machine, revision or per-fault times";
  return {
    kind: "faults",
    source,
    environment,
    syncTimeoutMs: optionalNumber(x.syncTimeoutMs),
    rows: entries.map(([key, v]) => {
      const s = v as Summary;
      const cut = key.lastIndexOf("/");
      return {
        fault: key.slice(0, cut),
        measure: key.slice(cut + 1),
        n: s.n,
        min: s.min,
        median: s.median,
        max: s.max,
      };
    }),
  };
}

function soak(x: Json, source: Source): SoakResult | string {
  const isResources = (r: unknown): r is Resources & Json =>
    isObject(r) && isNumber(r.rssMiB) && isNumber(r.heapMiB) && isNumber(r.arrayBuffersMiB);
  const ranks = rowsOf<Json>(
    x.ranks,
    (r) =>
      isNumber(r.rank) &&
      isNumber(r.usPerCall) &&
      isNumber(r.warmupCalls) &&
      isNumber(r.calls) &&
      isResources(r.atStart) &&
      isResources(r.atEnd) &&
      isNumber(r.atStart.fds) &&
      isNumber(r.atEnd.fds) &&
      Array.isArray(r.samples) &&
      r.samples.every((s) => isResources(s) && isNumber(s.calls)),
  );
  const environment = cpuEnvironmentOf(x, isNumber(x.world) ? [x.world] : []);
  if (!ranks || !environment || !isNumber(x.calls)) return "soak record without its machine, calls or ranks";
  const pick = (r: Resources, calls: number) => ({
    calls,
    rssMiB: r.rssMiB,
    heapMiB: r.heapMiB,
    arrayBuffersMiB: r.arrayBuffersMiB,
  });
  return {
    kind: "soak",
    source,
    environment,
    calls: x.calls,
    ranks: ranks
      .map((r) => {
        const start = r.atStart as Resources & { fds: number };
        const end = r.atEnd as Resources & { fds: number };
        return {
          rank: r.rank as number,
          usPerCall: r.usPerCall as number,
          fds: [start.fds, end.fds] as const,
          samples: [
            pick(start, r.warmupCalls as number),
            ...(r.samples as (Resources & { calls: number })[]).map((s) => pick(s, s.calls)),
            pick(end, r.calls as number),
          ],
        };
      })
      .sort((a, b) => a.rank - b.rank),
  };
}

function storeFuzz(x: Json, source: Source): StoreFuzzResult | string {
  const phase = (p: unknown): p is Json & { msPerRound: number } => isObject(p) && isNumber(p.msPerRound);
  const runs = rowsOf<{ fuzzed: Json & { msPerRound: number }; alone: Json & { msPerRound: number } }>(
    x.runs,
    (r) => phase(r.fuzzed) && phase(r.alone),
  );
  const environment = cpuEnvironmentOf(x, []);
  if (!runs || !environment) return "store-fuzz record without its machine or runs";
  return {
    kind: "store-fuzz",
    source,
    environment,
    runs: runs.map((r, i) => ({
      seed: isString(r.fuzzed.seed) ? r.fuzzed.seed : String(i + 1),
      framesSent: isNumber(r.fuzzed.framesSent) ? r.fuzzed.framesSent : 0,
      fuzzedMsPerRound: r.fuzzed.msPerRound,
      aloneMsPerRound: r.alone.msPerRound,
    })),
  };
}

/** A GPU benchmark's result: what kind, from the fields its benchmark writes. */
function gpuResult(x: Json, source: Source): (Recognised | string)[] {
  const environment = environmentOf(x.environment);
  const name = isString(x.bench) ? x.bench : isString(x.collective) ? x.collective : undefined;
  if (!environment)
    return [name ? `${name} result without a valid environment` : "not a symmkit benchmark result"];
  if (COLLECTIVES.includes(x.collective as CollectiveKind)) return [collective(x, environment, source)];
  if (FUSED_BENCHES.includes(x.bench as FusedBench)) return [fused(x, environment, source)];
  switch (x.bench) {
    case "ar-norm":
      return [arNorm(x, environment, source)];
    case "moe":
      return [moe(x, environment, source)];
    case "all-to-all":
      return [allToAll(x, environment, source)];
    case "send-recv":
      return sendRecv(x, environment, source);
    case "hosts":
      return hosts(x, environment, source);
    case "pytorch":
      return [pytorch(x, environment, source)];
  }
  if (name !== undefined) return [`a ${name} result, which this report has no chart for`];
  if (isObject(x.kernel)) return [gemm(x, environment, source)];
  if (isObject(x.launch)) return [eager(x, environment, source)];
  if ("bytesPerPeer" in x) return [link(x, environment, source)];
  if ("hostUsPerLaunch" in x) return [launch(x, environment, source)];
  if (Array.isArray(x.rows) && isObject(x.rows[0]) && "usPerOp" in x.rows[0])
    return [barrier(x, environment, source)];
  return ["not a symmkit benchmark result"];
}

/** Several results in one file: `symmkit tune --json`'s { collectives, fused }, or an array of them. */
function many(list: readonly unknown[], source: Source): (Recognised | string)[] {
  const seen = new Map<string, number>();
  return list.flatMap((x, i) => {
    if (!isObject(x) || !(isString(x.collective) || isString(x.bench)))
      return [`element ${i} is not a benchmark result`];
    // Each part's files are named after its collective or op, numbered where one repeats.
    const name = String(x.collective ?? x.bench);
    const n = (seen.get(name) ?? 0) + 1;
    seen.set(name, n);
    return gpuResult(x, { label: source.label, slug: `${source.slug}-${name}${n > 1 ? `-${n}` : ""}` });
  });
}

/** What one parsed file holds: results, or the reason it holds none (a string per part). */
export function recognise(x: unknown, source: Source): (Recognised | string)[] {
  if (Array.isArray(x)) return x.length > 0 ? many(x, source) : ["an empty array"];
  if (!isObject(x)) return ["not a JSON object or array"];
  if (Array.isArray(x.collectives))
    return many(
      [
        ...(x.collectives as unknown[]),
        ...(Array.isArray(x.fused) ? (x.fused as unknown[]) : []),
        ...(isObject(x.arNorm) ? [x.arNorm] : []),
      ],
      source,
    );
  if (isObject(x.rules)) return [tuneTable(x, source)];
  // The CPU-side records describe themselves and name their machine instead of a GPU environment.
  if (isString(x.description) && isObject(x.machine)) {
    if (isObject(x.byFault)) return [faults(x, source)];
    if (Array.isArray(x.ranks)) return [soak(x, source)];
    if (Array.isArray(x.runs)) return [storeFuzz(x, source)];
    return [`a CPU-side record this report has no chart for: ${x.description.split(/[.:]\s/)[0]}`];
  }
  return gpuResult(x, source);
}
