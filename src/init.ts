// init(): joins the job on the backend that fits this machine: cuda where a GPU is visible, cpu
// otherwise, or the one asked for.
import type { CpuAlgorithms } from "./cpu/collectives.js";
import { CpuProcessGroup, type CpuInitOptions } from "./cpu/process-group.js";
import { maxSymmetricBytes } from "./cpu/symmetric.js";
import type { AlgorithmNames, Collectives } from "./ops/collectives.js";
import { GpuCollectives } from "./ops/gpu-collectives.js";
import type { GpuAlgorithms } from "./ops/gpu-group.js";
import { readDistEnv, stagingBytesFromEnv } from "./distributed/env.js";
import { ProcessGroup, type InitOptions as CudaInitOptions } from "./distributed/process-group.js";
import { InvalidArgumentError, LibraryNotFoundError, UnsupportedError } from "./errors.js";
import { HostsCollectives } from "./ops/hosts-collectives.js";
import { deviceCount } from "./runtime/device.js";
import type { AnyTensor, TensorFactory } from "./runtime/tensor.js";

export type Backend = "cuda" | "cpu";
/** A cuda group with symmkit's collectives on symmetric memory. */
export type CudaProcessGroup = ProcessGroup<GpuCollectives>;
/** A cuda group that may span hosts (init({ acrossHosts: true })): NCCL between hosts, symmkit inside
 * each (`collectives.local`). */
export type HostsProcessGroup = ProcessGroup<HostsCollectives>;

/** The algorithms both backends have, by operation: those a program for either backend may name. */
export type PortableAlgorithms = {
  readonly [K in keyof AlgorithmNames]: CpuAlgorithms[K] & GpuAlgorithms[K];
};

/** The collectives of a group whose backend the program does not fix: every call of both backends, on
 * the tensors `group.tensors` makes (the types cannot tell one backend's tensors from the other's).
 * Narrow on `group.backend` for a backend's own options (GPUs: `stream`). */
export type AnyCollectives = Collectives<AnyTensor, AnyTensor, PortableAlgorithms>;

/** A backend's group as a program that runs on either sees it: the group itself (narrow on `backend` for
 * all of it), whose collectives also take AnyTensor and whose tensors are AnyTensor. */
export type PortableGroup<G extends CudaProcessGroup | CpuProcessGroup> = G & {
  readonly collectives: AnyCollectives;
  readonly tensors: TensorFactory;
};

/** What `init()` returns when the backend is not fixed: either backend's group (narrow on `backend`), whose
 * `collectives` take the tensors its `tensors` make, so one program type-checks for both. */
export type AnyProcessGroup = PortableGroup<CudaProcessGroup> | PortableGroup<CpuProcessGroup>;

/** Each rank's symmetric staging buffer on GPUs: the largest plain tensor a collective takes (default 64 MiB). */
export const DEFAULT_GPU_STAGING_BYTES = 64 * 1024 * 1024;
export type InitOptions = Omit<CudaInitOptions, "backend"> &
  Omit<CpuInitOptions, "backend"> & {
    backend?: Backend | "auto";
    /** GPUs: what one rank may push to one peer in a mailbox collective (lamport, ll; default 4 MiB,
     * see GpuCollectivesOptions). The CPU backend has no mailbox. */
    mailboxSlotBytes?: number;
    /** GPUs: the job may span hosts; the group's collectives are HostsCollectives (NCCL between hosts,
     * symmkit inside each). Without it a job on several hosts is refused. */
    acrossHosts?: boolean;
  };

/** The backend "auto" picks here, and why. */
export function detectBackend(): { backend: Backend; reason: string } {
  try {
    const n = deviceCount();
    if (n > 0) return { backend: "cuda", reason: `${n} GPU(s) visible` };
    return { backend: "cpu", reason: "the NVIDIA driver sees no GPU" };
  } catch (e) {
    if (e instanceof LibraryNotFoundError)
      return { backend: "cpu", reason: "the NVIDIA driver (libcuda) is not installed" };
    return { backend: "cpu", reason: (e instanceof Error ? e.message : String(e)).split("\n")[0] ?? "" };
  }
}

/** Every option init() knows (the compiler keeps this in step with InitOptions). */
const INIT_OPTION_NAMES: Readonly<Record<keyof InitOptions, true>> = {
  backend: true,
  storeTimeoutMs: true,
  syncTimeoutMs: true,
  stagingBytes: true,
  mailboxSlotBytes: true,
  acrossHosts: true,
};

/** An option init() does not know is refused: a misspelt one would otherwise be a default silently. */
function checkOptionNames(o: unknown): asserts o is InitOptions {
  if (typeof o !== "object" || o === null || Array.isArray(o))
    throw new InvalidArgumentError(
      `init: options must be an object, e.g. init({ backend: "cpu" }), got ${o === null ? "null" : typeof o}`,
    );
  const known = Object.keys(INIT_OPTION_NAMES);
  const unknown = Object.keys(o).filter((k) => !known.includes(k));
  if (unknown.length > 0)
    throw new InvalidArgumentError(
      `init: unknown option${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")}: the options are ` +
        `${known.join(", ")}`,
    );
}

/** Every option checked before anything is started, with a typed error naming it. */
function checkInitOptions(
  o: InitOptions,
  backend: Backend,
  env: Readonly<Record<string, string | undefined>>,
): void {
  const bad = (what: string): never => {
    throw new InvalidArgumentError(`init: ${what}`);
  };
  if (o.acrossHosts !== undefined && typeof o.acrossHosts !== "boolean")
    bad(`acrossHosts ${String(o.acrossHosts)} must be true or false`);
  for (const name of ["syncTimeoutMs", "storeTimeoutMs"] as const) {
    const v = o[name];
    // setTimeout's limit: larger deadlines would fire at once.
    if (v !== undefined && (!Number.isInteger(v) || v < 1 || v > 2 ** 31 - 1))
      bad(`${name} ${v} must be an integer number of milliseconds in [1, 2^31)`);
  }
  const staging = o.stagingBytes ?? stagingBytesFromEnv(env);
  if (staging !== undefined && (!Number.isSafeInteger(staging) || staging < 1))
    bad(`stagingBytes ${staging} must be a positive integer`);
  if (backend !== "cpu" || staging === undefined) return;
  // The CPU staging buffer is one shared region, which one ArrayBuffer must be able to view.
  const world = readDistEnv(env).worldSize;
  const max = maxSymmetricBytes(world);
  if (staging > max) {
    bad(
      `stagingBytes ${staging} exceeds ${max}, the CPU backend's largest staging buffer for ${world} ` +
        `rank(s) on Node ${process.version}: use a smaller one`,
    );
  }
}

export function init(
  options: InitOptions & { acrossHosts: true; backend?: "cuda" | "auto" },
): Promise<HostsProcessGroup>;
export function init(
  options: InitOptions & { backend: "cpu"; acrossHosts?: false },
): Promise<CpuProcessGroup>;
export function init(
  options: InitOptions & { backend: "cuda"; acrossHosts?: false },
): Promise<CudaProcessGroup>;
export function init(options?: InitOptions & { acrossHosts?: false }): Promise<AnyProcessGroup>;
export function init(options: InitOptions): Promise<AnyProcessGroup | HostsProcessGroup>;
// The overloads above promise the portable view of the same group objects (see PortableGroup).
export async function init(
  options: InitOptions = {},
): Promise<CudaProcessGroup | CpuProcessGroup | HostsProcessGroup> {
  checkOptionNames(options);
  if (options.backend !== undefined && !["auto", "cuda", "cpu"].includes(options.backend))
    throw new InvalidArgumentError(`init: backend ${String(options.backend)} is not one of auto, cuda, cpu`);
  const backend = !options.backend || options.backend === "auto" ? detectBackend().backend : options.backend;
  checkInitOptions(options, backend, process.env);
  const { backend: _ignored, mailboxSlotBytes, acrossHosts, ...rest } = options;
  void _ignored;
  const env = readDistEnv();
  const hosts = env.worldSize / env.localWorldSize;
  if (acrossHosts && backend !== "cuda")
    throw new UnsupportedError(
      "init: acrossHosts needs the cuda backend (NCCL between hosts); the CPU backend runs on one host",
    );
  if (backend === "cpu") return CpuProcessGroup.world(rest);
  const stagingBytes = rest.stagingBytes ?? stagingBytesFromEnv() ?? DEFAULT_GPU_STAGING_BYTES;
  const makeGpu = (group: CudaProcessGroup): Promise<GpuCollectives> =>
    GpuCollectives.create(group, stagingBytes, mailboxSlotBytes === undefined ? {} : { mailboxSlotBytes });
  if (acrossHosts)
    return ProcessGroup.world<HostsCollectives>(rest, (group) => HostsCollectives.create(group, makeGpu));
  if (hosts > 1)
    throw new UnsupportedError(
      `init: this job spans ${hosts} hosts and symmetric memory ends at a host: pass { acrossHosts: true } ` +
        "for a group whose collectives span them (NCCL between hosts, symmkit inside each)",
    );
  return ProcessGroup.world(rest, makeGpu);
}
