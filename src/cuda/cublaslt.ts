// libcublasLt: mechanical declarations. The matmul entry points are bound with the GEMM work.
import { bindAll } from "./native.js";
import { openLibrary } from "./discovery.js";

export const CUBLASLT_DECLARATIONS = {
  cublasLtGetVersion: "size_t cublasLtGetVersion()",
} as const;

export interface CublasLt {
  cublasLtGetVersion(): number;
}

let bound: CublasLt | undefined;
let libPath = "";

export function cublasLt(): CublasLt {
  if (!bound) {
    const found = openLibrary("cublasLt");
    libPath = found.path;
    bound = bindAll<CublasLt>(found.lib, found.path, CUBLASLT_DECLARATIONS, "install cuBLAS 12 or later");
  }
  return bound;
}

export function cublasLtLibraryPath(): string {
  cublasLt();
  return libPath;
}

/** cuBLASLt's version code, e.g. 130100, as "13.1.0". */
export function cublasLtVersion(): string {
  const code = cublasLt().cublasLtGetVersion();
  return `${Math.floor(code / 10000)}.${Math.floor((code % 10000) / 100)}.${code % 100}`;
}
