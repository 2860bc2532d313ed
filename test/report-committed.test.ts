// The committed results and their report: every JSON under bench/results is a kind of result the report
// charts, and docs/report is the report of what bench/results holds now, made by this generator. Checked
// without rendering (well under a second): the page lists every input with its SHA-256 and records a
// digest of each chart's Vega-Lite spec; both are compared with bench/results read and planned afresh.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { PACKAGE_ROOT } from "../src/paths.js";
import { specDigest } from "../src/report/chart-base.js";
import { readInputFiles } from "../src/report/inputs.js";
import { chartsOf, plan } from "../src/report/sections.js";

const RESULTS = path.join(PACKAGE_ROOT, "bench", "results");
const REPORT = path.join(PACKAGE_ROOT, "docs", "report");
const REGENERATE =
  "regenerate it from the package root: npm run build && node dist/src/cli.js report bench/results --out docs/report";

const files = readInputFiles([RESULTS], PACKAGE_ROOT);
const planned = plan(files);
const charts = chartsOf(planned.sections);

test("report: every JSON under bench/results is charted", () => {
  assert.ok(files.length > 0, "bench/results holds no JSON");
  const perFile = new Map<string, number>();
  for (const c of charts) perFile.set(c.source.label, (perFile.get(c.source.label) ?? 0) + 1);
  const uncharted = files.flatMap((f) => {
    const reasons = f.items.flatMap((x) => (x.kind === "unused" ? [x.reason] : []));
    if (reasons.length === 0 && perFile.has(f.source.label)) return [];
    return [`${f.source.label}: ${reasons.join("; ") || "no chart"}`];
  });
  assert.deepEqual(
    uncharted,
    [],
    "results the report has no chart for: give their kind one in src/report/ (results.ts, sections.ts), " +
      "or keep such files out of bench/results",
  );
});

test("report: docs/report is the report of bench/results", () => {
  const page = fs.readFileSync(path.join(REPORT, "index.html"), "utf8");
  const listed = [...page.matchAll(/<tr data-sha256="([0-9a-f]*)"><td><code>([^<]*)<\/code>/g)].map(
    ([, sha256, label]) => `${label!.replaceAll("&amp;", "&")} ${sha256!}`,
  );
  assert.deepEqual(
    listed,
    files.map((f) => `${f.source.label} ${f.sha256}`),
    `docs/report lists other inputs than bench/results holds: ${REGENERATE}`,
  );
  const shown = [...page.matchAll(/<figure id="([^"]+)" data-spec="([0-9a-f]+)">/g)].map(
    ([, name, digest]) => `${name!} ${digest!}`,
  );
  assert.deepEqual(
    shown,
    charts.map((c) => `${c.name} ${specDigest(c)}`),
    `docs/report's charts are not what this generator makes of bench/results: ${REGENERATE}`,
  );
  assert.deepEqual(
    fs.readdirSync(REPORT).sort(),
    ["index.html", ...charts.map((c) => `${c.name}.svg`)].sort(),
    `docs/report holds other files than the page and its charts: ${REGENERATE}`,
  );
});
