// `symmkit doctor`: what this machine offers symmkit. First the answer in one line (the backends that run
// here, what the GPU path lacks), one line per library under it, then each section in brief (with
// --verbose, every place each library was searched). Each section reports its own failure so that one
// missing library does not hide what else is there.
import os from "node:os";
import { SharedRegion } from "./cpu/shared-memory.js";
import { closeFd } from "./distributed/fd-channel.js";
import { SymmkitError } from "./errors.js";
import { driverLibraryPath } from "./cuda/driver.js";
import { ptrOrZero } from "./cuda/native.js";
import { cublasLtLibraryPath, cublasLtVersion } from "./cuda/cublaslt.js";
import { ncclLibraryPath, ncclVersion } from "./cuda/nccl.js";
import { check as nvmlCheck, nvml, NVML_P2P_CAPS_INDEX_NVLINK, NVML_P2P_STATUS_OK } from "./cuda/nvml.js";
import { detectBackend, type Backend } from "./init.js";
import { Device, deviceCount, driverVersion } from "./runtime/device.js";
import { getToolchain } from "./runtime/jit/compiler.js";
import { checkEnvVars, isEnvVarName, type EnvVarCheck } from "./settings.js";
import { hostNetwork, type HostNetwork } from "./distributed/host-network.js";

export interface GpuReport {
  readonly ordinal: number;
  readonly name: string;
  readonly pciBusId: string;
  readonly memoryGiB: number;
  readonly smCount: number;
  readonly computeCapability: string;
  readonly arch: string;
  readonly l2MiB: number;
  readonly sharedKiBPerBlockOptin: number;
  readonly multicast: string;
}

export type Section<T> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

/** The short answer, printed first (and the `summary` field of `symmkit doctor --json`). */
export interface DoctorSummary {
  /** The backends that run here: cuda when the GPU path has a driver, GPUs and NVRTC; cpu when the
   * CPU backend's shared memory works. Empty: symmkit cannot run here. */
  readonly runs: readonly Backend[];
  /** What `init()` picks here, and why. */
  readonly backend: Backend;
  readonly reason: string;
  /** The libraries of the GPU path that are missing (or unusable) here. */
  readonly gpuPathLacks: readonly string[];
  readonly text: string;
}

export interface DoctorReport {
  readonly summary: DoctorSummary;
  readonly driver: Section<{ version: string; library: string }>;
  readonly gpus: Section<GpuReport[]>;
  /** links[i][j]: "self", "NVLink", "P2P" (link type unknown), or "none". */
  readonly peers: Section<{ links: string[][]; linkTypeSource: string }>;
  readonly nvrtc: Section<{ version: string; library: string; headers: readonly string[] }>;
  readonly nccl: Section<{ version: string; library: string }>;
  readonly cublasLt: Section<{ version: string; library: string }>;
  /** The CPU backend: shared memory between the rank processes (memfd, mapped). */
  readonly cpu: Section<{ readonly sharedMemory: string; readonly cpus: number }>;
  /** What NCCL would use between hosts (a multi-host job's inter-host path). */
  readonly network: Section<HostNetwork>;
  /** The SYMMKIT_* variables set here, each checked (src/settings.ts). */
  readonly environment: readonly EnvVarCheck[];
}

function section<T>(f: () => T): Section<T> {
  try {
    return { ok: true, value: f() };
  } catch (e) {
    return { ok: false, error: e instanceof Error ? e.message : String(e) };
  }
}

export type DoctorSections = Omit<DoctorReport, "summary">;

/** The GPU path's libraries: name, what symmkit uses it for, its section. */
const GPU_PATH = [
  ["libcuda", "driver", "driver"],
  ["NVRTC", "kernels", "nvrtc"],
  ["NCCL", "baseline", "nccl"],
  ["cuBLASLt", "GEMM baseline", "cublasLt"],
] as const;

/** The first line of a section's error: the rest lists every place searched, for the details. */
const firstLine = (error: string): string => (error.split("\n")[0] ?? "").replace(/ Tried, in order:$/, "");

export function summarizeDoctor(
  r: DoctorSections,
  detected: { backend: Backend; reason: string },
): DoctorSummary {
  const { backend, reason } = detected;
  const lacks = GPU_PATH.filter(([, , key]) => !r[key].ok).map(([name]) => name);
  const gpuRuns = r.driver.ok && r.gpus.ok && r.nvrtc.ok;
  const runs: Backend[] = [...(gpuRuns ? ["cuda" as const] : []), ...(r.cpu.ok ? ["cpu" as const] : [])];
  const gpuPath =
    lacks.length === 0 ? "the GPU path has everything it needs" : `the GPU path lacks ${lacks.join(", ")}`;
  const named = runs.map((b) =>
    b === "cuda" ? `cuda (${reason})` : backend === "cpu" ? `cpu (no GPU: ${reason})` : "cpu",
  );
  const answer = r.cpu.ok
    ? `runs here: ${named.join(" and ")}; ${gpuPath}`
    : runs.length > 0
      ? `runs here: ${named.join(" and ")} (the CPU backend fails: ${firstLine(r.cpu.error)})`
      : `nothing runs here: the CPU backend fails (${firstLine(r.cpu.error)}) and ${gpuPath}`;
  const status = (s: Section<{ version: string; library: string }>): string =>
    s.ok ? `found: ${s.value.version}, ${s.value.library}` : `MISSING: ${firstLine(s.error)}`;
  const rows: [string, string][] = [
    ["CPU backend", r.cpu.ok ? `works: ${r.cpu.value.sharedMemory}` : `FAILS: ${firstLine(r.cpu.error)}`],
    ...GPU_PATH.map(([name, what, key]): [string, string] => [`${name} (${what})`, status(r[key])]),
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  const lines = [answer, ...rows.map(([label, said]) => `  ${label.padEnd(width)}  ${said}`)];
  // init() picks cuda where GPUs are visible, even where the GPU path cannot run.
  if (backend === "cuda" && !gpuRuns && r.cpu.ok)
    lines.push(
      `  init() picks cuda here (${reason}): pass { backend: "cpu" } until the GPU path has what it lacks`,
    );
  return { runs, backend, reason, gpuPathLacks: lacks, text: lines.join("\n") };
}

/** Whether the CPU backend runs here: a shared region made, mapped and let go, as its groups do. */
function cpuBackend(): { sharedMemory: string; cpus: number } {
  const { region, fd } = SharedRegion.create(4096, "symmkit-doctor");
  region.close();
  closeFd(fd);
  return { sharedMemory: "memory shared between rank processes (memfd)", cpus: os.availableParallelism() };
}

export function gatherDoctorReport(): DoctorReport {
  const driver = section(() => ({ version: driverVersion(), library: driverLibraryPath() }));
  const gpus = section(() => {
    if (!driver.ok) throw new SymmkitError("SYMMKIT_NO_DEVICE", "no driver");
    const n = deviceCount();
    if (n === 0)
      throw new SymmkitError("SYMMKIT_NO_DEVICE", "the driver sees no GPU (check CUDA_VISIBLE_DEVICES)");
    return Array.from({ length: n }, (_, i) => gpuReport(Device.get(i)));
  });
  const peers = section(() => {
    if (!gpus.ok) throw new SymmkitError("SYMMKIT_NO_DEVICE", "no GPU");
    return peerLinks(gpus.value.map((g) => Device.get(g.ordinal)));
  });
  const sections: DoctorSections = {
    driver,
    gpus,
    peers,
    nvrtc: section(() => {
      const tc = getToolchain();
      return { version: tc.nvrtcVersion, library: tc.nvrtcPath, headers: tc.cudaHeaders.dirs };
    }),
    nccl: section(() => ({ version: ncclVersion(), library: ncclLibraryPath() })),
    cublasLt: section(() => ({ version: cublasLtVersion(), library: cublasLtLibraryPath() })),
    cpu: section(cpuBackend),
    network: section(() => hostNetwork()),
    environment: checkEnvVars(),
  };
  return { summary: summarizeDoctor(sections, detectBackend()), ...sections };
}

function gpuReport(d: Device): GpuReport {
  const p = d.props;
  return {
    ordinal: p.ordinal,
    name: p.name,
    pciBusId: p.pciBusId,
    memoryGiB: +(p.totalMemoryBytes / 2 ** 30).toFixed(1),
    smCount: p.smCount,
    computeCapability: p.computeCapability.join("."),
    arch: p.arch,
    l2MiB: +(p.l2Bytes / 2 ** 20).toFixed(1),
    sharedKiBPerBlockOptin: p.sharedBytesPerBlockOptin / 1024,
    multicast: p.multicastSupported
      ? "supported, not used (symmkit never creates multicast objects)"
      : "not supported",
  };
}

/** Peer access from the driver; whether the link is NVLink from NVML, which the driver API cannot tell. */
function peerLinks(devices: Device[]): { links: string[][]; linkTypeSource: string } {
  let nvlink: ((a: Device, b: Device) => boolean) | undefined;
  let linkTypeSource = "NVML";
  try {
    const api = nvml();
    const handles = devices.map((d) => {
      const h: [bigint | null] = [null];
      nvmlCheck(
        api.nvmlDeviceGetHandleByPciBusId_v2(d.props.pciBusId, h),
        "nvmlDeviceGetHandleByPciBusId_v2",
      );
      return ptrOrZero(h[0]);
    });
    nvlink = (a, b) => {
      const s: [number] = [0];
      const status = api.nvmlDeviceGetP2PStatus(
        handles[a.ordinal]!,
        handles[b.ordinal]!,
        NVML_P2P_CAPS_INDEX_NVLINK,
        s,
      );
      return status === 0 && s[0] === NVML_P2P_STATUS_OK;
    };
  } catch (e) {
    linkTypeSource = `unknown (${e instanceof Error ? e.message.split("\n")[0] : String(e)})`;
  }
  const links = devices.map((a) =>
    devices.map((b) =>
      a === b
        ? "self"
        : !a.canAccessPeer(b)
          ? "none"
          : nvlink?.(a, b)
            ? "NVLink"
            : nvlink
              ? "P2P (PCIe)"
              : "P2P",
    ),
  );
  return { links, linkTypeSource };
}

/** Human-readable report, the answer first; `verbose` adds every place each library was searched. `ok`:
 * some backend runs here. */
export function formatDoctorReport(
  r: DoctorReport,
  options: { readonly verbose?: boolean } = {},
): { text: string; ok: boolean } {
  const lines: string[] = [r.summary.text, "", "details:"];
  let cut = false;
  const show = <T>(title: string, s: Section<T>, fmt: (v: T) => string[]): void => {
    lines.push(`${title}:`);
    if (s.ok) {
      lines.push(...fmt(s.value).map((l) => `  ${l}`));
      return;
    }
    const [first = "", ...rest] = s.error.split("\n");
    if (options.verbose) lines.push(`  MISSING: ${first}`, ...rest.map((l) => `  ${l}`));
    else {
      lines.push(`  MISSING: ${firstLine(first)}`);
      cut ||= rest.length > 0;
    }
  };
  show("driver", r.driver, (v) => [`version ${v.version}`, `library ${v.library}`]);
  show("gpus", r.gpus, (gs) =>
    gs.flatMap((g) => [
      `[${g.ordinal}] ${g.name}  ${g.memoryGiB} GiB  ${g.smCount} SMs  cc ${g.computeCapability} (${g.arch})  L2 ${g.l2MiB} MiB  bus ${g.pciBusId}`,
      `    shared memory per block (opt-in) ${g.sharedKiBPerBlockOptin} KiB; multicast ${g.multicast}`,
    ]),
  );
  show("peer access (row -> column)", r.peers, (p) => [
    ...p.links.map((row, i) => `[${i}] ${row.map((l) => l.padEnd(10)).join(" ")}`),
    `link type from ${p.linkTypeSource}`,
  ]);
  show("nvrtc", r.nvrtc, (v) => [
    `version ${v.version}`,
    `library ${v.library}`,
    `headers ${v.headers.join(", ")}`,
  ]);
  show("nccl", r.nccl, (v) => [`version ${v.version}`, `library ${v.library}`]);
  show("cublasLt", r.cublasLt, (v) => [`version ${v.version}`, `library ${v.library}`]);
  show("cpu backend", r.cpu, (v) => [`${v.sharedMemory}; ${v.cpus} CPUs`]);
  show("between hosts (NCCL)", r.network, (n) => [
    `would use ${n.transport}`,
    ...n.ibPorts.map(
      (p) => `InfiniBand/RoCE port ${p.device}:${p.port} ${p.state}, ${p.linkLayer}, ${p.rate}`,
    ),
    `libibverbs ${n.verbs ?? "not found"}; net plugin ${n.plugin ?? "none"}`,
    ...Object.entries(n.env).map(([k, v]) => `${k}=${v}`),
    "(a reading by NCCL's rules; NCCL_DEBUG=INFO shows NCCL's own choice)",
  ]);
  lines.push("environment (SYMMKIT_*):");
  if (r.environment.length === 0) lines.push("  none set: defaults apply");
  for (const v of r.environment)
    lines.push(
      `  ${v.name}=${v.value}${v.problem === undefined ? "" : `  ${isEnvVarName(v.name) ? "INVALID" : "UNKNOWN"}: ${v.problem}`}`,
    );
  if (cut) lines.push("(symmkit doctor --verbose lists every place each missing library was searched)");
  return { text: lines.join("\n"), ok: r.summary.runs.length > 0 };
}
