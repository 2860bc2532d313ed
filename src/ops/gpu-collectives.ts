// The collectives on GPU symmetric memory: validate (src/ops/validate.ts, shared with the CPU backend),
// pick an algorithm (auto: the tune table's pick, else the registry's built-in rule, whichever can run
// with this group's staging buffer and mailbox, among the algorithms that give the rank-order bits; a
// reduction none of them can take whole runs in pieces), and launch it through its record in
// src/ops/coll/registry.ts. Kernel handles are resolved once per (kernel, dtype, op) and kept, and the
// staging buffer's SymmView is made once: an eager call builds no strings and allocates nothing but its
// argument objects (and its output, when none is given).
import { InvalidArgumentError } from "../errors.js";
import {
  fingerprint,
  SPENT_CALL,
  SPENT_MESSAGE,
  takeCollectiveTurns,
  type CallAs,
  type CallKind,
  type CallShape,
  type CallTag,
  type Turns,
} from "../distributed/fingerprint.js";
import type { NcclComm } from "../distributed/nccl-comm.js";
import type { ProcessGroup } from "../distributed/process-group.js";
import type { SymmetricTensor } from "../distributed/symmetric-memory.js";
import { MAILBOX_HEADER_BYTES, MAILBOX_STATE_LAYOUT } from "../distributed/device-layouts.js";
import { DeviceMemory, memset } from "../runtime/memory.js";
import type { DType } from "../runtime/dtype.js";
import type { Kernel } from "../runtime/kernel.js";
import { sharedModule } from "../runtime/module.js";
import { Graph } from "../runtime/graph.js";
import { defaultStream, type Stream } from "../runtime/stream.js";
import { Tensor } from "../runtime/tensor.js";
import { agreedCheckCalls } from "./check-calls.js";
import { checkSameGpus } from "./same-gpus.js";
import {
  ALL_GATHER_PARAMS,
  allGatherExpr,
  allGatherProgram,
  BARRIER_HOLD_PARAMS,
  BARRIER_KERNEL_THREADS,
  BARRIER_KERNELS,
  GROUP_BARRIER_PARAMS,
  REDUCING_PARAMS,
  reducingExpr,
  reducingProgram,
  type AllGatherParams,
  type MAILBOX_PARAMS,
  type ReducingParams,
  type AllGatherKernel,
  type ReducingKernel,
} from "./coll/programs.js";
import {
  algorithmRecord,
  AUTO_ALGORITHMS,
  BASELINE_ALGORITHMS,
  builtInPick,
  canRun,
  pieceBytes,
  REDUCE_SCATTER_PIECES,
  type Capacity,
  GPU_ALL_GATHER_ALGORITHMS,
  GPU_ALL_REDUCE_ALGORITHMS,
  GPU_REDUCE_SCATTER_ALGORITHMS,
  THREADS,
  TUNABLE_ALGORITHMS,
  type CollectiveAlgorithm,
  type CollectiveCall,
  type CollectiveContext,
  type CollectiveName,
  type GpuAlgorithm,
  type GpuAllGatherAlgorithm,
  type GpuAllReduceAlgorithm,
  type GpuReduceScatterAlgorithm,
} from "./coll/registry.js";
import type { Collectives } from "./collectives.js";
import { overlaps, sameSpan } from "./gemm/matmul.js";
import { Memo3 } from "./memo.js";
import {
  checkAlgorithm,
  checkCapacity,
  checkDivisible,
  checkNumel,
  checkPeer,
  checkReduction,
  checkSameDtype,
  checkTensorArg,
  type ReduceOp,
} from "./validate.js";
import { loadTuneTable, pickRule, type LoadedTuneTable, type TuneKnown } from "./tune-table.js";
import {
  FUSED_TUNABLE,
  type AllGatherMatmulAlgorithm,
  type AllGatherMatmulOptions,
  type FusedMatmulOptions,
  type MatmulAllReduceAlgorithm,
  type MatmulAllReduceOptions,
  type MatmulReduceScatterAlgorithm,
} from "./fused/checks.js";
import { FusedMatmul, STAGING_PAD_BYTES, type FusedInput } from "./fused/fused-matmul.js";
import {
  AR_NORM_AUTO,
  AR_NORM_BASELINES,
  type AllReduceRmsNormOptions,
  type ArNormAlgorithm,
} from "./norm/checks.js";
import { ArNorm, type ArNormInput, type ArNormResult } from "./norm/ar-norm.js";
import {
  checkAllToAll,
  checkAllToAllV,
  checkAllToAllVTensors,
  checkCountList,
  checkSendRecv,
  GPU_ALL_TO_ALL_ALGORITHMS,
  GPU_ALL_TO_ALL_V_ALGORITHMS,
  GPU_SEND_RECV_ALGORITHMS,
  type GpuAllToAllAlgorithm,
  type GpuAllToAllVAlgorithm,
  type GpuSendRecvAlgorithm,
} from "./exchange/checks.js";
import {
  A2AV_PARAMS,
  A2AV_PROGRAM,
  A2AV_REFUSALS,
  GpuExchange,
  P2P_CHUNK_BYTES,
  P2P_PARAMS,
  P2P_SIGNAL_PARAMS,
  P2P_PROGRAM,
  type ExchangeInput,
} from "./exchange/exchange.js";
import {
  checkCombine,
  checkDispatch,
  type CombineOptions,
  type DispatchOptions,
  type DispatchResult,
  type MoeHandle,
} from "./moe/checks.js";
import { GPU_MOE_ALGORITHMS, GpuMoe, MOE_REFUSALS, type GpuMoeAlgorithm } from "./moe/moe.js";

export {
  GPU_ALL_GATHER_ALGORITHMS,
  GPU_ALL_REDUCE_ALGORITHMS,
  GPU_REDUCE_SCATTER_ALGORITHMS,
  TUNABLE_ALGORITHMS,
  type GpuAllGatherAlgorithm,
  type GpuAllReduceAlgorithm,
  type GpuReduceScatterAlgorithm,
};

/** The fused matmuls' construction that reduces through NCCL: for GEMM + reduce-scatter and GEMM +
 * all-reduce a baseline (NCCL's order of summation); all-gather + GEMM's only moves bits through NCCL. */
const FUSED_NCCL = "nccl_cublaslt";

/**
 * What a tune table may name, by op: auto's candidates, which for every op that sums over ranks are the
 * algorithms giving the rank-order bits; and the baselines a table is refused for naming (NCCL's sums).
 * `symmkit tune` writes its rules from the same lists.
 */
export const TUNE_KNOWN: TuneKnown = {
  ...AUTO_ALGORITHMS,
  "all-gather-matmul": FUSED_TUNABLE["all-gather-matmul"],
  "matmul-reduce-scatter": FUSED_TUNABLE["matmul-reduce-scatter"].filter((a) => a !== FUSED_NCCL),
  "matmul-all-reduce": FUSED_TUNABLE["matmul-all-reduce"].filter((a) => a !== FUSED_NCCL),
  arNorm: AR_NORM_AUTO,
  baselines: {
    ...BASELINE_ALGORITHMS,
    "matmul-reduce-scatter": [FUSED_NCCL],
    "matmul-all-reduce": [FUSED_NCCL],
    arNorm: AR_NORM_BASELINES,
  },
};

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

export interface GpuCollectivesOptions {
  /** Bytes one rank may push to one peer in one mailbox call (a multiple of 16). */
  readonly mailboxSlotBytes?: number;
}

interface Mailbox {
  readonly buffers: SymmetricTensor;
  readonly view: Uint8Array;
  readonly state: DeviceMemory;
  /** What one rank may push to one peer. */
  readonly slotBytes: number;
  /** A slot's bytes in the buffer (the kernels' `cap`): the payload, then the call's header. */
  readonly stride: number;
}

/**
 * A host's group's numbers, for HostsCollectives, whose calls run through it: its call number and its
 * messages' count (what GpuCollectives' calls take their turns from), and how to take a turn of each
 * for a call refused before it reached this group (see takeTurns). Not part of the package's API.
 */
export interface LocalTurns {
  readonly calls: (c: GpuCollectives) => number;
  readonly spendCall: (c: GpuCollectives) => void;
  readonly messages: (c: GpuCollectives) => number;
  readonly skipMessages: (c: GpuCollectives, peer: unknown, sends: boolean, receives: boolean) => boolean;
}
// Set by GpuCollectives' static block, which alone sees its private fields.
export let localTurns: LocalTurns;

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
}

export class GpuCollectives implements Collectives<
  Tensor,
  CollectiveInput,
  GpuAlgorithms,
  CollectiveOptions
> {
  readonly #group: ProcessGroup<GpuCollectives>;
  readonly #staging: SymmetricTensor;
  readonly #mailbox: Mailbox;
  readonly #comm: NcclComm;
  readonly #tuned: LoadedTuneTable | undefined;
  readonly #fused: FusedMatmul;
  readonly #arNorm: ArNorm;
  readonly #exchange: GpuExchange;
  readonly #inbox: SymmetricTensor;
  #p2pKernel: Kernel<typeof P2P_PARAMS> | undefined;
  #p2pSignalKernel: Kernel<typeof P2P_SIGNAL_PARAMS> | undefined;
  #a2avKernel: Kernel<typeof A2AV_PARAMS> | undefined;
  readonly #moe: GpuMoe;
  readonly #ctx: CollectiveContext;
  readonly #reducingKernels: Memo3<ReducingKernel, DType, ReduceOp, Kernel>;
  readonly #allGatherKernels = new Map<AllGatherKernel, Kernel>();
  readonly #groupBarrier: Kernel<typeof GROUP_BARRIER_PARAMS>;
  readonly #barrierHold: Kernel<typeof BARRIER_HOLD_PARAMS>;
  /** What auto and canRun judge a call against: fixed for the group's life. */
  readonly #capacity: Capacity;
  /** Collective calls made so far: every rank in step counts the same (the fingerprints' call number). */
  #seq = 0;

  private constructor(
    group: ProcessGroup<GpuCollectives>,
    staging: SymmetricTensor,
    mailbox: Mailbox,
    inbox: SymmetricTensor,
    comm: NcclComm,
    tuned: LoadedTuneTable | undefined,
    checkCalls: boolean,
  ) {
    this.#group = group;
    this.#staging = staging;
    this.#inbox = inbox;
    this.#mailbox = mailbox;
    this.#comm = comm;
    this.#tuned = tuned;
    const barriers = sharedModule(BARRIER_KERNELS, group.device);
    this.#groupBarrier = barriers.kernel("symmkit::group_barrier", GROUP_BARRIER_PARAMS);
    this.#barrierHold = barriers.kernel("symmkit::barrier_hold", BARRIER_HOLD_PARAMS);
    this.#capacity = {
      world: group.worldSize,
      mailboxSlotBytes: mailbox.slotBytes,
      stagingBytes: staging.tensor.nbytes,
    };
    const world = group.worldSize;
    // Every reducing kernel takes the parameters its records launch it with (coll/programs.ts).
    this.#reducingKernels = new Memo3((kernel, dtype, op) =>
      sharedModule(reducingProgram(kernel, dtype, op), group.device).kernel(
        reducingExpr(kernel, dtype, op, world),
        REDUCING_PARAMS[kernel],
      ),
    );
    this.#ctx = this.#context();
    this.#fused = new FusedMatmul({
      group,
      staging,
      comm,
      tuned,
      barrier: (view, stream, tag, step) => this.#ctx.groupBarrier(view, stream, tag, step),
      tag: (shape, stream) => this.#tag(shape, stream),
      allGather: (input, output, stream, as) => void this.#allGather(input, output, { stream }, as),
      reduceScatter: (input, output, stream, as) => void this.#reduceScatter(input, output, { stream }, as),
      allReduce: (input, output, algorithm, stream, as) =>
        void this.#allReduce(input, { output, algorithm, stream }, as),
      allReduceRmsNorm: (x, options, algorithm, stream) =>
        void this.allReduceRmsNorm(x, { ...options, algorithm, stream }),
      checkAllReduceRmsNorm: (x, options, algorithm) =>
        this.#arNorm.check(x, { ...options, algorithm }, "matmulAllReduce (rmsNorm)"),
    });
    this.#arNorm = new ArNorm({
      device: group.device,
      rank: group.rank,
      world,
      staging,
      stagingView: this.#ctx.stagingView,
      mailbox,
      rules: tuned?.arNorm?.rules,
      checkCalls,
      tag: (shape, stream) => this.#tag(shape, stream),
      allReduce: (input, x, output, algorithm, as, stream) => {
        const what = "allReduceRmsNorm";
        if (algorithm === "auto") this.#autoAllReduce(what, input, x, output, "sum", { stream }, as);
        else this.#launch("all-reduce", algorithm, what, input, x, output, "sum", { stream }, {}, as);
      },
      local: (input, what) => this.#local(input, what),
      onDevice: (what, t) => this.#onDevice(what, t),
    });
    const tag = (shape: CallShape, stream: Stream): CallTag => this.#tag(shape, stream);
    this.#exchange = new GpuExchange({
      ...this.#ctx,
      device: group.device,
      tag,
      inbox,
      p2pKernel: () =>
        (this.#p2pKernel ??= sharedModule(P2P_PROGRAM, group.device).kernel(
          "symmkit::p2p::p2p_put",
          P2P_PARAMS,
        )),
      p2pSignalKernel: () =>
        (this.#p2pSignalKernel ??= sharedModule(P2P_PROGRAM, group.device).kernel(
          "symmkit::p2p::p2p_ce_signal",
          P2P_SIGNAL_PARAMS,
        )),
      a2avKernel: () =>
        (this.#a2avKernel ??= sharedModule(A2AV_PROGRAM, group.device).kernel(
          `symmkit::a2av::all_to_all_v_pull<${world}>`,
          A2AV_PARAMS,
        )),
      refusalPtr: group.watch.refusalPtr,
    });
    for (const [op, refusals] of [
      ["allToAllV (counts on the device)", A2AV_REFUSALS],
      ["dispatch (pull_device)", MOE_REFUSALS],
    ] as const)
      for (const [code, why] of Object.entries(refusals))
        group.watch.describeRefusal(
          Number(code),
          (r) => `${op} was refused on every rank: ${why(r.rank, r.detail)}; nothing was written`,
        );
    this.#moe = new GpuMoe({
      ...this.#ctx,
      device: group.device,
      tag,
      refusalPtr: group.watch.refusalPtr,
    });
  }

  /** The tune table auto picks from (see src/ops/tune-table.ts), if this machine has one. */
  get tuneTable(): LoadedTuneTable | undefined {
    return this.#tuned;
  }

  /**
   * Collective: allocates the group's symmetric staging buffer, its mailbox, send/recv's inbox and its NCCL
   * communicator. The mailbox's Lamport buffers start as the sentinel (all bits set), its LL buffers and its call
   * counts as zero; all of it is in place on this rank before create returns, and the group meets (in
   * ProcessGroup) before anyone can push.
   */
  static async create(
    group: ProcessGroup<GpuCollectives>,
    stagingBytes: number,
    options: GpuCollectivesOptions = {},
  ): Promise<GpuCollectives> {
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
    // send/recv's inbox (algorithm put): two chunks per sender; its pad holds the signal slots.
    const inbox = await group.symmetric.empty([world * 2 * P2P_CHUNK_BYTES], "u8");
    return new GpuCollectives(
      group,
      staging,
      { buffers, view: buffers.deviceView(), state, slotBytes, stride },
      inbox,
      await group.nccl(),
      loadTuneTable(group.device.props.name, world, TUNE_KNOWN),
      checkCalls,
    );
  }

  get capacityBytes(): number {
    return this.#staging.tensor.nbytes;
  }

  /** The group's symmetric staging buffer (and its signal pad): the collectives stage plain inputs and
   * the fused matmuls receive there. Kernels of one's own may use it between collective calls. */
  get staging(): SymmetricTensor {
    return this.#staging;
  }

  /** What one rank may push to one peer in a mailbox call (lamport, ll). */
  get mailboxSlotBytes(): number {
    return this.#mailbox.slotBytes;
  }

  /** Sum (or max, min) of `input` over all ranks, into `output` (default: a new tensor). */
  allReduce(
    input: CollectiveInput,
    options: CollectiveOptions & { op?: ReduceOp; algorithm?: GpuAllReduceAlgorithm; output?: Tensor } = {},
  ): Tensor {
    return this.#allReduce(input, options);
  }

  /** allReduce, fingerprinted `as` the fused call it runs for (if any). */
  #allReduce(
    input: CollectiveInput,
    options: CollectiveOptions & { op?: ReduceOp; algorithm?: GpuAllReduceAlgorithm; output?: Tensor },
    as?: CallAs,
  ): Tensor {
    const what = "allReduce";
    checkTensorArg(what, "input", input);
    if (options.output !== undefined) checkTensorArg(what, "output", options.output);
    const x = this.#local(input, what);
    const op = options.op ?? "sum";
    const requested = options.algorithm ?? "auto";
    checkReduction(what, op, x.dtype);
    checkAlgorithm(what, requested, GPU_ALL_REDUCE_ALGORITHMS);
    const output =
      options.output ??
      Tensor.empty(x.shape, x.dtype, { device: this.#group.device, stream: this.#stream(options) });
    checkSameDtype(what, x, output);
    checkNumel(what, "output", output, x.numel);
    this.#onDevice(what, output);
    if (requested === "auto") this.#autoAllReduce(what, input, x, output, op, options, as);
    else this.#launch("all-reduce", requested, what, input, x, output, op, options, {}, as);
    return output;
  }

  /**
   * Every rank's `input`, in rank order, into `output` (world x input elements). With `copy_engine`,
   * `progressFlags` (u32, at least world elements) is zeroed when the call starts and flag r set to 1
   * once rank r's chunk has landed in `output`, each by the stream itself (cuStreamWriteValue32): a
   * kernel ordered after the call's start may wait on them (gemm's row-flags ready policy does).
   */
  allGather(
    input: CollectiveInput,
    output: Tensor,
    options: CollectiveOptions & { algorithm?: GpuAllGatherAlgorithm; progressFlags?: Tensor } = {},
  ): Tensor {
    return this.#allGather(input, output, options);
  }

  /** allGather, fingerprinted `as` the fused call it runs for (if any). */
  #allGather(
    input: CollectiveInput,
    output: Tensor,
    options: CollectiveOptions & { algorithm?: GpuAllGatherAlgorithm; progressFlags?: Tensor },
    as?: CallAs,
  ): Tensor {
    const what = "allGather";
    checkTensorArg(what, "input", input);
    checkTensorArg(what, "output", output);
    const x = this.#local(input, what);
    const requested = options.algorithm ?? "auto";
    checkAlgorithm(what, requested, GPU_ALL_GATHER_ALGORITHMS);
    const algorithm =
      requested === "auto" ? this.autoAlgorithm("all-gather", x.nbytes, stagedBytes(input, x)) : requested;
    const flags = options.progressFlags;
    if (flags) {
      if (algorithm !== "copy_engine")
        throw new InvalidArgumentError(`${what}: progressFlags come with algorithm copy_engine only`);
      if (flags.dtype !== "u32" || flags.numel < this.#group.worldSize)
        throw new InvalidArgumentError(
          `${what}: progressFlags must be u32 with at least ${this.#group.worldSize} elements`,
        );
      this.#onDevice(what, flags);
    }
    checkSameDtype(what, x, output);
    checkNumel(what, "output", output, x.numel * this.#group.worldSize);
    this.#onDevice(what, output);
    this.#launch("all-gather", algorithm, what, input, x, output, "sum", options, flags ? { flags } : {}, as);
    return output;
  }

  /** Chunk `rank` of the reduction of every rank's `input` (world x output elements), into `output`. */
  reduceScatter(
    input: CollectiveInput,
    output: Tensor,
    options: CollectiveOptions & { op?: ReduceOp; algorithm?: GpuReduceScatterAlgorithm } = {},
  ): Tensor {
    return this.#reduceScatter(input, output, options);
  }

  /** reduceScatter, fingerprinted `as` the fused call it runs for (if any). */
  #reduceScatter(
    input: CollectiveInput,
    output: Tensor,
    options: CollectiveOptions & { op?: ReduceOp; algorithm?: GpuReduceScatterAlgorithm },
    as?: CallAs,
  ): Tensor {
    const what = "reduceScatter";
    checkTensorArg(what, "input", input);
    checkTensorArg(what, "output", output);
    const x = this.#local(input, what);
    const op = options.op ?? "sum";
    const requested = options.algorithm ?? "auto";
    checkReduction(what, op, x.dtype);
    checkAlgorithm(what, requested, GPU_REDUCE_SCATTER_ALGORITHMS);
    checkSameDtype(what, x, output);
    checkDivisible(what, x, this.#group.worldSize);
    checkNumel(what, "output", output, x.numel / this.#group.worldSize);
    this.#onDevice(what, output);
    if (requested === "auto") this.#autoReduceScatter(what, input, x, output, op, options, as);
    else this.#launch("reduce-scatter", requested, what, input, x, output, op, options, {}, as);
    return output;
  }

  /**
   * auto's all-reduce of `input` (local tensor `x`) into `output`: its pick for the whole call, or where no
   * rank-order algorithm can take it whole (a plain input larger than the staging buffer), consecutive
   * pieces of x, each a call of its own with auto's pick for its size (see pieceBytes): the same bits.
   */
  #autoAllReduce(
    what: string,
    input: CollectiveInput,
    x: Tensor,
    output: Tensor,
    op: ReduceOp,
    options: CollectiveOptions,
    as?: CallAs,
  ): void {
    // Two-shot on a symmetric input out of place takes the staging buffer as scratch of the input's size.
    const inPlace = !(input instanceof Tensor) && output.ptr === x.ptr;
    const whole = this.#autoWhole("all-reduce", x.nbytes, inPlace ? 0 : x.nbytes);
    if (whole) return this.#launch("all-reduce", whole, what, input, x, output, op, options, {}, as);
    // A piece's output must not be a later piece's input: x itself, or memory apart from it.
    if (overlaps(output, x) && !sameSpan(output, x))
      throw new InvalidArgumentError(
        `${what}: the output overlaps the input without being it, and the call runs in pieces (the input is larger than the ${this.capacityBytes}-byte staging buffer); pass the input itself or memory apart from it as output`,
      );
    const step = this.#pieceElements("all-reduce", what, x.elementBytes);
    const xs = x.view([x.numel]);
    const outs = output.view([output.numel]);
    for (let at = 0; at < x.numel; at += step) {
      const end = Math.min(x.numel, at + step);
      const piece = xs.slice(at, end);
      // A plain piece as large as the staging buffer: two-shot at the latest takes it.
      const a = this.#autoWhole("all-reduce", piece.nbytes, piece.nbytes)!;
      this.#launch("all-reduce", a, what, piece, piece, outs.slice(at, end), op, options, {}, as);
    }
  }

  /**
   * auto's reduce-scatter: its pick for the whole call, or where no rank-order algorithm can take it whole
   * (a plain input larger than the staging buffer), pieces of the output, each a copy-engine call that
   * pushes every rank's piece from where it lies in the input (see pieceBytes): the same bits.
   */
  #autoReduceScatter(
    what: string,
    input: CollectiveInput,
    x: Tensor,
    output: Tensor,
    op: ReduceOp,
    options: CollectiveOptions,
    as?: CallAs,
  ): void {
    const whole = this.#autoWhole("reduce-scatter", output.nbytes, stagedBytes(input, x));
    if (whole) return this.#launch("reduce-scatter", whole, what, input, x, output, op, options, {}, as);
    const chunk = output.numel;
    // A piece's output must not be what a later piece pushes: memory apart from the input, or exactly one
    // rank's chunk of it (each piece of a chunk is read before it is written).
    const at = output.ptr - x.ptr;
    const oneChunk = at >= 0n && at % BigInt(output.nbytes) === 0n;
    if (overlaps(output, x) && !oneChunk)
      throw new InvalidArgumentError(
        `${what}: the output overlaps the input other than as one rank's chunk, and the call runs in pieces (the input is larger than the ${this.capacityBytes}-byte staging buffer); pass memory apart from the input as output`,
      );
    const step = this.#pieceElements("reduce-scatter", what, x.elementBytes);
    const xs = x.view([x.numel]);
    const outs = output.view([chunk]);
    const tail = (this.#group.worldSize - 1) * chunk;
    for (let from = 0; from < chunk; from += step) {
      const end = Math.min(chunk, from + step);
      // From rank 0's piece to the last rank's, chunk elements apart (CollectiveCall.chunkStride).
      const piece = xs.slice(from, tail + end);
      const out = outs.slice(from, end);
      this.#launch(
        "reduce-scatter",
        REDUCE_SCATTER_PIECES,
        what,
        piece,
        piece,
        out,
        op,
        options,
        { chunkStride: output.nbytes },
        as,
      );
    }
  }

  /** Elements per piece of a call auto runs in pieces (see pieceBytes). */
  #pieceElements(collective: CollectiveName, what: string, elementBytes: number): number {
    const bytes = pieceBytes(collective, this.#capacity);
    if (bytes === 0)
      throw new InvalidArgumentError(
        `${what}: the ${this.capacityBytes}-byte staging buffer holds no piece of this call; pass a larger stagingBytes to init()`,
      );
    return bytes / elementBytes;
  }

  /** Runs `algorithm`'s record (which turns a mailbox or staging need it cannot meet into a typed
   * error before anything runs). `extra`: all-gather's progress flags, a piece's chunk stride; `as`: the
   * fused call this one runs for, whose kind and shape its fingerprint carries. */
  #launch(
    collective: CollectiveName,
    algorithm: string,
    what: string,
    input: CollectiveInput,
    x: Tensor,
    output: Tensor,
    op: ReduceOp,
    options: CollectiveOptions,
    extra: { flags?: Tensor; chunkStride?: number } = {},
    as?: CallAs,
  ): void {
    const stream = this.#stream(options);
    const tag = this.#tag(
      {
        kind: as?.kind ?? (`${collective}/${algorithm}` as CallKind),
        dtype: x.dtype,
        op: collective === "all-gather" ? undefined : op,
        count: x.numel,
        dims: as?.dims,
      },
      stream,
    );
    const call: CollectiveCall = { what, input, x, output, op, stream, flags: extra.flags, tag, ...extra };
    algorithmRecord(collective, algorithm).launch(this.#ctx, call);
  }

  /** The next collective call's fingerprint (src/distributed/fingerprint.ts), for work enqueued on
   * `stream`. A call on a group whose kernels already gave up is refused: its signals are out of step. */
  #tag(shape: CallShape, stream: Stream): CallTag {
    this.#group.watch.throwIfFailed();
    this.#group.noteCapture(stream);
    return fingerprint(this.#seq++, shape);
  }

  #stream(options: CollectiveOptions): Stream {
    return options.stream ?? defaultStream(this.#group.device);
  }

  /**
   * All-gather + GEMM, a column-parallel linear layer: `aShard` [rows, k] on each rank (plain, or a
   * symmetric tensor read in place), `b` this rank's weight [n, k] (or [k, n] with layoutB "kn"); returns
   * out = gather(aShard) x b^T ([world x rows, n], bf16) and the gathered A ([world x rows, k]), both
   * allocated unless given. bf16, or fp8 e4m3 with per-tensor scales (scaleA the same on every rank).
   * `fused` runs the GEMM while the peers' shards arrive (see src/ops/fused/fused-matmul.ts); the result is
   * bitwise the GEMM of the gathered A. A plain shard is staged in the group's symmetric buffer.
   */
  allGatherMatmul(
    aShard: FusedInput,
    b: Tensor,
    options: AllGatherMatmulOptions<Tensor> &
      CollectiveOptions & { algorithm?: AllGatherMatmulAlgorithm } = {},
  ): { out: Tensor; gathered: Tensor } {
    return this.#fused.allGatherMatmul(aShard, b, {
      ...options,
      stream: this.#stream(options),
    });
  }

  /**
   * GEMM + reduce-scatter, a row-parallel linear layer: `a` [m, k] (this rank's slice of the contraction),
   * `b` [n, k] (or [k, n]); returns this rank's rows [rank x m / world, ...) of the sum over ranks of
   * a x b^T, [m / world, n] bf16. Every rank's partial is rounded to bf16 and the partials are summed in
   * f32 in rank order, rounded once: every run and every rank gives the same bits, equal to symmkit's
   * GEMM then reduce-scatter. `fused` needs m x n x 2 bytes of the staging buffer.
   */
  matmulReduceScatter(
    a: Tensor,
    b: Tensor,
    options: FusedMatmulOptions<Tensor> &
      CollectiveOptions & { algorithm?: MatmulReduceScatterAlgorithm } = {},
  ): Tensor {
    return this.#fused.matmulReduceScatter(a, b, {
      ...options,
      stream: this.#stream(options),
    });
  }

  /**
   * GEMM + all-reduce, a row-parallel linear layer: `a` [m, k] (this rank's slice of the contraction),
   * `b` this rank's weight [n, k] (or [k, n] with layoutB "kn"); returns the sum over ranks of a x b^T,
   * [m, n] bf16 on every rank (each rank's partial rounded to bf16, summed in rank order in f32, rounded
   * once), or with `rmsNorm` allReduceRmsNorm of the partial (out its output). Algorithms: `fused` (one
   * split-K GEMM whose epilogue pushes its tiles to every rank and sums them as they land; it needs
   * world x m x n x 2 bytes of the staging buffer), `sequential` (auto: symmkit's GEMM, then symmkit's
   * all-reduce or allReduceRmsNorm; the same bits as fused) and `nccl_cublaslt`.
   */
  matmulAllReduce(
    a: Tensor,
    b: Tensor,
    options: MatmulAllReduceOptions<Tensor> &
      CollectiveOptions & { algorithm?: MatmulAllReduceAlgorithm } = {},
  ): Tensor {
    return this.#fused.matmulAllReduce(a, b, { ...options, stream: this.#stream(options) });
  }

  /**
   * All-reduce + bias + residual + RMSNorm, the op after a row-parallel layer: with s = the sum of `x`
   * ([rows, hidden], bf16 or f16) over ranks rounded to its dtype, h = (s + bias) + residual rounded,
   * returns output = h / sqrt(mean(h^2) + eps) x weight over each row (x's dtype, or fp8e4m3 times
   * 1 / outputScale) and writes h to residualOut when given. f32 arithmetic in one fixed order: every
   * algorithm and every rank gives the same bits (device/include/symmkit/fused/ar_rms_norm.cuh).
   */
  allReduceRmsNorm(
    x: ArNormInput,
    options: AllReduceRmsNormOptions<Tensor> & CollectiveOptions & { algorithm?: ArNormAlgorithm },
  ): ArNormResult {
    checkTensorArg("allReduceRmsNorm", "x", x);
    return this.#arNorm.run(x, options, options?.stream ?? defaultStream(this.#group.device));
  }

  /** What auto picks for allReduceRmsNorm on `bytes` of x per rank in `rows` rows. */
  autoArNormAlgorithm(bytes: number, rows: number): Exclude<ArNormAlgorithm, "auto"> {
    return this.#arNorm.autoAlgorithm(bytes, rows);
  }

  /**
   * `x` to `peer`, which receives it with recv (or sendRecv) into a tensor of the same dtype and size.
   * Messages between a pair arrive in the order they were sent; both ranks must name the same
   * algorithm. put (auto): this rank's blocks store x into the peer's inbox, in chunks, over NVLink;
   * nccl: NCCL's send. Either way the call completes on the stream once the peer has the message.
   */
  send(
    x: Tensor,
    peer: number,
    options: CollectiveOptions & { algorithm?: GpuSendRecvAlgorithm } = {},
  ): void {
    const [stream, algorithm] = this.#pointToPoint("send", x, peer, options);
    this.#exchange.send(x, peer, algorithm, stream);
  }

  /** Into `out`, what `peer` sent. Returns `out`. */
  recv(
    out: Tensor,
    peer: number,
    options: CollectiveOptions & { algorithm?: GpuSendRecvAlgorithm } = {},
  ): Tensor {
    const [stream, algorithm] = this.#pointToPoint("recv", out, peer, options);
    this.#exchange.recv(out, peer, algorithm, stream);
    return out;
  }

  /** `x` to `peer` and `out` from it, in one call on both ranks (sizes may differ; no shared memory). */
  sendRecv(
    x: Tensor,
    out: Tensor,
    peer: number,
    options: CollectiveOptions & { algorithm?: GpuSendRecvAlgorithm } = {},
  ): Tensor {
    const what = "sendRecv";
    checkSendRecv(what, x, out, overlaps);
    const [stream, algorithm] = this.#pointToPoint(what, x, peer, options);
    this.#onDevice(what, out);
    this.#exchange.sendRecv(x, out, peer, algorithm, stream);
    return out;
  }

  /** Checks a point-to-point call; its stream and algorithm. Not a group call: the group's call count
   * stays as it is (the pair's own count numbers put's messages). */
  #pointToPoint(
    what: string,
    t: Tensor,
    peer: number,
    options: CollectiveOptions & { algorithm?: GpuSendRecvAlgorithm },
  ): [Stream, Exclude<GpuSendRecvAlgorithm, "auto">] {
    checkTensorArg(what, "tensor", t);
    checkPeer(what, peer, this.#group.worldSize, this.#group.rank);
    const algorithm = options.algorithm ?? "auto";
    checkAlgorithm(what, algorithm, GPU_SEND_RECV_ALGORITHMS);
    this.#onDevice(what, t);
    const stream = this.#stream(options);
    this.#group.watch.throwIfFailed();
    this.#group.noteCapture(stream);
    return [stream, algorithm === "auto" ? "put" : algorithm];
  }

  /**
   * Chunk j of `x` to rank j; chunk i of `out` from rank i (world equal chunks). Returns `out`. A
   * symmetric x is read in place by pull. auto: pull when the staging buffer holds x, else nccl.
   */
  allToAll(
    input: ExchangeInput,
    out: Tensor,
    options: CollectiveOptions & { algorithm?: GpuAllToAllAlgorithm } = {},
  ): Tensor {
    const what = "allToAll";
    checkTensorArg(what, "x", input);
    const x = this.#local(input, what);
    checkAllToAll(what, this.#group.worldSize, x, out, overlaps);
    const requested = options.algorithm ?? "auto";
    checkAlgorithm(what, requested, GPU_ALL_TO_ALL_ALGORITHMS);
    this.#onDevice(what, out);
    const algorithm = requested === "auto" ? this.#exchange.autoAllToAll(input, x) : requested;
    this.#exchange.allToAll(what, input, x, out, algorithm, this.#stream(options));
    return out;
  }

  /**
   * Uneven all-to-all by rows of x's first dimension: x's first sendCounts[0] rows to rank 0, the next
   * sendCounts[1] to rank 1, ...; out receives each rank's rows for this rank, packed in rank order.
   *
   * Counts as a host array (algorithms nccl, the auto pick, and copy_engine): they are exchanged first
   * (recvCounts, when given, is checked against them) and judged alike on every rank: a call that cannot
   * run (an out too small, wrong recvCounts, for copy_engine an x beyond the staging buffer) throws on
   * every rank with nothing written. Returns out and the rows received from each rank. Both wait on the
   * host for the counts, so neither can be captured in a CUDA graph.
   *
   * Counts as an i32 tensor of world elements on this GPU (algorithm pull, the auto pick): no host wait,
   * so the call can be captured. x is staged in the staging buffer; one kernel reads every rank's counts,
   * judges the call alike on every rank and copies this rank's rows. Returns out and `recvCountsOut` (a
   * new i32 tensor unless given; needed inside a capture) with the rows received from each rank. A call
   * the GPU refuses (a rank's counts adding up to more rows than its x has, or negative; rows of
   * another size than rank 0's; an out too
   * small; an x beyond the staging buffer) writes no row, sets the counts to -1 and makes the next
   * group.synchronize() throw InvalidArgumentError saying why, on every rank. x may hold more rows than
   * the counts send (a buffer of fixed capacity, as in a replayed graph): its first ones go.
   */
  allToAllV(
    x: Tensor,
    out: Tensor,
    sendCounts: readonly number[],
    options?: CollectiveOptions & { recvCounts?: readonly number[]; algorithm?: GpuAllToAllVAlgorithm },
  ): { output: Tensor; recvCounts: number[] };
  allToAllV(
    x: Tensor,
    out: Tensor,
    sendCounts: Tensor,
    options?: CollectiveOptions & { recvCountsOut?: Tensor; algorithm?: GpuAllToAllVAlgorithm },
  ): { output: Tensor; recvCounts: Tensor };
  allToAllV(
    x: Tensor,
    out: Tensor,
    sendCounts: readonly number[] | Tensor,
    options: CollectiveOptions & {
      recvCounts?: readonly number[];
      recvCountsOut?: Tensor;
      algorithm?: GpuAllToAllVAlgorithm;
    } = {},
  ): { output: Tensor; recvCounts: number[] | Tensor } {
    const what = "allToAllV";
    const world = this.#group.worldSize;
    const requested = options.algorithm ?? "auto";
    checkAlgorithm(what, requested, GPU_ALL_TO_ALL_V_ALGORITHMS);
    if (sendCounts instanceof Tensor) {
      checkAllToAllVTensors(what, x, out, overlaps);
      if (requested !== "auto" && requested !== "pull")
        throw new InvalidArgumentError(
          `${what}: counts on the device go with algorithm pull (or auto); ${requested} takes them as an array`,
        );
      if (options.recvCounts !== undefined)
        throw new InvalidArgumentError(
          `${what}: recvCounts (the rows expected) goes with counts as an array; with counts on the device, read the returned recvCounts`,
        );
      const counts = [sendCounts, options.recvCountsOut].filter((t) => t !== undefined);
      for (const t of counts)
        if (t.dtype !== "i32" || t.numel !== world)
          throw new InvalidArgumentError(
            `${what}: counts on the device are i32 tensors of ${world} elements`,
          );
      const into = options.recvCountsOut;
      if (into && [x, out].some((t) => overlaps(t, into)))
        throw new InvalidArgumentError(`${what}: recvCountsOut overlaps x or out: pass a tensor of its own`);
      for (const t of [x, out, ...counts]) this.#onDevice(what, t);
      const stream = this.#stream(options);
      if (options.recvCountsOut === undefined && Graph.activeCapture(stream) !== undefined)
        throw new InvalidArgumentError(
          `${what}: inside a CUDA graph capture, pass recvCountsOut (i32, ${world} elements) for the counts received`,
        );
      const recvCounts =
        options.recvCountsOut ?? Tensor.empty([world], "i32", { device: this.#group.device, stream });
      this.#exchange.allToAllVOnDevice(x, out, sendCounts, recvCounts, stream);
      return { output: out, recvCounts };
    }
    checkAllToAllV(what, world, x, out, sendCounts, overlaps);
    if (options.recvCounts !== undefined) checkCountList(what, "recvCounts", options.recvCounts, world);
    if (options.recvCountsOut !== undefined)
      throw new InvalidArgumentError(
        `${what}: recvCountsOut goes with counts on the device; with an array the counts come back as one`,
      );
    if (requested === "pull")
      throw new InvalidArgumentError(
        `${what}: algorithm pull takes the counts on the device (an i32 tensor of ${world} elements); with an array, use nccl or copy_engine`,
      );
    this.#onDevice(what, x);
    this.#onDevice(what, out);
    // auto is NCCL's until copy_engine is measured against it.
    const algorithm = requested === "auto" ? "nccl" : requested;
    const recvCounts = this.#exchange.allToAllV(
      what,
      x,
      out,
      sendCounts,
      options.recvCounts,
      algorithm,
      this.#stream(options),
    );
    return { output: out, recvCounts };
  }

  /**
   * MoE dispatch: each (token, slot) pair of `tokens` [tokens, hidden] (bf16, or fp8e4m3 with per-token
   * `scales`) to its expert's owner, expert-major (layout: src/ops/moe/checks.ts), with its weight (and
   * scale), the rows per local expert, and the handle combine takes. The group's staging buffer holds
   * the staged tokens. Algorithm pull waits on the host for the peers' counts (to size the outputs and
   * judge the call alike on every rank): a refused call throws on every rank, and it cannot be captured.
   * Algorithm pull_device (auto inside a capture or with `into`) needs maxRows: a kernel judges and routes, no host
   * wait, so it can be captured, with `into` (an eager pull_device result of the same shapes, whose
   * tensors it writes again); a refused call writes nothing, sets counts to -1 on every rank, and the next
   * group.synchronize() throws InvalidArgumentError saying why.
   */
  dispatch(
    tokens: Tensor,
    topkIdx: Tensor,
    topkWeights: Tensor,
    options: DispatchOptions<Tensor> & CollectiveOptions & { algorithm?: GpuMoeAlgorithm },
  ): DispatchResult<Tensor> {
    const what = "dispatch";
    const p = checkDispatch(what, this.#group.worldSize, tokens, topkIdx, topkWeights, options);
    checkAlgorithm(what, options.algorithm ?? "auto", GPU_MOE_ALGORITHMS);
    for (const t of [tokens, topkIdx, topkWeights, options.scales]) if (t) this.#onDevice(what, t);
    return this.#moe.dispatch(p, tokens, topkIdx, topkWeights, options, this.#stream(options));
  }

  /**
   * MoE combine: `expertOut` (this rank's experts' output, row for row as dispatched, bf16) back to the
   * tokens of `handle`'s dispatch, each the weighted sum over its slots in slot order (f32, every
   * operation rounded, then bf16). A symmetric `expertOut` (every rank passes one of this group's) is read
   * in place by the peers, with no copy into the staging buffer; a plain one is staged. Graph-capturable.
   */
  combine(
    expertOut: CollectiveInput,
    handle: MoeHandle<Tensor>,
    options: CombineOptions<Tensor> & CollectiveOptions & { algorithm?: GpuMoeAlgorithm } = {},
  ): Tensor {
    const what = "combine";
    const { rank, worldSize } = this.#group;
    checkTensorArg(what, "expertOut", expertOut);
    const x = this.#local(expertOut, what);
    checkCombine(what, rank, worldSize, x, handle, options.out, !(expertOut instanceof Tensor));
    checkAlgorithm(what, options.algorithm ?? "auto", GPU_MOE_ALGORITHMS);
    if (options.out) {
      this.#onDevice(what, options.out);
      if (overlaps(options.out, x)) throw new InvalidArgumentError(`${what}: out overlaps expertOut`);
    }
    return this.#moe.combine(expertOut, x, handle, options, this.#stream(options));
  }

  /** The fused matmuls' auto rules, for inspection (see FusedMatmul). */
  get fusedMatmul(): Pick<
    FusedMatmul,
    "autoAllGatherMatmul" | "autoMatmulReduceScatter" | "autoMatmulAllReduce" | "scatterFlagCapacity"
  > {
    return this.#fused;
  }

  /**
   * A barrier on the GPUs: a kernel on `stream` that completes on each rank once every rank's has started
   * (release/acquire: what any rank wrote before it is visible to every rank after it). With `holdNs`
   * it then waits that long, so that work the host enqueues behind it starts on all ranks within about
   * one barrier latency of each other (benchmarks use it to start timed work together).
   */
  barrier(options: CollectiveOptions & { holdNs?: number } = {}): void {
    const stream = this.#stream(options);
    this.#barrierHold.launch(
      { grid: 1, block: BARRIER_KERNEL_THREADS, stream },
      this.#ctx.stagingView,
      options.holdNs ?? 0,
      this.#tag({ kind: "barrier", count: 0 }, stream),
    );
  }

  /** The local tensor of an input, checked to be on this group's GPU. */
  #local(input: CollectiveInput, what: string): Tensor {
    const x = input instanceof Tensor ? input : input.tensor;
    if (
      !(input instanceof Tensor) &&
      (input.worldSize !== this.#group.worldSize ||
        input.rank !== this.#group.rank ||
        input.ranks.some((r, i) => r !== this.#group.ranks[i]))
    ) {
      throw new InvalidArgumentError(`${what}: the symmetric tensor belongs to another group`);
    }
    if (!(input instanceof Tensor)) input.checkBarrierRoom(what, this.#group.device.props.smCount);
    this.#onDevice(what, x);
    return x;
  }

  #onDevice(what: string, t: Tensor): void {
    if (t.device !== this.#group.device) {
      throw new InvalidArgumentError(
        `${what}: tensors must be on cuda:${this.#group.device.ordinal}, this one is on cuda:${t.device.ordinal}`,
      );
    }
  }

  /** What the launches use of this object (see CollectiveContext). */
  #context(): CollectiveContext {
    const group = this.#group;
    const device = group.device;
    const world = group.worldSize;
    const staging = this.#staging;
    const stagingView = staging.deviceView();
    const smCount = device.props.smCount;
    const blocks = (bytes: number, threads = THREADS): number =>
      Math.max(1, Math.min(smCount, Math.ceil(bytes / 16 / threads)));
    const capacityBytes = staging.tensor.nbytes;
    return {
      rank: group.rank,
      world,
      comm: this.#comm,
      staging,
      stagingView,
      capacityBytes,
      reducing: <K extends ReducingKernel>(kernel: K, dtype: DType, op: ReduceOp) =>
        this.#reducingKernels.get(kernel, dtype, op) as Kernel<ReducingParams[K]>,
      allGatherKernel: <K extends AllGatherKernel>(kernel: K) => {
        let k = this.#allGatherKernels.get(kernel);
        if (!k) {
          k = sharedModule(allGatherProgram(kernel), device).kernel(
            allGatherExpr(kernel, world),
            ALL_GATHER_PARAMS[kernel],
          );
          this.#allGatherKernels.set(kernel, k);
        }
        return k as Kernel<AllGatherParams[K]>;
      },
      groupBarrier: (view, stream, tag, step = 0) =>
        this.#groupBarrier.launch({ grid: 1, block: BARRIER_KERNEL_THREADS, stream }, view, tag, step),
      stage: (c, inPlaceOk = false) => {
        if (!(c.input instanceof Tensor)) {
          const aliased = overlaps(c.output, c.x);
          if (!aliased || (inPlaceOk && c.output.ptr === c.x.ptr && c.output.nbytes === c.x.nbytes))
            return [c.input.deviceView(), 0n];
        }
        checkCapacity(c.what, c.x.nbytes, capacityBytes);
        return [stagingView, c.x.ptr];
      },
      push: (algorithm, k, c, n, bytes) => this.#push(algorithm, k, c, n, bytes, blocks),
      blocks,
    };
  }

  /**
   * What auto runs for `bytes` (per rank: all-reduce and all-gather input, reduce-scatter output): the
   * tune table's pick, else the registry's built-in rule, the first that can run here: a mailbox
   * algorithm must fit the mailbox slot, and a staging one the staging buffer, which must hold `staged`
   * bytes (a plain input's size; 0 for a symmetric input; the copy-engine reduce-scatter needs world x
   * `bytes` either way). For all-reduce and reduce-scatter only algorithms that give the rank-order bits
   * (f32 accumulation in rank order, one rounding) are auto's, never NCCL's; where none can take the call
   * whole (a plain input larger than the staging buffer) auto runs it in pieces the staging buffer holds,
   * each a call of its own, and this names the pieces' algorithm (all-reduce: auto's pick for a piece;
   * reduce-scatter: copy_engine). All-gather moves bits, so NCCL is among its picks.
   */
  autoAlgorithm<C extends CollectiveName>(collective: C, bytes: number, staged = 0): GpuAlgorithm<C> {
    const whole = this.#autoWhole(collective, bytes, staged);
    if (whole) return whole;
    if (collective === "reduce-scatter") return REDUCE_SCATTER_PIECES as GpuAlgorithm<C>;
    const piece = Math.min(bytes, pieceBytes(collective, this.#capacity));
    return this.#autoWhole(collective, piece, piece)!;
  }

  /** auto's pick for the whole call (see autoAlgorithm); undefined: none can take it whole. */
  #autoWhole<C extends CollectiveName>(
    collective: C,
    bytes: number,
    staged: number,
  ): GpuAlgorithm<C> | undefined {
    const cap = this.#capacity;
    // The table names rank-order algorithms only: its loader refuses a baseline (src/ops/tune-table.ts).
    const tuned = this.#tuned && pickRule(this.#tuned.rules[collective], bytes);
    if (tuned && canRun(collective, tuned, bytes, staged, cap)) return tuned as GpuAlgorithm<C>;
    return builtInPick(collective, bytes, staged, cap);
  }

  /** Whether `algorithm` can run `bytes` per rank here (see autoAlgorithm). */
  canRun(collective: CollectiveName, algorithm: string, bytes: number, staged = 0): boolean {
    return canRun(collective, algorithm, bytes, staged, this.#capacity);
  }

  /**
   * A mailbox kernel for `algorithm`: `n` elements (ll: bytes), `bytes` per rank as its
   * mailboxBytesPerPeer counts them; what it sends each peer is checked against the slot before anything
   * runs.
   */
  #push(
    algorithm: CollectiveAlgorithm,
    k: Kernel<typeof MAILBOX_PARAMS>,
    c: CollectiveCall,
    n: number,
    bytes: number,
    blocks: (bytes: number, threads?: number) => number,
  ): void {
    const m = this.#mailbox;
    const bytesPerPeer = algorithm.mailboxBytesPerPeer(bytes, this.#group.worldSize);
    if (bytesPerPeer > m.slotBytes)
      throw new InvalidArgumentError(
        `${c.what}: ${bytesPerPeer} bytes per peer exceed the ${m.slotBytes}-byte mailbox slot; use another algorithm, or a larger mailboxSlotBytes`,
      );
    // blocks() counts 16-byte vectors, one per thread.
    const vectorBytes = (bytesPerPeer * 16) / algorithm.mailboxThreadBytes!;
    const fewSms = vectorBytes <= 16 * MAILBOX_SMALL_THREADS * this.#group.device.props.smCount;
    const threads = fewSms ? MAILBOX_SMALL_THREADS : THREADS;
    k.launch(
      { grid: blocks(vectorBytes, threads), block: threads, stream: c.stream },
      m.view,
      c.x,
      c.output,
      n,
      m.state.ptr,
      m.stride,
      c.tag,
    );
  }

  /** Collective: releases the staging buffer and the mailbox. */
  async dispose(): Promise<void> {
    this.#fused.dispose();
    this.#moe.dispose();
    this.#exchange.dispose();
    await this.#staging.dispose();
    await this.#mailbox.buffers.dispose();
    await this.#inbox.dispose();
    this.#mailbox.state.dispose();
  }

  static {
    localTurns = {
      calls: (c) => c.#seq,
      spendCall: (c) => void c.#seq++,
      messages: (c) => c.#exchange.messages,
      skipMessages: (c, peer, sends, receives) => c.#exchange.skip(peer, sends, receives),
    };
    // A call refused before it took its number takes it all the same (see takeTurns). The fused
    // matmuls, allReduceRmsNorm, the exchange and MoE take theirs through #tag, or through the calls
    // below: whatever they refuse, the wrapper of the call that reached them sees.
    const call: Turns<GpuCollectives> = {
      at: localTurns.calls,
      spend: (c) => {
        localTurns.spendCall(c);
        return SPENT_CALL;
      },
    };
    // put and copy_engine number a pair's messages (nccl has no numbers: spending one is harmless).
    const message = (sends: boolean, receives: boolean): Turns<GpuCollectives> => ({
      at: localTurns.messages,
      // The peer: send(x, peer), recv(out, peer), sendRecv(x, out, peer).
      spend: (self, _a, b, c) =>
        localTurns.skipMessages(self, sends && receives ? c : b, sends, receives) ? SPENT_MESSAGE : undefined,
    });
    takeCollectiveTurns(GpuCollectives.prototype, call, message);
  }
}

/** What the staging buffer must hold for `input`: a plain tensor is copied in, a symmetric one read in
 * place. */
function stagedBytes(input: CollectiveInput, x: Tensor): number {
  return input instanceof Tensor ? x.nbytes : 0;
}
