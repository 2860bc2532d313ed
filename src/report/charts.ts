// The charts of the benchmarks that compare symmkit with a baseline, as Vega-Lite specs: size sweeps
// (collectives, all-to-all, send/recv, across hosts), the GEMM against cuBLASLt, the fused matmuls
// against their GEMM alone and NCCL + cuBLASLt, all-reduce + RMSNorm against the unfused paths, MoE.
import {
  about,
  CONFIG,
  colourScale,
  library,
  LIBRARY_DASH,
  logAxis,
  measuredAxis,
  ratioRule,
  seriesScale,
  shapeBars,
  shapeOf,
  SIZE,
  title,
  type Chart,
  type Colours,
} from "./chart-base.js";
import type { ArNormResult, FusedResult, GemmResult, MoeResult, SweepResult } from "./results.js";

/** Latency, log-log, or bandwidth: every implementation against size on one chart. */
function sweepLines(r: SweepResult, c: Colours, measure: "latency" | "bandwidth"): Chart {
  const latency = measure === "latency";
  const values = r.rows.flatMap((row) =>
    r.implementations.flatMap((impl) => {
      const us = row.us[impl];
      if (us === undefined) return [];
      const y = latency ? us : (row.bytes / us / 1e3) * r.bandwidth.factor;
      return [{ bytes: row.bytes, impl, library: library(impl), y }];
    }),
  );
  const what = `${r.op} ${latency ? "latency" : r.bandwidth.name}`;
  return {
    name: `${r.source.slug}-${latency ? "latency" : r.bandwidth.key}`,
    what,
    ...about(r),
    spec: {
      ...SIZE,
      config: CONFIG,
      title: title(`${what}${r.dtype ? ` (${r.dtype})` : ""}`, r.environment, r.source),
      data: { values },
      mark: { type: "line", point: true, strokeWidth: 1.5 },
      encoding: {
        x: measuredAxis(
          "bytes",
          r.rows.map((x) => x.bytes),
          r.sizeTitle,
        ),
        y: {
          field: "y",
          type: "quantitative",
          ...(latency ? logAxis(values.map((v) => v.y)) : { scale: { type: "linear", zero: true } }),
          title: latency ? "latency (µs)" : r.bandwidth.title,
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

/** symmkit's best time over the baseline's against size, each point coloured by the algorithm that was
 * best. */
function sweepRatio(r: SweepResult, c: Colours): Chart | undefined {
  const ours = r.implementations.filter((i) => library(i) === "symmkit");
  const values = r.rows.flatMap((row) => {
    const base = row.us[r.baseline.name];
    const timed = ours.filter((i) => row.us[i] !== undefined);
    if (base === undefined || timed.length === 0) return [];
    const best = timed.reduce((a, b) => (row.us[b]! < row.us[a]! ? b : a));
    return [{ bytes: row.bytes, best, ratio: row.us[best]! / base }];
  });
  if (values.length === 0) return undefined;
  const bests = ours.filter((i) => values.some((v) => v.best === i));
  // Always showing 1, the line where symmkit and the baseline take the same time.
  const y = {
    type: "quantitative",
    // Short: vega would make room for a long title that its estimate of text widths overrates.
    title:
      r.baseline.label.length <= 4
        ? `best symmkit time / ${r.baseline.label} time`
        : "best symmkit / baseline",
    ...logAxis([...values.map((v) => v.ratio), 1]),
  } as const;
  const x = measuredAxis(
    "bytes",
    r.rows.map((row) => row.bytes),
    r.sizeTitle,
  );
  return {
    name: `${r.source.slug}-vs-nccl`,
    what: `${r.op}: best symmkit / ${r.baseline.label}`,
    ...about(r),
    spec: {
      ...SIZE,
      config: CONFIG,
      title: title(
        `${r.op}: best symmkit time / ${r.baseline.label} time`,
        r.environment,
        r.source,
        "below 1: symmkit faster",
      ),
      data: { values },
      layer: [
        ratioRule(y),
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

/** Latency, bandwidth and the ratio to the baseline of one size sweep. */
export function sweepCharts(r: SweepResult, c: Colours): Chart[] {
  const ratio = sweepRatio(r, c);
  return [sweepLines(r, c, "latency"), sweepLines(r, c, "bandwidth"), ...(ratio ? [ratio] : [])];
}

const UNSPLIT = "symmkit, plain kernel unsplit";

/** TFLOP/s per shape: symmkit's GEMM (and its plain kernel unsplit, where matmul() runs another plan)
 * against cuBLASLt; and their times over cuBLASLt's, which shows the small shapes TFLOP/s flattens. */
export function gemmCharts(r: GemmResult, c: Colours): Chart[] {
  const kinds = [
    ...new Set(
      r.rows.map(
        (x) =>
          `${x.elem}${x.layoutB ? `, B ${x.layoutB}` : ""}${x.weights === "cold" ? ", cold weights" : ""}`,
      ),
    ),
  ].join("; ");
  const tflops = r.rows.flatMap((x) => [
    { shape: shapeOf(x), impl: "symmkit", y: x.tflops.symmkit },
    ...(x.unsplitUs === undefined
      ? []
      : [{ shape: shapeOf(x), impl: UNSPLIT, y: (2 * x.m * x.n * x.k) / x.unsplitUs / 1e6 }]),
    { shape: shapeOf(x), impl: "cuBLASLt", y: x.tflops.cublaslt },
  ]);
  const impls = [...new Set(tflops.map((v) => v.impl))];
  const ours = impls.filter((i) => i !== "cuBLASLt");
  // Times in the ratio of the TFLOP/s: the same flops.
  const ratios = r.rows.flatMap((x) =>
    ours.flatMap((impl) => {
      const y = tflops.find((v) => v.shape === shapeOf(x) && v.impl === impl)?.y;
      return y === undefined ? [] : [{ shape: shapeOf(x), impl, y: x.tflops.cublaslt / y }];
    }),
  );
  const barColours = new Map([...c, [UNSPLIT, "#aec7e8"]]);
  const width = Math.max(SIZE.width, 40 * r.rows.length);
  return [
    {
      name: `${r.source.slug}-tflops`,
      what: `GEMM ${kinds}: TFLOP/s`,
      ...about(r),
      spec: {
        ...SIZE,
        width,
        config: CONFIG,
        title: title(`GEMM (${kinds}): symmkit against cuBLASLt`, r.environment, r.source),
        ...shapeBars(tflops, impls, barColours, "TFLOP/s"),
      },
    },
    {
      name: `${r.source.slug}-vs-cublaslt`,
      what: `GEMM ${kinds}: time over cuBLASLt's`,
      ...about(r),
      spec: {
        ...SIZE,
        width,
        config: CONFIG,
        title: title(
          `GEMM (${kinds}): time / cuBLASLt time`,
          r.environment,
          r.source,
          "below 1: symmkit faster",
        ),
        layer: [
          shapeBars(ratios, ours, barColours, "time / cuBLASLt time"),
          { ...ratioRule({ type: "quantitative" }), data: { values: [{}] } },
        ],
      },
    },
  ];
}

const FLOOR = "gemm_alone";

/** The fused matmuls: TFLOP/s of one rank's GEMM at each implementation's time, floors included; and
 * each implementation's time over symmkit's GEMM alone (1: the communication fully hidden). */
export function fusedCharts(r: FusedResult, c: Colours): Chart[] {
  const tflops = r.rows.flatMap((x) =>
    r.implementations.flatMap((impl) => {
      const us = x.us[impl];
      return us === undefined ? [] : [{ shape: shapeOf(x), impl, y: x.rankFlops / us / 1e6 }];
    }),
  );
  const width = Math.max(560, 70 * r.rows.length);
  const charts: Chart[] = [
    {
      name: `${r.source.slug}-tflops`,
      what: `${r.bench} ${r.dtype}: TFLOP/s`,
      ...about(r),
      spec: {
        width,
        height: 260,
        config: CONFIG,
        title: title(
          `${r.bench} (${r.dtype}): TFLOP/s per rank`,
          r.environment,
          r.source,
          "against NCCL + cuBLASLt and the GEMM alone",
        ),
        ...shapeBars(tflops, r.implementations, c, "TFLOP/s per rank"),
      },
    },
  ];
  const over = r.implementations.filter((i) => i !== FLOOR);
  const ratios = r.rows.flatMap((x) => {
    const floor = x.us[FLOOR];
    if (floor === undefined) return [];
    return over.flatMap((impl) => {
      const us = x.us[impl];
      return us === undefined ? [] : [{ shape: shapeOf(x), impl, y: us / floor }];
    });
  });
  if (ratios.length > 0) {
    const bars = shapeBars(ratios, over, c, "time / symmkit's GEMM alone");
    charts.push({
      name: `${r.source.slug}-vs-gemm`,
      what: `${r.bench} ${r.dtype}: time over the GEMM alone`,
      ...about(r),
      spec: {
        width,
        height: 260,
        config: CONFIG,
        title: title(
          `${r.bench} (${r.dtype}): time / symmkit's GEMM alone`,
          r.environment,
          r.source,
          "1: communication fully hidden",
        ),
        layer: [bars, { ...ratioRule({ type: "quantitative" }), data: { values: [{}] } }],
      },
    });
  }
  return charts;
}

const BEST_PLAIN = "all-reduce alone, best symmkit";
const NCCL_PLAIN = "all-reduce alone, NCCL";
const NCCL_NORM = "nccl_norm";

/**
 * all-reduce + RMSNorm per hidden size against tokens: every algorithm of allReduceRmsNorm beside the
 * plain all-reduce of the same bytes (symmkit's best, NCCL's) and NCCL's all-reduce then the norm kernel;
 * and the best fused time over the best plain all-reduce and over NCCL + norm.
 */
export function arNormCharts(r: ArNormResult, c: Colours): Chart[] {
  const hiddens = [...new Set(r.rows.map((x) => x.hidden))].sort((a, b) => a - b);
  const names = [...new Set(r.rows.flatMap((x) => Object.keys(x.us)))];
  const fused = names.filter((n) => !n.startsWith("ar_") && n !== NCCL_NORM);
  const plain = names.filter((n) => n.startsWith("ar_") && n !== "ar_nccl");
  const series = [...fused, BEST_PLAIN, NCCL_PLAIN, NCCL_NORM];
  const lineColours = new Map([...c, [BEST_PLAIN, "#8c8c8c"], [NCCL_PLAIN, "#000000"]]);
  const role = (s: string): string => (s === BEST_PLAIN || s === NCCL_PLAIN ? "reference" : library(s));
  return hiddens.flatMap((hidden): Chart[] => {
    const rows = r.rows.filter((x) => x.hidden === hidden);
    const plainBest = (us: Readonly<Record<string, number>>): number | undefined => {
      const ts = plain.flatMap((n) => (us[n] === undefined ? [] : [us[n]]));
      return ts.length ? Math.min(...ts) : undefined;
    };
    const lines = rows.flatMap((x) =>
      series.flatMap((s) => {
        const us = s === BEST_PLAIN ? plainBest(x.us) : s === NCCL_PLAIN ? x.us.ar_nccl : x.us[s];
        return us === undefined ? [] : [{ tokens: x.tokens, impl: s, library: role(s), y: us }];
      }),
    );
    const shown = series.filter((s) => lines.some((v) => v.impl === s));
    const x = measuredAxis(
      "tokens",
      rows.map((row) => row.tokens),
      `tokens per rank (× ${hidden} ${r.dtype})`,
      false,
    );
    const what = `all-reduce + RMSNorm, hidden ${hidden}`;
    const slug = `${r.source.slug}-h${hidden}`;
    const charts: Chart[] = [
      {
        name: `${slug}-latency`,
        what: `${what}: latency`,
        ...about(r),
        spec: {
          ...SIZE,
          config: CONFIG,
          title: title(
            `${what} (${r.dtype}): latency`,
            r.environment,
            r.source,
            "against the plain all-reduce and NCCL + norm",
          ),
          data: { values: lines },
          mark: { type: "line", point: true, strokeWidth: 1.5 },
          encoding: {
            x,
            y: { field: "y", type: "quantitative", ...logAxis(lines.map((v) => v.y)), title: "latency (µs)" },
            color: {
              field: "impl",
              type: "nominal",
              title: "implementation",
              scale: colourScale(lineColours, shown),
            },
            strokeDash: LIBRARY_DASH,
          },
        },
      },
    ];
    const comparisons = [
      ["over the all-reduce alone (best symmkit)", plainBest],
      ["over NCCL's all-reduce + norm", (us: Readonly<Record<string, number>>) => us[NCCL_NORM]],
    ] as const;
    const ratios = rows.flatMap((row) => {
      const ts = fused
        .filter((n) => library(n) === "symmkit" && row.us[n] !== undefined)
        .map((n) => row.us[n]!);
      if (ts.length === 0) return [];
      const best = Math.min(...ts);
      return comparisons.flatMap(([versus, of]) => {
        const base = of(row.us);
        return base === undefined ? [] : [{ tokens: row.tokens, versus, ratio: best / base }];
      });
    });
    if (ratios.length > 0) {
      const y = {
        type: "quantitative",
        title: "time ratio",
        ...logAxis([...ratios.map((v) => v.ratio), 1]),
      } as const;
      const versus = comparisons.map(([v]) => v).filter((v) => ratios.some((x) => x.versus === v));
      charts.push({
        name: `${slug}-vs-unfused`,
        what: `${what}: best fused over the unfused`,
        ...about(r),
        spec: {
          ...SIZE,
          config: CONFIG,
          title: title(
            `${what}: best fused time / unfused time`,
            r.environment,
            r.source,
            "below 1: fused faster",
          ),
          data: { values: ratios },
          layer: [
            ratioRule(y),
            {
              mark: { type: "line", point: { filled: true, size: 50 }, strokeWidth: 1.5 },
              encoding: {
                x,
                y: { ...y, field: "ratio" },
                color: {
                  field: "versus",
                  type: "nominal",
                  title: null,
                  scale: seriesScale(versus),
                  legend: { orient: "bottom" },
                },
              },
            },
          ],
        },
      });
    }
    return charts;
  });
}

/** MoE dispatch and combine against tokens per rank: µs per call, and GB/s of the token rows received. */
export function moeCharts(r: MoeResult): Chart[] {
  type Row = MoeResult["rows"][number];
  // Bytes received by the rows' count: bf16 rows, fp8 rows with their 4-byte scale.
  const bf16 = (x: Row): number => x.rows * x.hidden * 2;
  const fp8 = (x: Row): number => x.rows * (x.hidden + 4);
  const phases = [
    ["dispatch, pull (eager)", (x: Row) => x.dispatchUs, bf16],
    ["dispatch, pull_device", (x: Row) => x.dispatchDeviceUs, bf16],
    ["dispatch, pull_device (eager)", (x: Row) => x.dispatchEagerDeviceUs, bf16],
    ["dispatch fp8, pull_device", (x: Row) => x.dispatchFp8Us, fp8],
    ["combine", (x: Row) => x.combineUs, bf16],
    ["combine, in place", (x: Row) => x.combineInPlaceUs, bf16],
    ["combine, per_rank", (x: Row) => x.combineByRankUs, bf16],
  ] as const;
  const shapes = [...new Set(r.rows.map((x) => `${x.hidden}/${x.topk}/${x.experts}`))];
  return shapes.flatMap((shape): Chart[] => {
    const rows = r.rows.filter((x) => `${x.hidden}/${x.topk}/${x.experts}` === shape);
    const { hidden, topk, experts } = rows[0]!;
    const values = rows.flatMap((x) =>
      phases.flatMap(([phase, of, bytes]) => {
        const us = of(x);
        return us === undefined ? [] : [{ tokens: x.tokens, phase, us, gbPerS: bytes(x) / us / 1e3 }];
      }),
    );
    const shown = phases.map(([p]) => p).filter((p) => values.some((v) => v.phase === p));
    const x = measuredAxis(
      "tokens",
      rows.map((row) => row.tokens),
      "tokens per rank",
      false,
    );
    const what = `MoE, hidden ${hidden}, top-${topk} of ${experts}`;
    const slug = shapes.length > 1 ? `${r.source.slug}-h${hidden}-k${topk}-e${experts}` : r.source.slug;
    const chart = (measure: "latency" | "bandwidth"): Chart => {
      const latency = measure === "latency";
      const field = latency ? "us" : "gbPerS";
      return {
        name: `${slug}-${measure}`,
        what: `${what}: ${latency ? "latency" : "GB/s"}`,
        ...about(r),
        spec: {
          ...SIZE,
          config: CONFIG,
          title: title(
            `${what}: ${latency ? "µs per call" : "GB/s"}`,
            r.environment,
            r.source,
            latency ? "bf16; dispatch pull timed eagerly" : "bf16 token rows this rank receives",
          ),
          data: { values },
          mark: { type: "line", point: true, strokeWidth: 1.5 },
          encoding: {
            x,
            y: {
              field,
              type: "quantitative",
              ...(latency ? logAxis(values.map((v) => v.us)) : { scale: { type: "linear", zero: true } }),
              title: latency ? "µs per call" : "GB/s",
            },
            color: {
              field: "phase",
              type: "nominal",
              title: null,
              scale: seriesScale(shown),
              legend: { orient: "bottom" },
            },
          },
        },
      };
    };
    return [chart("latency"), chart("bandwidth")];
  });
}
