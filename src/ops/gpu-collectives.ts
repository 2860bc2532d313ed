// The collectives on GPU symmetric memory: validate (src/ops/validate.ts, shared with the CPU backend),
// pick an algorithm, launch the kernel specialised for the dtype, op and world size, or hand over to
// NCCL. Pull kernels copy a plain input into the group's symmetric staging buffer themselves, so a call
// is one kernel; mailbox kernels (lamport, ll) push the input into every peer's mailbox, with no barrier.
import { InvalidArgumentError } from "../errors.js";
import type { NcclComm } from "../distributed/nccl-comm.js";
import type { ProcessGroup } from "../distributed/process-group.js";
import type { SymmetricTensor } from "../distributed/symmetric-memory.js";
import { copyDeviceToDevice, DeviceMemory, memset, writeValue32 } from "../runtime/memory.js";
import { barrierLoopExpr, SYMM_VIEW_PARAM, SYNC_KERNELS } from "../distributed/sync-kernels.js";
import type { Kernel, ParamType } from "../runtime/kernel.js";
import { sharedModule, type Module } from "../runtime/module.js";
import { defaultStream, type Stream } from "../runtime/stream.js";
import { Tensor } from "../runtime/tensor.js";
import {
  allGatherExpr,
  allGatherProgram,
  COLL_PARAMS,
  COPY_ENGINE_REDUCE_PARAMS,
  MAILBOX_PARAMS,
  MAILBOX_STATE_BYTES,
  reducingExpr,
  reducingProgram,
  TWO_SHOT_PARAMS,
  type AllGatherKernel,
  type ReducingKernel,
} from "./coll-programs.js";
import {
  checkAlgorithm,
  checkCapacity,
  checkDivisible,
  checkNumel,
  checkReduction,
  checkSameDtype,
  checkTensorArg,
  type ReduceOp,
} from "./validate.js";
import { loadTuneTable, pickRule, type LoadedTuneTable, type TunedCollective } from "./tune-table.js";
import {
  FUSED_TUNABLE,
  type AllGatherMatmulAlgorithm,
  type AllGatherMatmulOptions,
  type FusedMatmulOptions,
  type MatmulReduceScatterAlgorithm,
} from "./fused-checks.js";
import { FusedMatmul, STAGING_PAD_BYTES, type FusedInput } from "./fused-matmul.js";

/** lamport: one-shot by pushing into peers' mailboxes (coll/mailbox.cuh), no barrier; lamport_two_shot:
 * reduce-scatter and all-gather the same way, in one kernel. Up to what fits the mailbox slot. */
export const GPU_ALL_REDUCE_ALGORITHMS = [
  "auto",
  "one_shot",
  "two_shot",
  "lamport",
  "lamport_two_shot",
  "nccl",
] as const;
export type GpuAllReduceAlgorithm = (typeof GPU_ALL_REDUCE_ALGORITHMS)[number];
/** reduce-scatter's copy_engine: the copy engines push each peer its chunk (rank-rotated), then a kernel
 * reduces the chunks that landed here, locally. */
export const GPU_REDUCE_SCATTER_ALGORITHMS = ["auto", "pull", "lamport", "copy_engine", "nccl"] as const;
export type GpuReduceScatterAlgorithm = (typeof GPU_REDUCE_SCATTER_ALGORITHMS)[number];
/** all-gather also runs on the copy engines (one copy per peer chunk, rank-rotated, with progress flags)
 * and as ll, pushing flagged words into peers' mailboxes (coll/mailbox.cuh), no barrier. */
export const GPU_ALL_GATHER_ALGORITHMS = ["auto", "pull", "ll", "copy_engine", "nccl"] as const;
export type GpuAllGatherAlgorithm = (typeof GPU_ALL_GATHER_ALGORITHMS)[number];

/**
 * auto's rule until `symmkit tune` measures the machine: one-shot up to this many bytes, two-shot above,
 * by world size. From bf16 runs on 2 and 4 H200s (bench/results/h200x2, h200x4): on 2 GPUs one-shot won
 * at every size from 4 KiB to 64 MiB (it moves half the bytes over NVLink that two-shot does there); on 4
 * the two are level at 256 KiB and two-shot wins from 1 MiB. 3 GPUs, unmeasured, follow 4.
 */
export function oneShotMaxBytes(world: number): number {
  return world === 2 ? Number.MAX_SAFE_INTEGER : 256 * 1024;
}
/**
 * auto's all-gather rule: the copy engines from this many output bytes, the pull kernel below. On 4
 * H200s (bench/results/h200x4/all-gather.json) the copy engines cost ~31 us at any small size (four copy
 * nodes and two barrier kernels) but win from 64 MiB (192.6 against 315.5 us; NCCL 199.5), and the two
 * are level at 16 MiB.
 */
export const COPY_ENGINE_ALL_GATHER_MIN_BYTES = 16 * 1024 * 1024;
/** auto's rule for the mailbox (lamport, ll) algorithms: up to this many bytes pushed to each peer, and
 * within the mailbox slot. */
export const MAILBOX_AUTO_MAX_BYTES = 256 * 1024;
/** reduce-scatter's: lamport up to this many output bytes (4 H200s: 13.9 us against pull's 18.7 at 1 MiB
 * of output, level at 4 MiB). */
export const LAMPORT_REDUCE_SCATTER_MAX_BYTES = 1024 * 1024;

/**
 * What `algorithm` sends each peer through the mailbox for `bytes` per rank (all-reduce and all-gather:
 * input, reduce-scatter: output), or 0 when it does not use the mailbox. lamport_two_shot sends a
 * reduce-scatter and an all-gather chunk of 16-byte groups.
 */
export function mailboxBytesPerPeer(algorithm: string, bytes: number, world: number): number {
  if (algorithm === "lamport" || algorithm === "ll") return bytes;
  if (algorithm === "lamport_two_shot") return 2 * 16 * Math.ceil(Math.ceil(bytes / 16) / world);
  return 0;
}

/** Algorithms that copy a plain input into the staging buffer (and two_shot's scratch lives there). */
const STAGING_ALGORITHMS: ReadonlySet<string> = new Set(["one_shot", "two_shot", "pull", "copy_engine"]);

/** What the staging buffer must hold for `input`: a plain tensor is copied in, a symmetric one read in
 * place. */
function stagedBytes(input: CollectiveInput, x: Tensor): number {
  return input instanceof Tensor ? x.nbytes : 0;
}

/** What `algorithm` needs in the staging buffer: `staged` (stagedBytes), but the copy-engine
 * reduce-scatter receives world chunks of `bytes` (its output size) whatever its input. */
function stagingNeed(
  collective: TunedCollective,
  algorithm: string,
  bytes: number,
  staged: number,
  world: number,
): number {
  return collective === "reduce-scatter" && algorithm === "copy_engine" ? bytes * world : staged;
}

/** What auto may pick, by collective: every algorithm but auto itself. */
export const TUNABLE_ALGORITHMS = {
  "all-reduce": GPU_ALL_REDUCE_ALGORITHMS.filter((a) => a !== "auto"),
  "all-gather": GPU_ALL_GATHER_ALGORITHMS.filter((a) => a !== "auto"),
  "reduce-scatter": GPU_REDUCE_SCATTER_ALGORITHMS.filter((a) => a !== "auto"),
};
interface TunableAlgorithms {
  "all-reduce": GpuAllReduceAlgorithm;
  "all-gather": GpuAllGatherAlgorithm;
  "reduce-scatter": GpuReduceScatterAlgorithm;
}
const THREADS = 512;
/** Mailbox kernels run blocks of 128 threads while that takes at most one block per SM (more SMs
 * sending and polling at once: 4 KiB to 256 KiB all-reduce 5-30% faster than with 512 on 4 H200s),
 * and blocks of 512 above (4 MiB 16-25% faster than with 128). */
const MAILBOX_SMALL_THREADS = 128;
/** Bytes of what a mailbox kernel sends each peer that one of its threads handles. */
const MAILBOX_THREAD_BYTES = { lamport: 16, lamport_two_shot: 32, ll: 8 } as const;
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
  readonly slotBytes: number;
}

export class GpuCollectives {
  readonly #group: ProcessGroup<GpuCollectives>;
  readonly #staging: SymmetricTensor;
  readonly #mailbox: Mailbox;
  readonly #comm: NcclComm;
  readonly #tuned: LoadedTuneTable | undefined;
  readonly #fused: FusedMatmul;
  #phase = 0;

  private constructor(
    group: ProcessGroup<GpuCollectives>,
    staging: SymmetricTensor,
    mailbox: Mailbox,
    comm: NcclComm,
    tuned: LoadedTuneTable | undefined,
  ) {
    this.#group = group;
    this.#staging = staging;
    this.#mailbox = mailbox;
    this.#comm = comm;
    this.#tuned = tuned;
    this.#fused = new FusedMatmul({
      group,
      staging,
      comm,
      tuned,
      barrier: (view, stream) => this.#barrierKernel(view, stream),
      nextPhase: () => this.#nextPhase(),
      allGather: (input, output, stream) => void this.allGather(input, output, { stream }),
      reduceScatter: (input, output, stream) => void this.reduceScatter(input, output, { stream }),
    });
  }

  /** The tune table auto picks from (see src/ops/tune-table.ts), if this machine has one. */
  get tuneTable(): LoadedTuneTable | undefined {
    return this.#tuned;
  }

  /**
   * Collective: allocates the group's symmetric staging buffer, its mailbox and its NCCL communicator.
   * The mailbox's Lamport buffers start as the sentinel (all bits set), its LL buffers and its call
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
    // The pad holds the barrier slots and GEMM + reduce-scatter's tile flags.
    const staging = await group.symmetric.empty([stagingBytes], "u8", { padBytes: STAGING_PAD_BYTES });
    const buffers = await group.symmetric.empty([7 * world * slotBytes], "u8");
    const state = DeviceMemory.alloc(MAILBOX_STATE_BYTES, group.device);
    const stream = defaultStream(group.device);
    memset(buffers.tensor.ptr, 0xffffffff, 4, (3 * world * slotBytes) / 4, stream);
    memset(state.ptr, 0, 4, MAILBOX_STATE_BYTES / 4, stream);
    stream.synchronize();
    return new GpuCollectives(
      group,
      staging,
      { buffers, view: buffers.deviceView(), state, slotBytes },
      await group.nccl(),
      loadTuneTable(group.device.props.name, world, { ...TUNABLE_ALGORITHMS, ...FUSED_TUNABLE }),
    );
  }

  get capacityBytes(): number {
    return this.#staging.tensor.nbytes;
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
    const what = "allReduce";
    checkTensorArg(what, "input", input);
    if (options.output !== undefined) checkTensorArg(what, "output", options.output);
    const x = this.#local(input, what);
    const op = options.op ?? "sum";
    const requested = options.algorithm ?? "auto";
    checkReduction(what, op, x.dtype);
    checkAlgorithm(what, requested, GPU_ALL_REDUCE_ALGORITHMS);
    // Two-shot on a symmetric input out of place takes the staging buffer as scratch of the input's size.
    const inPlace = !(input instanceof Tensor) && options.output?.ptr === input.tensor.ptr;
    const algorithm =
      requested === "auto" ? this.autoAlgorithm("all-reduce", x.nbytes, inPlace ? 0 : x.nbytes) : requested;
    const output = options.output ?? Tensor.empty(x.shape, x.dtype, { device: this.#group.device });
    checkSameDtype(what, x, output);
    checkNumel(what, "output", output, x.numel);
    this.#onDevice(what, output);
    const stream = options.stream ?? defaultStream(this.#group.device);
    if (algorithm === "nccl") {
      this.#comm.allReduce(x, output, op, stream);
      return output;
    }
    if (this.#group.worldSize === 1) {
      copyDeviceToDevice(output.ptr, x.ptr, x.nbytes, stream);
      return output;
    }
    if (algorithm === "lamport") {
      const k = this.#reducing("lamport_all_reduce", x, op, MAILBOX_PARAMS);
      this.#pushLaunch("lamport", k, what, x, output, x.numel, x.nbytes, stream);
      return output;
    }
    if (algorithm === "lamport_two_shot") {
      const k = this.#reducing("lamport_two_shot_all_reduce", x, op, MAILBOX_PARAMS);
      this.#pushLaunch("lamport_two_shot", k, what, x, output, x.numel, x.nbytes, stream);
      return output;
    }
    const [view, staged] = this.#stage(input, x, what);
    if (algorithm === "one_shot") {
      const k = this.#reducing("one_shot_all_reduce", x, op, COLL_PARAMS);
      k.launch(
        { grid: this.#blocks(x.nbytes), block: THREADS, stream },
        view,
        staged,
        output,
        x.numel,
        this.#nextPhase(),
      );
      return output;
    }
    // Two-shot stores the reduced chunks into every rank's scratch buffer: the staging buffer, or a
    // symmetric input itself only when the call is in place.
    let scratch = view;
    if (!(input instanceof Tensor) && !inPlace) {
      checkCapacity(`${what} (two-shot scratch)`, x.nbytes, this.capacityBytes);
      scratch = this.#staging.deviceView();
    }
    const k = this.#reducing("two_shot_all_reduce", x, op, TWO_SHOT_PARAMS);
    const grid = this.#blocks(Math.ceil(x.nbytes / this.#group.worldSize));
    k.launch({ grid, block: THREADS, stream }, view, scratch, staged, output, x.numel, this.#nextPhase());
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
    const stream = options.stream ?? defaultStream(this.#group.device);
    if (algorithm === "nccl") {
      this.#comm.allGather(x, output, stream);
      return output;
    }
    if (this.#group.worldSize === 1) {
      copyDeviceToDevice(output.ptr, x.ptr, x.nbytes, stream);
      return output;
    }
    if (algorithm === "copy_engine") {
      this.#copyEngineAllGather(input, x, output, stream, flags);
      return output;
    }
    if (algorithm === "ll") {
      const k = this.#allGatherKernel("ll_all_gather", MAILBOX_PARAMS);
      this.#pushLaunch("ll", k, what, x, output, x.nbytes, x.nbytes, stream);
      return output;
    }
    const [view, staged] = this.#stage(input, x, what);
    const k = this.#allGatherKernel("all_gather_pull", COLL_PARAMS);
    k.launch(
      { grid: this.#blocks(x.nbytes * this.#group.worldSize), block: THREADS, stream },
      view,
      staged,
      output,
      x.nbytes,
      this.#nextPhase(),
    );
    return output;
  }

  /** Chunk `rank` of the reduction of every rank's `input` (world x output elements), into `output`. */
  reduceScatter(
    input: CollectiveInput,
    output: Tensor,
    options: CollectiveOptions & { op?: ReduceOp; algorithm?: GpuReduceScatterAlgorithm } = {},
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
    const algorithm =
      requested === "auto"
        ? this.autoAlgorithm("reduce-scatter", output.nbytes, stagedBytes(input, x))
        : requested;
    const stream = options.stream ?? defaultStream(this.#group.device);
    if (algorithm === "nccl") {
      this.#comm.reduceScatter(x, output, op, stream);
      return output;
    }
    if (this.#group.worldSize === 1) {
      copyDeviceToDevice(output.ptr, x.ptr, x.nbytes, stream);
      return output;
    }
    if (algorithm === "lamport") {
      const k = this.#reducing("lamport_reduce_scatter", x, op, MAILBOX_PARAMS);
      this.#pushLaunch("lamport", k, what, x, output, output.numel, output.nbytes, stream);
      return output;
    }
    if (algorithm === "copy_engine") {
      this.#copyEngineReduceScatter(x, output, op, stream);
      return output;
    }
    const [view, staged] = this.#stage(input, x, what);
    const k = this.#reducing("reduce_scatter_pull", x, op, COLL_PARAMS);
    k.launch(
      { grid: this.#blocks(output.nbytes), block: THREADS, stream },
      view,
      staged,
      output,
      output.numel,
      this.#nextPhase(),
    );
    return output;
  }

  /**
   * All-gather + GEMM, a column-parallel linear layer: `aShard` [rows, k] on each rank (plain, or a
   * symmetric tensor read in place), `b` this rank's weight [n, k] (or [k, n] with layoutB "kn"); returns
   * out = gather(aShard) x b^T ([world x rows, n], bf16) and the gathered A ([world x rows, k]), both
   * allocated unless given. bf16, or fp8 e4m3 with per-tensor scales (scaleA the same on every rank).
   * `fused` runs the GEMM while the peers' shards arrive (see src/ops/fused-matmul.ts); the result is
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
      stream: options.stream ?? defaultStream(this.#group.device),
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
      stream: options.stream ?? defaultStream(this.#group.device),
    });
  }

  /** The fused matmuls' auto rules, for inspection (see FusedMatmul). */
  get fusedMatmul(): Pick<
    FusedMatmul,
    "autoAllGatherMatmul" | "autoMatmulReduceScatter" | "scatterFlagCapacity"
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
    const stream = options.stream ?? defaultStream(this.#group.device);
    const k = this.#module(SYNC_KERNELS).kernel("symmkit::barrier_hold", [SYMM_VIEW_PARAM, "u64"]);
    k.launch({ grid: 1, block: 32, stream }, this.#staging.deviceView(), options.holdNs ?? 0);
  }

  /**
   * Copy-engine all-gather, all in stream order: (plain input: copy it into the staging buffer), zero the
   * flags, a barrier kernel (release/acquire: every rank's buffer is complete before any peer copies
   * from it), one cuMemcpyDtoDAsync per rank starting at our own (rotated, so the W copy engines pulling
   * from one rank's buffer do not all start on the same rank), each followed by its flag, and a closing
   * barrier kernel (nobody rewrites its buffer while a peer's copy engine may still read it). No SM does
   * the copying.
   */
  #copyEngineAllGather(
    input: CollectiveInput,
    x: Tensor,
    output: Tensor,
    stream: Stream,
    flags?: Tensor,
  ): void {
    const world = this.#group.worldSize;
    const rank = this.#group.rank;
    let source: SymmetricTensor;
    if (input instanceof Tensor) {
      checkCapacity("allGather", x.nbytes, this.capacityBytes);
      copyDeviceToDevice(this.#staging.tensor.ptr, x.ptr, x.nbytes, stream);
      source = this.#staging;
    } else {
      source = input;
    }
    if (flags) memset(flags.ptr, 0, 4, world, stream);
    const view = source.deviceView();
    this.#barrierKernel(view, stream);
    for (let k = 0; k < world; k++) {
      const r = (rank + k) % world;
      copyDeviceToDevice(output.ptr + BigInt(r * x.nbytes), source.bufferPtrs[r]!, x.nbytes, stream);
      if (flags) writeValue32(flags.ptr + BigInt(4 * r), 1, stream);
    }
    this.#barrierKernel(view, stream);
  }

  /**
   * Copy-engine reduce-scatter, all in stream order: a barrier kernel (every peer finished whatever it
   * did with its staging buffer before), one cuMemcpyDtoDAsync per peer pushing it its chunk of `x` into
   * slot `rank` of its staging buffer, starting at the next rank (rotated, so that the W copy engines
   * write into W different ranks at each step), a barrier kernel (release/acquire: every chunk pushed
   * here has landed), then copy_engine_reduce_scatter reduces the W chunks in rank order, reading this
   * rank's own chunk from `x` itself, local memory only. The next call's opening barrier keeps peers
   * from pushing into the slots before that reduce finished.
   */
  #copyEngineReduceScatter(x: Tensor, output: Tensor, op: ReduceOp, stream: Stream): void {
    const world = this.#group.worldSize;
    const rank = this.#group.rank;
    const chunk = output.nbytes;
    checkCapacity(
      "reduceScatter (copy-engine slots)",
      chunk * world,
      this.capacityBytes,
      "pass a larger stagingBytes to init(), or use another algorithm",
    );
    const view = this.#staging.deviceView();
    this.#barrierKernel(view, stream);
    for (let k = 1; k < world; k++) {
      const d = (rank + k) % world;
      const slot = this.#staging.bufferPtrs[d]! + BigInt(rank * chunk);
      copyDeviceToDevice(slot, x.ptr + BigInt(d * chunk), chunk, stream);
    }
    this.#barrierKernel(view, stream);
    const k = this.#reducing("copy_engine_reduce_scatter", x, op, COPY_ENGINE_REDUCE_PARAMS);
    k.launch(
      { grid: this.#blocks(chunk), block: THREADS, stream },
      this.#staging.tensor.ptr,
      x.ptr + BigInt(rank * chunk),
      output,
      output.numel,
      rank,
    );
  }

  /** A one-block barrier kernel over `view`'s pads on `stream` (release/acquire, system scope). */
  #barrierKernel(view: Uint8Array, stream: Stream): void {
    const k = this.#module(SYNC_KERNELS).kernel(barrierLoopExpr(true, true), [SYMM_VIEW_PARAM, "u32"]);
    k.launch({ grid: 1, block: 32, stream }, view, 1);
  }

  /** The local tensor of an input, checked to be on this group's GPU. */
  #local(input: CollectiveInput, what: string): Tensor {
    const x = input instanceof Tensor ? input : input.tensor;
    if (
      !(input instanceof Tensor) &&
      (input.worldSize !== this.#group.worldSize || input.rank !== this.#group.rank)
    ) {
      throw new InvalidArgumentError(`${what}: the symmetric tensor belongs to another group`);
    }
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

  /** The SymmView the kernel reads and the plain tensor it copies in first (0n: the input is the user's
   * own symmetric tensor, read in place). */
  #stage(input: CollectiveInput, x: Tensor, what: string): [Uint8Array, bigint] {
    if (!(input instanceof Tensor)) return [input.deviceView(), 0n];
    checkCapacity(what, x.nbytes, this.capacityBytes);
    return [this.#staging.deviceView(), x.ptr];
  }

  #module(spec: Parameters<typeof sharedModule>[0]): Module {
    return sharedModule(spec, this.#group.device);
  }

  #allGatherKernel<const Ps extends readonly ParamType[]>(kernel: AllGatherKernel, params: Ps): Kernel<Ps> {
    return this.#module(allGatherProgram(kernel)).kernel(
      allGatherExpr(kernel, this.#group.worldSize),
      params,
    );
  }

  /**
   * What auto picks for `bytes` (per rank: all-reduce and all-gather input, reduce-scatter output):
   * the tune table's pick, else the built-in rule, else nccl, the first that can run here: a mailbox
   * algorithm must fit the mailbox slot, and a staging one (one_shot, two_shot, pull, copy_engine) the
   * staging buffer, which must hold `staged` bytes (a plain input's size; 0 for a symmetric input;
   * the copy-engine reduce-scatter needs world x `bytes` either way).
   * symmkit's own algorithms reduce in rank order; when auto picks nccl, NCCL's order applies.
   */
  autoAlgorithm<C extends TunedCollective>(
    collective: C,
    bytes: number,
    staged = 0,
  ): Exclude<TunableAlgorithms[C], "auto"> {
    type A = Exclude<TunableAlgorithms[C], "auto">;
    const world = this.#group.worldSize;
    const runs = (a: string): boolean =>
      mailboxBytesPerPeer(a, bytes, world) <= this.#mailbox.slotBytes &&
      (!STAGING_ALGORITHMS.has(a) || stagingNeed(collective, a, bytes, staged, world) <= this.capacityBytes);
    const tuned = this.#tuned && pickRule(this.#tuned.rules[collective], bytes);
    if (tuned && runs(tuned)) return tuned as A;
    const small = bytes <= MAILBOX_AUTO_MAX_BYTES;
    let rule: string;
    if (collective === "all-reduce") {
      if (small && runs("lamport")) rule = "lamport";
      else if (runs("lamport_two_shot")) rule = "lamport_two_shot";
      else rule = bytes > oneShotMaxBytes(world) ? "two_shot" : "one_shot";
    } else if (collective === "all-gather") {
      if (small && runs("ll")) rule = "ll";
      else rule = bytes * world >= COPY_ENGINE_ALL_GATHER_MIN_BYTES ? "copy_engine" : "pull";
    } else {
      rule = bytes <= LAMPORT_REDUCE_SCATTER_MAX_BYTES && runs("lamport") ? "lamport" : "pull";
    }
    return (runs(rule) ? rule : "nccl") as A;
  }

  /**
   * A mailbox kernel for `algorithm`: `n` elements (ll: bytes), `bytes` per rank as mailboxBytesPerPeer
   * counts them; what it sends each peer is checked against the slot before anything runs.
   */
  #pushLaunch(
    algorithm: keyof typeof MAILBOX_THREAD_BYTES,
    k: Kernel<typeof MAILBOX_PARAMS>,
    what: string,
    x: Tensor,
    output: Tensor,
    n: number,
    bytes: number,
    stream: Stream,
  ): void {
    const m = this.#mailbox;
    const bytesPerPeer = mailboxBytesPerPeer(algorithm, bytes, this.#group.worldSize);
    const threadBytes = MAILBOX_THREAD_BYTES[algorithm];
    if (bytesPerPeer > m.slotBytes)
      throw new InvalidArgumentError(
        `${what}: ${bytesPerPeer} bytes per peer exceed the ${m.slotBytes}-byte mailbox slot; use another algorithm, or a larger mailboxSlotBytes`,
      );
    // #blocks counts 16-byte vectors, one per thread.
    const vectorBytes = (bytesPerPeer * 16) / threadBytes;
    const fewSms = vectorBytes <= 16 * MAILBOX_SMALL_THREADS * this.#group.device.props.smCount;
    const threads = fewSms ? MAILBOX_SMALL_THREADS : THREADS;
    k.launch(
      { grid: this.#blocks(vectorBytes, threads), block: threads, stream },
      m.view,
      x,
      output,
      n,
      m.state.ptr,
      m.slotBytes,
      this.#nextPhase(),
    );
  }

  #reducing<const Ps extends readonly ParamType[]>(
    kernel: ReducingKernel,
    x: Tensor,
    op: ReduceOp,
    params: Ps,
  ): Kernel<Ps> {
    return this.#module(reducingProgram(kernel, x.dtype, op)).kernel(
      reducingExpr(kernel, x.dtype, op, this.#group.worldSize),
      params,
    );
  }

  /** Enough blocks of `threads` for `bytes` of 16-byte vectors, at most one per SM. */
  #blocks(bytes: number, threads = THREADS): number {
    return Math.max(1, Math.min(this.#group.device.props.smCount, Math.ceil(bytes / 16 / threads)));
  }

  /** Each launch takes two phase numbers (start and end barrier), for timeout records. */
  #nextPhase(): number {
    const p = this.#phase;
    this.#phase = (this.#phase + 2) >>> 0;
    return p;
  }

  /** Collective: releases the staging buffer and the mailbox. */
  async dispose(): Promise<void> {
    this.#fused.dispose();
    await this.#staging.dispose();
    await this.#mailbox.buffers.dispose();
    this.#mailbox.state.dispose();
  }
}
