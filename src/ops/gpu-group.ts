// One GPU group's context, shared by every op family (coll, fused, norm, exchange, moe): the group's
// symmetric staging buffer (its pad: barrier slots and the fused matmuls' tile flags), the Lamport/LL
// mailbox, send/recv's inbox, the NCCL communicator, the tune table, the call counter whose value every
// call's fingerprint carries, and what the collective records launch with (CollectiveContext: kernel
// handles resolved once per kernel, dtype and op; the staging buffer's SymmView made once). The facade
// (GpuCollectives) makes one and hands it to each family.
import { InvalidArgumentError } from "../errors.js";
import { fingerprint, type CallShape, type CallTag } from "../distributed/fingerprint.js";
import "./call-kinds.js"; // the operations' kinds, before this group fingerprints a call
import type { NcclComm } from "../distributed/nccl-comm.js";
import type { ProcessGroup } from "../distributed/process-group.js";
import type { SymmetricTensor } from "../distributed/symmetric-memory.js";
import { MAILBOX_HEADER_BYTES, MAILBOX_STATE_LAYOUT } from "../distributed/device-layouts.js";
import type { Device } from "../runtime/device.js";
import type { DType } from "../runtime/dtype.js";
import type { Kernel, ParamType } from "../runtime/kernel.js";
import { DeviceMemory, memset } from "../runtime/memory.js";
import { cachedSharedModule, sharedModule } from "../runtime/module.js";
import { defaultStream, type Stream } from "../runtime/stream.js";
import { Tensor } from "../runtime/tensor.js";
import { agreedCheckCalls } from "./check-calls.js";
import {
  BARRIER_HOLD_PARAMS,
  BARRIER_KERNEL_THREADS,
  BARRIER_KERNELS,
  GROUP_BARRIER_PARAMS,
  movingExpr,
  movingProgram,
  reducingExpr,
  reducingProgram,
  type CollKernel,
  type MAILBOX_PARAMS,
} from "./coll/programs.js";
import {
  THREADS,
  type Capacity,
  type CollectiveAlgorithm,
  type CollectiveCall,
  type CollectiveContext,
} from "./coll/registry.js";
import { P2P_PAD_BYTES, p2pInboxBytes } from "./exchange/programs.js";
import { STAGING_PAD_BYTES } from "./fused/programs.js";
import { overlaps } from "./gemm/matmul.js";
import { Memo3 } from "./memo.js";
import { checkSameGpus } from "./same-gpus.js";
import { TUNE_KNOWN } from "./tune-known.js";
import { loadTuneTable, type LoadedTuneTable } from "./tune-table.js";
import { checkCapacity, type ReduceOp } from "./validate.js";
import type {
  GpuAllGatherAlgorithm,
  GpuAllReduceAlgorithm,
  GpuReduceScatterAlgorithm,
} from "./coll/registry.js";
import type { GpuAllToAllAlgorithm, GpuAllToAllVAlgorithm, GpuSendRecvAlgorithm } from "./exchange/checks.js";
import type {
  AllGatherMatmulAlgorithm,
  MatmulAllReduceAlgorithm,
  MatmulReduceScatterAlgorithm,
} from "./fused/checks.js";
import type { GpuCombineAlgorithm, GpuMoeAlgorithm } from "./moe/checks.js";
import type { ArNormAlgorithm } from "./norm/checks.js";

/** Mailbox kernels run blocks of 128 threads while that takes at most one block per SM (more SMs
 * sending and polling at once: 4 KiB to 256 KiB all-reduce 5-30% faster than with 512 on 4 H200s),
 * and blocks of 512 above (4 MiB 16-25% faster than with 128). */
const MAILBOX_SMALL_THREADS = 128;
/** Default mailbox slot: what one rank may push to one peer in one mailbox call. The mailbox takes
 * 7 x world slots per rank (three Lamport buffers, two LL buffers of double-size slots). */
export const DEFAULT_MAILBOX_SLOT_BYTES = 4 * 1024 * 1024;

export type CollectiveInput = Tensor | SymmetricTensor;

export interface CollectiveOptions {
  readonly stream?: Stream;
}

/** What the context and the families use of the process group, whatever collectives it carries (so that
 * this layer needs no facade's type). */
export type GroupOfGpu = Pick<
  ProcessGroup,
  | "device"
  | "rank"
  | "worldSize"
  | "ranks"
  | "store"
  | "sharesGpus"
  | "watch"
  | "noteCapture"
  | "symmetric"
  | "nccl"
>;

export interface GpuCollectivesOptions {
  /** Bytes one rank may push to one peer in one mailbox call (a multiple of 16). */
  readonly mailboxSlotBytes?: number;
}

export interface Mailbox {
  readonly buffers: SymmetricTensor;
  readonly view: Uint8Array;
  readonly state: DeviceMemory;
  /** What one rank may push to one peer. */
  readonly slotBytes: number;
  /** A slot's bytes in the buffer (the kernels' `cap`): the payload, then the call's header. */
  readonly stride: number;
}

/** The algorithms the GPU backend accepts, by operation. */
export interface GpuAlgorithms {
  readonly allReduce: GpuAllReduceAlgorithm;
  readonly allGather: GpuAllGatherAlgorithm;
  readonly reduceScatter: GpuReduceScatterAlgorithm;
  readonly allGatherMatmul: AllGatherMatmulAlgorithm;
  readonly matmulReduceScatter: MatmulReduceScatterAlgorithm;
  readonly matmulAllReduce: MatmulAllReduceAlgorithm;
  readonly allReduceRmsNorm: ArNormAlgorithm;
  readonly sendRecv: GpuSendRecvAlgorithm;
  readonly allToAll: GpuAllToAllAlgorithm;
  readonly allToAllV: GpuAllToAllVAlgorithm;
  readonly moe: GpuMoeAlgorithm;
  readonly combine: GpuCombineAlgorithm;
}

export class GpuGroup implements CollectiveContext {
  readonly group: GroupOfGpu;
  readonly device: Device;
  readonly rank: number;
  readonly world: number;
  readonly staging: SymmetricTensor;
  readonly stagingView: Uint8Array;
  readonly capacityBytes: number;
  readonly mailbox: Mailbox;
  /** send/recv's inbox (put, ll; allToAll's ll too): p2pInboxBytes, and its pad's signal slots and
   * counts; inboxView its SymmView, made once. */
  readonly inbox: SymmetricTensor;
  readonly inboxView: Uint8Array;
  readonly comm: NcclComm;
  /** The tune table auto picks from (see src/ops/tune-table.ts), if this machine has one. */
  readonly tuned: LoadedTuneTable | undefined;
  /** SYMMKIT_CHECK_CALLS, as every rank of the group set it (src/ops/check-calls.ts). */
  readonly checkCalls: boolean;
  /** What auto and canRun judge a call against: fixed for the group's life. */
  readonly capacity: Capacity;
  /** Where a kernel records a call it refused (SyncWatch.refusalPtr). */
  readonly refusalPtr: bigint;
  /** Group calls made so far: every rank in step counts the same (the fingerprints' call number). */
  calls = 0;
  readonly barrierHold: Kernel<typeof BARRIER_HOLD_PARAMS>;
  readonly #groupBarrier: Kernel<typeof GROUP_BARRIER_PARAMS>;
  readonly #reducing: Memo3<CollKernel, DType, ReduceOp, Kernel>;
  readonly #moving = new Map<CollKernel, Kernel>();

  private constructor(
    group: GroupOfGpu,
    staging: SymmetricTensor,
    mailbox: Mailbox,
    inbox: SymmetricTensor,
    comm: NcclComm,
    checkCalls: boolean,
  ) {
    this.group = group;
    this.device = group.device;
    this.rank = group.rank;
    this.world = group.worldSize;
    this.staging = staging;
    this.stagingView = staging.deviceView();
    this.capacityBytes = staging.tensor.nbytes;
    this.mailbox = mailbox;
    this.inbox = inbox;
    this.inboxView = inbox.deviceView();
    this.comm = comm;
    this.tuned = loadTuneTable(this.device.props.name, this.world, TUNE_KNOWN);
    this.checkCalls = checkCalls;
    this.capacity = {
      world: this.world,
      mailboxSlotBytes: mailbox.slotBytes,
      stagingBytes: this.capacityBytes,
    };
    this.refusalPtr = group.watch.refusalPtr;
    const barriers = sharedModule(BARRIER_KERNELS, this.device);
    this.#groupBarrier = barriers.kernel("symmkit::group_barrier", GROUP_BARRIER_PARAMS);
    this.barrierHold = barriers.kernel("symmkit::barrier_hold", BARRIER_HOLD_PARAMS);
    this.#reducing = new Memo3((kernel, dtype, op) =>
      sharedModule(reducingProgram(kernel, dtype, op), this.device).kernel(
        reducingExpr(kernel, dtype, op, this.world),
        kernel.params,
      ),
    );
  }

  /**
   * Collective: allocates the group's symmetric staging buffer, its mailbox, send/recv's inbox and its NCCL
   * communicator. The mailbox's Lamport buffers start as the sentinel (all bits set), its LL buffers and its
   * call counts as zero; all of it is in place on this rank before create returns, and the group meets (in
   * ProcessGroup) before anyone can push.
   */
  static async create(
    group: GroupOfGpu,
    stagingBytes: number,
    options: GpuCollectivesOptions = {},
  ): Promise<GpuGroup> {
    const slotBytes = options.mailboxSlotBytes ?? DEFAULT_MAILBOX_SLOT_BYTES;
    if (!Number.isSafeInteger(slotBytes) || slotBytes <= 0 || slotBytes % 16 !== 0)
      throw new InvalidArgumentError(`mailboxSlotBytes ${slotBytes} must be a positive multiple of 16`);
    const world = group.worldSize;
    await checkSameGpus(group);
    const checkCalls = await agreedCheckCalls(group);
    // The pad holds the barrier slots and GEMM + reduce-scatter's tile flags.
    const staging = await group.symmetric.empty([stagingBytes], "u8", { padBytes: STAGING_PAD_BYTES });
    const stride = slotBytes + MAILBOX_HEADER_BYTES;
    const buffers = await group.symmetric.empty([7 * world * stride], "u8");
    const stateBytes = MAILBOX_STATE_LAYOUT.bytes;
    const state = DeviceMemory.alloc(stateBytes, group.device);
    const stream = defaultStream(group.device);
    memset(buffers.tensor.ptr, 0xffffffff, 4, (3 * world * stride) / 4, stream);
    memset(state.ptr, 0, 4, stateBytes / 4, stream);
    stream.synchronize();
    // send/recv's inbox: put's two chunks and ll's two buffers per sender; its pad holds put's signal
    // slots and ll's counts.
    const inbox = await group.symmetric.empty([p2pInboxBytes(world)], "u8", { padBytes: P2P_PAD_BYTES });
    const mailbox = { buffers, view: buffers.deviceView(), state, slotBytes, stride };
    return new GpuGroup(group, staging, mailbox, inbox, await group.nccl(), checkCalls);
  }

  /** The next group call's fingerprint (src/distributed/fingerprint.ts), for work enqueued on `stream`. A
   * call on a group whose kernels already gave up is refused: its signals are out of step. */
  tag(shape: CallShape, stream: Stream): CallTag {
    this.group.watch.throwIfFailed();
    this.group.noteCapture(stream);
    return fingerprint(this.calls++, shape);
  }

  /** The call's stream: its option, else the device's default (options may be missing: a JavaScript
   * caller's; the family's checks say so with a typed error). */
  stream(options: CollectiveOptions | undefined): Stream {
    return options?.stream ?? defaultStream(this.device);
  }

  /** The local tensor of an input, checked to be this group's and on its GPU. */
  local(input: CollectiveInput, what: string): Tensor {
    const x = input instanceof Tensor ? input : input.tensor;
    const g = this.group;
    if (
      !(input instanceof Tensor) &&
      (input.worldSize !== g.worldSize ||
        input.rank !== g.rank ||
        input.ranks.some((r, i) => r !== g.ranks[i]))
    ) {
      throw new InvalidArgumentError(`${what}: the symmetric tensor belongs to another group`);
    }
    if (!(input instanceof Tensor)) input.checkBarrierRoom(what, this.device.props.smCount);
    this.onDevice(what, x);
    return x;
  }

  onDevice(what: string, t: Tensor): void {
    if (t.device !== this.device) {
      throw new InvalidArgumentError(
        `${what}: tensors must be on cuda:${this.device.ordinal}, this one is on cuda:${t.device.ordinal}`,
      );
    }
  }

  // A kernel is resolved with the parameters its declaration gives (CollKernel), hence the casts back.
  reducing<P extends readonly ParamType[]>(kernel: CollKernel<P>, dtype: DType, op: ReduceOp): Kernel<P> {
    return this.#reducing.get(kernel, dtype, op) as Kernel<P>;
  }

  /** Resolves `kernel` (for `dtype` and `op` if it reduces) ahead of its first call, where its program is
   * loaded already or in the disk cache; nothing compiles here (a kernel never built is built by its first
   * call, as without this). */
  preload(kernel: CollKernel, dtype: DType, op: ReduceOp): void {
    const spec = kernel.reduces ? reducingProgram(kernel, dtype, op) : movingProgram(kernel);
    if (!cachedSharedModule(spec, this.device)) return;
    if (kernel.reduces) this.reducing(kernel, dtype, op);
    else this.moving(kernel);
  }

  moving<P extends readonly ParamType[]>(kernel: CollKernel<P>): Kernel<P> {
    let k = this.#moving.get(kernel);
    if (!k) {
      k = sharedModule(movingProgram(kernel), this.device).kernel(
        movingExpr(kernel, this.world),
        kernel.params,
      );
      this.#moving.set(kernel, k);
    }
    return k as Kernel<P>;
  }

  groupBarrier(view: Uint8Array, stream: Stream, tag: CallTag, step: 0 | 1 = 0): void {
    this.#groupBarrier.launch({ grid: 1, block: BARRIER_KERNEL_THREADS, stream }, view, tag, step);
  }

  stage(c: CollectiveCall, inPlaceOk = false): [Uint8Array, bigint] {
    if (!(c.input instanceof Tensor)) {
      const aliased = overlaps(c.output, c.x);
      if (!aliased || (inPlaceOk && c.output.ptr === c.x.ptr && c.output.nbytes === c.x.nbytes))
        return [c.input.deviceView(), 0n];
    }
    checkCapacity(c.what, c.x.nbytes, this.capacityBytes);
    return [this.stagingView, c.x.ptr];
  }

  blocks(bytes: number, threads = THREADS): number {
    return Math.max(1, Math.min(this.device.props.smCount, Math.ceil(bytes / 16 / threads)));
  }

  /** A mailbox kernel for `algorithm`: `n` elements (ll: bytes), `bytes` per rank as its
   * mailboxBytesPerPeer counts them; what it sends each peer is checked against the slot before anything
   * runs. */
  push(
    algorithm: CollectiveAlgorithm,
    k: Kernel<typeof MAILBOX_PARAMS>,
    c: CollectiveCall,
    n: number,
    bytes: number,
  ): void {
    const m = this.mailbox;
    const bytesPerPeer = algorithm.mailboxBytesPerPeer(bytes, this.world);
    if (bytesPerPeer > m.slotBytes)
      throw new InvalidArgumentError(
        `${c.what}: ${bytesPerPeer} bytes per peer exceed the ${m.slotBytes}-byte mailbox slot; use another algorithm, or a larger mailboxSlotBytes`,
      );
    // blocks() counts 16-byte vectors, one per thread.
    const vectorBytes = (bytesPerPeer * 16) / algorithm.mailboxThreadBytes!;
    const fewSms = vectorBytes <= 16 * MAILBOX_SMALL_THREADS * this.device.props.smCount;
    const threads = fewSms ? MAILBOX_SMALL_THREADS : THREADS;
    k.launch(
      { grid: this.blocks(vectorBytes, threads), block: threads, stream: c.stream },
      m.view,
      c.x,
      c.output,
      n,
      m.state.ptr,
      m.stride,
      c.tag,
    );
  }

  /** Collective: releases the staging buffer, the mailbox and the inbox. */
  async dispose(): Promise<void> {
    await this.staging.dispose();
    await this.mailbox.buffers.dispose();
    await this.inbox.dispose();
    this.mailbox.state.dispose();
  }
}
