// The report's inputs: result files found from the paths given, each read and recognised as one of the
// kinds symmkit's benchmarks write (src/bench/*.ts), checked field by field, since a results folder also
// holds files of other tools, older formats and hand edits. What is not recognised is kept with the
// reason, for the report to list.
import fs from "node:fs";
import path from "node:path";
import { SymmkitError } from "../errors.js";

/** What a benchmark result says about where it ran (src/bench/report.ts BenchEnvironment). */
export interface Environment {
  readonly device: string;
  readonly deviceCount: number;
  readonly worldSize: number;
  readonly gitRevision: string;
  readonly date: string;
}

export interface Source {
  /** As shown in the report: relative to the working directory when inside it. */
  readonly label: string;
  /** For the names of the files made from it: the path under the inputs' common folder. */
  readonly slug: string;
}

export const COLLECTIVES = ["all-reduce", "all-gather", "reduce-scatter"] as const;
export type CollectiveKind = (typeof COLLECTIVES)[number];

/** A collective benchmark (src/bench/collectives.ts), alone or one of a tune run's. */
export interface CollectiveResult {
  readonly kind: "collective";
  readonly source: Source;
  readonly environment: Environment;
  readonly collective: CollectiveKind;
  readonly dtype: string;
  readonly implementations: readonly string[];
  readonly rows: readonly { readonly bytes: number; readonly us: Readonly<Record<string, number>> }[];
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
    readonly tflops: { readonly symmkit: number; readonly cublaslt: number };
  }[];
}

export interface FusedResult {
  readonly kind: "fused";
  readonly source: Source;
  readonly environment: Environment;
  readonly bench: string;
  readonly dtype: string;
  readonly implementations: readonly string[];
  readonly rows: readonly {
    readonly m: number;
    readonly n: number;
    readonly k: number;
    readonly rankFlops: number;
    readonly us: Readonly<Record<string, number>>;
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

/** A result with too few numbers to chart, shown as a table. */
export interface TableResult {
  readonly kind: "table";
  readonly source: Source;
  readonly title: string;
  /** Machine, world size, revision; absent where the file does not say. */
  readonly environment: Environment | undefined;
  readonly header: readonly string[];
  readonly rows: readonly (readonly string[])[];
}

/** A file read but not charted, or not read: `reason` says why. */
export interface Unused {
  readonly kind: "unused";
  readonly source: Source;
  readonly reason: string;
}

export type Recognised = CollectiveResult | GemmResult | FusedResult | EagerResult | LinkResult | TableResult;
export type Input = Recognised | Unused;

type Json = Record<string, unknown>;

const isObject = (x: unknown): x is Json => typeof x === "object" && x !== null && !Array.isArray(x);
const isNumber = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x);
const isString = (x: unknown): x is string => typeof x === "string";
const isNumberRecord = (x: unknown): x is Record<string, number> =>
  isObject(x) && Object.values(x).every(isNumber);
const isStringArray = (x: unknown): x is string[] => Array.isArray(x) && x.every(isString);

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

function collective(x: Json, source: Source): Recognised | string {
  const environment = environmentOf(x.environment);
  if (!environment) return `${String(x.collective)} result without a valid environment`;
  const rows = rowsOf<CollectiveResult["rows"][number] & { dtype?: unknown }>(
    x.rows,
    (r) => isNumber(r.bytes) && r.bytes > 0 && isNumberRecord(r.us),
  );
  if (!rows) return `${String(x.collective)} result without rows of bytes and times`;
  const listed = isStringArray(x.implementations) ? x.implementations : [];
  // Every name with a time, in the order the file lists them.
  const implementations = [...new Set([...listed, ...rows.flatMap((r) => Object.keys(r.us))])];
  const dtype = rows[0]!.dtype;
  return {
    kind: "collective",
    source,
    environment,
    collective: x.collective as CollectiveKind,
    dtype: isString(dtype) ? dtype : "",
    implementations,
    rows: rows.map((r) => ({ bytes: r.bytes, us: r.us })),
  };
}

function fused(x: Json, source: Source): Recognised | string {
  const environment = environmentOf(x.environment);
  const rows = rowsOf<FusedResult["rows"][number]>(
    x.rows,
    (r) => isNumber(r.m) && isNumber(r.n) && isNumber(r.k) && isNumber(r.rankFlops) && isNumberRecord(r.us),
  );
  if (!environment || !rows) return `${String(x.bench)} result without a valid environment and rows`;
  return {
    kind: "fused",
    source,
    environment,
    bench: String(x.bench),
    dtype: isString(x.dtype) ? x.dtype : "",
    implementations: [...new Set(rows.flatMap((r) => Object.keys(r.us)))],
    rows,
  };
}

function gemm(x: Json, environment: Environment, source: Source): Recognised | string {
  const rows = rowsOf<GemmResult["rows"][number]>(
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
      ...r,
      elem: isString(r.elem) ? r.elem : "",
      layoutB: isString(r.layoutB) ? r.layoutB : "",
    })),
  };
}

function eager(x: Json, environment: Environment, source: Source): Recognised | string {
  const rows = rowsOf<EagerResult["rows"][number]>(
    x.rows,
    (r) => isString(r.collective) && isString(r.algorithm) && isNumber(r.hostUs) && isNumber(r.wallUs),
  );
  const launch = isObject(x.launch) && isObject(x.launch.hostUsPerLaunch) ? x.launch.hostUsPerLaunch : {};
  if (!rows || !isNumber(x.bytes) || !isNumber(launch.kernelApi))
    return "eager-call result without rows, bytes or the launch floor";
  return { kind: "eager", source, environment, bytes: x.bytes, launchUs: launch.kernelApi, rows };
}

function link(x: Json, environment: Environment, source: Source): Recognised | string {
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
  return { kind: "link", source, environment, bytesPerPeer: x.bytesPerPeer, rows };
}

const fixed = (x: number, digits = 2): string => x.toFixed(digits);

function barrier(x: Json, environment: Environment, source: Source): Recognised | string {
  const rows = rowsOf<{ measure: string; blocks: number; usPerOp: number }>(
    x.rows,
    (r) => isString(r.measure) && isNumber(r.blocks) && isNumber(r.usPerOp),
  );
  if (!rows) return "barrier result without rows";
  return {
    kind: "table",
    source,
    title: "Barrier and put/wait latency",
    environment,
    header: ["measure", "blocks", "µs per operation"],
    rows: rows.map((r) => [r.measure, String(r.blocks), fixed(r.usPerOp)]),
  };
}

function launch(x: Json, environment: Environment, source: Source): Recognised | string {
  const host = x.hostUsPerLaunch;
  if (!isNumberRecord(host) || !isNumber(x.gpuUsPerLaunchInGraph))
    return "launch result without host and GPU times";
  return {
    kind: "table",
    source,
    title: "Kernel launch cost",
    environment,
    header: ["measure", "µs per launch"],
    rows: [
      ...Object.entries(host).map(([name, us]) => [`host, ${name}`, fixed(us)]),
      ["GPU, back to back in a CUDA graph", fixed(x.gpuUsPerLaunchInGraph)],
    ],
  };
}

/** A tune table (src/ops/tune-table.ts): which algorithm `auto` picks up to which size. */
function tuneTable(x: Json, source: Source): Recognised | string {
  const rules = x.rules;
  if (!isObject(rules) || !isString(x.device) || !isNumber(x.worldSize) || !isString(x.gitRevision))
    return "tune table without device, world size, revision or rules";
  const rows: string[][] = [];
  const add = (op: string, list: unknown, key: "maxBytes" | "maxRows"): boolean => {
    const checked = rowsOf<Record<string, unknown>>(list, (r) => isNumber(r[key]) && isString(r.algorithm));
    if (!checked) return false;
    const up = (r: Record<string, unknown>): string =>
      key === "maxBytes" ? formatBytes(r[key] as number) : `${r[key] as number} rows`;
    rows.push([op, checked.map((r) => `up to ${up(r)}: ${r.algorithm as string}`).join("; ")]);
    return true;
  };
  for (const [op, list] of Object.entries(rules))
    if (!add(op, list, "maxBytes")) return `tune table: malformed rules for ${op}`;
  if (isObject(x.fused))
    for (const [op, list] of Object.entries(x.fused))
      if (Array.isArray(list) && !add(op, list, "maxRows")) return `tune table: malformed rules for ${op}`;
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

/** Several results in one file: `symmkit tune`'s measurements, an array or { collectives, fused }. */
function many(list: readonly unknown[], source: Source): (Recognised | string)[] {
  const seen = new Map<string, number>();
  return list.map((x, i) => {
    if (!isObject(x)) return `element ${i} is not a collective or fused-matmul result`;
    // Each part's files are named after its collective or fused op, numbered where one repeats.
    const name = String(x.collective ?? x.bench);
    const n = (seen.get(name) ?? 0) + 1;
    seen.set(name, n);
    const part = { label: source.label, slug: `${source.slug}-${name}${n > 1 ? `-${n}` : ""}` };
    if (COLLECTIVES.includes(x.collective as CollectiveKind)) return collective(x, part);
    if (x.bench === "ag-gemm" || x.bench === "gemm-rs") return fused(x, part);
    return `element ${i} is not a collective or fused-matmul result`;
  });
}

/** What one parsed file holds: results, or the reason it holds none. */
export function recognise(x: unknown, source: Source): (Recognised | string)[] {
  if (Array.isArray(x)) return x.length > 0 ? many(x, source) : ["an empty array"];
  if (!isObject(x)) return ["not a JSON object or array"];
  if (Array.isArray(x.collectives))
    return many(
      [...(x.collectives as unknown[]), ...(Array.isArray(x.fused) ? (x.fused as unknown[]) : [])],
      source,
    );
  if (COLLECTIVES.includes(x.collective as CollectiveKind)) return [collective(x, source)];
  if (x.bench === "ag-gemm" || x.bench === "gemm-rs") return [fused(x, source)];
  if (isObject(x.rules)) return [tuneTable(x, source)];
  const environment = environmentOf(x.environment);
  if (environment) {
    if (isObject(x.kernel)) return [gemm(x, environment, source)];
    if (isObject(x.launch)) return [eager(x, environment, source)];
    if ("bytesPerPeer" in x) return [link(x, environment, source)];
    if ("hostUsPerLaunch" in x) return [launch(x, environment, source)];
    if (Array.isArray(x.rows) && isObject(x.rows[0]) && "usPerOp" in x.rows[0])
      return [barrier(x, environment, source)];
  }
  // The CPU-side results (fault suite, soak, store fuzz) describe themselves; they have no chart here.
  if (isString(x.description)) return [`not a GPU benchmark: ${x.description.split(/[.:]\s/)[0]}`];
  return ["not a symmkit benchmark result"];
}

/** The result files `inputs` name: files as given, folders searched for *.json; sorted, each once. */
export function findFiles(inputs: readonly string[]): string[] {
  if (inputs.length === 0) throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", "report: no inputs given");
  const files = new Set<string>();
  const walk = (dir: string): void => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch (cause) {
      throw new SymmkitError("SYMMKIT_OS_ERROR", `report: cannot list ${dir}: ${(cause as Error).message}`, {
        cause,
      });
    }
    for (const e of entries) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && e.name.endsWith(".json")) files.add(p);
    }
  };
  for (const input of inputs) {
    const p = path.resolve(input);
    let stat: fs.Stats;
    try {
      stat = fs.statSync(p);
    } catch (cause) {
      throw new SymmkitError(
        "SYMMKIT_INVALID_ARGUMENT",
        `report: cannot read ${input}: no such file or folder`,
        {
          cause,
        },
      );
    }
    if (stat.isDirectory()) walk(p);
    else files.add(p);
  }
  return [...files].sort();
}

/** Labels and slugs for `files`: slugs from the paths under their common folder, unique. */
export function sourcesOf(files: readonly string[]): Source[] {
  const dirs = files.map((f) => path.dirname(f).split(path.sep));
  let common = dirs[0] ?? [];
  for (const d of dirs) {
    let i = 0;
    while (i < common.length && d[i] === common[i]) i++;
    common = common.slice(0, i);
  }
  const taken = new Set<string>();
  return files.map((f) => {
    const rel = path.relative(process.cwd(), f);
    const under = path.relative(common.join(path.sep), f).replace(/\.[^.]*$/, "");
    const base =
      under
        .toLowerCase()
        .replace(/[^a-z0-9.]+/g, "-")
        .replace(/^-|-$/g, "") || "result";
    let slug = base;
    for (let i = 2; taken.has(slug); i++) slug = `${base}-${i}`;
    taken.add(slug);
    return { label: rel.startsWith("..") || path.isAbsolute(rel) ? f : rel, slug };
  });
}

/** Every input file read and recognised, in order. */
export function readInputs(inputs: readonly string[]): Input[] {
  const files = findFiles(inputs);
  const sources = sourcesOf(files);
  return files.flatMap((file, i): Input[] => {
    const source = sources[i]!;
    let text: string;
    try {
      text = fs.readFileSync(file, "utf8");
    } catch (e) {
      return [{ kind: "unused", source, reason: `cannot be read: ${(e as Error).message}` }];
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      return [{ kind: "unused", source, reason: `not JSON: ${(e as Error).message}` }];
    }
    return recognise(value, source).map((r) =>
      typeof r === "string" ? { kind: "unused", source, reason: r } : r,
    );
  });
}
