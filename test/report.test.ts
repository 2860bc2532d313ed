// The report generator (src/report/): trimmed copies of real results, one file of every kind
// `symmkit bench`, `symmkit tune`, bench/torch-baselines.py and the CPU-side suites write, in
// test/fixtures/report/ (hosts-2x2.json and pytorch-w2.json are made up: no result across hosts and no
// PyTorch figures are committed yet; tune-table-w2.json is tune/'s table),
// rendered into a temporary folder; the page, its SVGs and PNGs checked; every kind of result recognised
// from its JSON; then, where a Chromium is installed, the page loaded and screenshotted headless.
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { PACKAGE_ROOT } from "../src/paths.js";
import { writeReport } from "../src/report/report.js";
import { busFactor, recognise } from "../src/report/results.js";

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
  // Not JSON by name: never read.
  fs.writeFileSync(path.join(extra, "notes.txt"), "hand-written notes");
  return [FIXTURES, extra];
}

/** Every chart the fixtures give, by the end of its file's name: each kind of result's charts. */
const FIXTURE_CHARTS = [
  "ag-gemm-bf16-w2-tflops",
  "ag-gemm-bf16-w2-vs-gemm",
  "all-reduce-w4-latency",
  "all-reduce-w4-busbw",
  "all-reduce-w4-vs-nccl",
  "all-to-all-w4-latency",
  "all-to-all-w4-bandwidth",
  "all-to-all-w4-vs-nccl",
  "ar-norm-w2-h8192-latency",
  "ar-norm-w2-h8192-vs-unfused",
  "barrier-w4-barrier",
  "cpu-fault-suite-faults",
  "cpu-soak-soak",
  "cpu-store-fuzz-store-fuzz",
  "eager-w2-eager",
  "gemm-ar-bf16-w4-tflops",
  "gemm-ar-bf16-w4-vs-gemm",
  "gemm-bf16-tflops",
  "gemm-bf16-vs-cublaslt",
  ...["all-reduce", "all-gather", "reduce-scatter"].flatMap((c) =>
    ["latency", "busbw", "vs-nccl"].map((m) => `hosts-2x2-${c}-${m}`),
  ),
  "launch-launch",
  "link-w4-link",
  "moe-w4-latency",
  "moe-w4-bandwidth",
  ...["ar-norm", "gemm-rs", "send-recv"].map((s) => `pytorch-w2-${s}`),
  ...["uni", "bi"].flatMap((m) => ["latency", "bandwidth", "vs-nccl"].map((x) => `send-recv-w4-${m}-${x}`)),
  ...["latency", "busbw", "vs-nccl"].map((m) => `with-pytorch-${m}`),
];

test("report: every kind of result charted; the page, one SVG and one PNG per chart, the rest listed", async (t) => {
  const dir = tempDir(t);
  const out = path.join(dir, "out");
  const given = inputs(dir);
  const { html, files } = await writeReport(given, { out, png: true });
  assert.equal(html, path.join(out, "index.html"));
  const page = fs.readFileSync(html, "utf8");
  const svgs = files.filter((f) => f.endsWith(".svg"));
  const pngs = files.filter((f) => f.endsWith(".png"));
  const stems = svgs.map((f) => path.basename(f, ".svg"));
  for (const want of FIXTURE_CHARTS)
    assert.equal(
      stems.filter((s) => s.endsWith(want)).length,
      1,
      `one chart ending ${want}: ${stems.join(", ")}`,
    );
  assert.equal(svgs.length, FIXTURE_CHARTS.length, stems.join(", "));
  assert.equal(pngs.length, svgs.length);
  assert.deepEqual(fs.readdirSync(out).sort(), ["index.html", ...files.map((f) => path.basename(f))].sort());

  for (const svg of svgs) {
    const text = fs.readFileSync(svg, "utf8");
    assertWellFormed(text, path.basename(svg));
    assert.ok(page.includes(`href="${path.basename(svg)}"`), `the page links ${path.basename(svg)}`);
    assert.ok(page.includes(text), `the page holds ${path.basename(svg)} inline`);
    // Each chart names its machine and revision (a CPU record names its host).
    assert.match(text, />rev [\w]+ · [^<]+\.json</, `${path.basename(svg)} names its revision and file`);
    assert.match(
      text,
      />(NVIDIA H[12]00[^<]*, world size \d|AMD EPYC, 2 CPUs)/,
      `${path.basename(svg)}: machine`,
    );
  }
  assertWellFormed(page.slice(page.indexOf("<body>"), page.indexOf("</body>") + 7), "the page's body");
  for (const png of pngs) {
    const bytes = fs.readFileSync(png);
    assert.ok(bytes.subarray(0, 8).equals(PNG_SIGNATURE), `${path.basename(png)} is a PNG`);
    assert.ok(bytes.length > 5000, `${path.basename(png)}: ${bytes.length} bytes`);
  }

  const svgNamed = (end: string): string => {
    const file = svgs.filter((f) => f.endsWith(`${end}.svg`));
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
  const latency = svgNamed("report-all-reduce-w4-latency");
  has(latency, "latency (µs)", "size per rank (bytes)", "implementation", ...impls, "4K", "1G");
  has(latency, "NVIDIA H200 (sm_90a, 132 SMs), world size 4");
  has(latency, "rev 5b62477 · test/fixtures/report/all-reduce-w4.json");
  has(svgNamed("report-all-reduce-w4-busbw"), "bus bandwidth (GB/s)", ...impls);
  has(svgNamed("report-all-reduce-w4-vs-nccl"), "best symmkit time / NCCL time", "best symmkit", "lamport");
  has(svgNamed("with-pytorch-latency"), "pytorch", "nccl");
  has(svgNamed("gemm-bf16-tflops"), "TFLOP/s", "m × n × k", "symmkit", "cuBLASLt", "8192×8192×8192");
  has(
    svgNamed("ag-gemm-bf16-w2-tflops"),
    "TFLOP/s per rank",
    "fused_copy_engine",
    "nccl_cublaslt",
    "gemm_alone",
  );
  has(
    svgNamed("gemm-ar-bf16-w4-vs-gemm"),
    "time / symmkit's GEMM alone",
    "fused",
    "nccl_cublaslt",
    "1×8192×28672",
  );
  has(
    svgNamed("all-to-all-w4-vs-nccl"),
    "all-to-all: best symmkit time / NCCL grouped send/recv time",
    "pull",
  );
  has(svgNamed("all-to-all-w4-latency"), "pull", "nccl", "nccl_raw", "input size per rank (bytes)");
  has(
    svgNamed("send-recv-w4-uni-bandwidth"),
    "send/recv one way bandwidth (u8)",
    "put",
    "GB/s, one direction",
  );
  has(svgNamed("send-recv-w4-bi-latency"), "sendRecv both ways latency (u8)", "copy_engine");
  has(svgNamed("hosts-2x2-all-gather-vs-nccl"), "hierarchical", "best symmkit / baseline");
  has(svgNamed("hosts-2x2-all-gather-latency"), "output size per rank (bytes)", "16K");
  has(svgNamed("ar-norm-w2-h8192-latency"), "lamport", "all-reduce alone, best symmkit", "nccl_norm", "4096");
  has(
    svgNamed("ar-norm-w2-h8192-vs-unfused"),
    "over NCCL's all-reduce + norm",
    "tokens per rank (× 8192 bf16)",
  );
  has(svgNamed("moe-w4-latency"), "dispatch, pull (eager)", "combine, in place", "µs per call");
  has(svgNamed("moe-w4-bandwidth"), "MoE, hidden 7168, top-8 of 256: GB/s", "dispatch, pull_device");
  has(svgNamed("launch-launch"), "host: Kernel.launch", "GPU: in a CUDA graph");
  has(svgNamed("eager-w2-eager"), "all-reduce lamport", "host time per call");
  has(svgNamed("barrier-w4-barrier"), "symm_sync&lt;true, true&gt;", "32 blocks");
  has(svgNamed("link-w4-link"), "copy engine push", "GB/s per rank");
  has(svgNamed("cpu-fault-suite-faults"), "kill-after (n 54)", "ms from the call to the typed error");
  has(svgNamed("cpu-fault-suite-faults"), "AMD EPYC, 2 CPUs, Node v20.20.2, world sizes 2, 3");
  has(svgNamed("cpu-soak-soak"), "RSS", "live heap", "rank 0", "calls made");
  has(svgNamed("cpu-store-fuzz-store-fuzz"), "under the fuzz", "alone");

  assert.match(page, /<code>[^<]*broken\.json<\/code>: not JSON/);
  assert.match(page, /<code>[^<]*not-a-result\.json<\/code>: not a symmkit benchmark result/);
  assert.doesNotMatch(page, /notes\.txt/);
  assert.match(
    page,
    /all-reduce latency <span class="meta">NVIDIA H200 \(sm_90a, 132 SMs\) · world size 4 · rev 5b62477/,
  );
  assert.match(page, /Tune table \(bf16\): what algorithm &quot;auto&quot; picks/);
  // Every input in the inputs' table with its digest.
  const listed = [...page.matchAll(/<tr data-sha256="([0-9a-f]{64})"><td><code>([^<]+)<\/code>/g)];
  assert.equal(listed.length, fs.readdirSync(FIXTURES).length + 3);
  assert.ok(listed.some(([, , label]) => label === "test/fixtures/report/hosts-2x2.json"));
  assert.match(
    page,
    /<code>test\/fixtures\/report\/send-recv-w4\.json<\/code><\/td><td><code>[0-9a-f]{12}<\/code><\/td><td>6 charts</,
  );

  // The same inputs give the same charts, byte for byte (PNGs left out: resvg's, from these SVGs).
  const again = await writeReport(given, { out: path.join(dir, "out2"), png: false });
  assert.equal(again.files.length, svgs.length);
  for (const f of again.files) {
    const name = path.basename(f);
    assert.ok(fs.readFileSync(f).equals(fs.readFileSync(path.join(out, name))), `${name} is the same`);
  }

  // A new report in the same folder removes the old one's charts it does not make again.
  const { files: gemmOnly } = await writeReport([path.join(FIXTURES, "gemm-bf16.json")], { out, png: false });
  const gemm = ["gemm-bf16-tflops.svg", "gemm-bf16-vs-cublaslt.svg"];
  assert.deepEqual(fs.readdirSync(out).sort(), [...gemm, "index.html"]);
  assert.deepEqual(
    gemmOnly,
    gemm.map((f) => path.join(out, f)),
  );
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
  const kinds = (x: unknown): string[] =>
    recognise(x, source).map((r) => (typeof r === "string" ? r : `${r.kind}:${r.source.slug}`));
  const kind = (x: unknown): string => kinds(x).join(", ");
  const launch = { environment, hostUsPerLaunch: { kernelApi: 3.3 }, gpuUsPerLaunchInGraph: 0.7 };
  assert.equal(kind(launch), "launch:x");
  assert.equal(
    kind({
      environment,
      bytes: 4096,
      launch,
      rows: [{ collective: "all-reduce", algorithm: "lamport", hostUs: 3.9, wallUs: 4.1 }],
    }),
    "eager:x",
  );
  assert.equal(
    kind({
      environment,
      bytesPerPeer: 1 << 20,
      rows: [{ engine: "sm", direction: "push", blocks: 1, threads: 32, unroll: 1, us: 9, gbPerS: 300 }],
    }),
    "link:x",
  );
  assert.equal(kind({ environment, rows: [{ measure: "barrier", blocks: 1, usPerOp: 1.2 }] }), "barrier:x");
  const rules = { "all-reduce": [{ maxBytes: 4096, algorithm: "lamport" }] };
  assert.equal(kind({ device: "GPU", worldSize: 2, gitRevision: "abc", rules }), "table:x");
  const collective = {
    environment,
    collective: "all-gather",
    rows: [{ bytes: 8192, us: { ll: 3, nccl: 6 } }],
  };
  const bench = (name: string, row: object) => ({ environment, bench: name, seed: "1", rows: [row] });
  const fusedRow = { m: 8, n: 8, k: 8, rankFlops: 1024, us: { fused: 2, gemm_alone: 1 } };
  const arNormRow = { tokens: 1, hidden: 4096, bytes: 8192, us: { lamport: 5, ar_lamport: 4, nccl_norm: 9 } };
  for (const name of ["ag-gemm", "gemm-rs", "gemm-ar"]) assert.equal(kind(bench(name, fusedRow)), "fused:x");
  assert.equal(kind(bench("ar-norm", arNormRow)), "ar-norm:x");
  const moeRow = {
    tokens: 128,
    hidden: 7168,
    topk: 8,
    experts: 256,
    rows: 1024,
    dispatchUs: 300,
    combineUs: 20,
  };
  assert.equal(kind(bench("moe", moeRow)), "moe:x");
  assert.equal(kind(bench("all-to-all", { bytes: 4096, us: { pull: 5, nccl_raw: 9 } })), "sweep:x");
  assert.equal(
    kind(bench("send-recv", { bytes: 4096, us: { uni_put: 5, uni_nccl: 6, bi_put: 7, bi_nccl: 8 } })),
    "sweep:x-uni, sweep:x-bi",
  );
  assert.equal(
    kind({
      ...bench("hosts", { collective: "all-reduce", bytes: 4096, us: { hierarchical: 30, nccl: 40 } }),
      hosts: 2,
      perHost: 2,
    }),
    "sweep:x-all-reduce",
  );
  // symmkit tune --json, and the older array of its collectives.
  assert.deepEqual(
    kinds({
      collectives: [collective, { ...collective, collective: "reduce-scatter" }],
      fused: [bench("ag-gemm", fusedRow), bench("gemm-ar", fusedRow)],
      arNorm: bench("ar-norm", arNormRow),
    }),
    [
      "sweep:x-all-gather",
      "sweep:x-reduce-scatter",
      "fused:x-ag-gemm",
      "fused:x-gemm-ar",
      "ar-norm:x-ar-norm",
    ],
  );
  assert.deepEqual(kinds([collective, collective]), ["sweep:x-all-gather", "sweep:x-all-gather-2"]);
  // The CPU-side records.
  const machine = { cpus: 2, cpu: "AMD EPYC", node: "v20.20.2" };
  const cpu = { description: "A suite. More.", machine, gitRevision: "abc", date: "2026-01-01" };
  const summary = { n: 3, min: 1, median: 2, max: 3 };
  assert.equal(kind({ ...cpu, byFault: { "skip/msToError": summary }, cases: {} }), "faults:x");
  const at = { fds: 22, rssMiB: 80, heapMiB: 6, arrayBuffersMiB: 0.5 };
  const rank = { rank: 0, calls: 10, usPerCall: 300, warmupCalls: 1, atStart: at, atEnd: at, samples: [] };
  assert.equal(kind({ ...cpu, world: 2, calls: 10, ranks: [rank] }), "soak:x");
  assert.equal(
    kind({ ...cpu, runs: [{ fuzzed: { msPerRound: 1 }, alone: { msPerRound: 0.7 } }] }),
    "store-fuzz:x",
  );
  assert.match(kind({ ...cpu, other: 1 }), /a CPU-side record this report has no chart for: A suite$/);
  // What is not charted says why.
  assert.match(
    kind(bench("broadcast", { bytes: 1 })),
    /a broadcast result, which this report has no chart for/,
  );
  assert.match(kind(bench("moe", { tokens: 1 })), /moe result without rows/);
  const pytorchRow = {
    section: "send-recv",
    impl: "nccl send/recv, one way",
    bytes: 4096,
    us: 9,
    mode: "graph",
  };
  assert.equal(kind(bench("pytorch", pytorchRow)), "pytorch:x");
  assert.match(kind(bench("pytorch", { ...pytorchRow, bytes: undefined })), /pytorch result without rows/);
  assert.match(kind({ ...collective, rows: [{ bytes: "8K" }] }), /without rows of bytes and times/);
  assert.match(kind({ ...collective, environment: {} }), /without a valid environment/);
  assert.match(kind({ hello: 1 }), /not a symmkit benchmark result/);
  assert.match(kind(42), /not a JSON object/);
  // nccl-tests' bus bandwidth factors.
  assert.deepEqual(
    [busFactor("all-reduce", 4), busFactor("all-gather", 4), busFactor("reduce-scatter", 2)],
    [1.5, 0.75, 0.5],
  );
});

test("report: an installation without results of its own says what to pass, in one line", (t) => {
  // The package as installed: its dist/src and package.json, no bench/results.
  const dir = tempDir(t);
  const pkg = path.join(dir, "node_modules", "symmkit");
  fs.cpSync(path.join(PACKAGE_ROOT, "dist", "src"), path.join(pkg, "dist", "src"), { recursive: true });
  fs.copyFileSync(path.join(PACKAGE_ROOT, "package.json"), path.join(pkg, "package.json"));
  fs.symlinkSync(path.join(PACKAGE_ROOT, "node_modules"), path.join(pkg, "node_modules"));
  const r = spawnSync(process.execPath, [path.join(pkg, "dist", "src", "cli.js"), "report"], {
    cwd: dir,
    encoding: "utf8",
  });
  assert.equal(r.status, 2, r.stderr);
  assert.equal(r.stdout, "");
  assert.match(
    r.stderr,
    /^symmkit report: no results given, and this installation has none of its own: pass the JSON files that symmkit bench \.\.\. --json FILE wrote, or folders of them, e\.g\. symmkit report results\/ --out report[^\n]*\n$/,
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

test("report: headless Chromium loads the page with every kind of chart and shows it", async (t) => {
  const chromium = findChromium();
  if (!chromium) {
    t.skip("no Chromium: set CHROMIUM or put chromium on PATH (.ci/chromium.sh installs Debian's)");
    return;
  }
  const dir = tempDir(t);
  const out = path.join(dir, "out");
  const { html, files } = await writeReport([FIXTURES], { out, png: false });
  // The same page zoomed out, so that one window shows every section (the fixtures' page is about
  // 15 000 pixels long; the window holds 17 600 at a quarter).
  const overview = path.join(out, "overview.html");
  fs.writeFileSync(
    overview,
    fs.readFileSync(html, "utf8").replace("</style>", "body { zoom: 0.25; }\n</style>"),
  );
  const shot = path.join(dir, "page.png");
  const run = (...args: string[]) =>
    promisify(execFile)(
      chromium,
      [
        "--headless",
        // Chromium refuses to run as root with its sandbox; CI containers run as root.
        ...(process.getuid?.() === 0 ? ["--no-sandbox"] : []),
        "--disable-gpu",
        "--hide-scrollbars",
        ...args,
      ],
      { timeout: 60_000, maxBuffer: 64 << 20 },
    );
  const [dom] = await Promise.all([
    run("--dump-dom", `file://${html}`),
    run(`--screenshot=${shot}`, "--window-size=400,4400", `file://${overview}`),
  ]);
  // The browser parsed every chart as an SVG element inside its figure.
  const figures = [...dom.stdout.matchAll(/<figure id="([^"]+)"[^>]*>\s*<h4>[\s\S]*?<\/h4>\s*<svg /g)];
  assert.deepEqual(figures.map(([, id]) => id).sort(), files.map((f) => path.basename(f, ".svg")).sort());
  const png = fs.readFileSync(shot);
  assert.ok(png.subarray(0, 8).equals(PNG_SIGNATURE));
  // IHDR: the window's size; a blank page of that size compresses to a few kilobytes.
  assert.deepEqual([png.readUInt32BE(16), png.readUInt32BE(20)], [400, 4400]);
  assert.ok(png.length > 100_000, `screenshot of ${png.length} bytes: a blank page?`);
});
