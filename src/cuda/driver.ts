// libcuda: mechanical declarations, named as cuda.h (13.0) maps them (versioned symbols by their real
// names), and the one check() that turns a CUresult into a CudaError.
import { CudaError } from "../errors.js";
import { bindAll, defineAliases, type Ptr } from "./native.js";
import { openLibrary } from "./discovery.js";

defineAliases({
  CUresult: "int",
  CUdevice: "int",
  CUdeviceptr: "void *",
  CUcontext: "void *",
  CUstream: "void *",
  CUevent: "void *",
  CUmodule: "void *",
  CUfunction: "void *",
  CUgraph: "void *",
  CUgraphExec: "void *",
  CUmemGenericAllocationHandle: "void *",
  CUmemoryPool: "void *",
});

export const DRIVER_DECLARATIONS = {
  cuInit: "CUresult cuInit(unsigned int flags)",
  cuDriverGetVersion: "CUresult cuDriverGetVersion(_Out_ int *version)",
  cuGetErrorName: "CUresult cuGetErrorName(CUresult error, _Out_ const char **str)",
  cuGetErrorString: "CUresult cuGetErrorString(CUresult error, _Out_ const char **str)",
  cuDeviceGetCount: "CUresult cuDeviceGetCount(_Out_ int *count)",
  cuDeviceGet: "CUresult cuDeviceGet(_Out_ CUdevice *device, int ordinal)",
  cuDeviceGetName: "CUresult cuDeviceGetName(void *name, int len, CUdevice dev)",
  cuDeviceGetAttribute: "CUresult cuDeviceGetAttribute(_Out_ int *value, int attrib, CUdevice dev)",
  cuDeviceTotalMem_v2: "CUresult cuDeviceTotalMem_v2(_Out_ size_t *bytes, CUdevice dev)",
  cuDeviceGetPCIBusId: "CUresult cuDeviceGetPCIBusId(void *pciBusId, int len, CUdevice dev)",
  cuDeviceCanAccessPeer: "CUresult cuDeviceCanAccessPeer(_Out_ int *canAccess, CUdevice dev, CUdevice peer)",
  cuDeviceGetP2PAttribute:
    "CUresult cuDeviceGetP2PAttribute(_Out_ int *value, int attrib, CUdevice src, CUdevice dst)",
  cuDevicePrimaryCtxRetain: "CUresult cuDevicePrimaryCtxRetain(_Out_ CUcontext *ctx, CUdevice dev)",
  cuDevicePrimaryCtxRelease_v2: "CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)",
  cuCtxSetCurrent: "CUresult cuCtxSetCurrent(CUcontext ctx)",
  cuCtxSynchronize: "CUresult cuCtxSynchronize()",
  cuCtxEnablePeerAccess: "CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)",
  cuMemGetInfo_v2: "CUresult cuMemGetInfo_v2(_Out_ size_t *free, _Out_ size_t *total)",
  cuMemAlloc_v2: "CUresult cuMemAlloc_v2(_Out_ CUdeviceptr *dptr, size_t bytes)",
  cuMemFree_v2: "CUresult cuMemFree_v2(CUdeviceptr dptr)",
  cuMemHostAlloc: "CUresult cuMemHostAlloc(_Out_ void **pp, size_t bytes, unsigned int flags)",
  cuMemFreeHost: "CUresult cuMemFreeHost(void *p)",
  cuMemHostGetDevicePointer_v2:
    "CUresult cuMemHostGetDevicePointer_v2(_Out_ CUdeviceptr *dptr, void *p, unsigned int flags)",
  cuMemsetD8Async: "CUresult cuMemsetD8Async(CUdeviceptr dst, uint8_t value, size_t n, CUstream s)",
  cuMemsetD16Async: "CUresult cuMemsetD16Async(CUdeviceptr dst, uint16_t value, size_t n, CUstream s)",
  cuMemsetD32Async: "CUresult cuMemsetD32Async(CUdeviceptr dst, uint32_t value, size_t n, CUstream s)",
  cuMemcpyHtoDAsync_v2:
    "CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)",
  cuMemcpyDtoHAsync_v2: "CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)",
  cuMemcpyDtoDAsync_v2:
    "CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)",
  // copy is a CUDA_MEMCPY2D (128 bytes, CUDA_MEMCPY2D_LAYOUT).
  cuMemcpy2DAsync_v2: "CUresult cuMemcpy2DAsync_v2(void *copy, CUstream s)",
  cuMemcpyPeerAsync:
    "CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src, CUcontext srcCtx, size_t n, CUstream s)",
  cuStreamCreate: "CUresult cuStreamCreate(_Out_ CUstream *stream, unsigned int flags)",
  cuStreamCreateWithPriority:
    "CUresult cuStreamCreateWithPriority(_Out_ CUstream *stream, unsigned int flags, int priority)",
  cuStreamDestroy_v2: "CUresult cuStreamDestroy_v2(CUstream stream)",
  cuStreamSynchronize: "CUresult cuStreamSynchronize(CUstream stream)",
  cuStreamQuery: "CUresult cuStreamQuery(CUstream stream)",
  cuStreamWaitEvent: "CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags)",
  cuStreamBeginCapture_v2: "CUresult cuStreamBeginCapture_v2(CUstream stream, int mode)",
  cuStreamEndCapture: "CUresult cuStreamEndCapture(CUstream stream, _Out_ CUgraph *graph)",
  cuStreamIsCapturing: "CUresult cuStreamIsCapturing(CUstream stream, _Out_ int *status)",
  cuThreadExchangeStreamCaptureMode: "CUresult cuThreadExchangeStreamCaptureMode(_Inout_ int *mode)",
  cuGraphInstantiateWithFlags:
    "CUresult cuGraphInstantiateWithFlags(_Out_ CUgraphExec *exec, CUgraph graph, unsigned long long flags)",
  cuGraphLaunch: "CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream)",
  cuGraphExecDestroy: "CUresult cuGraphExecDestroy(CUgraphExec exec)",
  cuGraphDestroy: "CUresult cuGraphDestroy(CUgraph graph)",
  cuEventCreate: "CUresult cuEventCreate(_Out_ CUevent *event, unsigned int flags)",
  cuEventRecord: "CUresult cuEventRecord(CUevent event, CUstream stream)",
  cuEventSynchronize: "CUresult cuEventSynchronize(CUevent event)",
  cuEventQuery: "CUresult cuEventQuery(CUevent event)",
  cuEventElapsedTime_v2: "CUresult cuEventElapsedTime_v2(_Out_ float *ms, CUevent start, CUevent end)",
  cuEventDestroy_v2: "CUresult cuEventDestroy_v2(CUevent event)",
  cuModuleLoadData: "CUresult cuModuleLoadData(_Out_ CUmodule *module, const void *image)",
  cuModuleUnload: "CUresult cuModuleUnload(CUmodule module)",
  cuModuleGetFunction:
    "CUresult cuModuleGetFunction(_Out_ CUfunction *fn, CUmodule module, const char *name)",
  cuFuncGetAttribute: "CUresult cuFuncGetAttribute(_Out_ int *value, int attrib, CUfunction fn)",
  cuFuncSetAttribute: "CUresult cuFuncSetAttribute(CUfunction fn, int attrib, int value)",
  cuMemGetAllocationGranularity:
    "CUresult cuMemGetAllocationGranularity(_Out_ size_t *granularity, void *prop, int option)",
  cuMemCreate:
    "CUresult cuMemCreate(_Out_ CUmemGenericAllocationHandle *handle, size_t size, void *prop, unsigned long long flags)",
  cuMemRelease: "CUresult cuMemRelease(CUmemGenericAllocationHandle handle)",
  cuMemExportToShareableHandle:
    "CUresult cuMemExportToShareableHandle(_Out_ int *fd, CUmemGenericAllocationHandle handle, int handleType, unsigned long long flags)",
  // For POSIX file descriptors, osHandle is the descriptor's value cast to a pointer.
  cuMemImportFromShareableHandle:
    "CUresult cuMemImportFromShareableHandle(_Out_ CUmemGenericAllocationHandle *handle, void *osHandle, int handleType)",
  cuMemAddressReserve:
    "CUresult cuMemAddressReserve(_Out_ CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags)",
  cuMemAddressFree: "CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)",
  cuMemMap:
    "CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle, unsigned long long flags)",
  cuMemUnmap: "CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)",
  cuMemSetAccess: "CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, void *desc, size_t count)",
  // props is a CUmemPoolProps (88 bytes), map an array of CUmemAccessDesc, value a cuuint64_t for the
  // attributes used here.
  cuMemPoolCreate: "CUresult cuMemPoolCreate(_Out_ CUmemoryPool *pool, void *props)",
  cuMemPoolDestroy: "CUresult cuMemPoolDestroy(CUmemoryPool pool)",
  cuMemPoolSetAttribute: "CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void *value)",
  cuMemPoolGetAttribute: "CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void *value)",
  cuMemPoolTrimTo: "CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)",
  cuMemPoolSetAccess: "CUresult cuMemPoolSetAccess(CUmemoryPool pool, void *map, size_t count)",
  cuMemAllocFromPoolAsync:
    "CUresult cuMemAllocFromPoolAsync(_Out_ CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream s)",
  cuMemFreeAsync: "CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)",
  cuStreamWriteValue32_v2:
    "CUresult cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, uint32_t value, unsigned int flags)",
  // tensorMap is a 64-byte aligned native block; the arrays are rank (strides: rank - 1) entries long.
  cuTensorMapEncodeTiled:
    "CUresult cuTensorMapEncodeTiled(void *tensorMap, int dataType, uint32_t rank, CUdeviceptr globalAddress, const void *globalDim, const void *globalStrides, const void *boxDim, const void *elementStrides, int interleave, int swizzle, int l2Promotion, int oobFill)",
  // config, kernelParams and extra are addresses of native blocks the caller owns (runtime/kernel.ts).
  cuLaunchKernelEx: "CUresult cuLaunchKernelEx(void *config, CUfunction f, void *kernelParams, void *extra)",
  cuOccupancyMaxActiveClusters:
    "CUresult cuOccupancyMaxActiveClusters(_Out_ int *numClusters, CUfunction func, void *config)",
} as const;

type Out<T> = [T];

/** Typed view of the bound functions. Pointers and handles are BigInt; NULL handles come back as null. */
export interface Driver {
  cuInit(flags: number): number;
  cuDriverGetVersion(v: Out<number>): number;
  cuGetErrorName(e: number, s: Out<string | null>): number;
  cuGetErrorString(e: number, s: Out<string | null>): number;
  cuDeviceGetCount(n: Out<number>): number;
  cuDeviceGet(d: Out<number>, ordinal: number): number;
  cuDeviceGetName(buf: Uint8Array, len: number, dev: number): number;
  cuDeviceGetAttribute(v: Out<number>, attrib: number, dev: number): number;
  cuDeviceTotalMem_v2(bytes: Out<number>, dev: number): number;
  cuDeviceGetPCIBusId(buf: Uint8Array, len: number, dev: number): number;
  cuDeviceCanAccessPeer(v: Out<number>, dev: number, peer: number): number;
  cuDeviceGetP2PAttribute(v: Out<number>, attrib: number, src: number, dst: number): number;
  cuDevicePrimaryCtxRetain(ctx: Out<Ptr | null>, dev: number): number;
  cuDevicePrimaryCtxRelease_v2(dev: number): number;
  cuCtxSetCurrent(ctx: Ptr): number;
  cuCtxSynchronize(): number;
  cuCtxEnablePeerAccess(peer: Ptr, flags: number): number;
  cuMemGetInfo_v2(free: Out<number>, total: Out<number>): number;
  cuMemAlloc_v2(p: Out<Ptr | null>, bytes: number): number;
  cuMemFree_v2(p: Ptr): number;
  cuMemHostAlloc(p: Out<Ptr | null>, bytes: number, flags: number): number;
  cuMemFreeHost(p: Ptr): number;
  cuMemHostGetDevicePointer_v2(d: Out<Ptr | null>, p: Ptr, flags: number): number;
  cuMemsetD8Async(dst: Ptr, value: number, n: number, s: Ptr): number;
  cuMemsetD16Async(dst: Ptr, value: number, n: number, s: Ptr): number;
  cuMemsetD32Async(dst: Ptr, value: number, n: number, s: Ptr): number;
  cuMemcpyHtoDAsync_v2(dst: Ptr, src: ArrayBufferView | Ptr, n: number, s: Ptr): number;
  cuMemcpyDtoHAsync_v2(dst: ArrayBufferView | Ptr, src: Ptr, n: number, s: Ptr): number;
  cuMemcpyDtoDAsync_v2(dst: Ptr, src: Ptr, n: number, s: Ptr): number;
  cuMemcpy2DAsync_v2(copy: Ptr, s: Ptr): number;
  cuMemcpyPeerAsync(dst: Ptr, dstCtx: Ptr, src: Ptr, srcCtx: Ptr, n: number, s: Ptr): number;
  cuStreamCreate(s: Out<Ptr | null>, flags: number): number;
  cuStreamCreateWithPriority(s: Out<Ptr | null>, flags: number, priority: number): number;
  cuStreamDestroy_v2(s: Ptr): number;
  cuStreamSynchronize(s: Ptr): number;
  cuStreamQuery(s: Ptr): number;
  cuStreamWaitEvent(s: Ptr, e: Ptr, flags: number): number;
  cuStreamBeginCapture_v2(s: Ptr, mode: number): number;
  cuStreamEndCapture(s: Ptr, g: Out<Ptr | null>): number;
  cuStreamIsCapturing(s: Ptr, status: Out<number>): number;
  cuThreadExchangeStreamCaptureMode(mode: Out<number>): number;
  cuGraphInstantiateWithFlags(exec: Out<Ptr | null>, g: Ptr, flags: number): number;
  cuGraphLaunch(exec: Ptr, s: Ptr): number;
  cuGraphExecDestroy(exec: Ptr): number;
  cuGraphDestroy(g: Ptr): number;
  cuEventCreate(e: Out<Ptr | null>, flags: number): number;
  cuEventRecord(e: Ptr, s: Ptr): number;
  cuEventSynchronize(e: Ptr): number;
  cuEventQuery(e: Ptr): number;
  cuEventElapsedTime_v2(ms: Out<number>, start: Ptr, end: Ptr): number;
  cuEventDestroy_v2(e: Ptr): number;
  cuModuleLoadData(m: Out<Ptr | null>, image: Uint8Array): number;
  cuModuleUnload(m: Ptr): number;
  cuModuleGetFunction(f: Out<Ptr | null>, m: Ptr, name: string): number;
  cuFuncGetAttribute(v: Out<number>, attrib: number, f: Ptr): number;
  cuFuncSetAttribute(f: Ptr, attrib: number, value: number): number;
  cuLaunchKernelEx(config: Ptr, f: Ptr, params: Ptr, extra: Ptr): number;
  cuOccupancyMaxActiveClusters(n: Out<number>, f: Ptr, config: Ptr): number;
  cuStreamWriteValue32_v2(s: Ptr, addr: Ptr, value: number, flags: number): number;
  cuTensorMapEncodeTiled(
    map: Ptr,
    dataType: number,
    rank: number,
    address: Ptr,
    dims: BigUint64Array,
    strides: BigUint64Array,
    box: Uint32Array,
    elementStrides: Uint32Array,
    interleave: number,
    swizzle: number,
    l2Promotion: number,
    oobFill: number,
  ): number;
  cuMemGetAllocationGranularity(g: Out<number>, prop: Ptr, option: number): number;
  cuMemCreate(h: Out<Ptr | null>, size: number, prop: Ptr, flags: number): number;
  cuMemRelease(h: Ptr): number;
  cuMemExportToShareableHandle(fd: Out<number>, h: Ptr, type: number, flags: number): number;
  cuMemImportFromShareableHandle(h: Out<Ptr | null>, osHandle: Ptr, type: number): number;
  cuMemAddressReserve(p: Out<Ptr | null>, size: number, align: number, addr: Ptr, flags: number): number;
  cuMemAddressFree(p: Ptr, size: number): number;
  cuMemMap(p: Ptr, size: number, offset: number, h: Ptr, flags: number): number;
  cuMemUnmap(p: Ptr, size: number): number;
  cuMemSetAccess(p: Ptr, size: number, desc: Ptr, count: number): number;
  cuMemPoolCreate(pool: Out<Ptr | null>, props: Ptr): number;
  cuMemPoolDestroy(pool: Ptr): number;
  cuMemPoolSetAttribute(pool: Ptr, attr: number, value: Ptr): number;
  cuMemPoolGetAttribute(pool: Ptr, attr: number, value: Ptr): number;
  cuMemPoolTrimTo(pool: Ptr, minBytesToKeep: number): number;
  cuMemPoolSetAccess(pool: Ptr, map: Ptr, count: number): number;
  cuMemAllocFromPoolAsync(p: Out<Ptr | null>, bytes: number, pool: Ptr, s: Ptr): number;
  cuMemFreeAsync(p: Ptr, s: Ptr): number;
}

/** CUresult values the runtime branches on. */
export const CUDA_SUCCESS = 0;
export const CUDA_ERROR_NOT_READY = 600;

/** CUdevice_attribute (cuda.h). */
export const DeviceAttribute = {
  MAX_THREADS_PER_BLOCK: 1,
  WARP_SIZE: 10,
  MAX_PITCH: 11,
  CLOCK_RATE: 13,
  MULTIPROCESSOR_COUNT: 16,
  CAN_MAP_HOST_MEMORY: 19,
  PCI_BUS_ID: 33,
  PCI_DEVICE_ID: 34,
  MEMORY_CLOCK_RATE: 36,
  GLOBAL_MEMORY_BUS_WIDTH: 37,
  L2_CACHE_SIZE: 38,
  MAX_THREADS_PER_MULTIPROCESSOR: 39,
  UNIFIED_ADDRESSING: 41,
  PCI_DOMAIN_ID: 50,
  COMPUTE_CAPABILITY_MAJOR: 75,
  COMPUTE_CAPABILITY_MINOR: 76,
  MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: 81,
  MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: 97,
  VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: 102,
  HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: 103,
  CLUSTER_LAUNCH: 120,
  MEMORY_POOLS_SUPPORTED: 115,
  MULTICAST_SUPPORTED: 132,
} as const;

/** CUfunction_attribute (cuda.h). */
export const FuncAttribute = {
  MAX_THREADS_PER_BLOCK: 0,
  SHARED_SIZE_BYTES: 1,
  LOCAL_SIZE_BYTES: 3,
  NUM_REGS: 4,
  MAX_DYNAMIC_SHARED_SIZE_BYTES: 8,
} as const;

/** CUdevice_P2PAttribute (cuda.h). */
export const P2PAttribute = {
  PERFORMANCE_RANK: 1,
  ACCESS_SUPPORTED: 2,
  NATIVE_ATOMIC_SUPPORTED: 3,
} as const;

export const CU_STREAM_NON_BLOCKING = 0x1;
export const CU_EVENT_DEFAULT = 0x0;
export const CU_EVENT_DISABLE_TIMING = 0x2;
export const CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
export const CU_STREAM_CAPTURE_MODE_RELAXED = 2;
export const CU_STREAM_CAPTURE_STATUS_ACTIVE = 1;
export const CU_MEMHOSTALLOC_PORTABLE = 0x1;
export const CU_MEMHOSTALLOC_DEVICEMAP = 0x2;
export const CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4;
export const CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;
/** CUtensorMapDataType, CUtensorMapSwizzle and CUtensorMapL2promotion (cuda.h). */
export const TensorMapDataType = { UINT8: 0, FLOAT32: 7, BFLOAT16: 9 } as const;
export const TensorMapSwizzle = { NONE: 0, B32: 1, B64: 2, B128: 3 } as const;
export const TensorMapL2Promotion = { NONE: 0, B64: 1, B128: 2, B256: 3 } as const;
/** cuStreamWriteValue32 flag: write without waiting for earlier memory operations to be flushed. */
export const CU_STREAM_WRITE_VALUE_DEFAULT = 0x0;
/** CUmemAllocationProp / CUmemAccessDesc values (cuda.h 13.0; the structs are 32 and 12 bytes). */
export const CU_MEM_ALLOCATION_TYPE_PINNED = 1;
export const CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1;
export const CU_MEM_LOCATION_TYPE_DEVICE = 1;
export const CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3;
export const CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1;
/** CUDA_MEMCPY2D's fields used here (cuda.h 13.0; the other fields stay zero) and CU_MEMORYTYPE_DEVICE. */
export const CUDA_MEMCPY2D_LAYOUT = {
  srcMemoryType: 16,
  srcDevice: 32,
  srcPitch: 48,
  dstMemoryType: 72,
  dstDevice: 88,
  dstPitch: 104,
  widthInBytes: 112,
  height: 120,
  bytes: 128,
} as const;
export const CU_MEMORYTYPE_DEVICE = 2;
/** CUmemPoolProps is 88 bytes (allocType, handleTypes, location at 0, 4, 8); CUmemPool_attribute values. */
export const CU_MEM_POOL_PROPS_BYTES = 88;
export const CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4;
export const CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5;
export const CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7;

let driver: Driver | undefined;
let driverPath = "";

/** Opens libcuda and binds it (once per process); does not initialise it. */
export function cuda(): Driver {
  if (!driver) {
    const found = openLibrary("cuda");
    driverPath = found.path;
    driver = bindAll<Driver>(
      found.lib,
      found.path,
      DRIVER_DECLARATIONS,
      "update the NVIDIA driver (symmkit binds the CUDA 13.0 driver API)",
    );
  }
  return driver;
}

export function driverLibraryPath(): string {
  cuda();
  return driverPath;
}

/** What a kernel's trap leaves every later call of its context: CUDA_ERROR_LAUNCH_FAILED. */
const CUDA_ERROR_LAUNCH_FAILED = 719;

/** What a call that finds its context ended by a trap throws, once a kernel of this process recorded why
 * (a bounded wait that gave up, a mismatched call, a stall, the NCCL watchdog): set by
 * src/distributed/sync-watch.ts, which reads the records (of the current context's watches only), so that
 * whichever call sees the dead context first reports the cause. */
let explainFailure: ((e: CudaError) => unknown) | undefined;
export function setFailureExplainer(explain: (e: CudaError) => unknown): void {
  explainFailure = explain;
}

/** Throws CudaError unless `status` is CUDA_SUCCESS, or for a launch failure the typed error its recorded
 * cause stands for (setFailureExplainer). The one place driver statuses are judged. */
export function check(status: number, call: string): void {
  if (status === CUDA_SUCCESS) return;
  const e = cudaError(status, call);
  throw explainFailure && status === CUDA_ERROR_LAUNCH_FAILED ? explainFailure(e) : e;
}

export function cudaError(status: number, call: string): CudaError {
  const d = cuda();
  const name: [string | null] = [null];
  const text: [string | null] = [null];
  const known = d.cuGetErrorName(status, name) === CUDA_SUCCESS;
  d.cuGetErrorString(status, text);
  return new CudaError(
    call,
    status,
    known ? (name[0] ?? `CUresult ${status}`) : `CUresult ${status}`,
    text[0] ?? "unknown error",
  );
}
