// The report generator (src/report/): a small set of real results (test/fixtures/report/: trimmed copies
// of bench/results/h200x4/all-reduce.json, h200x2/ag-gemm-bf16.json and h200/gemm-bf16.json) rendered
// into a temporary folder; the page, its SVGs and PNGs checked; then, where a Chromium is installed,
// the page screenshotted headless.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { PACKAGE_ROOT } from "../src/paths.js";
import { writeReport } from "../src/report/report.js";
import { recognise } from "../src/report/inputs.js";
import { busFactor } from "../src/report/charts.js";

const FIXTURES = path.join(PACKAGE_ROOT, "test", "fixtures", "report");
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function tempDir(t: { after: (fn: () => void) => void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-report-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** XML well-formedness, as far as vega's SVG needs: one root element, tags nested and closed,
 * attributes quoted, no stray "<", every "&" an entity. */
function assertWellFormed(xml: string, name: string): void {
  const tag = /<(\/?)([A-Za-z][\w:.-]*)((?:\s+[\w:.-]+="[^"<]*")*)\s*(\/?)>/y;
  const stack: string[] = [];
  let roots = 0;
  let i = 0;
  while (i < xml.length) {
    const lt = xml.indexOf("<", i);
    const text = xml.slice(i, lt < 0 ? xml.length : lt);
    assert.doesNotMatch(text, /&(?!(?:amp|lt|gt|quot|apos|#\d+|#x[0-9a-f]+);)/i, `${name}: bare & in text`);
    if (lt < 0) break;
    assert.ok(stack.length > 0 || text.trim() === "", `${name}: text outside the root element`);
    tag.lastIndex = lt;
    const m = tag.exec(xml);
    assert.ok(m, `${name}: malformed tag at ${lt}: ${xml.slice(lt, lt + 60)}`);
    const [, close, tagName, , selfClosing] = m;
    if (close) assert.equal(stack.pop(), tagName, `${name}: </${tagName}> closes the wrong element`);
    else {
      if (stack.length === 0) roots++;
      if (!selfClosing) stack.push(tagName!);
    }
    i = tag.lastIndex;
  }
  assert.deepEqual(stack, [], `${name}: unclosed elements`);
  assert.equal(roots, 1, `${name}: one root element`);
}

/** The fixtures, plus files written for the test: the all-reduce result with a PyTorch figure added,
 * a file that is not JSON and one that is JSON but no result. */
function inputs(dir: string): string[] {
  const allReduce = JSON.parse(fs.readFileSync(path.join(FIXTURES, "all-reduce-w4.json"), "utf8")) as {
    rows: { us: Record<string, number> }[];
  };
  for (const row of allReduce.rows) row.us.pytorch = row.us.nccl! * 1.05;
  const extra = path.join(dir, "in");
  fs.mkdirSync(extra);
  fs.writeFileSync(path.join(extra, "with-pytorch.json"), JSON.stringify(allReduce));
  fs.writeFileSync(path.join(extra, "broken.json"), "{ not json");
  fs.writeFileSync(path.join(extra, "not-a-result.json"), JSON.stringify({ hello: 1 }));
  return [FIXTURES, extra];
}

test("report: the page, one SVG and one PNG per chart, the unusable files listed", async (t) => {
  const dir = tempDir(t);
  const out = path.join(dir, "out");
  const given = inputs(dir);
  const { html, files } = await writeReport(given, { out, png: true });
  assert.equal(html, path.join(out, "index.html"));
  const page = fs.readFileSync(html, "utf8");
  const svgs = files.filter((f) => f.endsWith(".svg"));
  const pngs = files.filter((f) => f.endsWith(".png"));
  // Two all-reduce results (latency, bus bandwidth, ratio to NCCL each), a GEMM and a fused chart.
  assert.equal(svgs.length, 8);
  assert.equal(pngs.length, svgs.length);
  assert.deepEqual(fs.readdirSync(out).sort(), ["index.html", ...files.map((f) => path.basename(f))].sort());

  for (const svg of svgs) {
    const text = fs.readFileSync(svg, "utf8");
    assertWellFormed(text, path.basename(svg));
    assert.ok(page.includes(`href="${path.basename(svg)}"`), `the page links ${path.basename(svg)}`);
    assert.ok(page.includes(text), `the page holds ${path.basename(svg)} inline`);
  }
  assertWellFormed(page.slice(page.indexOf("<body>"), page.indexOf("</body>") + 7), "the page's body");
  for (const png of pngs) {
    const bytes = fs.readFileSync(png);
    assert.ok(bytes.subarray(0, 8).equals(PNG_SIGNATURE), `${path.basename(png)} is a PNG`);
    assert.ok(bytes.length > 5000, `${path.basename(png)}: ${bytes.length} bytes`);
  }

  const svgNamed = (end: string): string => {
    const file = svgs.filter((f) => f.endsWith(end));
    assert.equal(file.length, 1, `one chart ending ${end}: ${svgs.join(", ")}`);
    return fs.readFileSync(file[0]!, "utf8");
  };
  const has = (svg: string, ...texts: string[]): void => {
    for (const x of texts)
      assert.match(
        svg,
        new RegExp(`>${x.replace(/[()|.*+?]/g, "\\$&")}</t(?:ext|span)>`),
        `the chart shows "${x}"`,
      );
  };
  const impls = ["one_shot", "two_shot", "lamport", "lamport_two_shot", "nccl", "one_shot_plain"];
  const latency = svgNamed("report-all-reduce-w4-latency.svg");
  has(latency, "latency (µs)", "size per rank (bytes)", "implementation", ...impls, "4K", "1G");
  has(latency, "NVIDIA H200 (sm_90a, 132 SMs), world size 4");
  has(latency, "rev 5b62477 · test/fixtures/report/all-reduce-w4.json");
  has(svgNamed("report-all-reduce-w4-busbw.svg"), "bus bandwidth (GB/s)", ...impls);
  has(
    svgNamed("report-all-reduce-w4-vs-nccl.svg"),
    "best symmkit time / NCCL time",
    "best symmkit",
    "lamport",
  );
  has(svgNamed("with-pytorch-latency.svg"), "pytorch", "nccl");
  has(svgNamed("gemm-bf16-tflops.svg"), "TFLOP/s", "m × n × k", "symmkit", "cuBLASLt", "8192×8192×8192");
  has(svgNamed("ag-gemm-bf16-w2-tflops.svg"), "TFLOP/s per rank", "fused_copy_engine", "nccl_cublaslt");

  assert.match(page, /<code>[^<]*broken\.json<\/code>: not JSON/);
  assert.match(page, /<code>[^<]*not-a-result\.json<\/code>: not a symmkit benchmark result/);
  assert.match(
    page,
    /all-reduce latency <span class="meta">NVIDIA H200 \(sm_90a, 132 SMs\) · world size 4 · rev 5b62477/,
  );

  // The same inputs give the same files, byte for byte.
  const again = await writeReport(given, { out: path.join(dir, "out2"), png: true });
  assert.equal(again.files.length, files.length);
  for (const f of again.files) {
    const name = path.basename(f);
    assert.ok(fs.readFileSync(f).equals(fs.readFileSync(path.join(out, name))), `${name} is the same`);
  }

  // A new report in the same folder removes the old one's charts it does not make again.
  const { files: gemmOnly } = await writeReport([path.join(FIXTURES, "gemm-bf16.json")], { out, png: false });
  assert.deepEqual(fs.readdirSync(out).sort(), ["gemm-bf16-tflops.svg", "index.html"]);
  assert.deepEqual(gemmOnly, [path.join(out, "gemm-bf16-tflops.svg")]);
});

test("report: an input that does not exist is a typed error", async (t) => {
  const dir = tempDir(t);
  await assert.rejects(writeReport([path.join(dir, "nothing-here")], { out: dir, png: false }), {
    code: "SYMMKIT_INVALID_ARGUMENT",
    message: /nothing-here: no such file or folder/,
  });
  await assert.rejects(writeReport([], { out: dir, png: false }), { code: "SYMMKIT_INVALID_ARGUMENT" });
});

test("report: every kind of result src/bench writes is recognised, or set aside with the reason", () => {
  const source = { label: "x.json", slug: "x" };
  const environment = { device: "GPU", deviceCount: 4, worldSize: 2, gitRevision: "abc", date: "2026-01-01" };
  const kind = (x: unknown): string => {
    const [r] = recognise(x, source);
    return typeof r === "string" ? r : r!.kind;
  };
  const launch = { environment, hostUsPerLaunch: { kernelApi: 3.3 }, gpuUsPerLaunchInGraph: 0.7 };
  assert.equal(kind(launch), "table");
  assert.equal(
    kind({
      environment,
      bytes: 4096,
      launch,
      rows: [{ collective: "all-reduce", algorithm: "lamport", hostUs: 3.9, wallUs: 4.1 }],
    }),
    "eager",
  );
  assert.equal(
    kind({
      environment,
      bytesPerPeer: 1 << 20,
      rows: [{ engine: "sm", direction: "push", blocks: 1, threads: 32, unroll: 1, us: 9, gbPerS: 300 }],
    }),
    "link",
  );
  assert.equal(kind({ environment, rows: [{ measure: "barrier", blocks: 1, usPerOp: 1.2 }] }), "table");
  const rules = { "all-reduce": [{ maxBytes: 4096, algorithm: "lamport" }] };
  assert.equal(kind({ device: "GPU", worldSize: 2, gitRevision: "abc", rules }), "table");
  const collective = {
    environment,
    collective: "all-gather",
    rows: [{ bytes: 8192, us: { ll: 3, nccl: 6 } }],
  };
  assert.deepEqual(
    recognise([collective, { ...collective, collective: "reduce-scatter" }], source).map((r) =>
      typeof r === "string" ? r : r.source.slug,
    ),
    ["x-all-gather", "x-reduce-scatter"],
  );
  assert.match(
    kind({ description: "The CPU soak (test/cpu-soak.test.ts). More." }),
    /not a GPU benchmark: The CPU soak/,
  );
  assert.match(kind({ ...collective, rows: [{ bytes: "8K" }] }), /without rows of bytes and times/);
  assert.match(kind({ ...collective, environment: {} }), /without a valid environment/);
  assert.match(kind(42), /not a JSON object/);
  // nccl-tests' bus bandwidth factors.
  assert.deepEqual(
    [busFactor("all-reduce", 4), busFactor("all-gather", 4), busFactor("reduce-scatter", 2)],
    [1.5, 0.75, 0.5],
  );
});

/** The Chromium the screenshot test runs: $CHROMIUM, else the first of the usual names on PATH. */
function findChromium(): string | undefined {
  if (process.env.CHROMIUM) return process.env.CHROMIUM;
  for (const name of ["chromium", "chromium-browser", "google-chrome"])
    for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
      const file = path.join(dir, name);
      if (dir && fs.existsSync(file)) return file;
    }
  return undefined;
}

test("report: headless Chromium renders the page", async (t) => {
  const chromium = findChromium();
  if (!chromium) {
    t.skip("no Chromium: set CHROMIUM or put chromium on PATH (.ci/chromium.sh installs Debian's)");
    return;
  }
  const dir = tempDir(t);
  const { html } = await writeReport([FIXTURES], { out: path.join(dir, "out"), png: false });
  const shot = path.join(dir, "page.png");
  await promisify(execFile)(
    chromium,
    [
      "--headless",
      // Chromium refuses to run as root with its sandbox; CI containers run as root.
      ...(process.getuid?.() === 0 ? ["--no-sandbox"] : []),
      "--disable-gpu",
      "--hide-scrollbars",
      `--screenshot=${shot}`,
      "--window-size=1200,2000",
      `file://${html}`,
    ],
    { timeout: 60_000 },
  );
  const png = fs.readFileSync(shot);
  assert.ok(png.subarray(0, 8).equals(PNG_SIGNATURE));
  // IHDR: the window's size; a blank page of that size compresses to a few kilobytes.
  assert.deepEqual([png.readUInt32BE(16), png.readUInt32BE(20)], [1200, 2000]);
  assert.ok(png.length > 30_000, `screenshot of ${png.length} bytes: a blank page?`);
});
