// Every SYMMKIT_* environment variable symmkit reads, in one table: what it means, its default (stated
// here and nowhere else), what a valid value looks like and the parser that checks it. Nothing else in
// symmkit reads a SYMMKIT_* variable: code asks readEnvVar(name, env), typed by the name. A variable set
// to the empty string counts as unset. A bad value is a SymmkitError (code SYMMKIT_ENVIRONMENT) that names
// the variable and its value, says what it takes, and how to fix it. README's table lists the same
// variables (test/settings.test.ts checks both against the sources).
import path from "node:path";
import { SymmkitError } from "./errors.js";
import { userCacheDir } from "./paths.js";

export type Env = Readonly<Record<string, string | undefined>>;

/** What a parser returns for a value it refuses. */
export const INVALID: unique symbol = Symbol("invalid");

export interface EnvVar<T> {
  /** What it does, in one line. */
  readonly meaning: string;
  /** What applies when it is unset, in words. */
  readonly default: string;
  /** What a valid value is, for the error message. */
  readonly expected: string;
  /** A valid value. */
  readonly example: string;
  /** The value when unset (or empty). */
  readonly unset: (env: Env) => T;
  /** A set value, checked: INVALID when it is not one `expected` describes. */
  readonly parse: (value: string, env: Env) => T | typeof INVALID;
  /** Never shown, in errors or by `symmkit doctor`. */
  readonly secret?: boolean;
}

/** Deadline of every bounded wait inside symmkit's kernels (and the CPU backend's signal waits). */
export const DEFAULT_SYNC_TIMEOUT_MS = 30_000;
/** How long a store call waits by default (SYMMKIT_STORE_TIMEOUT_MS; StoreClient). */
export const DEFAULT_STORE_TIMEOUT_MS = 300_000;
/** Largest size the GPU tests' large-collectives check runs (bytes per rank). */
export const DEFAULT_TEST_LARGE_MAX = 1 << 30;
/** A job token longer than this is refused by the store (its hello reads at most 1024 bytes). */
const MAX_JOB_TOKEN_BYTES = 1024;
/** setTimeout's limit: a longer deadline would fire at once. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** A whole number in [min, max] (as Number() reads it: "30000", "3e4"). */
function wholeNumber(min: number, max: number): (v: string) => number | typeof INVALID {
  return (v) => {
    const n = Number(v);
    return Number.isInteger(n) && n >= min && n <= max ? n : INVALID;
  };
}

/** Any non-empty string, used as given. */
const anyString = (v: string): string => v;
const none = (): undefined => undefined;
const onOff = (v: string): boolean | typeof INVALID => {
  const value = v.toLowerCase();
  if (["1", "true", "on"].includes(value)) return true;
  return ["0", "false", "off"].includes(value) ? false : INVALID;
};

/** The override of one NVIDIA library's search. */
function libraryOverride(library: string, file: string): EnvVar<string | undefined> {
  return {
    meaning: `${library}: a library file, or the directory holding it; the only place it is looked for`,
    default:
      "searched: LD_LIBRARY_PATH, the system loader, CUDA_HOME/CUDA_PATH, /usr/local/cuda*, the distribution, Python wheels",
    expected: "a library file or a directory (checked when the library is opened)",
    example: `/usr/local/cuda/lib64/${file}`,
    unset: none,
    parse: anyString,
  };
}

export const ENV_VARS = {
  SYMMKIT_LIBCUDA: libraryOverride("libcuda (the NVIDIA driver)", "libcuda.so.1"),
  SYMMKIT_LIBNVRTC: libraryOverride("libnvrtc (NVRTC, the runtime compiler)", "libnvrtc.so.13"),
  SYMMKIT_LIBNCCL: libraryOverride("libnccl (NCCL)", "libnccl.so.2"),
  SYMMKIT_LIBCUBLASLT: libraryOverride("libcublasLt (cuBLASLt)", "libcublasLt.so.13"),
  SYMMKIT_LIBNVML: libraryOverride("libnvidia-ml (NVML)", "libnvidia-ml.so.1"),
  SYMMKIT_CUDA_INCLUDE: {
    meaning:
      "the CUDA include directory NVRTC compiles against (include/cccl beside it is added when present)",
    default: "searched: beside NVRTC, CUDA_HOME/CUDA_PATH, /usr/local/cuda*, Python wheels, /usr/include",
    expected: "a directory holding cuda_fp16.h and cuda_bf16.h (checked when NVRTC is first used)",
    example: "/usr/local/cuda/include",
    unset: none,
    parse: anyString,
  },
  SYMMKIT_KERNEL_CACHE: {
    meaning: "where compiled kernels are cached, or off (also 0, false, no) for no cache",
    default: "$XDG_CACHE_HOME/symmkit/kernels (XDG_CACHE_HOME defaults to ~/.cache)",
    expected: "a directory, or off",
    example: "/tmp/symmkit-kernels",
    unset: (env): string | null => path.join(userCacheDir(env), "kernels"),
    parse: (v): string | null =>
      ["off", "0", "false", "no"].includes(v.toLowerCase()) ? null : path.resolve(v),
  },
  SYMMKIT_TUNE_DIR: {
    meaning: "where `symmkit tune` writes tune tables, and where algorithm auto looks first (then tune/)",
    default: "$XDG_CACHE_HOME/symmkit/tune",
    expected: "a directory",
    example: "/tmp/symmkit-tune",
    unset: (env): string => path.join(userCacheDir(env), "tune"),
    parse: anyString,
  },
  SYMMKIT_SYNC_TIMEOUT_MS: {
    meaning:
      "deadline of every wait inside symmkit's kernels and CPU signal waits (init({ syncTimeoutMs }) wins)",
    default: String(DEFAULT_SYNC_TIMEOUT_MS),
    expected: `a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS}`,
    example: "60000",
    unset: (): number => DEFAULT_SYNC_TIMEOUT_MS,
    parse: wholeNumber(1, MAX_TIMEOUT_MS),
  },
  SYMMKIT_STORE_TIMEOUT_MS: {
    meaning:
      "deadline of every wait on the rendezvous store: joining the job, barriers, allocations (init({ storeTimeoutMs }) wins)",
    default: String(DEFAULT_STORE_TIMEOUT_MS),
    expected: `a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS}`,
    example: "60000",
    unset: (): number => DEFAULT_STORE_TIMEOUT_MS,
    parse: wholeNumber(1, MAX_TIMEOUT_MS),
  },
  SYMMKIT_STAGING_BYTES: {
    meaning:
      "each rank's symmetric staging buffer: the largest plain tensor a collective takes, the fused matmuls' workspace (init({ stagingBytes }) wins)",
    // The constants are DEFAULT_GPU_STAGING_BYTES (init.ts) and DEFAULT_CPU_STAGING_BYTES
    // (cpu/process-group.ts); test/settings.test.ts checks that this says the same.
    default: "the backend's: 64 MiB on GPUs, 8 MiB on the CPU backend",
    expected: "a positive whole number of bytes",
    example: String(256 * 2 ** 20),
    unset: (): number | undefined => undefined,
    parse: wholeNumber(1, Number.MAX_SAFE_INTEGER),
  },
  SYMMKIT_JOB_TOKEN: {
    meaning:
      "the rendezvous store's shared secret: symmkit run sets it for its ranks; give every rank (and every host's symmkit run) the same one",
    default: "symmkit run makes a random one (one host only); a rank started alone needs none",
    expected: `a secret of 1 to ${MAX_JOB_TOKEN_BYTES} bytes`,
    example: "3f9c1e0b7a5d42c8",
    unset: (): string | undefined => undefined,
    parse: (v) => (Buffer.byteLength(v, "utf8") <= MAX_JOB_TOKEN_BYTES ? v : INVALID),
    secret: true,
  },
  SYMMKIT_LAUNCHER_PID: {
    meaning: "set by symmkit run: the launcher's process id; the rank exits when the launcher is gone",
    default: "none: the rank watches no launcher",
    expected: "a process id (a positive whole number)",
    example: "4242",
    unset: (): number | undefined => undefined,
    parse: wholeNumber(1, 2 ** 31 - 1),
  },
  SYMMKIT_FD_DIR: {
    meaning: "set by symmkit run: the host's private directory (mode 0700) where ranks pass file descriptors",
    default: "none: local rank 0 makes one and shares it through the store",
    expected: "a directory",
    example: "/tmp/symmkit-job-abc123",
    unset: none,
    parse: anyString,
  },
  SYMMKIT_SHARE_GPUS: {
    meaning:
      "set by symmkit run --share-gpus: a host's ranks beyond its GPUs share them round-robin (time-sliced; correctness only, benchmarks refuse)",
    default: "off: a host starts at most one rank per GPU",
    expected: "1, true or on; 0, false or off",
    example: "1",
    unset: (): boolean => false,
    parse: onOff,
  },
  SYMMKIT_STORE_HOST: {
    meaning:
      "the address the rendezvous store listens on when rank 0 starts it (ranks not started by symmkit run)",
    default: "127.0.0.1",
    expected: "a host name or IP address",
    example: "0.0.0.0",
    unset: (): string => "127.0.0.1",
    parse: anyString,
  },
  SYMMKIT_GIT_REVISION: {
    meaning: "the git revision benchmark results and tune tables record",
    default: "`git rev-parse --short=12 HEAD` in the package, else unknown",
    expected: "a revision",
    example: "713f69d0c2a1",
    unset: none,
    parse: anyString,
  },
  SYMMKIT_CHECK_CALLS: {
    meaning:
      "checks that cost on every call: before each NCCL call between hosts, every rank's call fingerprint gathered and compared; allReduceRmsNorm's weight and bias read back to the host and their digest put in the call's fingerprint (CollectiveMismatchError where ranks differ). Every rank must set it alike",
    default:
      "off: calls inside a host are checked (their signals carry fingerprints), NCCL's between hosts are not, nor allReduceRmsNorm's weight and bias on GPUs",
    expected: "1, true or on; 0, false or off",
    example: "1",
    unset: (): boolean => false,
    parse: onOff,
  },
  SYMMKIT_DEBUG: {
    meaning: "print stack traces of errors the CLI reports",
    default: "off",
    expected: "1, true or on; 0, false or off",
    example: "1",
    unset: (): boolean => false,
    parse: onOff,
  },
  SYMMKIT_TEST_SEED: {
    meaning: "the random seed of symmkit demo and the tests, to replay a run (each prints the one it used)",
    default: "a fresh random seed each run",
    expected: "a whole number from 0 to 2^64 - 1",
    example: "125304592983915",
    unset: (): bigint | undefined => undefined,
    parse: (v) => {
      let n: bigint;
      try {
        n = BigInt(v);
      } catch {
        return INVALID;
      }
      return n >= 0n && n < 1n << 64n ? n : INVALID;
    },
  },
  SYMMKIT_TEST_LARGE_MAX: {
    meaning: "the GPU tests' largest collective (test/gpu/ranks/collectives-large.ts), bytes per rank",
    default: `${DEFAULT_TEST_LARGE_MAX / 2 ** 30} GiB`,
    expected: "a positive whole number of bytes",
    example: String(64 * 2 ** 20),
    unset: (): number => DEFAULT_TEST_LARGE_MAX,
    parse: wholeNumber(1, Number.MAX_SAFE_INTEGER),
  },
} satisfies Record<`SYMMKIT_${string}`, EnvVar<unknown>>;

export type EnvVarName = keyof typeof ENV_VARS;
/** What readEnvVar(name) returns. */
export type EnvVarValue<N extends EnvVarName> = (typeof ENV_VARS)[N] extends EnvVar<infer T> ? T : never;
/** The variables that override where an NVIDIA library is looked for. */
export type LibraryEnvVar = Extract<
  EnvVarName,
  "SYMMKIT_LIBCUDA" | "SYMMKIT_LIBNVRTC" | "SYMMKIT_LIBNCCL" | "SYMMKIT_LIBCUBLASLT" | "SYMMKIT_LIBNVML"
>;

export function isEnvVarName(name: string): name is EnvVarName {
  return Object.hasOwn(ENV_VARS, name);
}

/** The variable's value from `env`, parsed; its default when unset or empty. */
export function readEnvVar<N extends EnvVarName>(name: N, env: Env = process.env): EnvVarValue<N> {
  const spec: EnvVar<unknown> = ENV_VARS[name];
  const raw = env[name];
  if (raw === undefined || raw === "") return spec.unset(env) as EnvVarValue<N>;
  const value = spec.parse(raw, env);
  if (value === INVALID) {
    throw new SymmkitError(
      "SYMMKIT_ENVIRONMENT",
      `${name}=${shown(spec, raw)} is not valid: expected ${spec.expected}. Set it to one ` +
        `(e.g. ${name}=${spec.example}), or unset it for the default (${spec.default}).`,
    );
  }
  return value as EnvVarValue<N>;
}

/** A value as errors and `symmkit doctor` show it: quoted, or its length only when secret. */
function shown(spec: EnvVar<unknown> | undefined, raw: string): string {
  return spec?.secret ? `<${Buffer.byteLength(raw, "utf8")} bytes, not shown>` : JSON.stringify(raw);
}

export interface EnvVarCheck {
  readonly name: string;
  /** As set, quoted (a secret's length only). */
  readonly value: string;
  /** Why it is refused, or that symmkit reads no such variable; absent when fine. */
  readonly problem?: string;
}

/** Every SYMMKIT_* variable set in `env`, checked (for `symmkit doctor`). */
export function checkEnvVars(env: Env = process.env): EnvVarCheck[] {
  return Object.keys(env)
    .filter((name) => name.startsWith("SYMMKIT_") && env[name] !== undefined && env[name] !== "")
    .sort()
    .map((name) => {
      const known = isEnvVarName(name);
      const value = shown(known ? ENV_VARS[name] : undefined, env[name]!);
      if (!known) return { name, value, problem: "symmkit reads no such variable (a typo?)" };
      try {
        readEnvVar(name, env);
        return { name, value };
      } catch (e) {
        return { name, value, problem: e instanceof Error ? e.message : String(e) };
      }
    });
}
