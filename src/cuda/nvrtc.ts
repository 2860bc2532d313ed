// libnvrtc: mechanical declarations and the one check() that turns an nvrtcResult into an NvrtcError.
import path from "node:path";
import { NvrtcError } from "../errors.js";
import { bindAll, defineAliases, koffi, type Ptr } from "./native.js";
import { openLibrary, systemContext } from "./discovery.js";

defineAliases({ nvrtcResult: "int", nvrtcProgram: "void *" });

export const NVRTC_DECLARATIONS = {
  nvrtcVersion: "nvrtcResult nvrtcVersion(_Out_ int *major, _Out_ int *minor)",
  nvrtcGetErrorString: "const char *nvrtcGetErrorString(nvrtcResult result)",
  nvrtcGetNumSupportedArchs: "nvrtcResult nvrtcGetNumSupportedArchs(_Out_ int *n)",
  nvrtcGetSupportedArchs: "nvrtcResult nvrtcGetSupportedArchs(void *archs)",
  nvrtcCreateProgram:
    "nvrtcResult nvrtcCreateProgram(_Out_ nvrtcProgram *prog, const char *src, const char *name, int numHeaders, const char **headers, const char **includeNames)",
  nvrtcDestroyProgram: "nvrtcResult nvrtcDestroyProgram(_Inout_ nvrtcProgram *prog)",
  nvrtcAddNameExpression: "nvrtcResult nvrtcAddNameExpression(nvrtcProgram prog, const char *nameExpression)",
  nvrtcCompileProgram:
    "nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char **options)",
  nvrtcGetLoweredName:
    "nvrtcResult nvrtcGetLoweredName(nvrtcProgram prog, const char *nameExpression, _Out_ const char **lowered)",
  nvrtcGetProgramLogSize: "nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, _Out_ size_t *size)",
  nvrtcGetProgramLog: "nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, void *log)",
  nvrtcGetCUBINSize: "nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, _Out_ size_t *size)",
  nvrtcGetCUBIN: "nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, void *cubin)",
  nvrtcGetPTXSize: "nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, _Out_ size_t *size)",
  nvrtcGetPTX: "nvrtcResult nvrtcGetPTX(nvrtcProgram prog, void *ptx)",
} as const;

type Out<T> = [T];

export interface Nvrtc {
  nvrtcVersion(major: Out<number>, minor: Out<number>): number;
  nvrtcGetErrorString(result: number): string;
  nvrtcGetNumSupportedArchs(n: Out<number>): number;
  nvrtcGetSupportedArchs(archs: Int32Array): number;
  nvrtcCreateProgram(
    prog: Out<Ptr | null>,
    src: string,
    name: string,
    numHeaders: number,
    headers: string[] | null,
    includeNames: string[] | null,
  ): number;
  nvrtcDestroyProgram(prog: Out<Ptr | null>): number;
  nvrtcAddNameExpression(prog: Ptr, expr: string): number;
  nvrtcCompileProgram(prog: Ptr, n: number, options: string[]): number;
  nvrtcGetLoweredName(prog: Ptr, expr: string, lowered: Out<string | null>): number;
  nvrtcGetProgramLogSize(prog: Ptr, size: Out<number>): number;
  nvrtcGetProgramLog(prog: Ptr, log: Uint8Array): number;
  nvrtcGetCUBINSize(prog: Ptr, size: Out<number>): number;
  nvrtcGetCUBIN(prog: Ptr, cubin: Uint8Array): number;
  nvrtcGetPTXSize(prog: Ptr, size: Out<number>): number;
  nvrtcGetPTX(prog: Ptr, ptx: Uint8Array): number;
}

export const NVRTC_SUCCESS = 0;
export const NVRTC_ERROR_COMPILATION = 6;

let bound: Nvrtc | undefined;
let libPath = "";

/**
 * Opens libnvrtc (once per process). NVRTC dlopens its builtins library by soname at compile time; when
 * NVRTC was found outside the loader's path, that lookup would fail, so the builtins library beside it
 * is loaded first: the loader then resolves the soname to the copy already in the process.
 */
export function nvrtc(): Nvrtc {
  if (!bound) {
    const found = openLibrary("nvrtc");
    libPath = found.path;
    preloadBuiltins(found.path);
    bound = bindAll<Nvrtc>(
      found.lib,
      found.path,
      NVRTC_DECLARATIONS,
      "install a newer NVRTC (CUDA 12.4 or later)",
    );
  }
  return bound;
}

/** The builtins library preloaded: kept, since koffi unloads a library whose object is collected, and
 * NVRTC's next lookup by soname would then fail (NVRTC_ERROR_BUILTIN_OPERATION_FAILURE, seen after a
 * collection in a process that compiled many programs). */
const keptLibraries: unknown[] = [];

function preloadBuiltins(nvrtcPath: string): void {
  if (!path.isAbsolute(nvrtcPath)) return;
  const dir = path.dirname(nvrtcPath);
  const ctx = systemContext();
  const builtins = ctx
    .readdir(dir)
    .filter((n) => /^libnvrtc-builtins\.so(\.\d+)+$/.test(n))
    .sort((a, b) => b.length - a.length);
  const file = builtins[0];
  if (file) keptLibraries.push(koffi.load(path.join(dir, file)));
}

export function nvrtcLibraryPath(): string {
  nvrtc();
  return libPath;
}

export function nvrtcVersion(): { major: number; minor: number } {
  const major: [number] = [0];
  const minor: [number] = [0];
  check(nvrtc().nvrtcVersion(major, minor), "nvrtcVersion");
  return { major: major[0], minor: minor[0] };
}

/** Throws NvrtcError unless `status` is NVRTC_SUCCESS. The one place NVRTC statuses are judged. */
export function check(status: number, call: string, log = ""): void {
  if (status !== NVRTC_SUCCESS) throw new NvrtcError(call, status, nvrtc().nvrtcGetErrorString(status), log);
}
