// Symmetric memory: every rank of a group allocates the same buffer with CUDA VMM, exports it as a POSIX
// file descriptor, sends that to each local peer (fd-exchange.ts), imports and maps the peers' buffers
// into its own address space, and so can load and store straight into them. Each allocation carries its
// own signal pad (zeroed before any peer can map it), private to (group, allocation). Multicast objects
// are never created.
import { DisposedError, InvalidArgumentError, SymmkitError } from "../errors.js";
import {
  check,
  CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
  CU_MEM_ALLOCATION_TYPE_PINNED,
  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
  CU_MEM_LOCATION_TYPE_DEVICE,
} from "../cuda/driver.js";
import { NativeBlock, ptrOrZero, type Ptr } from "../cuda/native.js";
import { driver, type Device } from "../runtime/device.js";
import { dtypeInfo, type DType } from "../runtime/dtype.js";
import { copyHostToDevice, DeviceMemory, memset, retryAfterRelease } from "../runtime/memory.js";
import { readWriteAccess } from "../runtime/memory-pool.js";
import { defaultStream } from "../runtime/stream.js";
import { numelOf, Tensor, type DisposedLabel, type Shape } from "../runtime/tensor.js";
import { closeFd } from "./fd-channel.js";
import type { FdExchange } from "./fd-exchange.js";
import type { ScopedStore } from "./scoped-store.js";
import type { SyncWatch } from "./sync-watch.js";
import { DEVICE_POINTER_BYTES, PAD_BYTES_PER_BLOCK_AND_RANK, SYMM_VIEW_LAYOUT } from "./device-layouts.js";

/** Default signal pad: 64 KiB = 8192 u64 slots, a call word's and a shape word's for each of 1024 blocks
 * at world size 4 (sync/barrier.cuh). */
export const DEFAULT_PAD_BYTES = 64 * 1024;
export const MAX_SYMMETRIC_WORLD = 8;
const DATA_ALIGN = 4096;

/** What a SymmetricAllocator needs from its process group. */
export interface SymmetricContext {
  readonly rank: number;
  readonly worldSize: number;
  /** Global rank of each group member. */
  readonly ranks: readonly number[];
  readonly device: Device;
  readonly store: ScopedStore;
  readonly fds: FdExchange;
  readonly watch: SyncWatch;
  readonly storeTimeoutMs: number;
  /** What the tensor is to the user when it is not one they made (the memory of a group's
   * collectives): named when it is used after its disposal. */
  readonly label?: DisposedLabel | undefined;
}

interface Mapping {
  readonly handle: Ptr;
  readonly va: Ptr;
}

function allocationProp(device: Device): NativeBlock {
  const prop = new NativeBlock(32);
  prop.view.setUint32(0, CU_MEM_ALLOCATION_TYPE_PINNED, true);
  prop.view.setUint32(4, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, true);
  prop.view.setUint32(8, CU_MEM_LOCATION_TYPE_DEVICE, true);
  prop.view.setInt32(12, device.ordinal, true);
  return prop;
}

/** Maps `handle` at a fresh address range readable and writable by `device`. */
function mapHandle(handle: Ptr, size: number, device: Device): Ptr {
  const d = driver();
  const va: [Ptr | null] = [null];
  check(d.cuMemAddressReserve(va, size, 0, 0n, 0), "cuMemAddressReserve");
  const addr = ptrOrZero(va[0]);
  const desc = readWriteAccess(device);
  try {
    check(d.cuMemMap(addr, size, 0, handle, 0), "cuMemMap");
    check(d.cuMemSetAccess(addr, size, desc.ptr, 1), "cuMemSetAccess");
  } catch (e) {
    d.cuMemUnmap(addr, size);
    d.cuMemAddressFree(addr, size);
    throw e;
  } finally {
    desc.free();
  }
  return addr;
}

function unmap(m: Mapping, size: number): void {
  const d = driver();
  check(d.cuMemUnmap(m.va, size), "cuMemUnmap");
  check(d.cuMemAddressFree(m.va, size), "cuMemAddressFree");
  check(d.cuMemRelease(m.handle), "cuMemRelease");
}

export interface SymmetricOptions {
  /** Signal pad bytes per rank (a multiple of 8: u64 signal slots). */
  readonly padBytes?: number;
}

export class SymmetricTensor implements AsyncDisposable {
  /** This rank's buffer. */
  readonly tensor: Tensor;
  readonly rank: number;
  readonly worldSize: number;
  /** Each rank's buffer as mapped on this GPU (index: group rank). */
  readonly bufferPtrs: readonly Ptr[];
  /** Each rank's signal pad as mapped on this GPU. */
  readonly padPtrs: readonly Ptr[];
  /** The same two arrays in device memory (u64[worldSize] each), for kernels that index them. */
  readonly bufferPtrsDevice: DeviceMemory;
  readonly padPtrsDevice: DeviceMemory;
  readonly padBytes: number;
  readonly #ctx: SymmetricContext;
  readonly #mappings: Mapping[];
  readonly #size: number;
  readonly #memories: DeviceMemory[];
  readonly #id: number;
  #view: Uint8Array | undefined;

  /** The allocation's number in its group, the same on every rank (allocations are collective). */
  get id(): number {
    return this.#id;
  }

  /** The group's ranks (global), in group order. */
  get ranks(): readonly number[] {
    return this.#ctx.ranks;
  }
  #disposed = false;

  private constructor(
    ctx: SymmetricContext,
    id: number,
    mappings: Mapping[],
    size: number,
    dataBytes: number,
    padBytes: number,
    shape: Shape,
    dtype: DType,
  ) {
    this.#ctx = ctx;
    this.#id = id;
    this.#mappings = mappings;
    this.#size = size;
    this.rank = ctx.rank;
    this.worldSize = ctx.worldSize;
    this.padBytes = padBytes;
    this.bufferPtrs = mappings.map((m) => m.va);
    this.padPtrs = mappings.map((m) => m.va + BigInt(dataBytes));
    this.#memories = mappings.map((m) => DeviceMemory.external(ctx.device, m.va, size));
    this.tensor = Tensor.fromMemory(this.#memories[ctx.rank]!, shape, dtype, 0, ctx.label);
    this.bufferPtrsDevice = DeviceMemory.alloc(8 * ctx.worldSize, ctx.device);
    this.padPtrsDevice = DeviceMemory.alloc(8 * ctx.worldSize, ctx.device);
    const stream = defaultStream(ctx.device);
    copyHostToDevice(this.bufferPtrsDevice.ptr, new BigUint64Array(this.bufferPtrs), stream);
    copyHostToDevice(this.padPtrsDevice.ptr, new BigUint64Array(this.padPtrs), stream);
    stream.synchronize();
  }

  /** Collective: every member calls it with the same shape, dtype and options, in the same order. */
  static async allocate(
    ctx: SymmetricContext,
    id: number,
    shape: Shape,
    dtype: DType,
    options: SymmetricOptions = {},
  ): Promise<SymmetricTensor> {
    const padBytes = options.padBytes ?? DEFAULT_PAD_BYTES;
    if (!Number.isInteger(padBytes) || padBytes < 8 || padBytes % 8 !== 0) {
      throw new InvalidArgumentError(`padBytes ${padBytes} must be a positive multiple of 8`);
    }
    if (ctx.worldSize > MAX_SYMMETRIC_WORLD) {
      throw new InvalidArgumentError(
        `symmetric memory spans at most ${MAX_SYMMETRIC_WORLD} ranks, this group has ${ctx.worldSize}`,
      );
    }
    const dataBytes = Math.ceil((numelOf(shape) * dtypeInfo(dtype).bytes) / DATA_ALIGN) * DATA_ALIGN;
    const device = ctx.device;
    device.makeCurrent();
    if (!device.props.virtualMemoryManagement || !device.props.posixFdHandles) {
      throw new SymmkitError(
        "SYMMKIT_UNSUPPORTED",
        `${device.props.name} lacks CUDA VMM with POSIX file descriptor handles`,
      );
    }
    const d = driver();
    const prop = allocationProp(device);
    let size: number;
    const own: [Ptr | null] = [null];
    try {
      const g: [number] = [0];
      check(
        d.cuMemGetAllocationGranularity(g, prop.ptr, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
        "cuMemGetAllocationGranularity",
      );
      size = Math.ceil((dataBytes + padBytes) / g[0]) * g[0];
      retryAfterRelease(device, () =>
        check(d.cuMemCreate(own, size, prop.ptr, 0), `cuMemCreate(${size} bytes)`),
      );
    } finally {
      prop.free();
    }
    const key = `symm/${id}`;
    const mappings: Mapping[] = new Array<Mapping>(ctx.worldSize);
    const ownHandle = ptrOrZero(own[0]);
    let exported = -1;
    try {
      mappings[ctx.rank] = { handle: ownHandle, va: mapHandle(ownHandle, size, device) };
      // Zero buffer and pad before any peer can map them: pads must start idle.
      const stream = defaultStream(device);
      memset(mappings[ctx.rank]!.va, 0, 4, size / 4, stream);
      stream.synchronize();
      const fd: [number] = [-1];
      check(
        d.cuMemExportToShareableHandle(fd, ownHandle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        "cuMemExportToShareableHandle",
      );
      exported = fd[0];
      // Peers must agree on what they allocate: a mismatch would map buffers of different sizes.
      const signature = JSON.stringify({ shape, dtype, padBytes, size });
      await ctx.fds.share(ctx, key, signature, exported, (r, theirFd) => {
        const h: [Ptr | null] = [null];
        check(
          d.cuMemImportFromShareableHandle(h, BigInt(theirFd), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          "cuMemImportFromShareableHandle",
        );
        const handle = ptrOrZero(h[0]);
        mappings[r] = { handle, va: mapHandle(handle, size, device) };
      });
    } catch (e) {
      for (const m of mappings) if (m) unmap(m, size);
      throw e;
    } finally {
      if (exported >= 0) closeFd(exported);
    }
    return new SymmetricTensor(ctx, id, mappings, size, dataBytes, padBytes, shape, dtype);
  }

  /** Rank `r`'s buffer as a tensor on this GPU (peer memory: loads and stores cross NVLink). */
  peer(r: number): Tensor {
    const m = this.#memories[r];
    if (!m) throw new InvalidArgumentError(`rank ${r} is not in this group of ${this.worldSize}`);
    return Tensor.fromMemory(m, this.tensor.shape, this.tensor.dtype, 0, this.#ctx.label);
  }

  /** Blocks a kernel that meets its peers over this tensor's pads may run (sync/barrier.cuh: a call word
   * and a shape word per block and rank). */
  get barrierBlocks(): number {
    return Math.floor(this.padBytes / (PAD_BYTES_PER_BLOCK_AND_RANK * this.worldSize));
  }

  /** Refuses (InvalidArgumentError) where a kernel of `blocks` blocks could not meet its peers over this
   * tensor's pads: a symmetric input that symmkit's collectives read in place. */
  checkBarrierRoom(what: string, blocks: number): void {
    if (this.barrierBlocks < blocks)
      throw new InvalidArgumentError(
        `${what}: the symmetric tensor's ${this.padBytes}-byte signal pad holds barriers for ${this.barrierBlocks} ` +
          `blocks, and the call runs up to ${blocks}; make it with padBytes of at least ` +
          `${blocks * PAD_BYTES_PER_BLOCK_AND_RANK * this.worldSize} (the default, ${DEFAULT_PAD_BYTES}, holds ` +
          `${Math.floor(DEFAULT_PAD_BYTES / (PAD_BYTES_PER_BLOCK_AND_RANK * this.worldSize))})`,
      );
  }

  /**
   * The SymmView kernels take by value (device/include/symmkit/sync/barrier.cuh; SYMM_VIEW_LAYOUT): buffers and
   * pads of every rank, this rank, the world size, and the bounded-wait settings of the group. Made once
   * (nothing in it changes while the tensor lives): callers pass it to launches, which copy it, and must
   * not modify it.
   */
  deviceView(): Uint8Array {
    // After dispose the view's addresses are unmapped: a kernel given it would fault.
    if (this.#disposed) {
      const label = this.#ctx.label;
      throw label
        ? new DisposedError(label.what, label.todo)
        : new DisposedError(`symmetric tensor ${JSON.stringify(this.tensor.shape)} ${this.tensor.dtype}`);
    }
    return (this.#view ??= this.#makeView());
  }

  #makeView(): Uint8Array {
    const L = SYMM_VIEW_LAYOUT;
    const b = new Uint8Array(L.bytes);
    const v = new DataView(b.buffer);
    this.bufferPtrs.forEach((p, i) => v.setBigUint64(L.buffers + DEVICE_POINTER_BYTES * i, p, true));
    this.padPtrs.forEach((p, i) => v.setBigUint64(L.pads + DEVICE_POINTER_BYTES * i, p, true));
    v.setUint32(L.rank, this.rank, true);
    v.setUint32(L.world, this.worldSize, true);
    v.setBigUint64(L.timeoutNs, this.#ctx.watch.timeoutNs, true);
    v.setBigUint64(L.abortFlag, this.#ctx.watch.abortFlagPtr, true);
    v.setBigUint64(L.record, this.#ctx.watch.recordPtr, true);
    return b;
  }

  /**
   * Collective. Waits for this GPU's work, then for every member (no peer may still be using our
   * memory), then unmaps every buffer and releases the allocations.
   */
  async dispose(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#ctx.watch.translate(() => this.#ctx.device.synchronize());
    await this.#ctx.store.barrier(`symm/${this.#id}/free`);
    for (const m of this.#memories) m.dispose();
    this.bufferPtrsDevice.dispose();
    this.padPtrsDevice.dispose();
    this.#ctx.device.makeCurrent();
    for (const m of this.#mappings) unmap(m, this.#size);
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose();
  }
}
