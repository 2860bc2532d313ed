// `symmkit doctor` answers first, in a few lines: which backend runs here and what the GPU path lacks
// (one line per library, without the search lists); the details follow; --json carries the answer too.
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

test("without a GPU: the CPU backend first, then one line per library of the GPU path", () => {
  const s = summarizeDoctor(NO_GPU, {
    backend: "cpu",
    reason: "the NVIDIA driver (libcuda) is not installed",
  });
  assert.equal(s.backend, "cpu");
  assert.deepEqual(s.gpuPathLacks, ["libcuda", "NCCL", "cuBLASLt"]);
  const lines = s.text.split("\n");
  assert.equal(lines[0], "backend available: cpu (no GPU: the NVIDIA driver (libcuda) is not installed)");
  assert.equal(lines[1], "the GPU path lacks libcuda, NCCL, cuBLASLt:");
  assert.equal(lines.length, 6);
  assert.match(
    lines[2]!,
    /^ {2}libcuda \(driver\) +MISSING: libcuda \(NVIDIA driver\) not found\. Set SYMMKIT_LIBCUDA .*directory\.$/,
  );
  assert.match(lines[3]!, /^ {2}NVRTC \(kernels\) +found: 12\.4, \/x\/libnvrtc\.so\.12$/);
  assert.match(lines[4]!, /^ {2}NCCL .*MISSING: .*SYMMKIT_LIBNCCL/);
  assert.match(lines[5]!, /^ {2}cuBLASLt .*MISSING: .*SYMMKIT_LIBCUBLASLT/);

  const { text, ok } = formatDoctorReport({ summary: s, ...NO_GPU });
  assert.equal(ok, false);
  assert.ok(text.startsWith(`${s.text}\n\ndetails:\ndriver:\n  MISSING: `), text);
  assert.match(
    text,
    /Tried, in order:\n {4}\/usr\/lib \(distribution\)/,
    "the search lists are in the details",
  );
  assert.match(
    text,
    /between hosts \(NCCL\):\n {2}would use TCP sockets on eth0 \(10\.0\.0\.5\): no InfiniBand\/RoCE device\n/,
  );
});

test("with GPUs and every library: the GPU backend, nothing lacking", () => {
  const sections: DoctorSections = {
    ...NO_GPU,
    driver: found("13.0", "/usr/lib/libcuda.so.1"),
    gpus: { ok: true, value: [] },
    nccl: found("2.27.7", "/x/libnccl.so.2"),
    cublasLt: found("13.0.0", "/x/libcublasLt.so.13"),
  };
  const s = summarizeDoctor(sections, { backend: "cuda", reason: "2 GPU(s) visible" });
  assert.deepEqual(s.gpuPathLacks, []);
  assert.match(s.text, /^backend available: cuda \(2 GPU\(s\) visible\)/);
  assert.match(s.text, /\nthe GPU path has everything it needs:\n/);
  assert.equal(s.text.split("\n").filter((l) => l.includes("found: ")).length, 4);
});

test("symmkit doctor here: the short answer first; --json carries it as `summary`", () => {
  const r = spawnSync(process.execPath, [cli, "doctor"], { encoding: "utf8", timeout: 60_000 });
  const json = spawnSync(process.execPath, [cli, "doctor", "--json"], { encoding: "utf8", timeout: 60_000 });
  const report = JSON.parse(json.stdout) as DoctorReport;
  assert.ok(r.stdout.startsWith(`${report.summary.text}\n\ndetails:\n`), r.stdout);
  const first = r.stdout.split("\n")[0]!;
  assert.match(first, new RegExp(`^backend available: ${report.summary.backend} \\(`));
  if (report.summary.backend === "cpu") assert.match(first, /^backend available: cpu \(no GPU: .+\)$/);
  assert.equal(report.summary.text.split("\n").length, 6, "one line per library of the GPU path");
});
