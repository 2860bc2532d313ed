// CUDA C++ -> CUBIN with NVRTC for one exact architecture, through the disk cache. Needs no GPU.
import { NvrtcError, InvalidArgumentError } from "../../errors.js";
import { findCudaHeaders, systemContext, type HeaderDirs } from "../../cuda/discovery.js";
import { check, nvrtc, nvrtcLibraryPath, nvrtcVersion, NVRTC_SUCCESS } from "../../cuda/nvrtc.js";
import { cString } from "../../cuda/native.js";
import { DEVICE_INCLUDE_DIR, VERSION } from "../../paths.js";
import { CACHE_ENTRY_FORMAT, cacheDirFromEnv, cacheKey, KernelCache, type CachedKernel } from "./cache.js";
import { includedHeaders } from "./includes.js";

export interface CompileRequest {
  /** Program name used in diagnostics, e.g. "symmkit/fill.cu". */
  readonly name: string;
  readonly source: string;
  /** Kernels to instantiate and look up, e.g. "symmkit::fill<uint64_t>". */
  readonly nameExpressions: readonly string[];
  /** Exact target, e.g. "sm_90a". */
  readonly arch: string;
  readonly options?: readonly string[];
  /** Searched after symmkit's device/include and before the CUDA headers. */
  readonly includeDirs?: readonly string[];
}

export interface CompiledProgram extends CachedKernel {
  readonly key: string;
  readonly cacheHit: boolean;
  readonly ms: number;
}

export interface Toolchain {
  readonly nvrtcVersion: string;
  readonly nvrtcPath: string;
  readonly cudaHeaders: HeaderDirs;
}

let toolchain: Toolchain | undefined;

/** NVRTC and the CUDA headers, found once per process. */
export function getToolchain(): Toolchain {
  if (!toolchain) {
    const v = nvrtcVersion();
    const nvrtcPath = nvrtcLibraryPath();
    toolchain = {
      nvrtcVersion: `${v.major}.${v.minor}`,
      nvrtcPath,
      cudaHeaders: findCudaHeaders(systemContext(), nvrtcPath),
    };
  }
  return toolchain;
}

let defaultCache: KernelCache | undefined;

export function kernelCache(): KernelCache {
  defaultCache ??= new KernelCache(cacheDirFromEnv());
  return defaultCache;
}

const ARCH = /^sm_\d{2,3}[af]?$/;

/** The options NVRTC gets, in order; part of the cache key. */
export function compileOptions(req: CompileRequest, tc: Toolchain): string[] {
  if (!ARCH.test(req.arch)) throw new InvalidArgumentError(`arch ${req.arch}: expected e.g. sm_90a`);
  const dirs = [DEVICE_INCLUDE_DIR, ...(req.includeDirs ?? []), ...tc.cudaHeaders.dirs];
  return [
    `--gpu-architecture=${req.arch}`,
    "--std=c++17",
    "--generate-line-info",
    ...dirs.map((d) => `-I${d}`),
    ...(req.options ?? []),
  ];
}

/** A request's NVRTC options, its cache key (everything that decides its cubin) and the cache's entry
 * under it, if any. */
function lookUp(
  req: CompileRequest,
  cache: KernelCache,
): { options: string[]; key: string; hit: CachedKernel | undefined } {
  const tc = getToolchain();
  const options = compileOptions(req, tc);
  const includeDirs = options.filter((o) => o.startsWith("-I")).map((o) => o.slice(2));
  const key = cacheKey({
    symmkit: VERSION,
    entry: CACHE_ENTRY_FORMAT,
    nvrtc: tc.nvrtcVersion,
    arch: req.arch,
    options,
    source: req.source,
    headers: includedHeaders(req.source, includeDirs),
    names: req.nameExpressions,
  });
  return { options, key, hit: cache.get(key) };
}

export function compileProgram(req: CompileRequest, cache: KernelCache = kernelCache()): CompiledProgram {
  const t0 = performance.now();
  const { options, key, hit } = lookUp(req, cache);
  if (hit) return { ...hit, key, cacheHit: true, ms: performance.now() - t0 };
  const built = runNvrtc(req, options);
  cache.put(key, built);
  return { ...built, key, cacheHit: false, ms: performance.now() - t0 };
}

/** The program from the disk cache alone: undefined where it was never compiled (nothing compiles). */
export function cachedProgram(
  req: CompileRequest,
  cache: KernelCache = kernelCache(),
): CompiledProgram | undefined {
  if (cache.dir === null) return undefined;
  const t0 = performance.now();
  const { key, hit } = lookUp(req, cache);
  return hit && { ...hit, key, cacheHit: true, ms: performance.now() - t0 };
}

function runNvrtc(req: CompileRequest, options: string[]): CachedKernel {
  const api = nvrtc();
  const prog: [bigint | null] = [null];
  check(api.nvrtcCreateProgram(prog, req.source, req.name, 0, null, null), "nvrtcCreateProgram");
  const p = prog[0]!;
  try {
    for (const expr of req.nameExpressions)
      check(api.nvrtcAddNameExpression(p, expr), "nvrtcAddNameExpression");
    const status = api.nvrtcCompileProgram(p, options.length, options);
    const log = programLog(p);
    if (status !== NVRTC_SUCCESS) {
      throw new NvrtcError(
        `nvrtcCompileProgram(${req.name}, ${req.arch})`,
        status,
        api.nvrtcGetErrorString(status),
        log,
      );
    }
    const size: [number] = [0];
    check(api.nvrtcGetCUBINSize(p, size), "nvrtcGetCUBINSize");
    const cubin = new Uint8Array(size[0]);
    check(api.nvrtcGetCUBIN(p, cubin), "nvrtcGetCUBIN");
    const lowered: Record<string, string> = {};
    for (const expr of req.nameExpressions) {
      const out: [string | null] = [null];
      check(api.nvrtcGetLoweredName(p, expr, out), "nvrtcGetLoweredName");
      lowered[expr] = out[0]!;
    }
    return { cubin, lowered, log };
  } finally {
    api.nvrtcDestroyProgram(prog);
  }
}

function programLog(p: bigint): string {
  const api = nvrtc();
  const size: [number] = [0];
  check(api.nvrtcGetProgramLogSize(p, size), "nvrtcGetProgramLogSize");
  if (size[0] <= 1) return "";
  const buf = new Uint8Array(size[0]);
  check(api.nvrtcGetProgramLog(p, buf), "nvrtcGetProgramLog");
  return cString(buf).trim();
}
