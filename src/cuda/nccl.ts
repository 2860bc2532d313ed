// libnccl: mechanical declarations and check(). Handles (ncclComm_t) are pointers; ncclUniqueId is a
// 128-byte struct passed by value.
import { SymmkitError } from "../errors.js";
import { bindAll, defineAliases, koffi, type Ptr } from "./native.js";
import { openLibrary } from "./discovery.js";

defineAliases({ ncclResult_t: "int", ncclComm_t: "void *", ncclDataType_t: "int", ncclRedOp_t: "int" });
if (!tryType("ncclUniqueId"))
  koffi.struct("ncclUniqueId", { internal: koffi.array("uint8_t", 128, "Typed") });

function tryType(name: string): boolean {
  try {
    koffi.type(name);
    return true;
  } catch {
    return false;
  }
}

export const NCCL_DECLARATIONS = {
  ncclGetVersion: "ncclResult_t ncclGetVersion(_Out_ int *version)",
  ncclGetErrorString: "const char *ncclGetErrorString(ncclResult_t result)",
  ncclGetLastError: "const char *ncclGetLastError(ncclComm_t comm)",
  ncclGetUniqueId: "ncclResult_t ncclGetUniqueId(_Out_ ncclUniqueId *id)",
  ncclCommInitRankConfig:
    "ncclResult_t ncclCommInitRankConfig(_Out_ ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, void *config)",
  ncclCommDestroy: "ncclResult_t ncclCommDestroy(ncclComm_t comm)",
  ncclCommAbort: "ncclResult_t ncclCommAbort(ncclComm_t comm)",
  ncclCommGetAsyncError: "ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, _Out_ ncclResult_t *error)",
  ncclAllReduce:
    "ncclResult_t ncclAllReduce(void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm, void *stream)",
  ncclAllGather:
    "ncclResult_t ncclAllGather(void *send, void *recv, size_t sendcount, ncclDataType_t type, ncclComm_t comm, void *stream)",
  ncclReduceScatter:
    "ncclResult_t ncclReduceScatter(void *send, void *recv, size_t recvcount, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm, void *stream)",
  ncclBroadcast:
    "ncclResult_t ncclBroadcast(void *send, void *recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm, void *stream)",
  ncclSend:
    "ncclResult_t ncclSend(void *send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, void *stream)",
  ncclRecv:
    "ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, void *stream)",
  ncclGroupStart: "ncclResult_t ncclGroupStart()",
  ncclGroupEnd: "ncclResult_t ncclGroupEnd()",
} as const;

export interface Nccl {
  ncclGetVersion(v: [number]): number;
  ncclGetErrorString(r: number): string;
  ncclGetLastError(comm: Ptr | null): string | null;
  ncclGetUniqueId(id: [{ internal: Uint8Array } | null]): number;
  ncclCommInitRankConfig(
    comm: [Ptr | null],
    nranks: number,
    id: { internal: Uint8Array },
    rank: number,
    config: Ptr,
  ): number;
  ncclCommDestroy(comm: Ptr): number;
  ncclCommAbort(comm: Ptr): number;
  ncclCommGetAsyncError(comm: Ptr, err: [number]): number;
  ncclAllReduce(
    send: Ptr,
    recv: Ptr,
    count: number,
    type: number,
    op: number,
    comm: Ptr,
    stream: Ptr,
  ): number;
  ncclAllGather(send: Ptr, recv: Ptr, count: number, type: number, comm: Ptr, stream: Ptr): number;
  ncclReduceScatter(
    send: Ptr,
    recv: Ptr,
    count: number,
    type: number,
    op: number,
    comm: Ptr,
    stream: Ptr,
  ): number;
  ncclBroadcast(
    send: Ptr,
    recv: Ptr,
    count: number,
    type: number,
    root: number,
    comm: Ptr,
    stream: Ptr,
  ): number;
  ncclSend(send: Ptr, count: number, type: number, peer: number, comm: Ptr, stream: Ptr): number;
  ncclRecv(recv: Ptr, count: number, type: number, peer: number, comm: Ptr, stream: Ptr): number;
  ncclGroupStart(): number;
  ncclGroupEnd(): number;
}

/** ncclResult_t values the runtime branches on. */
export const NCCL_SUCCESS = 0;
export const NCCL_IN_PROGRESS = 7;

/** ncclDataType_t (nccl.h). */
export const NcclDataType = {
  i8: 0,
  u8: 1,
  i32: 2,
  u32: 3,
  i64: 4,
  u64: 5,
  f16: 6,
  f32: 7,
  f64: 8,
  bf16: 9,
  fp8e4m3: 10,
  fp8e5m2: 11,
} as const;

/** ncclRedOp_t (nccl.h). */
export const NcclRedOp = { sum: 0, prod: 1, max: 2, min: 3, avg: 4 } as const;

/** The prefix of ncclConfig_t that NCCL 2.19 defined (the struct is append-only and versioned). */
export const NCCL_CONFIG_BYTES = 48;
export const NCCL_CONFIG_VERSION = 21900;
export const NCCL_API_MAGIC = 0xcafebeef;
export const NCCL_CONFIG_UNDEF_INT = -2147483648;

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

export class NcclError extends SymmkitError {
  constructor(
    readonly call: string,
    readonly status: number,
    detail: string,
  ) {
    super("SYMMKIT_NCCL_ERROR", `${call} failed: ${detail} (${status})`);
  }
}

/** Throws NcclError unless `status` is ncclSuccess. The one place NCCL statuses are judged. */
export function check(status: number, call: string, comm?: Ptr): void {
  if (status === NCCL_SUCCESS) return;
  const api = nccl();
  const last = comm !== undefined ? api.ncclGetLastError(comm) : null;
  throw new NcclError(call, status, `${api.ncclGetErrorString(status)}${last ? `: ${last}` : ""}`);
}
