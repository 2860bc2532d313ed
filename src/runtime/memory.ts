// Device memory, pinned host memory and the copies between them. Memory is released by dispose(),
// never by the garbage collector: GPU memory is too scarce to wait for a GC that does not see it.
import { CudaError, DisposedError, InvalidArgumentError, SymmkitError, UnsupportedError } from "../errors.js";
import {
  check,
  CU_MEMHOSTALLOC_DEVICEMAP,
  CU_MEMHOSTALLOC_PORTABLE,
  CU_MEMORYTYPE_DEVICE,
  CU_STREAM_WRITE_VALUE_DEFAULT,
  CUDA_MEMCPY2D_LAYOUT,
} from "../cuda/driver.js";
import { koffi, NativeBlock, ptrOrZero, type Ptr } from "../cuda/native.js";
import { Device, driver } from "./device.js";
import { Event } from "./event.js";
import { MemoryPool } from "./memory-pool.js";
import { captureInProgress, defaultStream, type Stream } from "./stream.js";

function checkBytes(bytes: number): void {
  if (!Number.isSafeInteger(bytes) || bytes < 0)
    throw new InvalidArgumentError(`byte count ${bytes} is not a size`);
}

/**
 * Device memory: one cuMemAlloc allocation (a zero-byte one is valid and has address 0), one from the
 * device's stream-ordered pool (pooled), or memory that something else owns and maps (external), which
 * dispose() only marks dead.
 */
export class DeviceMemory implements Disposable {
  readonly device: Device;
  readonly bytes: number;
  readonly #owned: boolean;
  /** A pooled allocation's stream, which orders its free. */
  readonly #stream: Stream | undefined;
  /** Other streams a pooled allocation is used on (recordStream): its free waits for them too. */
  #uses: Set<Stream> | undefined;
  #ptr: Ptr;
  #alive = true;

  private constructor(device: Device, ptr: Ptr, bytes: number, owned = true, stream?: Stream) {
    this.device = device;
    this.#ptr = ptr;
    this.bytes = bytes;
    this.#owned = owned;
    this.#stream = stream;
  }

  /**
   * `bytes` from the device's memory pool (MemoryPool) in `stream`'s order: work queued on `stream` after
   * this call may use it, work on other streams once `stream` has reached this point (an event, a
   * synchronisation). dispose() gives it back in `stream`'s order. Refused while `stream` is being captured
   * into a CUDA graph (a pool allocation there would belong to the graph); a plain allocation on a GPU
   * without memory pools.
   */
  static pooled(bytes: number, stream: Stream): DeviceMemory {
    checkBytes(bytes);
    const device = stream.device;
    if (stream.capturing)
      throw new UnsupportedError(
        "a tensor made on a stream being captured into a CUDA graph would belong to the graph: make it " +
          "before the capture (for an op, pass its out/output)",
      );
    if (bytes === 0 || !MemoryPool.supported(device)) return DeviceMemory.alloc(bytes, device);
    let ptr: Ptr = 0n;
    retryAfterRelease(device, () => {
      ptr = MemoryPool.of(device).alloc(bytes, stream);
    });
    return new DeviceMemory(device, ptr, bytes, true, stream);
  }

  /**
   * Pooled memory that work on `stream` (another stream than its own) uses: its free will wait for what
   * `stream` has queued at dispose() time, as well as for its own stream. Plain memory needs none of this.
   */
  recordStream(stream: Stream): void {
    if (this.#stream && stream !== this.#stream) (this.#uses ??= new Set()).add(stream);
  }

  /** Memory owned elsewhere (e.g. a symmetric mapping); its owner disposes this when it unmaps. */
  static external(device: Device, ptr: Ptr, bytes: number): DeviceMemory {
    checkBytes(bytes);
    return new DeviceMemory(device, ptr, bytes, false);
  }

  static alloc(bytes: number, device: Device = Device.get()): DeviceMemory {
    checkBytes(bytes);
    if (bytes === 0) return new DeviceMemory(device, 0n, 0);
    const p: [Ptr | null] = [null];
    retryAfterRelease(device, () => {
      device.makeCurrent();
      check(driver().cuMemAlloc_v2(p, bytes), `cuMemAlloc_v2(${bytes} bytes)`);
    });
    return new DeviceMemory(device, ptrOrZero(p[0]), bytes);
  }

  get alive(): boolean {
    return this.#alive;
  }

  get ptr(): Ptr {
    if (!this.#alive) throw new DisposedError("DeviceMemory");
    return this.#ptr;
  }

  /**
   * Frees the memory. Work still queued that uses it must have completed (cuMemFree does not order itself
   * after it), but for pooled memory on its own stream and on the streams recorded (recordStream): that
   * memory returns to the pool once they reach this point.
   */
  dispose(): void {
    if (!this.#alive) return;
    if (this.#owned && this.#ptr !== 0n && this.#stream) this.#freePooled(this.#stream);
    else if (this.#owned && this.#ptr !== 0n) {
      this.device.makeCurrent();
      check(driver().cuMemFree_v2(this.#ptr), "cuMemFree_v2");
    }
    this.#alive = false;
    this.#ptr = 0n;
  }

  #freePooled(own: Stream): void {
    // Checked before anything is enqueued: a refused dispose leaves the memory allocated and alive.
    refuseCapturing(own);
    if (this.#uses) for (const s of this.#uses) refuseCapturing(s);
    const stream = own.disposed || this.#uses ? this.#afterUses(own, [...(this.#uses ?? [])]) : own;
    MemoryPool.of(this.device).free(this.#ptr, this.bytes, stream);
  }

  /** The stream to free on once the recorded streams' work queued so far, and a destroyed stream's, is
   * done (the eager path, one live stream of its own, skips this). */
  #afterUses(own: Stream, uses: readonly Stream[]): Stream {
    // A stream that is gone may have left work queued: wait for its device (this one, or the other GPU a
    // recorded stream belongs to), then free in any order.
    for (const d of new Set([own, ...uses].filter((s) => s.disposed).map((s) => s.device))) d.synchronize();
    const stream = own.disposed ? defaultStream(this.device) : own;
    for (const use of uses)
      if (!use.disposed) {
        // The event in the recorded stream's context (it may be another GPU's): cuEventRecord wants both in one.
        const done = Event.create(use.device).record(use);
        stream.waitEvent(done);
        done.dispose(); // released by the driver once it has completed
      }
    return stream;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

function refuseCapturing(s: Stream): void {
  if (!s.disposed && s.capturing)
    throw new UnsupportedError(
      "dispose() of a tensor whose stream is being captured into a CUDA graph: dispose it after the capture",
    );
}

/** CUDA_ERROR_OUT_OF_MEMORY. */
const OUT_OF_MEMORY = 2;

/**
 * Runs `allocate`; if the device is out of memory while a stream-ordered pool holds some unused, gives that
 * back (after the device's work) and runs it once more. For plain and symmetric allocations.
 */
export function retryAfterRelease(device: Device, allocate: () => void): void {
  try {
    allocate();
  } catch (e) {
    if (!(e instanceof CudaError && e.status === OUT_OF_MEMORY)) throw e;
    // Releasing cached blocks synchronises the device, which would invalidate a capture in progress.
    if (captureInProgress()) throw e;
    let released: boolean;
    try {
      released = MemoryPool.releaseCached(device);
    } catch (failed) {
      // A kernel's recorded cause (a typed error) says more than the allocation's; else the device's work
      // failed and the allocation's own error is the one to see.
      if (failed instanceof SymmkitError && !(failed instanceof CudaError)) throw failed;
      throw new CudaError(e.call, e.status, e.errorName, e.errorString, { cause: failed });
    }
    if (!released) throw e;
    allocate();
  }
}

/**
 * Page-locked host memory (cuMemHostAlloc), visible to every context (portable). With `mapped`, kernels
 * can read and write it directly through `devicePtr`: the channel for flags and records the host polls.
 */
export class PinnedMemory implements Disposable {
  readonly bytes: number;
  readonly devicePtr: Ptr;
  /** The memory itself, without copy. Invalid after dispose(). */
  readonly buffer: ArrayBuffer;
  #ptr: Ptr;

  private constructor(ptr: Ptr, bytes: number, devicePtr: Ptr) {
    this.#ptr = ptr;
    this.bytes = bytes;
    this.devicePtr = devicePtr;
    this.buffer = koffi.view(ptr, bytes);
  }

  static alloc(bytes: number, options: { mapped?: boolean; device?: Device } = {}): PinnedMemory {
    checkBytes(bytes);
    if (bytes === 0) throw new InvalidArgumentError("pinned allocations must be at least one byte");
    (options.device ?? Device.get()).makeCurrent();
    const d = driver();
    const flags = CU_MEMHOSTALLOC_PORTABLE | (options.mapped ? CU_MEMHOSTALLOC_DEVICEMAP : 0);
    const p: [Ptr | null] = [null];
    check(d.cuMemHostAlloc(p, bytes, flags), `cuMemHostAlloc(${bytes} bytes)`);
    const ptr = ptrOrZero(p[0]);
    let devicePtr = 0n;
    if (options.mapped) {
      const dp: [Ptr | null] = [null];
      check(d.cuMemHostGetDevicePointer_v2(dp, ptr, 0), "cuMemHostGetDevicePointer_v2");
      devicePtr = ptrOrZero(dp[0]);
    }
    new Uint8Array(koffi.view(ptr, bytes)).fill(0);
    return new PinnedMemory(ptr, bytes, devicePtr);
  }

  get ptr(): Ptr {
    if (this.#ptr === 0n) throw new DisposedError("PinnedMemory");
    return this.#ptr;
  }

  dispose(): void {
    if (this.#ptr === 0n) return;
    check(driver().cuMemFreeHost(this.#ptr), "cuMemFreeHost");
    this.#ptr = 0n;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * Host -> device, ordered on `stream`. From pageable memory the call returns once the source has been
 * staged, so `src` may be reused right away.
 */
export function copyHostToDevice(dst: Ptr, src: ArrayBufferView, stream: Stream = defaultStream()): void {
  stream.device.makeCurrent();
  if (src.byteLength === 0) return;
  check(driver().cuMemcpyHtoDAsync_v2(dst, src, src.byteLength, stream.handle), "cuMemcpyHtoDAsync_v2");
}

/** Device -> host: waits for `stream`, so `dst` holds the data on return. */
export function copyDeviceToHost(dst: ArrayBufferView, src: Ptr, stream: Stream = defaultStream()): void {
  stream.device.makeCurrent();
  if (dst.byteLength > 0) {
    check(driver().cuMemcpyDtoHAsync_v2(dst, src, dst.byteLength, stream.handle), "cuMemcpyDtoHAsync_v2");
  }
  stream.synchronize();
}

/**
 * `height` rows of `widthBytes` from `src` (rows `srcPitch` bytes apart) to `dst` (rows `dstPitch` apart) on
 * one device, in one copy. Pitches at least the width and at most the device's maxPitchBytes.
 */
export function copy2d(
  dst: Ptr,
  dstPitch: number,
  src: Ptr,
  srcPitch: number,
  widthBytes: number,
  height: number,
  stream: Stream = defaultStream(),
): void {
  for (const n of [dstPitch, srcPitch, widthBytes, height]) checkBytes(n);
  const max = stream.device.props.maxPitchBytes;
  if (widthBytes > Math.min(dstPitch, srcPitch) || Math.max(dstPitch, srcPitch) > max)
    throw new InvalidArgumentError(
      `copy2d: pitches ${srcPitch} and ${dstPitch} must lie between the width ${widthBytes} and ${max} bytes`,
    );
  if (widthBytes === 0 || height === 0) return;
  const L = CUDA_MEMCPY2D_LAYOUT;
  copy2dBlock ??= new NativeBlock(L.bytes);
  const v = copy2dBlock.view;
  v.setUint32(L.srcMemoryType, CU_MEMORYTYPE_DEVICE, true);
  v.setBigUint64(L.srcDevice, src, true);
  v.setBigUint64(L.srcPitch, BigInt(srcPitch), true);
  v.setUint32(L.dstMemoryType, CU_MEMORYTYPE_DEVICE, true);
  v.setBigUint64(L.dstDevice, dst, true);
  v.setBigUint64(L.dstPitch, BigInt(dstPitch), true);
  v.setBigUint64(L.widthInBytes, BigInt(widthBytes), true);
  v.setBigUint64(L.height, BigInt(height), true);
  stream.device.makeCurrent();
  // The driver reads the descriptor during the call, so one block serves every call.
  check(driver().cuMemcpy2DAsync_v2(copy2dBlock.ptr, stream.handle), "cuMemcpy2DAsync_v2");
}
let copy2dBlock: NativeBlock | undefined;

export function copyDeviceToDevice(
  dst: Ptr,
  src: Ptr,
  bytes: number,
  stream: Stream = defaultStream(),
): void {
  checkBytes(bytes);
  stream.device.makeCurrent();
  if (bytes > 0) check(driver().cuMemcpyDtoDAsync_v2(dst, src, bytes, stream.handle), "cuMemcpyDtoDAsync_v2");
}

/** Between two devices' memories (through NVLink or PCIe as the hardware allows). */
export function copyPeer(
  dst: Ptr,
  dstDevice: Device,
  src: Ptr,
  srcDevice: Device,
  bytes: number,
  stream: Stream = defaultStream(),
): void {
  checkBytes(bytes);
  stream.device.makeCurrent();
  if (bytes > 0) {
    check(
      driver().cuMemcpyPeerAsync(dst, dstDevice.ctx, src, srcDevice.ctx, bytes, stream.handle),
      "cuMemcpyPeerAsync",
    );
  }
}

/** Sets `count` elements of 1, 2 or 4 bytes to `bits`. */
export function memset(
  dst: Ptr,
  bits: number,
  elementBytes: 1 | 2 | 4,
  count: number,
  stream: Stream = defaultStream(),
): void {
  checkBytes(count);
  stream.device.makeCurrent();
  if (count === 0) return;
  const d = driver();
  if (elementBytes === 1) check(d.cuMemsetD8Async(dst, bits, count, stream.handle), "cuMemsetD8Async");
  else if (elementBytes === 2) check(d.cuMemsetD16Async(dst, bits, count, stream.handle), "cuMemsetD16Async");
  else check(d.cuMemsetD32Async(dst, bits >>> 0, count, stream.handle), "cuMemsetD32Async");
}

/** The stream writes `value` to the u32 at `dst` once its earlier work is done (a graph node when captured). */
export function writeValue32(dst: Ptr, value: number, stream: Stream = defaultStream()): void {
  stream.device.makeCurrent();
  check(
    driver().cuStreamWriteValue32_v2(stream.handle, dst, value >>> 0, CU_STREAM_WRITE_VALUE_DEFAULT),
    "cuStreamWriteValue32_v2",
  );
}
