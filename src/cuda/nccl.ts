// libnccl: mechanical declarations and check(). The collectives are bound with the distributed runtime.
import { SymmkitError } from "../errors.js";
import { bindAll, defineAliases } from "./native.js";
import { openLibrary } from "./discovery.js";

defineAliases({ ncclResult_t: "int" });

export const NCCL_DECLARATIONS = {
  ncclGetVersion: "ncclResult_t ncclGetVersion(_Out_ int *version)",
  ncclGetErrorString: "const char *ncclGetErrorString(ncclResult_t result)",
} as const;

export interface Nccl {
  ncclGetVersion(v: [number]): number;
  ncclGetErrorString(r: number): string;
}

let bound: Nccl | undefined;
let libPath = "";

export function nccl(): Nccl {
  if (!bound) {
    const found = openLibrary("nccl");
    libPath = found.path;
    bound = bindAll<Nccl>(found.lib, found.path, NCCL_DECLARATIONS, "install NCCL 2.19 or later");
  }
  return bound;
}

export function ncclLibraryPath(): string {
  nccl();
  return libPath;
}

/** NCCL's version code, e.g. 22805, as "2.28.5". */
export function ncclVersion(): string {
  const v: [number] = [0];
  check(nccl().ncclGetVersion(v), "ncclGetVersion");
  const code = v[0];
  return `${Math.floor(code / 10000)}.${Math.floor((code % 10000) / 100)}.${code % 100}`;
}

/** Throws unless `status` is ncclSuccess. The one place NCCL statuses are judged. */
export function check(status: number, call: string): void {
  if (status !== 0) {
    throw new SymmkitError(
      "SYMMKIT_NCCL_ERROR",
      `${call} failed: ${nccl().ncclGetErrorString(status)} (${status})`,
    );
  }
}
