// symmkit's public API.
export * from "./errors.js";
export { Device, deviceCount, driverVersion, type DeviceProperties } from "./runtime/device.js";
export { Stream, defaultStream } from "./runtime/stream.js";
export { Event } from "./runtime/event.js";
export { CaptureScope, Graph } from "./runtime/graph.js";
export {
  DeviceMemory,
  PinnedMemory,
  copyDeviceToDevice,
  copyDeviceToHost,
  copyHostToDevice,
  copyPeer,
} from "./runtime/memory.js";
export { MemoryPool } from "./runtime/memory-pool.js";
export {
  Tensor,
  freshSeed,
  type AnyTensor,
  type DisposedLabel,
  type HostNormalOptions,
  type HostUniformOptions,
  type Shape,
  type TensorFactory,
  type TensorOptions,
  type ToHostOptions,
  type UniformOptions,
  type NormalOptions,
} from "./runtime/tensor.js";
export {
  DTYPES,
  dtypeInfo,
  encode,
  decodeToF32,
  type DType,
  type DTypeInfo,
  type RawArray,
  type RawArrayOf,
  type RawArrays,
} from "./runtime/dtype.js";
export { Module, type ProgramSpec } from "./runtime/module.js";
export {
  Kernel,
  ArgPacker,
  type ParamType,
  type LaunchConfig,
  type Dim3,
  type Pointerish,
  type KernelAttributes,
} from "./runtime/kernel.js";
export {
  compileProgram,
  getToolchain,
  type CompileRequest,
  type CompiledProgram,
  type Toolchain,
} from "./runtime/jit/compiler.js";
export { KernelCache, type CachedKernel } from "./runtime/jit/cache.js";
export { hostUniform, hostNormal, hostRandInt, philox4x32_10 } from "./runtime/random.js";
export { compileCatalog, PROGRAMS, type CatalogResult } from "./catalog.js";
export { ProcessGroup, initCuda } from "./distributed/process-group.js";
export type { ProcessGroupLike } from "./distributed/group-base.js";
export {
  init,
  detectBackend,
  type Backend,
  type AnyCollectives,
  type AnyProcessGroup,
  type CudaProcessGroup,
  type PortableAlgorithms,
  type PortableGroup,
  type HostsProcessGroup,
  type InitOptions,
} from "./init.js";
export { HOSTS_ALGORITHMS, type HostsAlgorithm } from "./ops/hosts-records.js";
export {
  HostsCollectives,
  HIERARCHICAL_MAX_BYTES,
  autoHostsAlgorithm,
  type HostsCallOptions,
} from "./ops/hosts-collectives.js";
export { CpuProcessGroup, type CpuInitOptions } from "./cpu/process-group.js";
export { CpuCollectives, type CpuAlgorithms } from "./cpu/collectives.js";
export { CpuSymmetricTensor } from "./cpu/symmetric.js";
export { HostTensor } from "./cpu/host-tensor.js";
export { REDUCE_OPS, REDUCE_DTYPES, type ReduceOp as CollectiveReduceOp } from "./ops/validate.js";
export type { Collectives, AlgorithmNames, GroupCollectives } from "./ops/collectives.js";
export { GpuCollectives } from "./ops/gpu-collectives.js";
export {
  DEFAULT_MAILBOX_SLOT_BYTES,
  type GpuAlgorithms,
  type CollectiveInput,
  type CollectiveOptions,
  type GpuCollectivesOptions,
} from "./ops/gpu-group.js";
export type { LoadedTuneTable } from "./ops/tune-table.js";
export { algorithmTable } from "./ops/algorithm-table.js";
export {
  COLLECTIVE_ALGORITHMS,
  GPU_ALL_REDUCE_ALGORITHMS,
  GPU_ALL_GATHER_ALGORITHMS,
  GPU_REDUCE_SCATTER_ALGORITHMS,
  CPU_ALL_REDUCE_ALGORITHMS,
  CPU_ALL_GATHER_ALGORITHMS,
  CPU_REDUCE_SCATTER_ALGORITHMS,
  type CollectiveName,
  type CollectiveAlgorithm,
  type GpuAllReduceAlgorithm,
  type GpuAllGatherAlgorithm,
  type GpuReduceScatterAlgorithm,
  type CpuAllReduceAlgorithm,
  type CpuAllGatherAlgorithm,
  type CpuReduceScatterAlgorithm,
} from "./ops/coll/registry.js";
export { OsError } from "./cuda/libc.js";
export { NcclError } from "./cuda/nccl.js";
export { FdTimeoutError } from "./distributed/fd-channel.js";
export { ProtocolError } from "./distributed/store/protocol.js";
export { SymmetricTensor, type SymmetricOptions } from "./distributed/symmetric-memory.js";
export { SYMM_VIEW_PARAM, SYMM_VIEW_BYTES } from "./distributed/device-layouts.js";
export {
  KernelStallError,
  SymmTimeoutError,
  SyncWatch,
  type TimeoutRecord,
} from "./distributed/sync-watch.js";
export { NcclTimeoutError } from "./distributed/nccl-watchdog.js";
export { CALL_KINDS } from "./ops/call-kinds.js";
export {
  CallTag,
  CollectiveMismatchError,
  describeFingerprint,
  fingerprint,
  MAX_FINGERPRINT_COUNT,
  SHAPES,
  type CallKind,
  type CallShape,
} from "./distributed/fingerprint.js";
export { NcclComm, type ReduceOp } from "./distributed/nccl-comm.js";
export {
  StoreClient,
  StoreTimeoutError,
  StoreClosedError,
  StoreRefusedError,
  type StoreAddress,
} from "./distributed/store/client.js";
export { StoreServer, type StoreServerOptions } from "./distributed/store/server.js";
export { ScopedStore } from "./distributed/scoped-store.js";
export { launch, parseRunArgs, type LaunchOptions } from "./distributed/launcher.js";
export { DEVICE_INCLUDE_DIR, VERSION } from "./paths.js";
export { matmul, type PortableMatmulOptions } from "./matmul.js";
export {
  checkMatmul,
  MATMUL_IMPLS,
  type MatmulImpl,
  type MatmulOptions,
  type BLayout,
  type MatmulProblem,
} from "./ops/gemm/matmul.js";
export { HopperGemm, HopperLauncher, gemmTiles, type GemmLaunch } from "./ops/gemm/hopper-gemm.js";
export {
  DecodeGemm,
  DECODE_VARIANTS,
  type DecodeLaunch,
  type DecodeVariant,
} from "./ops/gemm/decode-gemm.js";
export {
  ALL_GATHER_MATMUL_ALGORITHMS,
  MATMUL_REDUCE_SCATTER_ALGORITHMS,
  MATMUL_ALL_REDUCE_ALGORITHMS,
  CPU_FUSED_MATMUL_ALGORITHMS,
  type MatmulAllReduceAlgorithm,
  type MatmulAllReduceOptions,
  type MatmulRmsNormOptions,
  type AllGatherMatmulAlgorithm,
  type MatmulReduceScatterAlgorithm,
  type AllGatherMatmulOptions,
  type FusedMatmulOptions,
} from "./ops/fused/checks.js";
export {
  AR_NORM_ALGORITHMS,
  CPU_AR_NORM_ALGORITHMS,
  type ArNormAlgorithm,
  type AllReduceRmsNormOptions,
} from "./ops/norm/checks.js";
export { rmsNorm } from "./norm.js";
export {
  CPU_EXCHANGE_ALGORITHMS,
  GPU_ALL_TO_ALL_ALGORITHMS,
  GPU_ALL_TO_ALL_V_ALGORITHMS,
  GPU_SEND_RECV_ALGORITHMS,
  type CpuExchangeAlgorithm,
  type GpuAllToAllAlgorithm,
  type GpuAllToAllVAlgorithm,
  type GpuSendRecvAlgorithm,
} from "./ops/exchange/checks.js";
export {
  A2A_CE_AUTO_MIN_BYTES,
  A2A_CE_AUTO_MIN_SYMMETRIC_BYTES,
  A2A_LL_AUTO_MAX_BYTES,
  A2A_PULL_AUTO_MAX_BYTES,
  LL_AUTO_MAX_BYTES,
} from "./ops/exchange/records.js";
export {
  CPU_COMBINE_ALGORITHMS,
  CPU_MOE_ALGORITHMS,
  MOE_TOKEN_DTYPES,
  type CombineOptions,
  type CpuCombineAlgorithm,
  type CpuMoeAlgorithm,
  type DispatchOptions,
  type DispatchResult,
  type MoeHandle,
  type MoeProblem,
} from "./ops/moe/checks.js";
export {
  GPU_COMBINE_ALGORITHMS,
  GPU_MOE_ALGORITHMS,
  type GpuCombineAlgorithm,
  type GpuMoeAlgorithm,
} from "./ops/moe/checks.js";
export { GEMM_VARIANTS, type GemmVariant } from "./ops/gemm/programs.js";
export { CublasLtMatmul, type LtMatmul } from "./ops/gemm/cublaslt-matmul.js";
export { CublasError } from "./cuda/cublaslt.js";
export { encodeTensorMap2d, type TensorMap2d } from "./runtime/tensor-map.js";
export {
  ENV_VARS,
  readEnvVar,
  checkEnvVars,
  type EnvVarName,
  type EnvVarValue,
  type EnvVarCheck,
} from "./settings.js";
