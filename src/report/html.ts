// The report page: one self-contained HTML file, every chart's SVG inline (no network, no scripts), a
// heading per chart naming its machine, world size, revision and source file, then the results that
// have no chart as tables, the files that gave nothing, each with the reason, and every input file with
// its digest and what it gave (what the test of a committed report compares).
import { machineParts, specDigest, type Chart } from "./chart-base.js";
import type { InputFile, Unused } from "./inputs.js";
import type { AnyEnvironment, TableResult } from "./results.js";
import type { Section } from "./sections.js";

/** Marks a page as this generator's, so that a new report may remove the old one's chart files. */
export const GENERATOR = "symmkit report";

export interface RenderedChart {
  readonly chart: Chart;
  readonly svg: string;
  /** The chart's files, relative to the page: its SVG, then its PNG when made. */
  readonly files: readonly string[];
}

const escape = (s: string): string =>
  s.replace(/[&<>"]/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[ch]!);

function meta(e: AnyEnvironment, label: string): string {
  const parts = [...machineParts(e), `rev ${e.gitRevision}`, ...(e.date ? [e.date.slice(0, 10)] : [])];
  return [...parts.map(escape), `<code>${escape(label)}</code>`].join(" · ");
}

function figure({ chart, svg, files }: RenderedChart): string {
  const links = files.map((f) => `<a href="${escape(f)}">${escape(f.split(".").at(-1)!.toUpperCase())}</a>`);
  return `<figure id="${escape(chart.name)}" data-spec="${specDigest(chart)}">
<h4>${escape(chart.what)} <span class="meta">${meta(chart.environment, chart.source.label)}</span></h4>
${svg}
<figcaption>${links.join(" · ")}</figcaption>
</figure>`;
}

function table(t: TableResult): string {
  const row = (cells: readonly string[], tag: string): string =>
    `<tr>${cells.map((c) => `<${tag}>${escape(c)}</${tag}>`).join("")}</tr>`;
  return `<h3>${escape(t.title)} <span class="meta">${meta(t.environment, t.source.label)}</span></h3>
<table>
${row(t.header, "th")}
${t.rows.map((r) => row(r, "td")).join("\n")}
</table>`;
}

const STYLE = `body { font-family: sans-serif; margin: 2em; max-width: 1400px; color: #222; }
h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
h4 { font-size: 0.95em; margin: 0 0 0.3em; }
.meta { font-weight: normal; color: #555; font-size: 0.9em; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(540px, 1fr)); gap: 1.5em; margin-bottom: 1.5em; }
figure { margin: 0; }
figure svg { max-width: 100%; height: auto; }
figcaption { font-size: 0.85em; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }`;

/** What an input file gave, for the inputs' table. */
function gave(f: InputFile, charts: number): string {
  const unused = f.items.filter((x): x is Unused => x.kind === "unused");
  const tables = f.items.filter((x) => x.kind === "table").length;
  const parts = [
    ...(charts ? [`${charts} chart${charts > 1 ? "s" : ""}`] : []),
    ...(tables ? [`${tables} table${tables > 1 ? "s" : ""}`] : []),
    ...unused.map((u) => `not charted: ${u.reason}`),
  ];
  return parts.join("; ") || "nothing";
}

export function page(o: {
  inputs: readonly string[];
  sections: readonly Section<RenderedChart>[];
  tables: readonly TableResult[];
  unused: readonly Unused[];
  files: readonly InputFile[];
}): string {
  const all = o.sections.flatMap((s) => s.groups.flatMap((g) => g.rows.flat()));
  const perFile = new Map<string, number>();
  for (const { chart } of all) perFile.set(chart.source.label, (perFile.get(chart.source.label) ?? 0) + 1);
  const nav = [
    ...o.sections.map((s) => [s.id, s.title] as const),
    ...(o.tables.length ? [["tables", "Results without a chart"] as const] : []),
    ...(o.unused.length ? [["unused", "Files not charted"] as const] : []),
    ["inputs", "Inputs"] as const,
  ];
  const body = [
    `<h1>symmkit benchmark results</h1>`,
    `<p>${all.length} charts from ${o.files.length} files (${o.inputs.map((i) => `<code>${escape(i)}</code>`).join(", ")}).
GPU times are from CUDA-graph replays (medians) unless a section says otherwise, each implementation validated
first and measured in the same run as its baselines (see <code>src/bench/</code>). Each chart names its machine,
world size, git revision and file.</p>`,
    `<nav><ul>${nav.map(([id, t]) => `<li><a href="#${id}">${escape(t)}</a></li>`).join("")}</ul></nav>`,
    ...o.sections.map(
      (s) => `<section id="${s.id}">
<h2>${escape(s.title)}</h2>
<p>${s.note}</p>
${s.groups
  .map(
    (g) =>
      (g.title ? `<h3>${escape(g.title)}</h3>\n` : "") +
      g.rows.map((row) => `<div class="charts">\n${row.map(figure).join("\n")}\n</div>`).join("\n"),
  )
  .join("\n")}
</section>`,
    ),
    ...(o.tables.length
      ? [
          `<section id="tables">\n<h2>Results without a chart</h2>\n${o.tables.map(table).join("\n")}\n</section>`,
        ]
      : []),
    ...(o.unused.length
      ? [
          `<section id="unused">
<h2>Files not charted</h2>
<ul>
${o.unused.map((u) => `<li><code>${escape(u.source.label)}</code>: ${escape(u.reason)}</li>`).join("\n")}
</ul>
</section>`,
        ]
      : []),
    `<section id="inputs">
<h2>Inputs</h2>
<p>Every file read, the first digits of its SHA-256 (all of them in the row's <code>data-sha256</code>) and what
it gave.</p>
<table>
<tr><th>file</th><th>SHA-256</th><th>gave</th></tr>
${o.files
  .map(
    (f) =>
      `<tr data-sha256="${f.sha256}"><td><code>${escape(f.source.label)}</code></td>` +
      `<td><code>${f.sha256.slice(0, 12)}</code></td><td>${escape(gave(f, perFile.get(f.source.label) ?? 0))}</td></tr>`,
  )
  .join("\n")}
</table>
</section>`,
  ];
  // prettier-ignore: the page is generated, and committed under docs/, which `prettier --check .` covers.
  return `<!doctype html>
<!-- prettier-ignore -->
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="generator" content="${GENERATOR}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>symmkit benchmark results</title>
<style>
${STYLE}
</style>
</head>
<body>
${body.join("\n")}
</body>
</html>
`;
}
