// `symmkit doctor` answers in its first line: the backends that run here and what the GPU path lacks; a
// line per library follows (without the search lists, which only --verbose and --json show), then the
// details. It exits 0 when a backend runs here, 1 only when none does; --json carries the answer too.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  formatDoctorReport,
  summarizeDoctor,
  type DoctorReport,
  type DoctorSections,
} from "../src/doctor.js";

const cli = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "src", "cli.js");

const missing = (what: string, env: string): { ok: false; error: string } => ({
  ok: false,
  error: `${what} not found. Set ${env} to the library file or its directory. Tried, in order:\n  /usr/lib (distribution): no such file`,
});
const found = (version: string, library: string) => ({ ok: true as const, value: { version, library } });

const NO_GPU: DoctorSections = {
  driver: missing("libcuda (NVIDIA driver)", "SYMMKIT_LIBCUDA"),
  gpus: { ok: false, error: "no driver" },
  peers: { ok: false, error: "no GPU" },
  nvrtc: {
    ok: true,
    value: { version: "12.4", library: "/x/libnvrtc.so.12", headers: ["/usr/local/cuda/include"] },
  },
  nccl: missing("libnccl (NCCL)", "SYMMKIT_LIBNCCL"),
  cublasLt: missing("libcublasLt (cuBLASLt)", "SYMMKIT_LIBCUBLASLT"),
  cpu: { ok: true, value: { sharedMemory: "memory shared between rank processes (memfd)", cpus: 2 } },
  network: {
    ok: true,
    value: {
      transport: "TCP sockets on eth0 (10.0.0.5): no InfiniBand/RoCE device",
      ibPorts: [],
      verbs: undefined,
      plugin: undefined,
      socketInterface: "eth0",
      env: {},
    },
  },
  environment: [],
};

const CPU_REASON = "the NVIDIA driver (libcuda) is not installed";

test("without a GPU: the CPU backend runs, the first line says so and what the GPU path lacks", () => {
  const s = summarizeDoctor(NO_GPU, { backend: "cpu", reason: CPU_REASON });
  assert.equal(s.backend, "cpu");
  assert.deepEqual(s.runs, ["cpu"]);
  assert.deepEqual(s.gpuPathLacks, ["libcuda", "NCCL", "cuBLASLt"]);
  const lines = s.text.split("\n");
  assert.equal(
    lines[0],
    `runs here: cpu (no GPU: ${CPU_REASON}); the GPU path lacks libcuda, NCCL, cuBLASLt`,
  );
  assert.equal(lines.length, 6);
  assert.match(lines[1]!, /^ {2}CPU backend +works: memory shared between rank processes \(memfd\)$/);
  assert.match(
    lines[2]!,
    /^ {2}libcuda \(driver\) +MISSING: libcuda \(NVIDIA driver\) not found\. Set SYMMKIT_LIBCUDA .*directory\.$/,
  );
  assert.match(lines[3]!, /^ {2}NVRTC \(kernels\) +found: 12\.4, \/x\/libnvrtc\.so\.12$/);
  assert.match(lines[4]!, /^ {2}NCCL .*MISSING: .*SYMMKIT_LIBNCCL/);
  assert.match(lines[5]!, /^ {2}cuBLASLt .*MISSING: .*SYMMKIT_LIBCUBLASLT/);

  const report = { summary: s, ...NO_GPU };
  const { text, ok } = formatDoctorReport(report);
  assert.equal(ok, true, "a backend runs here");
  assert.ok(text.startsWith(`${s.text}\n\ndetails:\ndriver:\n  MISSING: `), text);
  assert.doesNotMatch(text, /Tried, in order|\/usr\/lib \(distribution\)/, "no search lists by default");
  assert.match(text, /\n\(symmkit doctor --verbose lists every place each missing library was searched\)$/);
  assert.match(
    text,
    /between hosts \(NCCL\):\n {2}would use TCP sockets on eth0 \(10\.0\.0\.5\): no InfiniBand\/RoCE device\n/,
  );
  const verbose = formatDoctorReport(report, { verbose: true }).text;
  assert.match(
    verbose,
    /Tried, in order:\n {4}\/usr\/lib \(distribution\)/,
    "--verbose: the search lists in the details",
  );
  assert.doesNotMatch(verbose, /--verbose lists/);
});

test("with GPUs and every library: both backends run, nothing lacking", () => {
  const sections: DoctorSections = {
    ...NO_GPU,
    driver: found("13.0", "/usr/lib/libcuda.so.1"),
    gpus: { ok: true, value: [] },
    nccl: found("2.27.7", "/x/libnccl.so.2"),
    cublasLt: found("13.0.0", "/x/libcublasLt.so.13"),
  };
  const s = summarizeDoctor(sections, { backend: "cuda", reason: "2 GPU(s) visible" });
  assert.deepEqual(s.gpuPathLacks, []);
  assert.deepEqual(s.runs, ["cuda", "cpu"]);
  assert.equal(
    s.text.split("\n")[0],
    "runs here: cuda (2 GPU(s) visible) and cpu; the GPU path has everything it needs",
  );
  assert.equal(s.text.split("\n").filter((l) => l.includes("found: ")).length, 4);
});

test("GPUs visible but no NVRTC: the CPU backend runs, and init({ backend: 'cpu' }) is named", () => {
  const s = summarizeDoctor(
    {
      ...NO_GPU,
      driver: found("13.0", "/usr/lib/libcuda.so.1"),
      gpus: { ok: true, value: [] },
      nvrtc: { ok: false, error: "libnvrtc not found." },
    },
    { backend: "cuda", reason: "2 GPU(s) visible" },
  );
  assert.deepEqual(s.runs, ["cpu"]);
  const lines = s.text.split("\n");
  assert.equal(lines[0], "runs here: cpu; the GPU path lacks NVRTC, NCCL, cuBLASLt");
  assert.match(lines.at(-1)!, /init\(\) picks cuda here \(2 GPU\(s\) visible\): pass \{ backend: "cpu" \}/);
});

test("nothing runs (no GPU, shared memory failing): the first line says so, and doctor's ok is false", () => {
  const sections: DoctorSections = { ...NO_GPU, cpu: { ok: false, error: "memfd_create failed: ENOSYS" } };
  const s = summarizeDoctor(sections, { backend: "cpu", reason: CPU_REASON });
  assert.deepEqual(s.runs, []);
  assert.equal(
    s.text.split("\n")[0],
    "nothing runs here: the CPU backend fails (memfd_create failed: ENOSYS) and the GPU path lacks " +
      "libcuda, NCCL, cuBLASLt",
  );
  assert.equal(formatDoctorReport({ summary: s, ...sections }).ok, false);
});

test("symmkit doctor here: the answer first, exit 0 when a backend runs; --verbose, --json", () => {
  const doctor = (...args: string[]) =>
    spawnSync(process.execPath, [cli, "doctor", ...args], { encoding: "utf8", timeout: 60_000 });
  const [r, verbose, json] = [doctor(), doctor("--verbose"), doctor("--json")];
  const report = JSON.parse(json.stdout) as DoctorReport;
  const runs = report.summary.runs.length > 0;
  for (const x of [r, verbose, json]) assert.equal(x.status, runs ? 0 : 1, x.stdout + x.stderr);
  assert.ok(r.stdout.startsWith(`${report.summary.text}\n\ndetails:\n`), r.stdout);
  const first = r.stdout.split("\n")[0]!;
  assert.match(first, /^(runs here: |nothing runs here: )/);
  if (report.summary.backend === "cpu" && report.cpu.ok)
    assert.match(first, /^runs here: cpu \(no GPU: .+\); the GPU path (lacks .+|has everything it needs)$/);
  assert.doesNotMatch(r.stdout, /Tried, in order/);
  assert.ok(r.stdout.split("\n").length <= 40, `a short report without --verbose:\n${r.stdout}`);
  if (!report.driver.ok) {
    assert.match(r.stdout, /Set SYMMKIT_LIBCUDA/);
    assert.match(verbose.stdout, /Tried, in order:\n {4}\S/, "--verbose lists the places searched");
    assert.match(JSON.stringify(report.driver), /Tried, in order/, "--json keeps them");
  }
});
