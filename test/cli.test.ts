// The symmkit command, spawned as people run it (no GPU needed): every command's help; a command line it
// cannot take refused in one line with exit code 2; a command's own error in one line with exit code 1;
// SYMMKIT_DEBUG adding the stack; run passing its command's arguments through; report's wiring.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const cli = path.join(root, "dist", "src", "cli.js");

interface Result {
  readonly args: readonly string[];
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function symmkit(args: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<Result> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [cli, ...args], { env, timeout: 60_000 });
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    p.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    p.on("error", reject);
    p.on("close", (status) => resolve({ args, status, stdout, stderr }));
  });
}

/** Runs every command line, a few at a time (each is a Node process), in order. */
async function symmkitAll(lines: readonly (readonly string[])[], env?: NodeJS.ProcessEnv): Promise<Result[]> {
  const results: Result[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < lines.length; i = next++) results[i] = await symmkit(lines[i]!, env);
  };
  await Promise.all(Array.from({ length: 4 }, worker));
  return results;
}

const show = (r: Result): string => `symmkit ${r.args.join(" ")}: exit ${r.status}\n${r.stdout}${r.stderr}`;

const COLLECTIVES = ["all-reduce", "all-gather", "reduce-scatter"];
const BENCHES = [
  "launch",
  "barrier",
  "link",
  ...COLLECTIVES,
  "gemm",
  "ag-gemm",
  "gemm-rs",
  "gemm-ar",
  "ar-norm",
  "all-to-all",
  "send-recv",
  "moe",
];
/** Every command that does something (as opposed to a group of commands). */
const LEAVES = [
  ["demo"],
  ["run"],
  ["doctor"],
  ["kernels"],
  ...BENCHES.map((b) => ["bench", b]),
  ["tune"],
  ["report"],
  ["help"],
];
const COMMANDS = [[], ["bench"], ...LEAVES];
/** The leaves that take no operands. */
const NO_OPERANDS = LEAVES.filter(([c]) => !["run", "report", "help"].includes(c!));

/** "symmkit bench link": the command that `args` name. */
function commandOf(args: readonly string[]): string {
  const [first, second] = args;
  const names = LEAVES.map(([c]) => c).includes(first) || first === "bench" ? [first] : [];
  if (first === "bench" && BENCHES.includes(second!)) names.push(second);
  return ["symmkit", ...names].join(" ");
}

/** Refused: exit code 2, one line on stderr naming the command, matching `why`, no stack, nothing on stdout. */
function assertRefused(r: Result, why: RegExp): void {
  assert.equal(r.status, 2, show(r));
  const lines = r.stderr.trimEnd().split("\n");
  assert.equal(lines.length, 1, show(r));
  assert.ok(lines[0]!.startsWith(`${commandOf(r.args)}: `), show(r));
  assert.match(lines[0]!, why, show(r));
  assert.doesNotMatch(r.stderr, /^\s+at /m, show(r));
  assert.equal(r.stdout, "", show(r));
}

/** The entry of `flags` in a help's option list, on one line. */
function optionEntry(help: string, flags: string): string {
  const lines = help.split("\n");
  const start = lines.findIndex((l) => l.trimStart().startsWith(flags));
  assert.ok(start >= 0, `no ${flags} in\n${help}`);
  const more = lines.slice(start + 1).findIndex((l) => !/^ {4,}\S/.test(l));
  return lines
    .slice(start, start + 1 + more)
    .map((l) => l.trim())
    .join(" ");
}

test("every command's --help shows its usage and options; symmkit help <command> the same", async () => {
  const helps = await symmkitAll(COMMANDS.map((c) => [...c, "--help"]));
  COMMANDS.forEach((c, i) => {
    const r = helps[i]!;
    assert.equal(r.status, 0, show(r));
    assert.match(r.stdout, new RegExp(`^Usage: ${["symmkit", ...c].join(" ")} \\[options\\]`), show(r));
    assert.match(r.stdout, /-h, --help/, show(r));
    assert.equal(r.stderr, "", show(r));
  });
  const of = (...c: string[]): string =>
    helps[COMMANDS.findIndex((x) => x.join(" ") === c.join(" "))]!.stdout;
  // Those whose options are declared only when they run among them.
  const named = [[], ["bench"], ["run"], ["tune"], ["bench", "link"], ["bench", "gemm"], ["help"]];
  const viaHelp = await symmkitAll(named.map((c) => ["help", ...c]));
  named.forEach((c, i) => assert.equal(viaHelp[i]!.stdout, of(...c), `symmkit help ${c.join(" ")}`));

  // Defaults, and what the values may be.
  const says = (help: string, flags: string, what: string): void =>
    assert.ok(optionEntry(help, flags).includes(what), `${flags}: ${what}\n${help}`);
  says(of("run"), "-n, --nproc-per-node <N>", "(default: 1)");
  says(of("run"), "--grace-ms <T>", "(default: 5000)");
  says(of("kernels"), "--arch <sm_XX>", '(default: "sm_90a")');
  says(of("tune"), "--sizes <lo:hi>", "(default: 4K:64M)");
  says(of("tune"), "--dtype <name>", 'default: "bf16"');
  says(of("bench", "link"), "--bytes <size>", "(default: 256M)");
  says(of("bench", "gemm"), "--layout-b <layout>", '(choices: "nk", "kn", default: "nk")');
  says(of("bench", "gemm"), "--shapes <MxNxK,...>", "(default: 8192x8192x8192,");
  says(of("bench", "gemm-rs"), "--shapes <MxNxK,...>", "(default: 1024x8192x8192,");
  says(of("bench", "all-reduce"), "--algorithms <names>", "one_shot");
  says(of("report"), "--out <dir>", '(default: "./symmkit-report")');
  for (const c of ["demo", "run", "doctor", "kernels", "bench", "tune", "report", "help"])
    assert.match(of(), new RegExp(`^  ${c} `, "m"), `symmkit --help lists ${c}`);
  for (const b of BENCHES) assert.match(of("bench"), new RegExp(`^  ${b} `, "m"), `bench --help lists ${b}`);
});

test("symmkit alone shows the help; --version and -v print the package's version", async () => {
  const [alone, version, v] = await symmkitAll([[], ["--version"], ["-v"]]);
  assert.equal(alone!.status, 0, show(alone!));
  assert.match(alone!.stdout, /^Usage: symmkit /);
  const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as { version: string };
  for (const r of [version!, v!]) {
    assert.equal(r.status, 0, show(r));
    assert.equal(r.stdout, `${pkg.version}\n`);
  }
});

test("run --help says which scripts run with Node, and how to run anything else", async () => {
  const r = await symmkit(["run", "--help"]);
  assert.equal(r.status, 0, show(r));
  for (const said of [/\.js\b/, /\.mjs\b/, /\.cjs\b/, /\.ts\b/, /symmkit run -n 2 -- python3 x\.py/])
    assert.match(r.stdout, said);
  assert.match(r.stdout, /^Usage: symmkit run \[options\] <script> \[args\.\.\.\]$/m);
  assert.match(r.stdout, /symmkit run \[options\] -- <command> \[args\.\.\.\]/);
});

/** `symmkit args` whose stdout's reader goes away after `keepLines` lines (0: before it writes anything). */
function symmkitCutOff(args: readonly string[], keepLines: number): Promise<Result & { lines: string[] }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [cli, ...args], { timeout: 60_000 });
    const lines: string[] = [];
    let stderr = "";
    let buf = "";
    if (keepLines === 0) p.stdout.destroy();
    p.stdout.on("data", (d: Buffer) => {
      buf += d.toString();
      for (let nl = buf.indexOf("\n"); nl >= 0 && lines.length < keepLines; nl = buf.indexOf("\n")) {
        lines.push(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
      }
      if (lines.length >= keepLines) p.stdout.destroy();
    });
    p.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    p.on("error", reject);
    p.on("close", (status) => resolve({ args, status, stdout: lines.join("\n"), stderr, lines }));
  });
}

test("output whose reader went away (symmkit --help | head -1): no stack, the status of SIGPIPE", async () => {
  const [help, job] = await Promise.all([
    symmkitCutOff(["--help"], 0),
    // A job whose output is cut off is stopped, as a process killed by SIGPIPE would stop it.
    symmkitCutOff(["run", "--", "sh", "-c", "echo pid $$; while :; do echo line; sleep 0.01; done"], 2),
  ]);
  for (const r of [help, job]) {
    assert.equal(r.status, 141, show(r));
    assert.equal(r.stderr, "", show(r));
  }
  const pid = Number(/^\[rank 0\] pid (\d+)$/.exec(job.lines[0] ?? "")?.[1]);
  assert.ok(pid > 0, show(job));
  let alive = true;
  for (let i = 0; i < 100 && alive; i++) {
    try {
      process.kill(pid, 0);
      await new Promise((r) => setTimeout(r, 20));
    } catch {
      alive = false;
    }
  }
  assert.equal(alive, false, "the rank was stopped");
  // As people type it.
  const piped = await new Promise<Result>((resolve, reject) => {
    const p = spawn("/bin/sh", ["-c", '"$0" "$1" --help | head -1', process.execPath, cli]);
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    p.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    p.on("error", reject);
    p.on("close", (status) => resolve({ args: ["--help", "|", "head", "-1"], status, stdout, stderr }));
  });
  assert.equal(piped.stdout, "Usage: symmkit [options] [command]\n", show(piped));
  assert.equal(piped.stderr, "", show(piped));
});

test("unknown commands, unknown options, extra arguments: one line, exit code 2", async () => {
  const cases: [string[], RegExp][] = [
    [["frobnicate"], /^symmkit: unknown command 'frobnicate'/],
    [["bench", "frobnicate"], /^symmkit bench: unknown command 'frobnicate'/],
    [["bench", "launchh"], /unknown command 'launchh' \(Did you mean launch\?\)/],
    [["help", "bench", "frobnicate"], /^symmkit help: unknown command 'bench frobnicate'/],
    [["bench"], /^symmkit bench: missing command: one of launch, barrier,/],
    [["run"], /^symmkit run: missing required argument 'command'/],
    ...COMMANDS.map((c): [string[], RegExp] => [[...c, "--bogus"], /unknown option '--bogus'/]),
    ...NO_OPERANDS.map((c): [string[], RegExp] => [[...c, "extra"], /too many arguments/]),
  ];
  const results = await symmkitAll(cases.map(([args]) => args));
  results.forEach((r, i) => assertRefused(r, cases[i]![1]));
});

test("bad values: one line naming the option, exit code 2, before anything runs", async () => {
  const invalid = (option: string): RegExp => new RegExp(`option '${option}[^']*' argument .* is invalid`);
  const cases: [string[], RegExp][] = [
    [["run", "-n", "0", "x.js"], invalid("-n, --nproc-per-node")],
    [["run", "-n", "x", "x.js"], invalid("-n, --nproc-per-node")],
    [["run", "-n", "-5", "x.js"], invalid("-n, --nproc-per-node")],
    [["run", "-n", "1.5", "x.js"], invalid("-n, --nproc-per-node")],
    [["run", "--nnodes", "0", "x.js"], invalid("--nnodes")],
    [["run", "--master-port", "70000", "x.js"], invalid("--master-port")],
    [["run", "--grace-ms", "soon", "x.js"], invalid("--grace-ms")],
    [["run", "-n"], /option '-n, --nproc-per-node <N>' argument missing/],
    [
      ["run", "--nnodes", "2", "--node-rank", "2", "--master-port", "1", "x.js"],
      /--node-rank 2 must be below/,
    ],
    [["run", "--nnodes", "2", "x.js"], /a multi-node job needs an explicit --master-port/],
    [["kernels", "--arch", "90"], invalid("--arch")],
    [["tune", "--sizes", "-5"], invalid("--sizes")],
    [["tune", "--sizes", "4X"], invalid("--sizes")],
    [["tune", "--sizes", "0"], invalid("--sizes")],
    [["tune", "--sizes", "4K:0M"], invalid("--sizes")],
    [["tune", "--sizes", "64M:4K"], /the range ends below its start/],
    [["tune", "--sizes", "4K:8K:16K"], invalid("--sizes")],
    [["tune", "--sizes"], /option '--sizes <lo:hi>' argument missing/],
    [["tune", "--dtype", "f33"], invalid("--dtype")],
    [["bench", "link", "--bytes", "4K:8K"], invalid("--bytes")],
    [["bench", "link", "--bytes", "-1"], invalid("--bytes")],
    ...COLLECTIVES.flatMap((b): [string[], RegExp][] => [
      [["bench", b, "--sizes", "0K:4K"], invalid("--sizes")],
      [["bench", b, "--dtype", "bogus"], invalid("--dtype")],
      [["bench", b, "--algorithms", "nccl,bogus"], /No algorithm bogus; there are .*nccl/],
    ]),
    [["bench", "gemm", "--dtype", "f32"], invalid("--dtype")],
    [["bench", "gemm", "--layout-b", "xx"], invalid("--layout-b")],
    [["bench", "gemm", "--shapes", "1x2"], invalid("--shapes")],
    [["bench", "gemm", "--shapes", "0x8x8"], invalid("--shapes")],
    ...["ag-gemm", "gemm-rs", "gemm-ar"].flatMap((b): [string[], RegExp][] => [
      [["bench", b, "--shapes", "8x8"], invalid("--shapes")],
      [["bench", b, "--dtype", "f16"], invalid("--dtype")],
      [["bench", b, "--algorithms", "fused,"], invalid("--algorithms")],
    ]),
    [["bench", "all-to-all", "--algorithms", "pull,bogus"], /No algorithm bogus; there are .*nccl_raw/],
    [["bench", "send-recv", "--sizes", "0"], invalid("--sizes")],
    [["bench", "send-recv", "--staging", "1M:2M"], /Expected one size/],
    [["bench", "moe", "--tokens", "0"], invalid("--tokens")],
    [["report", path.join(os.tmpdir(), "symmkit-no-such-results.json")], /no such file or directory/],
  ];
  const results = await symmkitAll(cases.map(([args]) => args));
  results.forEach((r, i) => assertRefused(r, cases[i]![1]));
});

test("a command's own error: one line with its code, exit code 1; SYMMKIT_DEBUG adds the stack", async () => {
  // A second node without the job's shared secret: the launcher refuses before it starts anything.
  const env = { ...process.env };
  delete env.SYMMKIT_JOB_TOKEN;
  delete env.SYMMKIT_DEBUG;
  const job = ["run", "--nnodes", "2", "--node-rank", "1", "--master-port", "29500", "x.js"];
  const [plain, debug, off] = await Promise.all([
    symmkit(job, env),
    symmkit(job, { ...env, SYMMKIT_DEBUG: "1" }),
    symmkit(job, { ...env, SYMMKIT_DEBUG: "off" }),
  ]);
  assert.equal(plain.status, 1, show(plain));
  assert.match(
    plain.stderr,
    /^symmkit run: a multi-node job needs SYMMKIT_JOB_TOKEN set to the same secret on every node \[SYMMKIT_ENVIRONMENT\]\n$/,
  );
  assert.equal(off.stderr, plain.stderr);
  assert.equal(debug.status, 1, show(debug));
  assert.ok(debug.stderr.startsWith(plain.stderr), show(debug));
  assert.match(debug.stderr, /^\s+at jobToken /m, show(debug));

  const [usage, bad] = await Promise.all([
    symmkit(["tune", "--sizes", "-5"], { ...env, SYMMKIT_DEBUG: "1" }),
    symmkit(["tune", "--sizes", "-5"], { ...env, SYMMKIT_DEBUG: "yes" }),
  ]);
  assert.equal(usage.status, 2, show(usage));
  assert.match(usage.stderr, /^symmkit tune: option '--sizes <lo:hi>' argument '-5' is invalid/);
  assert.match(usage.stderr, /^\s+at /m, show(usage));
  // A bad SYMMKIT_DEBUG is said, and counts as off.
  assert.equal(bad.status, 2, show(bad));
  assert.match(bad.stderr, /SYMMKIT_DEBUG="yes" is not valid/);
  assert.doesNotMatch(bad.stderr, /^\s+at /m, show(bad));
});

test("run: options up to the script, everything after it the script's own", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-cli-"));
  try {
    const script = path.join(dir, "argv.mjs");
    fs.writeFileSync(script, "console.log(process.env.RANK, JSON.stringify(process.argv.slice(2)));\n");
    const [direct, dashes] = await Promise.all([
      symmkit(["run", "-n", "2", script, "--foo", "--help", "-n", "3"]),
      symmkit(["run", "--nproc-per-node=1", "--", process.execPath, script, "-v"]),
    ]);
    assert.equal(direct.status, 0, show(direct));
    assert.deepEqual(direct.stdout.trimEnd().split("\n").sort(), [
      '[rank 0] 0 ["--foo","--help","-n","3"]',
      '[rank 1] 1 ["--foo","--help","-n","3"]',
    ]);
    assert.equal(dashes.status, 0, show(dashes));
    assert.equal(dashes.stdout, '[rank 0] 0 ["-v"]\n');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("report writes the page into --out and prints its path", async () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-report-"));
  try {
    const r = await symmkit([
      "report",
      path.join(root, "bench", "results", "h200", "gemm-bf16.json"),
      "--out",
      out,
    ]);
    assert.equal(r.status, 0, show(r));
    assert.equal(r.stdout, `${path.join(out, "index.html")}\n`);
    assert.ok(fs.existsSync(path.join(out, "index.html")));
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
});
