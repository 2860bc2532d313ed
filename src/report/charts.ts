// The report's charts as Vega-Lite specs, one builder per kind of result. Every chart names its machine,
// world size, revision and source file in its title, so that an SVG file makes sense on its own.
import type { TopLevelSpec } from "vega-lite";
import {
  formatBytes,
  type CollectiveResult,
  type EagerResult,
  type Environment,
  type FusedResult,
  type GemmResult,
  type LinkResult,
  type Source,
} from "./inputs.js";

export interface Chart {
  /** The stem of its files, unique in the report. */
  readonly name: string;
  /** What it shows, for its heading: "all-reduce latency". */
  readonly what: string;
  readonly environment: Environment;
  readonly source: Source;
  readonly spec: TopLevelSpec;
}

/** Colours by implementation name, the same in every chart of a report. */
export type Colours = ReadonlyMap<string, string>;

// The baselines in black and greys, so that symmkit's own implementations stand out in colour.
const BASELINE_COLOURS: Readonly<Record<string, string>> = {
  nccl: "#000000",
  nccl_cublaslt: "#000000",
  cuBLASLt: "#000000",
  symmkit: "#1f77b4",
  cublaslt_alone: "#8c8c8c",
  gemm_alone: "#c7c7c7",
};
const PALETTE = [
  "#1f77b4",
  "#ff7f0e",
  "#2ca02c",
  "#d62728",
  "#9467bd",
  "#8c564b",
  "#e377c2",
  "#bcbd22",
  "#17becf",
  "#aec7e8",
  "#ffbb78",
  "#98df8a",
  "#ff9896",
  "#c5b0d5",
  "#c49c94",
  "#f7b6d2",
];

/** Colours for `names`: baselines fixed, the others from the palette in sorted order. */
export function colours(names: Iterable<string>): Colours {
  const others = [...new Set(names)].filter((n) => !(n in BASELINE_COLOURS)).sort();
  return new Map([
    ...Object.entries(BASELINE_COLOURS),
    ...others.map((n, i) => [n, PALETTE[i % PALETTE.length]!] as const),
  ]);
}

const colourScale = (c: Colours, names: readonly string[]) => ({
  domain: [...names],
  range: names.map((n) => c.get(n) ?? "#000000"),
});

/** Which library an implementation is: symmkit's own, or a baseline. */
function library(impl: string): string {
  if (impl === "nccl") return "NCCL";
  if (/torch/i.test(impl)) return "PyTorch";
  return "symmkit";
}
// Baselines dashed; the colour legend names them.
const LIBRARY_DASH = {
  field: "library",
  type: "nominal",
  scale: {
    domain: ["symmkit", "NCCL", "PyTorch"],
    range: [
      [1, 0],
      [6, 3],
      [2, 2],
    ],
  },
  legend: null,
} as const;

/** Every chart's one font. Named: for a generic family it lacks, resvg takes the first font it has,
 * often a serif one. */
export const FONT = "Helvetica, Arial, DejaVu Sans, sans-serif";

const CONFIG = {
  // No ARIA description of every mark: the page says what each chart shows.
  aria: false,
  font: FONT,
  title: { anchor: "start", fontSize: 13, subtitleFontSize: 11, subtitleColor: "#555" },
  legend: { labelFontSize: 11, titleFontSize: 11 },
  axis: { labelLimit: 260 },
} as const;

const machine = (e: Environment): string =>
  `${e.device}, world size ${e.worldSize}${e.deviceCount > e.worldSize ? ` of ${e.deviceCount} GPUs` : ""}`;

function title(text: string, e: Environment, source: Source) {
  return { text, subtitle: [machine(e), `rev ${e.gitRevision} · ${source.label}`] };
}

/** nccl-tests' bus bandwidth factor: all-reduce 2(W-1)/W, all-gather and reduce-scatter (W-1)/W. */
export function busFactor(collective: string, world: number): number {
  return ((collective === "all-reduce" ? 2 : 1) * (world - 1)) / world;
}

// Size labels in the style of the benchmarks' --sizes: 4K, 16M, 1G.
const SIZE_LABEL =
  "datum.value >= 1073741824 ? format(datum.value / 1073741824, '~g') + 'G' : " +
  "datum.value >= 1048576 ? format(datum.value / 1048576, '~g') + 'M' : " +
  "datum.value >= 1024 ? format(datum.value / 1024, '~g') + 'K' : format(datum.value, '~g')";

/** What the benchmarks count as a row's bytes (src/bench/collectives.ts): nccl-tests' size. */
const SIZE_TITLE: Record<string, string> = {
  "all-reduce": "size per rank (bytes)",
  "all-gather": "output size per rank (bytes)",
  "reduce-scatter": "input size per rank (bytes)",
};

/** A log-scale x axis over exactly the sizes measured, labelled as --sizes writes them. */
function sizeAxis(r: CollectiveResult) {
  const sizes = [...new Set(r.rows.map((x) => x.bytes))].sort((a, b) => a - b);
  const lo = sizes[0]!;
  const hi = sizes.at(-1)!;
  return {
    field: "bytes",
    type: "quantitative",
    // One size alone still needs a range around it.
    scale: { type: "log", domain: lo === hi ? [lo / 2, hi * 2] : [lo, hi], nice: false },
    axis: { values: sizes, labelExpr: SIZE_LABEL, title: SIZE_TITLE[r.collective], grid: true },
  } as const;
}

const SIZE = { width: 420, height: 260 } as const;

/**
 * A log scale over `ys` with grid lines at 1, 2 and 5 times the powers of ten (vega draws nine a decade,
 * which crowds the chart and doubles its SVG), or at every multiple where that leaves fewer than three.
 */
function logAxis(ys: readonly number[]) {
  const lo = Math.min(...ys) / 1.1;
  const hi = Math.max(...ys) * 1.1;
  const ticks = (multiples: readonly number[]): number[] => {
    const out: number[] = [];
    for (let p = Math.floor(Math.log10(lo)); p <= Math.ceil(Math.log10(hi)); p++)
      for (const m of multiples) {
        const v = Number(`${m}e${p}`); // exact, unlike m * 10 ** p for p < 0
        if (v >= lo && v <= hi) out.push(v);
      }
    return out;
  };
  const values = ticks([1, 2, 5]);
  return {
    scale: { type: "log" as const, domain: [lo, hi], nice: false },
    axis: {
      values: values.length >= 3 ? values : ticks([1, 2, 3, 4, 5, 6, 7, 8, 9]),
      labelExpr: "format(datum.value, '~g')",
    },
  };
}

/** Latency, log-log, and bus bandwidth: every implementation against size on one chart. */
function collectiveLines(r: CollectiveResult, c: Colours, measure: "latency" | "busbw"): Chart {
  const bus = busFactor(r.collective, r.environment.worldSize);
  const values = r.rows.flatMap((row) =>
    r.implementations.flatMap((impl) => {
      const us = row.us[impl];
      if (us === undefined) return [];
      const y = measure === "latency" ? us : (row.bytes / us / 1e3) * bus;
      return [{ bytes: row.bytes, impl, library: library(impl), y }];
    }),
  );
  const latency = measure === "latency";
  const what = `${r.collective} ${latency ? "latency" : "bus bandwidth"}`;
  return {
    name: `${r.source.slug}-${latency ? "latency" : "busbw"}`,
    what,
    environment: r.environment,
    source: r.source,
    spec: {
      ...SIZE,
      config: CONFIG,
      title: title(`${what}${r.dtype ? ` (${r.dtype})` : ""}`, r.environment, r.source),
      data: { values },
      mark: { type: "line", point: true, strokeWidth: 1.5 },
      encoding: {
        x: sizeAxis(r),
        y: {
          field: "y",
          type: "quantitative",
          ...(latency ? logAxis(values.map((v) => v.y)) : { scale: { type: "linear", zero: true } }),
          title: latency ? "latency (µs)" : "bus bandwidth (GB/s)",
        },
        color: {
          field: "impl",
          type: "nominal",
          title: "implementation",
          scale: colourScale(c, r.implementations),
        },
        strokeDash: LIBRARY_DASH,
      },
    },
  };
}

/** symmkit's best time over NCCL's against size, each point coloured by the algorithm that was best. */
function collectiveRatio(r: CollectiveResult, c: Colours): Chart | undefined {
  const ours = r.implementations.filter((i) => library(i) === "symmkit");
  const values = r.rows.flatMap((row) => {
    const nccl = row.us.nccl;
    const timed = ours.filter((i) => row.us[i] !== undefined);
    if (nccl === undefined || timed.length === 0) return [];
    const best = timed.reduce((a, b) => (row.us[b]! < row.us[a]! ? b : a));
    return [{ bytes: row.bytes, best, ratio: row.us[best]! / nccl }];
  });
  if (values.length === 0) return undefined;
  const ratios = values.map((v) => v.ratio);
  const bests = ours.filter((i) => values.some((v) => v.best === i));
  // Always showing 1, the line where symmkit and NCCL take the same time.
  const y = {
    type: "quantitative",
    title: "best symmkit time / NCCL time",
    ...logAxis([...ratios, 1]),
  } as const;
  const x = sizeAxis(r);
  return {
    name: `${r.source.slug}-vs-nccl`,
    what: `${r.collective}: best symmkit / NCCL`,
    environment: r.environment,
    source: r.source,
    spec: {
      ...SIZE,
      config: CONFIG,
      title: title(
        `${r.collective}: best symmkit time / NCCL time (below 1: symmkit faster)`,
        r.environment,
        r.source,
      ),
      data: { values },
      layer: [
        { mark: { type: "rule", strokeDash: [4, 4], color: "#888888" }, encoding: { y: { ...y, datum: 1 } } },
        { mark: { type: "line", color: "#999999" }, encoding: { x, y: { ...y, field: "ratio" } } },
        {
          mark: { type: "point", filled: true, size: 70, opacity: 1 },
          encoding: {
            x,
            y: { ...y, field: "ratio" },
            color: { field: "best", type: "nominal", title: "best symmkit", scale: colourScale(c, bests) },
          },
        },
      ],
    },
  };
}

export function collectiveCharts(r: CollectiveResult, c: Colours): Chart[] {
  const ratio = collectiveRatio(r, c);
  return [collectiveLines(r, c, "latency"), collectiveLines(r, c, "busbw"), ...(ratio ? [ratio] : [])];
}

/** Grouped bars: TFLOP/s per problem shape (in the file's order), one bar per implementation. */
function tflopsBars(
  values: readonly { shape: string; impl: string; tflops: number }[],
  impls: readonly string[],
  c: Colours,
  yTitle: string,
) {
  return {
    data: { values: [...values] },
    mark: { type: "bar" },
    encoding: {
      x: {
        field: "shape",
        type: "nominal",
        sort: [...new Set(values.map((v) => v.shape))],
        title: "m × n × k",
        axis: { labelAngle: -30 },
      },
      xOffset: { field: "impl", type: "nominal", sort: [...impls] },
      y: { field: "tflops", type: "quantitative", title: yTitle },
      color: { field: "impl", type: "nominal", title: "implementation", scale: colourScale(c, impls) },
    },
  } as const;
}

const shapeOf = (r: { m: number; n: number; k: number }): string => `${r.m}×${r.n}×${r.k}`;

export function gemmChart(r: GemmResult, c: Colours): Chart {
  const kinds = [...new Set(r.rows.map((x) => `${x.elem}${x.layoutB ? `, B ${x.layoutB}` : ""}`))].join("; ");
  const values = r.rows.flatMap((x) => [
    { shape: shapeOf(x), impl: "symmkit", tflops: x.tflops.symmkit },
    { shape: shapeOf(x), impl: "cuBLASLt", tflops: x.tflops.cublaslt },
  ]);
  return {
    name: `${r.source.slug}-tflops`,
    what: `GEMM ${kinds}: TFLOP/s`,
    environment: r.environment,
    source: r.source,
    spec: {
      ...SIZE,
      config: CONFIG,
      title: title(`GEMM (${kinds}): symmkit against cuBLASLt`, r.environment, r.source),
      ...tflopsBars(values, ["symmkit", "cuBLASLt"], c, "TFLOP/s"),
    },
  };
}

/** The fused matmuls: TFLOP/s of one rank's GEMM at each implementation's time, floors included. */
export function fusedChart(r: FusedResult, c: Colours): Chart {
  const values = r.rows.flatMap((x) =>
    r.implementations.flatMap((impl) => {
      const us = x.us[impl];
      return us === undefined ? [] : [{ shape: shapeOf(x), impl, tflops: x.rankFlops / us / 1e6 }];
    }),
  );
  return {
    name: `${r.source.slug}-tflops`,
    what: `${r.bench} ${r.dtype}: TFLOP/s`,
    environment: r.environment,
    source: r.source,
    spec: {
      width: 560,
      height: 260,
      config: CONFIG,
      title: title(
        `${r.bench} (${r.dtype}): TFLOP/s per rank against NCCL + cuBLASLt and the GEMM alone`,
        r.environment,
        r.source,
      ),
      ...tflopsBars(values, r.implementations, c, "TFLOP/s per rank"),
    },
  };
}

/** Eager calls: host and wall time per call by collective and algorithm, the bare launch marked. */
export function eagerChart(r: EagerResult): Chart {
  const calls = r.rows.map((x) => `${x.collective} ${x.algorithm}`);
  const values = r.rows.flatMap((x) => [
    { call: `${x.collective} ${x.algorithm}`, measure: "host time per call", us: x.hostUs },
    { call: `${x.collective} ${x.algorithm}`, measure: "wall time per call", us: x.wallUs },
  ]);
  return {
    name: `${r.source.slug}-eager`,
    what: `eager calls of ${formatBytes(r.bytes)}`,
    environment: r.environment,
    source: r.source,
    spec: {
      width: 420,
      config: CONFIG,
      title: title(
        `Eager collective calls of ${formatBytes(r.bytes)} (dashed: one bare kernel launch, ${r.launchUs.toFixed(1)} µs)`,
        r.environment,
        r.source,
      ),
      layer: [
        {
          data: { values },
          mark: { type: "bar" },
          encoding: {
            y: { field: "call", type: "nominal", sort: calls, title: null },
            yOffset: { field: "measure", type: "nominal" },
            x: { field: "us", type: "quantitative", title: "µs per call" },
            color: { field: "measure", type: "nominal", title: null, legend: { orient: "bottom" } },
          },
        },
        {
          data: { values: [{ us: r.launchUs }] },
          mark: { type: "rule", strokeDash: [4, 4], color: "#000000" },
          encoding: { x: { field: "us", type: "quantitative" } },
        },
      ],
    },
  };
}

/** NVLink: GB/s per rank of every engine, direction and launch shape measured. */
export function linkChart(r: LinkResult): Chart {
  const values = r.rows.map((x) => ({
    config:
      x.engine === "sm"
        ? `SM ${x.direction}, ${x.blocks}×${x.threads}, unroll ${x.unroll}`
        : `copy engine ${x.direction}`,
    direction: x.direction,
    gbPerS: x.gbPerS,
  }));
  return {
    name: `${r.source.slug}-link`,
    what: "NVLink bandwidth",
    environment: r.environment,
    source: r.source,
    spec: {
      width: 420,
      config: CONFIG,
      title: title(
        `NVLink: GB/s per rank, ${formatBytes(r.bytesPerPeer)} to or from every peer`,
        r.environment,
        r.source,
      ),
      data: { values },
      mark: { type: "bar" },
      encoding: {
        y: { field: "config", type: "nominal", sort: values.map((v) => v.config), title: null },
        x: { field: "gbPerS", type: "quantitative", title: "GB/s per rank" },
        color: { field: "direction", type: "nominal", title: "direction" },
      },
    },
  };
}
