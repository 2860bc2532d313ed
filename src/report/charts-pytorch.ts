// PyTorch's figures (bench/torch-baselines.py): one chart per section, GPU µs per call of each of its
// implementations over the section's problems, in the file's order, to read beside symmkit's charts of the
// same benchmark and world size.
import { about, CONFIG, logAxis, seriesScale, SIZE, title, type Chart } from "./chart-base.js";
import type { PytorchResult } from "./results.js";

/** The x axis's title by what a section's problems are. */
const PROBLEM_TITLE: Readonly<Record<string, string>> = {
  "ar-norm": "tokens per rank",
  "send-recv": "bytes",
  "all-to-all": "bytes per rank",
};

/** PyTorch's implementations are no symmkit algorithm: coloured per chart, apart within it. */
export function pytorchCharts(r: PytorchResult): Chart[] {
  const sections = [...new Set(r.rows.map((x) => x.section))];
  return sections.map((section) => {
    const rows = r.rows.filter((x) => x.section === section);
    const values = rows.map((x) => ({
      problem: x.problem,
      impl: x.series ? `${x.impl}, ${x.series}` : x.impl,
      us: x.us,
    }));
    const impls = [...new Set(values.map((x) => x.impl))];
    const modes = [...new Set(rows.map((x) => x.mode))].join(", ");
    return {
      name: `${r.source.slug}-${section}`,
      what: `PyTorch, ${section}`,
      ...about(r),
      spec: {
        ...SIZE,
        config: CONFIG,
        title: title(`PyTorch, ${section}: GPU µs per call (${modes})`, r.environment, r.source),
        data: { values },
        mark: { type: "line", point: true },
        encoding: {
          x: {
            field: "problem",
            type: "ordinal",
            sort: [...new Set(rows.map((x) => x.problem))],
            title: PROBLEM_TITLE[section] ?? "m × n × k",
            axis: { labelAngle: -30 },
          },
          y: { field: "us", type: "quantitative", title: "µs per call", ...logAxis(rows.map((x) => x.us)) },
          color: {
            field: "impl",
            type: "nominal",
            title: "implementation",
            scale: seriesScale(impls),
            legend: { labelLimit: 600 },
          },
        },
      },
    };
  });
}
