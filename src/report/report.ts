// `symmkit report`: benchmark results (the JSON files src/bench/ writes) as one HTML page with a chart per
// view of them, each chart also an SVG file (and a PNG on request). Charts are Vega-Lite specs compiled
// and rendered to SVG in this process (vega's headless renderer), PNGs rasterised by resvg: no browser,
// no network. The same inputs give the same files, byte for byte.
import fs from "node:fs";
import path from "node:path";
import { Resvg } from "@resvg/resvg-js";
import { parse, View } from "vega";
import { compile } from "vega-lite";
import { SymmkitError } from "../errors.js";
import { FONT, type Chart } from "./chart-base.js";
import { GENERATOR, page, type RenderedChart } from "./html.js";
import { readInputFiles } from "./inputs.js";
import { plan, type Section } from "./sections.js";

/** The page's name in `out`. */
const PAGE = "index.html";

/** vega's SVG less what only a live, scripted view uses (classes, ARIA roles, pointer events, empty
 * paths) and opacity 1 (the default, and not inherited), the font said once instead of on every text,
 * coordinates to a hundredth of a pixel: a third fewer bytes, which a report holds twice (page, file). */
function compact(svg: string): string {
  return svg
    .replace(/ (?:class|role|aria-[a-z]+|pointer-events)="[^"]*"| opacity="1"/g, "")
    .replace(/<path d="(?:M0,0h0v0h0Z)?"(?: display="none")?\/>/g, "")
    .replaceAll(` font-family="${FONT}"`, "")
    .replace("<svg ", `<svg font-family="${FONT}" `)
    .replace(
      / (d|transform|x|y|x1|x2|y1|y2|width|height)="([^"]*)"/g,
      (_, name: string, value: string) =>
        ` ${name}="${value.replace(/-?\d+\.\d{3,}/g, (n) => String(+Number(n).toFixed(2)))}"`,
    );
}

async function toSvg(chart: Chart): Promise<string> {
  const view = new View(parse(compile(chart.spec).spec), { renderer: "none" });
  try {
    return compact(await view.toSVG());
  } finally {
    view.finalize();
  }
}

/** A file-system call on `file`, its failure a SymmkitError naming the file. */
function onDisk<T>(file: string, call: () => T): T {
  try {
    return call();
  } catch (cause) {
    throw new SymmkitError("SYMMKIT_OS_ERROR", `report: ${file}: ${(cause as Error).message}`, { cause });
  }
}

/** Removes the chart files an earlier report in `out` linked and this one does not write, so that the
 * folder holds one report. Only a page this generator wrote is read; anything else is left alone. */
function removeOldCharts(out: string, keep: ReadonlySet<string>): void {
  const file = path.join(out, PAGE);
  if (!fs.existsSync(file)) return;
  const old = onDisk(file, () => fs.readFileSync(file, "utf8"));
  if (!old.includes(`<meta name="generator" content="${GENERATOR}">`)) return;
  for (const [, name] of old.matchAll(/href="([\w.-]+\.(?:svg|png))"/g)) {
    const stale = path.join(out, name!);
    if (!keep.has(name!)) onDisk(stale, () => fs.rmSync(stale, { force: true }));
  }
}

/**
 * Reads the benchmark results in `inputs` (files, or folders searched for *.json) and writes into
 * `options.out` the page (index.html), one SVG per chart and, with `png`, one PNG per chart. Files that
 * are not results, or not readable, are listed on the page with the reason, and every input with its
 * SHA-256 (labels relative to the working directory). `html` is the page's path,
 * `files` the chart files' paths in the page's order. Throws SymmkitError: SYMMKIT_INVALID_ARGUMENT when
 * an input does not exist, SYMMKIT_OS_ERROR when a folder cannot be listed or `out` written.
 */
export async function writeReport(
  inputs: string[],
  options: { out: string; png: boolean },
): Promise<{ html: string; files: string[] }> {
  const files = readInputFiles(inputs);
  const planned = plan(files);
  const out = path.resolve(options.out);
  onDisk(out, () => fs.mkdirSync(out, { recursive: true }));
  const write = (file: string, data: string | Buffer): void =>
    onDisk(file, () => fs.writeFileSync(file, data));
  const written: string[] = [];
  const render = async (chart: Chart): Promise<RenderedChart> => {
    const svg = await toSvg(chart);
    const chartFiles = [`${chart.name}.svg`];
    write(path.join(out, chartFiles[0]!), svg);
    if (options.png) {
      chartFiles.push(`${chart.name}.png`);
      write(
        path.join(out, chartFiles[1]!),
        new Resvg(svg, { fitTo: { mode: "zoom", value: 2 } }).render().asPng(),
      );
    }
    written.push(...chartFiles.map((f) => path.join(out, f)));
    return { chart, svg, files: chartFiles };
  };
  const rendered: Section<RenderedChart>[] = [];
  for (const s of planned.sections) {
    const groups: Section<RenderedChart>["groups"][number][] = [];
    for (const g of s.groups) {
      const rows: RenderedChart[][] = [];
      for (const row of g.rows) {
        const done: RenderedChart[] = [];
        for (const chart of row) done.push(await render(chart));
        rows.push(done);
      }
      groups.push({ title: g.title, rows });
    }
    rendered.push({ ...s, groups });
  }
  removeOldCharts(out, new Set(written.map((f) => path.basename(f))));
  const html = path.join(out, PAGE);
  write(
    html,
    page({
      inputs,
      sections: rendered,
      tables: planned.tables,
      unused: planned.unused,
      files,
    }),
  );
  return { html, files: written };
}
