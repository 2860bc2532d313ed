// The charts of what a machine costs before any algorithm: a kernel launch, an eager collective call,
// a barrier, NVLink's bandwidth; and of the CPU-side suites (fault times, the soak's memory, the store
// under a fuzz).
import { about, CONFIG, logAxis, seriesScale, SIZE, title, type Chart } from "./chart-base.js";
import {
  formatBytes,
  type BarrierResult,
  type EagerResult,
  type FaultsResult,
  type LaunchResult,
  type LinkResult,
  type SoakResult,
  type StoreFuzzResult,
} from "./results.js";

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
    ...about(r),
    spec: {
      width: 420,
      config: CONFIG,
      title: title(
        `Eager collective calls of ${formatBytes(r.bytes)}`,
        r.environment,
        r.source,
        `dashed: one bare kernel launch, ${r.launchUs.toFixed(1)} µs`,
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

/** What `symmkit bench launch` calls its host measures. */
const LAUNCH_NAMES: Readonly<Record<string, string>> = {
  kernelApi: "host: Kernel.launch",
  rawKoffiFreshArgs: "host: koffi, fresh argument array",
};

/** One kernel launch: host time per launch by how it is made, and GPU time per launch in a graph. */
export function launchChart(r: LaunchResult): Chart {
  const values = [
    ...Object.entries(r.hostUs).map(([name, us]) => ({ measure: LAUNCH_NAMES[name] ?? `host: ${name}`, us })),
    { measure: "GPU: in a CUDA graph", us: r.gpuUsInGraph },
  ];
  return {
    name: `${r.source.slug}-launch`,
    what: "kernel launch cost",
    ...about(r),
    spec: {
      width: 420,
      config: CONFIG,
      title: title("Kernel launch: µs per launch", r.environment, r.source),
      data: { values },
      mark: { type: "bar" },
      encoding: {
        y: { field: "measure", type: "nominal", sort: values.map((v) => v.measure), title: null },
        x: { field: "us", type: "quantitative", title: "µs per launch" },
        color: {
          field: "measure",
          type: "nominal",
          scale: seriesScale(values.map((v) => v.measure)),
          legend: null,
        },
      },
    },
  };
}

/** Barrier and put/wait latency by measure and number of blocks. */
export function barrierChart(r: BarrierResult): Chart {
  const values = r.rows.map((x) => ({ ...x, blocks: `${x.blocks} block${x.blocks > 1 ? "s" : ""}` }));
  const blocks = [...new Set(r.rows.map((x) => x.blocks))].sort((a, b) => a - b);
  const labels = blocks.map((b) => `${b} block${b > 1 ? "s" : ""}`);
  return {
    name: `${r.source.slug}-barrier`,
    what: "barrier and put/wait latency",
    ...about(r),
    spec: {
      width: 420,
      config: CONFIG,
      title: title("Barrier and put/wait: µs per operation", r.environment, r.source),
      data: { values },
      mark: { type: "bar" },
      encoding: {
        y: {
          field: "measure",
          type: "nominal",
          sort: [...new Set(r.rows.map((x) => x.measure))],
          title: null,
        },
        yOffset: { field: "blocks", type: "nominal", sort: labels },
        x: { field: "usPerOp", type: "quantitative", title: "µs per operation" },
        color: {
          field: "blocks",
          type: "nominal",
          title: null,
          scale: seriesScale(labels),
          legend: { orient: "bottom" },
        },
      },
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
    ...about(r),
    spec: {
      width: 420,
      config: CONFIG,
      title: title(
        "NVLink: GB/s per rank",
        r.environment,
        r.source,
        `${formatBytes(r.bytesPerPeer)} to or from every peer`,
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

/** What the fault suite's measures are. */
const FAULT_MEASURES: Readonly<Record<string, string>> = {
  msToError: "ms from the call to the typed error",
  msNextCallRefused: "ms to refuse the next call",
  msKillToEnd: "ms from SIGKILL to the launcher's exit",
  msCall: "ms per call, waiting on a straggler",
};

/** The CPU fault suite: per measure, each fault's median with its range over every case, one panel
 * per measure, each on its own scale. */
export function faultsChart(r: FaultsResult): Chart {
  const values = r.rows.map((x) => ({
    ...x,
    measure: FAULT_MEASURES[x.measure] ?? x.measure,
    fault: `${x.fault} (n ${x.n})`,
  }));
  const measures = [...new Set(values.map((v) => v.measure))];
  const x = { type: "quantitative", scale: { zero: false }, title: null } as const;
  const y = { field: "fault", type: "nominal", title: null } as const;
  return {
    name: `${r.source.slug}-faults`,
    what: "CPU fault suite: time per fault",
    ...about(r),
    spec: {
      config: CONFIG,
      title: title(
        "CPU fault suite: median and range per fault",
        r.environment,
        r.source,
        r.syncTimeoutMs ? `sync timeout ${r.syncTimeoutMs} ms` : undefined,
      ),
      vconcat: measures.map((measure) => ({
        width: 420,
        height: { step: 18 },
        title: { text: measure, fontSize: 11, fontWeight: "normal" },
        data: { values: values.filter((v) => v.measure === measure) },
        layer: [
          {
            mark: { type: "rule", color: "#888888" },
            encoding: { y, x: { field: "min", ...x }, x2: { field: "max" } },
          },
          {
            mark: { type: "point", filled: true, size: 50, color: "#1f77b4", opacity: 1 },
            encoding: { y, x: { field: "median", ...x } },
          },
        ],
      })),
    },
  };
}

/** The CPU soak: every rank's memory from the end of the warm-up to the last call (flat: no leak). */
export function soakChart(r: SoakResult): Chart {
  const measures = ["RSS", "live heap", "ArrayBuffers"] as const;
  const values = r.ranks.flatMap((rank) =>
    rank.samples.flatMap((s) =>
      (
        [
          ["RSS", s.rssMiB],
          ["live heap", s.heapMiB],
          ["ArrayBuffers", s.arrayBuffersMiB],
        ] as const
      ).map(([measure, mib]) => ({ calls: s.calls, measure, rank: `rank ${rank.rank}`, mib })),
    ),
  );
  const fds = r.ranks.map((x) => `${x.fds[0]}→${x.fds[1]}`).join(", ");
  const us = r.ranks.map((x) => x.usPerCall).join(", ");
  return {
    name: `${r.source.slug}-soak`,
    what: `CPU soak: memory over ${r.calls} calls`,
    ...about(r),
    spec: {
      ...SIZE,
      config: CONFIG,
      title: title(
        `CPU soak: MiB per rank over ${r.calls} calls`,
        r.environment,
        r.source,
        `${us} µs per call; descriptors ${fds} (rank ${r.ranks.map((x) => x.rank).join(", ")})`,
      ),
      data: { values },
      mark: { type: "line", point: true, strokeWidth: 1.5 },
      encoding: {
        x: { field: "calls", type: "quantitative", title: "calls made" },
        y: { field: "mib", type: "quantitative", ...logAxis(values.map((v) => v.mib)), title: "MiB" },
        color: { field: "measure", type: "nominal", title: null, scale: seriesScale(measures) },
        strokeDash: { field: "rank", type: "nominal", title: null },
      },
    },
  };
}

/** The store fuzz: each run's milliseconds per round under the fuzz and alone. */
export function storeFuzzChart(r: StoreFuzzResult): Chart {
  const phases = ["under the fuzz", "alone"];
  const values = r.runs.flatMap((x) => [
    { run: `seed ${x.seed}`, phase: phases[0], ms: x.fuzzedMsPerRound },
    { run: `seed ${x.seed}`, phase: phases[1], ms: x.aloneMsPerRound },
  ]);
  const frames = r.runs.map((x) => x.framesSent).join(", ");
  return {
    name: `${r.source.slug}-store-fuzz`,
    what: "store fuzz: ms per round",
    ...about(r),
    spec: {
      ...SIZE,
      config: CONFIG,
      title: title(
        "Store under a fuzz: ms per job round",
        r.environment,
        r.source,
        `${frames} hostile frames`,
      ),
      data: { values },
      mark: { type: "bar" },
      encoding: {
        x: { field: "run", type: "nominal", title: null, axis: { labelAngle: 0 } },
        xOffset: { field: "phase", type: "nominal", sort: phases },
        y: { field: "ms", type: "quantitative", title: "ms per round (rank 0)" },
        color: {
          field: "phase",
          type: "nominal",
          title: null,
          scale: seriesScale(phases),
          legend: { orient: "bottom" },
        },
      },
    },
  };
}
