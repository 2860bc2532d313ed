// Symmetric tensors of the CPU backend: every rank creates a shared region (data, then signal pad),
// sends its descriptor to each local peer and maps theirs: the GPU path's export/import/map, with memfd
// instead of CUDA VMM. The pad is zero before any peer can map it.
import { DisposedError, InvalidArgumentError } from "../errors.js";
import { dtypeInfo, type DType } from "../runtime/dtype.js";
import { numelOf, type DisposedLabel, type Shape } from "../runtime/tensor.js";
import { closeFd } from "../distributed/fd-channel.js";
import type { FdExchange } from "../distributed/fd-exchange.js";
import type { ScopedStore } from "../distributed/scoped-store.js";
import { HostTensor } from "./host-tensor.js";
import { SharedRegion } from "./shared-memory.js";
import { SLOT_BYTES, SLOT_GROUPS } from "./sync.js";

const DATA_ALIGN = 64;

/** Bytes of each rank's signal pad, after the data. */
const padBytes = (worldSize: number): number => SLOT_BYTES * SLOT_GROUPS * worldSize;

/** The largest symmetric tensor, in bytes, of a group of `worldSize`: data and pad share one region. */
export function maxSymmetricBytes(worldSize: number): number {
  return Math.floor((SharedRegion.MAX_BYTES - padBytes(worldSize)) / DATA_ALIGN) * DATA_ALIGN;
}

export interface CpuSymmetricContext {
  readonly rank: number;
  readonly worldSize: number;
  readonly ranks: readonly number[];
  readonly store: ScopedStore;
  readonly fds: FdExchange;
  readonly storeTimeoutMs: number;
  /** What the tensor is to the user when it is not one they made (the memory of a group's
   * collectives): named when it is used after its disposal. */
  readonly label?: DisposedLabel | undefined;
}

export class CpuSymmetricTensor implements AsyncDisposable {
  readonly tensor: HostTensor;
  readonly rank: number;
  readonly worldSize: number;
  /** Each rank's signal pad, mapped here. */
  readonly pads: readonly BigInt64Array[];
  readonly #regions: SharedRegion[];
  readonly #dataBytes: number;
  readonly #ctx: CpuSymmetricContext;
  readonly #id: number;
  #alive = true;

  private constructor(
    ctx: CpuSymmetricContext,
    id: number,
    regions: SharedRegion[],
    dataBytes: number,
    shape: Shape,
    dtype: DType,
  ) {
    this.#ctx = ctx;
    this.#id = id;
    this.#regions = regions;
    this.#dataBytes = dataBytes;
    this.rank = ctx.rank;
    this.worldSize = ctx.worldSize;
    this.pads = regions.map((r) => new BigInt64Array(r.buffer, dataBytes, SLOT_GROUPS * ctx.worldSize));
    this.tensor = this.peer(ctx.rank, shape, dtype);
  }

  /** Collective: every member calls it with the same shape and dtype, in the same order. */
  static async allocate(
    ctx: CpuSymmetricContext,
    id: number,
    shape: Shape,
    dtype: DType,
  ): Promise<CpuSymmetricTensor> {
    const dataBytes = Math.max(
      DATA_ALIGN,
      Math.ceil((numelOf(shape) * dtypeInfo(dtype).bytes) / DATA_ALIGN) * DATA_ALIGN,
    );
    const bytes = dataBytes + padBytes(ctx.worldSize);
    const key = `cpu-symm/${id}`;
    const { region, fd } = SharedRegion.create(bytes, `symmkit-${key}`);
    const regions = new Array<SharedRegion>(ctx.worldSize);
    regions[ctx.rank] = region;
    try {
      await ctx.fds.share(ctx, key, JSON.stringify({ shape, dtype, bytes }), fd, (r, theirFd) => {
        regions[r] = SharedRegion.map(theirFd, bytes);
      });
    } catch (e) {
      for (const reg of regions) reg?.close();
      throw e;
    } finally {
      closeFd(fd);
    }
    return new CpuSymmetricTensor(ctx, id, regions, dataBytes, shape, dtype);
  }

  /** Rank `r`'s buffer, mapped here, seen with `shape` and `dtype` (default: this tensor's). */
  peer(r: number, shape: Shape = this.tensor.shape, dtype: DType = this.tensor.dtype): HostTensor {
    if (!this.#alive) {
      const label = this.#ctx.label;
      throw label
        ? new DisposedError(label.what, label.todo)
        : new DisposedError(`symmetric tensor ${JSON.stringify(this.tensor.shape)} ${this.tensor.dtype}`);
    }
    const region = this.#regions[r];
    if (!region) throw new InvalidArgumentError(`rank ${r} is not in this group of ${this.worldSize}`);
    if (numelOf(shape) * dtypeInfo(dtype).bytes > this.#dataBytes) {
      throw new InvalidArgumentError(
        `${JSON.stringify(shape)} ${dtype} does not fit in ${this.#dataBytes} bytes`,
      );
    }
    return HostTensor.over(region.buffer, 0, shape, dtype, () => this.#alive, this.#ctx.label);
  }

  get capacityBytes(): number {
    return this.#dataBytes;
  }

  /** Collective: once every member is done with every buffer, unmaps them. */
  async dispose(): Promise<void> {
    if (!this.#alive) return;
    this.#alive = false;
    await this.#ctx.store.barrier(`cpu-symm/${this.#id}/free`);
    for (const r of this.#regions) r.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose();
  }
}
