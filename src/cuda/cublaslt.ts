// libcublasLt: mechanical declarations, the enum values symmkit passes (cublasLt.h, library_types.h),
// and the one check() that turns a cublasStatus_t into a CublasError.
import { SymmkitError } from "../errors.js";
import { bindAll, defineAliases, type Ptr } from "./native.js";
import { openLibrary } from "./discovery.js";

defineAliases({
  cublasStatus_t: "int",
  cublasLtHandle_t: "void *",
  cublasLtMatmulDesc_t: "void *",
  cublasLtMatrixLayout_t: "void *",
  cublasLtMatmulPreference_t: "void *",
});

export const CUBLASLT_DECLARATIONS = {
  cublasLtGetVersion: "size_t cublasLtGetVersion()",
  cublasLtGetStatusName: "const char *cublasLtGetStatusName(cublasStatus_t status)",
  cublasLtGetStatusString: "const char *cublasLtGetStatusString(cublasStatus_t status)",
  cublasLtCreate: "cublasStatus_t cublasLtCreate(_Out_ cublasLtHandle_t *handle)",
  cublasLtDestroy: "cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle)",
  cublasLtMatmulDescCreate:
    "cublasStatus_t cublasLtMatmulDescCreate(_Out_ cublasLtMatmulDesc_t *desc, int computeType, int scaleType)",
  cublasLtMatmulDescDestroy: "cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc)",
  cublasLtMatmulDescSetAttribute:
    "cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, int attr, const void *buf, size_t size)",
  cublasLtMatrixLayoutCreate:
    "cublasStatus_t cublasLtMatrixLayoutCreate(_Out_ cublasLtMatrixLayout_t *layout, int type, uint64_t rows, uint64_t cols, int64_t ld)",
  cublasLtMatrixLayoutDestroy: "cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout)",
  cublasLtMatmulPreferenceCreate:
    "cublasStatus_t cublasLtMatmulPreferenceCreate(_Out_ cublasLtMatmulPreference_t *pref)",
  cublasLtMatmulPreferenceDestroy:
    "cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)",
  cublasLtMatmulPreferenceSetAttribute:
    "cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref, int attr, const void *buf, size_t size)",
  // results is an array of cublasLtMatmulHeuristicResult_t (HEURISTIC_RESULT_BYTES each) the caller owns.
  cublasLtMatmulAlgoGetHeuristic:
    "cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref, int requested, void *results, _Out_ int *returned)",
  // alpha, beta and algo are host addresses of native blocks the caller owns.
  cublasLtMatmul:
    "cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, void *alpha, void *A, cublasLtMatrixLayout_t aDesc, void *B, cublasLtMatrixLayout_t bDesc, void *beta, void *C, cublasLtMatrixLayout_t cDesc, void *D, cublasLtMatrixLayout_t dDesc, void *algo, void *workspace, size_t workspaceBytes, void *stream)",
} as const;

type Out<T> = [T];

export interface CublasLt {
  cublasLtGetVersion(): number;
  cublasLtGetStatusName(status: number): string | null;
  cublasLtGetStatusString(status: number): string | null;
  cublasLtCreate(h: Out<Ptr | null>): number;
  cublasLtDestroy(h: Ptr): number;
  cublasLtMatmulDescCreate(d: Out<Ptr | null>, computeType: number, scaleType: number): number;
  cublasLtMatmulDescDestroy(d: Ptr): number;
  cublasLtMatmulDescSetAttribute(d: Ptr, attr: number, buf: ArrayBufferView, size: number): number;
  cublasLtMatrixLayoutCreate(
    l: Out<Ptr | null>,
    type: number,
    rows: number,
    cols: number,
    ld: number,
  ): number;
  cublasLtMatrixLayoutDestroy(l: Ptr): number;
  cublasLtMatmulPreferenceCreate(p: Out<Ptr | null>): number;
  cublasLtMatmulPreferenceDestroy(p: Ptr): number;
  cublasLtMatmulPreferenceSetAttribute(p: Ptr, attr: number, buf: ArrayBufferView, size: number): number;
  cublasLtMatmulAlgoGetHeuristic(
    h: Ptr,
    desc: Ptr,
    a: Ptr,
    b: Ptr,
    c: Ptr,
    d: Ptr,
    pref: Ptr,
    requested: number,
    results: Ptr,
    returned: Out<number>,
  ): number;
  cublasLtMatmul(
    h: Ptr,
    desc: Ptr,
    alpha: Ptr,
    a: Ptr,
    aDesc: Ptr,
    b: Ptr,
    bDesc: Ptr,
    beta: Ptr,
    c: Ptr,
    cDesc: Ptr,
    d: Ptr,
    dDesc: Ptr,
    algo: Ptr,
    workspace: Ptr,
    workspaceBytes: number,
    stream: Ptr,
  ): number;
}

export const CUBLAS_STATUS_SUCCESS = 0;
/** cudaDataType_t (library_types.h). */
export const CudaDataType = { R_32F: 0, R_16F: 2, R_16BF: 14, R_8F_E4M3: 28, R_8F_E5M2: 29 } as const;
export const CUBLAS_COMPUTE_32F = 68;
export const CUBLAS_OP_N = 0;
export const CUBLAS_OP_T = 1;
/** cublasLtMatmulDescAttributes_t (cublasLt.h). */
export const MatmulDescAttribute = {
  TRANSA: 3,
  TRANSB: 4,
  A_SCALE_POINTER: 17,
  B_SCALE_POINTER: 18,
  FAST_ACCUM: 25,
} as const;
export const CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1;
/** sizeof(cublasLtMatmulHeuristicResult_t): algo (64), workspaceSize, state, wavesCount, reserved[4]. */
export const HEURISTIC_RESULT_BYTES = 96;
/** The cublasLtMatmulAlgo_t at the start of a heuristic result. */
export const MATMUL_ALGO_BYTES = 64;

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

export class CublasError extends SymmkitError {
  constructor(
    readonly call: string,
    readonly status: number,
    detail: string,
  ) {
    super("SYMMKIT_CUBLAS_ERROR", `${call} failed: ${detail} (${status})`);
  }
}

/** Throws CublasError unless `status` is CUBLAS_STATUS_SUCCESS. The one place cuBLASLt statuses are judged. */
export function check(status: number, call: string): void {
  if (status === CUBLAS_STATUS_SUCCESS) return;
  const api = cublasLt();
  const name = api.cublasLtGetStatusName(status) ?? `cublasStatus_t ${status}`;
  const text = api.cublasLtGetStatusString(status) ?? "unknown error";
  throw new CublasError(call, status, `${name}: ${text}`);
}
