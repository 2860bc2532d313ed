// The stream-ordered memory pool behind tensors made with a stream (Tensor.empty(..., { stream })): one
// CUDA memory pool per device (cuMemPoolCreate) that keeps what it has mapped, so an allocation is a
// sub-allocation of memory already mapped (microseconds; cuMemAlloc of a few MiB maps pages, hundreds)
// and a free never waits for the device (cuMemFree does). Allocations and frees are ordered on a stream:
// the memory is the allocation's from that point of the stream on, and the pool's again once the stream
// reaches the free. The pool reuses freed memory on another stream only behind the free (the driver's
// default reuse rules). trim() gives back what no allocation uses.
//
// A free of a small block does not reach the driver at once: the block is kept for the next allocation of
// the same size on the same stream, which takes it without a driver call. That is the reuse the driver
// itself allows (the same stream, behind the free), minus two driver calls per eager op that makes a fresh
// output. What is kept is bounded (KEEP_*) and handed back to the pool by trim(), and so before an
// allocation that ran out of memory tries again.
import {
  check,
  CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
  CU_MEM_ALLOCATION_TYPE_PINNED,
  CU_MEM_LOCATION_TYPE_DEVICE,
  CU_MEM_POOL_PROPS_BYTES,
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
  CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
  CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
} from "../cuda/driver.js";
import { NativeBlock, ptrOrZero, type Ptr } from "../cuda/native.js";
import { driver } from "./libcuda.js";

const pools = new Map<PoolDevice, MemoryPool>();

/** What the pool needs of a device (a Device: this module sits below it, and it asks for its pool). */
export interface PoolDevice {
  readonly ordinal: number;
  readonly handle: number;
  readonly props: { readonly memoryPools: boolean };
  makeCurrent(): void;
  synchronize(): void;
}

/** What the pool needs of a stream (a Stream; this module sits below streams and devices). */
export interface PoolStream {
  readonly handle: Ptr;
  readonly disposed: boolean;
}

/** Blocks larger than this go back to the pool at once: a driver call is nothing beside their use. */
const KEEP_BLOCK_MAX_BYTES = 16 << 20;
/** Kept blocks of one size on one stream: enough for a layer's few live outputs of one shape. */
const KEEP_PER_SIZE = 4;
/** Bytes kept in all; past it, every kept block goes back to the pool. */
const KEEP_TOTAL_MAX_BYTES = 256 << 20;

/** A CUmemAccessDesc (12 bytes) granting `device` read and write access, for cuMemSetAccess and
 * cuMemPoolSetAccess; the caller frees it. */
export function readWriteAccess(device: PoolDevice): NativeBlock {
  const desc = new NativeBlock(12);
  desc.view.setUint32(0, CU_MEM_LOCATION_TYPE_DEVICE, true);
  desc.view.setInt32(4, device.ordinal, true);
  desc.view.setUint32(8, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, true);
  return desc;
}

export class MemoryPool {
  readonly device: PoolDevice;
  readonly #handle: Ptr;
  /** The cuuint64_t the attribute calls read and write. */
  readonly #value = new NativeBlock(8);
  /** Freed blocks kept for their stream, by stream and size (see the module's comment). */
  readonly #kept = new Map<PoolStream, Map<number, Ptr[]>>();
  #keptBytes = 0;

  private constructor(device: PoolDevice, handle: Ptr) {
    this.device = device;
    this.#handle = handle;
  }

  /** The device's pool, created on first use. */
  static of(device: PoolDevice): MemoryPool {
    let pool = pools.get(device);
    if (pool) return pool;
    device.makeCurrent();
    const props = new NativeBlock(CU_MEM_POOL_PROPS_BYTES);
    const h: [Ptr | null] = [null];
    try {
      props.view.setUint32(0, CU_MEM_ALLOCATION_TYPE_PINNED, true);
      props.view.setUint32(8, CU_MEM_LOCATION_TYPE_DEVICE, true);
      props.view.setInt32(12, device.handle, true);
      check(driver().cuMemPoolCreate(h, props.ptr), "cuMemPoolCreate");
    } finally {
      props.free();
    }
    pool = new MemoryPool(device, ptrOrZero(h[0]));
    // Keep everything mapped: giving memory back at every synchronisation would cost what the pool saves.
    pool.#value.view.setBigUint64(0, 2n ** 64n - 1n, true);
    check(
      driver().cuMemPoolSetAttribute(pool.#handle, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, pool.#value.ptr),
      "cuMemPoolSetAttribute(RELEASE_THRESHOLD)",
    );
    pools.set(device, pool);
    return pool;
  }

  /** Whether the device has stream-ordered pools (some virtualised GPUs do not). */
  static supported(device: PoolDevice): boolean {
    return device.props.memoryPools;
  }

  /** Lets kernels on `peer` dereference this pool's memory (as Device.enablePeerAccess does for plain
   * memory, which a pool's does not follow). */
  grantAccess(peer: PoolDevice): void {
    const desc = readWriteAccess(peer);
    try {
      check(driver().cuMemPoolSetAccess(this.#handle, desc.ptr, 1), "cuMemPoolSetAccess");
    } finally {
      desc.free();
    }
  }

  /**
   * Gives the device what the pools hold unused, once its work is done: what a plain or symmetric allocation
   * that ran out of memory does before it tries again (the pools never give memory back on their own).
   * False if there was no pool to trim.
   */
  static releaseCached(device: PoolDevice): boolean {
    const pool = pools.get(device);
    if (!pool) return false;
    device.synchronize();
    pool.trim();
    return true;
  }

  /** `bytes` in `stream`'s order (see the module's comment). */
  alloc(bytes: number, stream: PoolStream): Ptr {
    const kept = this.#kept.get(stream)?.get(bytes)?.pop();
    if (kept !== undefined) {
      this.#keptBytes -= bytes;
      return kept;
    }
    this.device.makeCurrent();
    const p: [Ptr | null] = [null];
    check(
      driver().cuMemAllocFromPoolAsync(p, bytes, this.#handle, stream.handle),
      `cuMemAllocFromPoolAsync(${bytes} bytes)`,
    );
    return ptrOrZero(p[0]);
  }

  /** Gives `ptr` (`bytes` long) back once `stream` reaches this point: kept for the stream's next
   * allocation of that size if it is small, else to the pool. */
  free(ptr: Ptr, bytes: number, stream: PoolStream): void {
    if (bytes <= KEEP_BLOCK_MAX_BYTES) {
      if (this.#keptBytes + bytes > KEEP_TOTAL_MAX_BYTES) this.#releaseKept();
      let sizes = this.#kept.get(stream);
      if (!sizes) this.#kept.set(stream, (sizes = new Map<number, Ptr[]>()));
      let blocks = sizes.get(bytes);
      if (!blocks) sizes.set(bytes, (blocks = []));
      if (blocks.length < KEEP_PER_SIZE) {
        blocks.push(ptr);
        this.#keptBytes += bytes;
        return;
      }
    }
    this.#free(ptr, stream);
  }

  /** Frees in `stream`'s order (0n: the NULL stream, for memory no queued work uses). */
  #free(ptr: Ptr, stream: PoolStream | 0n): void {
    this.device.makeCurrent();
    check(driver().cuMemFreeAsync(ptr, stream === 0n ? 0n : stream.handle), "cuMemFreeAsync");
  }

  /** Hands every kept block to the pool, in its stream's order (a stream since destroyed may have left
   * work that used them queued: the device's work is waited for first). */
  #releaseKept(): void {
    if (this.#keptBytes === 0) return;
    if ([...this.#kept.keys()].some((s) => s.disposed)) this.device.synchronize();
    for (const [stream, sizes] of this.#kept)
      for (const blocks of sizes.values())
        for (const ptr of blocks) this.#free(ptr, stream.disposed ? 0n : stream);
    this.#kept.clear();
    this.#keptBytes = 0;
  }

  /** Bytes allocated and not yet freed (kept blocks count as freed). */
  get usedBytes(): number {
    return this.#get(CU_MEMPOOL_ATTR_USED_MEM_CURRENT, "USED_MEM_CURRENT") - this.#keptBytes;
  }

  /** Bytes the pool holds mapped, used or not. */
  get reservedBytes(): number {
    return this.#get(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, "RESERVED_MEM_CURRENT");
  }

  /** Gives the device back what no allocation uses, but `keepBytes`. Frees count once their streams have
   * reached them: synchronise first. */
  trim(keepBytes = 0): void {
    if (this.#keptBytes > 0) {
      this.#releaseKept();
      this.device.synchronize(); // the frees just queued count once their streams reach them
    }
    this.device.makeCurrent();
    check(driver().cuMemPoolTrimTo(this.#handle, keepBytes), "cuMemPoolTrimTo");
  }

  #get(attribute: number, name: string): number {
    check(
      driver().cuMemPoolGetAttribute(this.#handle, attribute, this.#value.ptr),
      `cuMemPoolGetAttribute(${name})`,
    );
    return Number(this.#value.view.getBigUint64(0, true));
  }
}
