// What every chart of the report shares: its record, colours, fonts, titles naming the machine, world
// size, revision and source file (so that an SVG file makes sense on its own), and the axes.
import { createHash } from "node:crypto";
import type { TopLevelSpec } from "vega-lite";
import type { AnyEnvironment, Source } from "./results.js";

export interface Chart {
  /** The stem of its files, unique in the report. */
  readonly name: string;
  /** What it shows, for its heading: "all-reduce latency". */
  readonly what: string;
  readonly environment: AnyEnvironment;
  readonly source: Source;
  readonly spec: TopLevelSpec;
}

/** Colours by implementation name, the same in every chart of a report. */
export type Colours = ReadonlyMap<string, string>;

// The baselines in black and greys, so that symmkit's own implementations stand out in colour.
const BASELINE_COLOURS: Readonly<Record<string, string>> = {
  nccl: "#000000",
  nccl_raw: "#555555",
  nccl_cublaslt: "#000000",
  nccl_norm: "#555555",
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

export const colourScale = (c: Colours, names: readonly string[]) => ({
  domain: [...names],
  range: names.map((n) => c.get(n) ?? "#000000"),
});

/** A fixed scale for series that are not implementations (MoE's phases, a suite's measures). */
export const seriesScale = (names: readonly string[]) => ({
  domain: [...names],
  range: names.map((_, i) => PALETTE[i % PALETTE.length]!),
});

/** Which library an implementation is: symmkit's own, or a baseline. */
export function library(impl: string): string {
  if (/nccl/i.test(impl)) return "NCCL";
  if (/torch/i.test(impl)) return "PyTorch";
  return "symmkit";
}

// Baselines dashed, references dotted; the colour legend names them.
export const LIBRARY_DASH = {
  field: "library",
  type: "nominal",
  scale: {
    domain: ["symmkit", "NCCL", "PyTorch", "reference"],
    range: [
      [1, 0],
      [6, 3],
      [2, 2],
      [1, 3],
    ],
  },
  legend: null,
} as const;

/** Every chart's one font. Named: for a generic family it lacks, resvg takes the first font it has,
 * often a serif one. */
export const FONT = "Helvetica, Arial, DejaVu Sans, sans-serif";

export const CONFIG = {
  // No ARIA description of every mark: the page says what each chart shows.
  aria: false,
  font: FONT,
  title: { anchor: "start", fontSize: 13, subtitleFontSize: 11, subtitleColor: "#555" },
  // Without a canvas, vega estimates text widths at 0.8 em a character and cuts labels longer than the
  // limit: room for about 45 characters.
  legend: { labelFontSize: 11, titleFontSize: 11, labelLimit: 400 },
  axis: { labelLimit: 400 },
} as const;

export const SIZE = { width: 420, height: 260 } as const;

/** ["NVIDIA H200 (sm_90a, 132 SMs)", "world size 4"], or for a CPU-side suite ["AMD EPYC, 2 CPUs",
 * "Node v20.20.2", "world sizes 2, 3"]. */
export function machineParts(e: AnyEnvironment): string[] {
  if ("worldSizes" in e) {
    const w = e.worldSizes;
    return [
      e.device,
      ...(e.node ? [`Node ${e.node}`] : []),
      ...(w.length ? [`world size${w.length > 1 ? "s" : ""} ${w.join(", ")}`] : []),
    ];
  }
  return [
    e.device,
    `world size ${e.worldSize}${e.deviceCount > e.worldSize ? ` of ${e.deviceCount} GPUs` : ""}`,
  ];
}

export const machine = (e: AnyEnvironment): string => machineParts(e).join(", ");

/** A short digest of a chart's spec: what the page records, so that a test can tell a stale page
 * without rendering it. */
export const specDigest = (chart: Chart): string =>
  createHash("sha256").update(JSON.stringify(chart.spec)).digest("hex").slice(0, 16);

/** A chart's title, short (vega estimates text widths generously, and a long title widens the SVG),
 * and below it the machine, revision, source file and `note`. */
export function title(text: string, e: AnyEnvironment, source: Source, note?: string) {
  return { text, subtitle: [...(note ? [note] : []), machine(e), `rev ${e.gitRevision} · ${source.label}`] };
}

/** The fields every chart of one result shares. */
export const about = (r: { environment: AnyEnvironment; source: Source }) => ({
  environment: r.environment,
  source: r.source,
});

// Size labels in the style of the benchmarks' --sizes: 4K, 16M, 1G.
const SIZE_LABEL =
  "datum.value >= 1073741824 ? format(datum.value / 1073741824, '~g') + 'G' : " +
  "datum.value >= 1048576 ? format(datum.value / 1048576, '~g') + 'M' : " +
  "datum.value >= 1024 ? format(datum.value / 1024, '~g') + 'K' : format(datum.value, '~g')";

/** A log-scale x axis over exactly the values measured: sizes labelled as --sizes writes them, or counts. */
export function measuredAxis(field: string, values: readonly number[], axisTitle: string, bytes = true) {
  const xs = [...new Set(values)].sort((a, b) => a - b);
  const lo = xs[0]!;
  const hi = xs.at(-1)!;
  return {
    field,
    type: "quantitative",
    // One value alone still needs a range around it.
    scale: { type: "log", domain: lo === hi ? [lo / 2, hi * 2] : [lo, hi], nice: false },
    axis: {
      values: xs,
      labelExpr: bytes ? SIZE_LABEL : "format(datum.value, '~g')",
      title: axisTitle,
      grid: true,
    },
  } as const;
}

/**
 * A log scale over `ys` with grid lines at 1, 2 and 5 times the powers of ten (vega draws nine a decade,
 * which crowds the chart and doubles its SVG), or at every multiple where that leaves fewer than three.
 */
export function logAxis(ys: readonly number[]) {
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

/** The dashed line at 1 that a ratio chart's y axis `y` is read against. */
export const ratioRule = <Y extends object>(y: Y) => ({
  mark: { type: "rule" as const, strokeDash: [4, 4], color: "#888888" },
  encoding: { y: { ...y, datum: 1 } },
});

export const shapeOf = (r: { m: number; n: number; k: number }): string => `${r.m}×${r.n}×${r.k}`;

/** Grouped bars: a value per problem shape (in the file's order), one bar per implementation. */
export function shapeBars(
  values: readonly { shape: string; impl: string; y: number }[],
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
      y: { field: "y", type: "quantitative", title: yTitle },
      color: { field: "impl", type: "nominal", title: "implementation", scale: colourScale(c, impls) },
    },
  } as const;
}
