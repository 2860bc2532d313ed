// What the page shows, in order, before anything is rendered: the sections, their groups (world sizes,
// hosts, fused ops) and each result's charts as Vega-Lite specs. The report renders this plan; the test
// of the committed report compares it with the page, without rendering.
import { colours, type Chart } from "./chart-base.js";
import { arNormCharts, fusedCharts, gemmCharts, moeCharts, sweepCharts } from "./charts.js";
import {
  barrierChart,
  eagerChart,
  faultsChart,
  launchChart,
  linkChart,
  soakChart,
  storeFuzzChart,
} from "./charts-machine.js";
import { pytorchCharts } from "./charts-pytorch.js";
import type { Input, InputFile, Unused } from "./inputs.js";
import {
  FUSED_BENCHES,
  SWEEP_FAMILIES,
  type Recognised,
  type SweepFamily,
  type TableResult,
} from "./results.js";

/** A part of the page: what its charts show (`note`, HTML), then groups of charts under subheadings,
 * each group in rows (one result's charts side by side). */
export interface Section<C = Chart> {
  readonly id: string;
  readonly title: string;
  readonly note: string;
  readonly groups: readonly { readonly title: string; readonly rows: readonly (readonly C[])[] }[];
}

export interface Plan {
  readonly sections: readonly Section[];
  readonly tables: readonly TableResult[];
  readonly unused: readonly Unused[];
}

// By file; a file's parts in the order it holds them (the sort is stable).
const byLabel = (a: { source: { label: string } }, b: typeof a): number =>
  a.source.label.localeCompare(b.source.label, "en");

const of = <K extends Recognised["kind"]>(items: readonly Input[], kind: K) =>
  items.filter((x): x is Extract<Recognised, { kind: K }> => x.kind === kind).sort(byLabel);

/** `results` in groups by `key` (title, order), in order, each result's charts a row. */
function grouped<R>(
  results: readonly R[],
  key: (r: R) => { title: string; order: number },
  charts: (r: R) => Chart[],
): Section["groups"] {
  const keys = new Map(results.map((r) => [key(r).title, key(r).order]));
  return [...keys]
    .sort((a, b) => a[1] - b[1] || a[0].localeCompare(b[0], "en"))
    .map(([t]) => ({ title: t, rows: results.filter((r) => key(r).title === t).map(charts) }));
}

const byWorld = (r: { environment: { worldSize: number } }) => ({
  title: `World size ${r.environment.worldSize}`,
  order: r.environment.worldSize,
});

const one = (rows: Chart[][]): Section["groups"] => [{ title: "", rows }];

const SWEEP_SECTIONS: Readonly<Record<SweepFamily, { title: string; note: string }>> = {
  "all-reduce": {
    title: "All-reduce",
    note: "Bus bandwidth is nccl-tests': the size over the time, times 2(W-1)/W on W ranks.",
  },
  "all-gather": {
    title: "All-gather",
    note: "Sizes are nccl-tests': the gathered output; bus bandwidth the size over the time, times (W-1)/W.",
  },
  "reduce-scatter": {
    title: "Reduce-scatter",
    note: "Sizes are nccl-tests': each rank's input; bus bandwidth the size over the time, times (W-1)/W.",
  },
  "all-to-all": {
    title: "All-to-all",
    note:
      "allToAll of bytes per rank: symmkit's algorithms (<code>nccl</code>: NCCL through symmkit, behind its " +
      "fingerprint barrier) against NCCL's grouped send/recv as PyTorch's all_to_all_single calls it " +
      "(<code>nccl_raw</code>). GB/s: what crosses the links per rank, (W-1)/W of the input, over the time.",
  },
  "send-recv": {
    title: "Send/recv",
    note:
      "Rank pairs (2p, 2p + 1): one way, the even rank sends (a send completes once its receiver has the " +
      "message); both ways, sendRecv. GB/s: one direction's bytes over the time.",
  },
  hosts: {
    title: "Across hosts",
    note:
      "A group across hosts: hierarchical (symmkit inside each host, NCCL between hosts) against flat NCCL " +
      "over the whole group. Sizes and bus bandwidth as nccl-tests counts them.",
  },
};

/** The page's sections of charts, in order; sections with nothing to show left out. */
export function plan(files: readonly InputFile[]): Plan {
  const items = files.flatMap((f) => f.items);
  const sweeps = of(items, "sweep");
  const fused = of(items, "fused");
  const arNorm = of(items, "ar-norm");
  const c = colours([
    ...sweeps.flatMap((r) => r.implementations),
    ...fused.flatMap((r) => r.implementations),
    ...arNorm.flatMap((r) => r.rows.flatMap((x) => Object.keys(x.us))).filter((n) => !n.startsWith("ar_")),
  ]);
  const all: Section[] = [
    ...SWEEP_FAMILIES.map((family) => ({
      id: family,
      ...SWEEP_SECTIONS[family],
      groups: grouped(
        sweeps.filter((r) => r.family === family),
        (r) => r.group,
        (r) => sweepCharts(r, c),
      ),
    })),
    {
      id: "gemm",
      title: "GEMM",
      note:
        "symmkit's GEMM (what <code>matmul()</code> runs) against cuBLASLt on one GPU; where that is not the " +
        "plain Hopper kernel unsplit, the plain kernel too, for what the choice gains. Time over cuBLASLt's " +
        "shows the few-row shapes, whose TFLOP/s are small.",
      groups: grouped(
        of(items, "gemm"),
        () => ({ title: "", order: 0 }),
        (r) => gemmCharts(r, c),
      ),
    },
    {
      id: "fused",
      title: "Fused matmuls",
      note:
        "TFLOP/s of the GEMM one rank computes, at each implementation's time: the fused constructions, " +
        "<code>sequential</code> (collective then GEMM, or GEMM then collective), NCCL + cuBLASLt, and the " +
        "floors, symmkit's GEMM alone and cuBLASLt alone. Time over the GEMM alone: 1 is communication fully " +
        "hidden.",
      groups: grouped(
        fused,
        (r) => ({
          title: `${r.bench}, world size ${r.environment.worldSize}`,
          order: FUSED_BENCHES.indexOf(r.bench) * 1000 + r.environment.worldSize,
        }),
        (r) => fusedCharts(r, c),
      ),
    },
    {
      id: "ar-norm",
      title: "All-reduce + RMSNorm",
      note:
        "allReduceRmsNorm (all-reduce, bias, residual, RMSNorm) by tokens per rank: every algorithm beside " +
        "the plain all-reduce of the same bytes (symmkit's best, dotted grey; NCCL's, dotted black) and " +
        "NCCL's all-reduce followed by the norm kernel (<code>nccl_norm</code>), the unfused path a framework " +
        "runs.",
      groups: grouped(arNorm, byWorld, (r) => arNormCharts(r, c)),
    },
    {
      id: "moe",
      title: "MoE dispatch and combine",
      note:
        "Per tokens per rank: dispatch <code>pull</code> timed eagerly (events around each call, its host " +
        "round trip included), the rest from CUDA-graph replays. GB/s: the token rows this rank receives.",
      groups: grouped(of(items, "moe"), byWorld, moeCharts),
    },
    {
      id: "pytorch",
      title: "PyTorch",
      note:
        "PyTorch's figures on the shapes symmkit's benchmarks time, measured in the same call: NCCL through " +
        "torch.distributed, cuBLAS through torch.matmul, F.rms_norm, and PyTorch's symmetric-memory fused " +
        "matmuls (<code>bench/torch-baselines.py</code>). GPU time per call from CUDA-graph replays, or " +
        "eager where a call could not be captured (the title says which).",
      groups: grouped(of(items, "pytorch"), byWorld, pytorchCharts),
    },
    {
      id: "launch",
      title: "Launches and eager calls",
      note:
        "Host time per kernel launch and GPU time per launch replayed from a graph; host and wall time per " +
        "eager collective call (no graph), against one bare launch.",
      groups: [
        { title: "Kernel launch", rows: [of(items, "launch").map(launchChart)] },
        { title: "Eager collective calls", rows: [of(items, "eager").map(eagerChart)] },
      ],
    },
    {
      id: "barrier",
      title: "Barrier",
      note: "GPU time per barrier or put/wait round trip.",
      groups: one([of(items, "barrier").map(barrierChart)]),
    },
    {
      id: "link",
      title: "NVLink",
      note: "Per rank, to or from every peer at once: SM copies by launch shape, and the copy engines.",
      groups: one([of(items, "link").map(linkChart)]),
    },
    {
      id: "cpu",
      title: "CPU backend suites",
      note:
        "Records of the CPU-side suites: the fault suite's times per fault, the soak's memory per rank over " +
        "its calls, the rendezvous store's rounds under a fuzz. Host times, on a shared machine.",
      groups: one([
        [
          ...of(items, "faults").map(faultsChart),
          ...of(items, "soak").map(soakChart),
          ...of(items, "store-fuzz").map(storeFuzzChart),
        ],
      ]),
    },
  ];
  return {
    sections: all
      .map((s) => ({ ...s, groups: s.groups.filter((g) => g.rows.some((r) => r.length > 0)) }))
      .filter((s) => s.groups.length > 0),
    tables: of(items, "table"),
    unused: items.filter((x): x is Unused => x.kind === "unused"),
  };
}

/** Every chart of a plan, in the page's order. */
export const chartsOf = <C>(sections: readonly Section<C>[]): C[] =>
  sections.flatMap((s) => s.groups.flatMap((g) => g.rows.flat()));
