// A GPU and its primary context. All CUDA calls stay on the main thread; each one that needs a context
// calls makeCurrent() first, which costs a compare when the context is already current.
import { InvalidArgumentError, SymmkitError } from "../errors.js";
import { check, DeviceAttribute, P2PAttribute, type Driver } from "../cuda/driver.js";
import { cString, ptrOrZero, type Ptr } from "../cuda/native.js";
import { driver } from "./libcuda.js";
import { MemoryPool } from "./memory-pool.js";

export { driver };

export function driverVersion(): string {
  const v: [number] = [0];
  check(driver().cuDriverGetVersion(v), "cuDriverGetVersion");
  return `${Math.floor(v[0] / 1000)}.${(v[0] % 1000) / 10}`;
}

export function deviceCount(): number {
  const n: [number] = [0];
  check(driver().cuDeviceGetCount(n), "cuDeviceGetCount");
  return n[0];
}

export interface DeviceProperties {
  readonly ordinal: number;
  readonly name: string;
  readonly pciBusId: string;
  readonly computeCapability: readonly [number, number];
  /** The exact NVRTC target: sm_90a on Hopper (arch-specific features such as wgmma). */
  readonly arch: string;
  readonly smCount: number;
  readonly l2Bytes: number;
  /** The largest pitch a 2D copy takes (copy2d). */
  readonly maxPitchBytes: number;
  /** Stream-ordered memory pools (MemoryPool); without them tensors made on a stream are plain. */
  readonly memoryPools: boolean;
  readonly totalMemoryBytes: number;
  readonly maxThreadsPerBlock: number;
  readonly sharedBytesPerBlockOptin: number;
  readonly sharedBytesPerSm: number;
  readonly clusterLaunch: boolean;
  readonly virtualMemoryManagement: boolean;
  readonly posixFdHandles: boolean;
  readonly multicastSupported: boolean;
}

let currentCtx: Ptr = 0n;
/** The context symmkit made current last (every call makes its device's current first). */
export const currentContext = (): Ptr => currentCtx;
let defaultOrdinal = 0;

export class Device {
  static #devices = new Map<number, Device>();

  readonly ordinal: number;
  readonly handle: number;
  /** The retained primary context. */
  readonly ctx: Ptr;
  readonly props: DeviceProperties;

  private constructor(ordinal: number) {
    const d = driver();
    const count = deviceCount();
    if (!Number.isInteger(ordinal) || ordinal < 0 || ordinal >= count) {
      if (count === 0)
        throw new SymmkitError("SYMMKIT_NO_DEVICE", "no CUDA device is visible to this process");
      throw new InvalidArgumentError(
        `device ${ordinal} does not exist: this process sees ${count} device(s)`,
      );
    }
    const h: [number] = [0];
    check(d.cuDeviceGet(h, ordinal), "cuDeviceGet");
    this.ordinal = ordinal;
    this.handle = h[0];
    const ctx: [Ptr | null] = [null];
    check(d.cuDevicePrimaryCtxRetain(ctx, this.handle), "cuDevicePrimaryCtxRetain");
    this.ctx = ptrOrZero(ctx[0]);
    this.props = readProperties(d, ordinal, this.handle);
  }

  /**
   * The device with this ordinal, or the process's default device (see setDefault; 0 unless set). One
   * object per device per process.
   */
  static get(ordinal: number = defaultOrdinal): Device {
    let dev = Device.#devices.get(ordinal);
    if (!dev) {
      dev = new Device(ordinal);
      Device.#devices.set(ordinal, dev);
    }
    dev.makeCurrent();
    return dev;
  }

  /**
   * Makes this the device that tensors, streams and kernels use when none is named (init() makes it the
   * GPU of LOCAL_RANK).
   */
  static setDefault(device: Device): void {
    defaultOrdinal = device.ordinal;
    device.makeCurrent();
  }

  makeCurrent(): void {
    if (currentCtx !== this.ctx) {
      check(driver().cuCtxSetCurrent(this.ctx), "cuCtxSetCurrent");
      currentCtx = this.ctx;
    }
  }

  /** Waits for all work on the device (every stream). */
  synchronize(): void {
    this.makeCurrent();
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
  }

  memoryInfo(): { freeBytes: number; totalBytes: number } {
    this.makeCurrent();
    const free: [number] = [0];
    const total: [number] = [0];
    check(driver().cuMemGetInfo_v2(free, total), "cuMemGetInfo_v2");
    return { freeBytes: free[0], totalBytes: total[0] };
  }

  canAccessPeer(peer: Device): boolean {
    const v: [number] = [0];
    check(driver().cuDeviceCanAccessPeer(v, this.handle, peer.handle), "cuDeviceCanAccessPeer");
    return v[0] !== 0;
  }

  p2pAttribute(peer: Device, attribute: keyof typeof P2PAttribute): number {
    const v: [number] = [0];
    check(
      driver().cuDeviceGetP2PAttribute(v, P2PAttribute[attribute], this.handle, peer.handle),
      "cuDeviceGetP2PAttribute",
    );
    return v[0];
  }

  /** Lets kernels on this device dereference `peer`'s memory, plain and pooled (idempotent). */
  enablePeerAccess(peer: Device): void {
    this.makeCurrent();
    const status = driver().cuCtxEnablePeerAccess(peer.ctx, 0);
    const CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704;
    if (status !== CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) check(status, "cuCtxEnablePeerAccess");
    if (peer.props.memoryPools) MemoryPool.of(peer).grantAccess(this);
    this.makeCurrent();
  }
}

function readProperties(d: Driver, ordinal: number, dev: number): DeviceProperties {
  const attr = (a: keyof typeof DeviceAttribute): number => {
    const v: [number] = [0];
    check(d.cuDeviceGetAttribute(v, DeviceAttribute[a], dev), `cuDeviceGetAttribute(${a})`);
    return v[0];
  };
  const nameBuf = new Uint8Array(256);
  check(d.cuDeviceGetName(nameBuf, nameBuf.length, dev), "cuDeviceGetName");
  const busBuf = new Uint8Array(64);
  check(d.cuDeviceGetPCIBusId(busBuf, busBuf.length, dev), "cuDeviceGetPCIBusId");
  const total: [number] = [0];
  check(d.cuDeviceTotalMem_v2(total, dev), "cuDeviceTotalMem_v2");
  const major = attr("COMPUTE_CAPABILITY_MAJOR");
  const minor = attr("COMPUTE_CAPABILITY_MINOR");
  return {
    ordinal,
    name: cString(nameBuf),
    pciBusId: cString(busBuf),
    computeCapability: [major, minor],
    arch: archFor(major, minor),
    smCount: attr("MULTIPROCESSOR_COUNT"),
    l2Bytes: attr("L2_CACHE_SIZE"),
    maxPitchBytes: attr("MAX_PITCH"),
    memoryPools: attr("MEMORY_POOLS_SUPPORTED") !== 0,
    totalMemoryBytes: total[0],
    maxThreadsPerBlock: attr("MAX_THREADS_PER_BLOCK"),
    sharedBytesPerBlockOptin: attr("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
    sharedBytesPerSm: attr("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
    clusterLaunch: attr("CLUSTER_LAUNCH") !== 0,
    virtualMemoryManagement: attr("VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED") !== 0,
    posixFdHandles: attr("HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED") !== 0,
    multicastSupported: attr("MULTICAST_SUPPORTED") !== 0,
  };
}

/** sm_XY, with the arch-specific "a" suffix from Hopper on (wgmma, setmaxnreg need sm_90a). */
export function archFor(major: number, minor: number): string {
  return `sm_${major}${minor}${major >= 9 ? "a" : ""}`;
}
