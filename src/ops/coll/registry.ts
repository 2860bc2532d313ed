// Every collective algorithm symmkit has, one record each: what it is, whether it gives the rank-order
// bits, what it needs (staging buffer, mailbox), when auto's built-in rule picks it, which backends run
// it, its kernels, and how it launches on GPUs. The algorithm lists, auto and its candidates, the tune
// table's, the benchmarks' implementations, the demo and the docs' table (src/ops/algorithm-table.ts) all come from
// here: adding an algorithm is one record plus its kernel.
import { copyDeviceToDevice, memset, writeValue32 } from "../../runtime/memory.js";
import type { DType } from "../../runtime/dtype.js";
import type { Kernel, ParamType } from "../../runtime/kernel.js";
import type { ProgramSpec } from "../../runtime/module.js";
import type { Stream } from "../../runtime/stream.js";
import { Tensor } from "../../runtime/tensor.js";
import type { NcclComm } from "../../distributed/nccl-comm.js";
import type { CallTag } from "../../distributed/fingerprint.js";
import type { SymmetricTensor } from "../../distributed/symmetric-memory.js";
import { checkCapacity, REDUCE_DTYPES, REDUCE_OPS, type ReduceOp } from "../validate.js";
import type { TunedCollective } from "../tune-table.js";
import {
  COLL_PARAMS,
  COPY_ENGINE_REDUCE_PARAMS,
  MAILBOX_PARAMS,
  movingKernel,
  movingProgram,
  reducingKernel,
  reducingProgram,
  TWO_SHOT_PARAMS,
  type CollKernel,
} from "./programs.js";

export type CollectiveName = TunedCollective;

/** One call, checked: what a record's launch gets. */
export interface CollectiveCall {
  readonly what: string;
  /** The input as given: a plain tensor, or a symmetric one read in place. */
  readonly input: Tensor | SymmetricTensor;
  /** The input's local tensor. */
  readonly x: Tensor;
  readonly output: Tensor;
  /** "sum" for all-gather. */
  readonly op: ReduceOp;
  readonly stream: Stream;
  /** all-gather's progress flags (copy_engine only). */
  readonly flags: Tensor | undefined;
  /** reduce-scatter, copy_engine only: bytes from one rank's chunk of `x` to the next (undefined: the
   * output's bytes). A call run in pieces passes the whole call's chunk, `x` starting at the piece. */
  readonly chunkStride: number | undefined;
  /** The call's fingerprint (src/distributed/fingerprint.ts), passed to its kernels: their signals carry
   * it, so a peer in another call is caught at its first barrier. */
  readonly tag: CallTag;
}

/** What a GPU launch may use of the group's collectives (GpuCollectives implements it). */
export interface CollectiveContext {
  readonly rank: number;
  readonly world: number;
  readonly comm: NcclComm;
  readonly staging: SymmetricTensor;
  /** The staging buffer's SymmView, made once. */
  readonly stagingView: Uint8Array;
  readonly capacityBytes: number;
  /** A reducing kernel for this group's world size, resolved once per (kernel, dtype, op). */
  reducing<P extends readonly ParamType[]>(kernel: CollKernel<P>, dtype: DType, op: ReduceOp): Kernel<P>;
  /** A moving kernel (all-gather's, all-to-all's) for this group's world size, resolved once. */
  moving<P extends readonly ParamType[]>(kernel: CollKernel<P>): Kernel<P>;
  /** A one-block barrier kernel over `view`'s pads (release/acquire, system scope), its signals carrying
   * `tag`: the call's barrier number `step` (0, or 1 for its second). */
  groupBarrier(view: Uint8Array, stream: Stream, tag: CallTag, step?: 0 | 1): void;
  /** The SymmView a pull kernel reads and the plain tensor it copies in first (0n: a symmetric input,
   * read in place). A symmetric input that the output overlaps is copied in like a plain one (peers
   * may still read it while this rank writes its output), unless the kernel is made for that
   * (`inPlaceOk`: two-shot). */
  stage(call: CollectiveCall, inPlaceOk?: boolean): [Uint8Array, bigint];
  /** Launches a mailbox kernel for `n` elements, `bytes` per rank (see mailboxBytesPerPeer). */
  push(
    algorithm: CollectiveAlgorithm,
    kernel: Kernel<typeof MAILBOX_PARAMS>,
    call: CollectiveCall,
    n: number,
    bytes: number,
  ): void;
  /** Enough blocks of `threads` for `bytes` of 16-byte vectors, at most one per SM. */
  blocks(bytes: number, threads?: number): number;
}

export interface CollectiveAlgorithm<C extends CollectiveName = CollectiveName> {
  readonly collective: C;
  /** One line for the docs' table. */
  readonly summary: string;
  /**
   * Its result is the reference's bits at every size and world: for a reduction, f32 accumulation in
   * rank order rounded once to the dtype (src/ops/coll/reduce.ts); an all-gather moves bits, so any is. Only
   * such algorithms are auto's (built-in rule, tune tables); the others are baselines a caller names.
   */
  readonly rankOrder: boolean;
  /** The CPU backend runs it too (as the reference). */
  readonly cpu: boolean;
  /** auto's built-in rule: the first rank-order algorithm (in record order) for which this holds and
   * which can run is picked; without it, only a tune table makes auto pick it. */
  readonly autoWhen?: (bytes: number, world: number) => boolean;
  /** The benchmark also times it on a plain input (copied in by the kernel). */
  readonly benchPlain?: boolean;
  /** Mailbox algorithms: bytes of what one peer receives that one thread handles. */
  readonly mailboxThreadBytes?: number;
  /** What it pushes into each peer's mailbox for `bytes` per rank (0: no mailbox). */
  readonly mailboxBytesPerPeer: (bytes: number, world: number) => number;
  /** What it needs of the staging buffer, given `staged` (a plain input's size, 0 for a symmetric one);
   * absent: it does not use the staging buffer. */
  readonly stagingBytes?: (bytes: number, staged: number, world: number) => number;
  /** The collective kernels it launches (their programs compiled on first use; CI compiles all). */
  readonly kernels: readonly CollKernel[];
  readonly launch: (ctx: CollectiveContext, call: CollectiveCall) => void;
}

/** Threads per block of the pull and copy kernels. */
export const THREADS = 512;

/** auto's rule: one-shot up to this many bytes, two-shot above, by world size. From bf16 runs on 2 and 4
 * H200s (bench/results/h200x2, h200x4): on 2 GPUs one-shot won at every size from 4 KiB to 64 MiB (it
 * moves half the bytes over NVLink that two-shot does there); on 4 the two are level at 256 KiB and
 * two-shot wins from 1 MiB. 3 GPUs, unmeasured, follow 4. */
export function oneShotMaxBytes(world: number): number {
  return world === 2 ? Number.MAX_SAFE_INTEGER : 256 * 1024;
}
/** auto's all-gather rule: the copy engines from this many output bytes. On 4 H200s
 * (bench/results/h200x4/all-gather.json) they cost ~31 us at any small size (four copy nodes and two
 * barrier kernels) but win from 64 MiB (192.6 against 315.5 us; NCCL 199.5); level at 16 MiB. */
export const COPY_ENGINE_ALL_GATHER_MIN_BYTES = 16 * 1024 * 1024;
/** auto's rule for the mailbox algorithms (lamport, ll): up to this many bytes pushed to each peer. */
export const MAILBOX_AUTO_MAX_BYTES = 256 * 1024;
/** reduce-scatter's: lamport up to this many output bytes (4 H200s: 13.9 us against pull's 18.7 at 1 MiB
 * of output, level at 4 MiB). */
export const LAMPORT_REDUCE_SCATTER_MAX_BYTES = 1024 * 1024;

const none = (): number => 0;
const sameBytes = (bytes: number): number => bytes;
/** Algorithms that stage a plain input (and two_shot's scratch lives there). */
const staged = (_bytes: number, s: number): number => s;
/** A kernel's programs: a reducing one's per (dtype, op), a moving one's single program. */
const kernelPrograms = (k: CollKernel): ProgramSpec[] =>
  k.reduces
    ? REDUCE_DTYPES.flatMap((d) => REDUCE_OPS.map((op) => reducingProgram(k, d, op)))
    : [movingProgram(k)];

/** An algorithm's programs, all of them (the catalog's). */
export const algorithmPrograms = (r: CollectiveAlgorithm): ProgramSpec[] => r.kernels.flatMap(kernelPrograms);

// The kernels the records below launch (coll/*.cuh), with the parameters they pass.
const LAMPORT_ALL_REDUCE = reducingKernel("lamport_all_reduce", MAILBOX_PARAMS);
const LAMPORT_TWO_SHOT_ALL_REDUCE = reducingKernel("lamport_two_shot_all_reduce", MAILBOX_PARAMS);
const ONE_SHOT_ALL_REDUCE = reducingKernel("one_shot_all_reduce", COLL_PARAMS);
const TWO_SHOT_ALL_REDUCE = reducingKernel("two_shot_all_reduce", TWO_SHOT_PARAMS);
const LL_ALL_GATHER = movingKernel("ll_all_gather", MAILBOX_PARAMS);
const ALL_GATHER_PULL = movingKernel("all_gather_pull", COLL_PARAMS);
const LAMPORT_REDUCE_SCATTER = reducingKernel("lamport_reduce_scatter", MAILBOX_PARAMS);
const REDUCE_SCATTER_PULL = reducingKernel("reduce_scatter_pull", COLL_PARAMS);
const COPY_ENGINE_REDUCE_SCATTER = reducingKernel("copy_engine_reduce_scatter", COPY_ENGINE_REDUCE_PARAMS);

/** On one rank a collective is a copy (none in place): the records' shared first step. Returns true
 * when that was all. */
function trivial(ctx: CollectiveContext, c: CollectiveCall): boolean {
  if (ctx.world !== 1) return false;
  if (c.output.ptr !== c.x.ptr) copyDeviceToDevice(c.output.ptr, c.x.ptr, c.x.nbytes, c.stream);
  return true;
}

/** NCCL carries no signal of ours: a barrier kernel whose signals carry the call's fingerprint goes first,
 * so that a rank in another call is caught there (CollectiveMismatchError) instead of NCCL mixing two
 * calls' data or hanging. It costs the call one small kernel (docs/perf-notes.md). */
function fingerprintNccl(ctx: CollectiveContext, c: CollectiveCall): void {
  if (ctx.world > 1) ctx.groupBarrier(ctx.stagingView, c.stream, c.tag);
}

const ALL_REDUCE = {
  lamport: {
    collective: "all-reduce",
    summary: "one-shot by pushing into every peer's mailbox (coll/mailbox.cuh), no barrier",
    rankOrder: true,
    cpu: false,
    autoWhen: (bytes) => bytes <= MAILBOX_AUTO_MAX_BYTES,
    mailboxThreadBytes: 16,
    mailboxBytesPerPeer: sameBytes,
    kernels: [LAMPORT_ALL_REDUCE],
    launch: (ctx, c) => {
      if (trivial(ctx, c)) return;
      const k = ctx.reducing(LAMPORT_ALL_REDUCE, c.x.dtype, c.op);
      ctx.push(ALL_REDUCE.lamport, k, c, c.x.numel, c.x.nbytes);
    },
  },
  lamport_two_shot: {
    collective: "all-reduce",
    summary: "reduce-scatter then all-gather through the mailboxes, in one kernel, no barrier",
    rankOrder: true,
    cpu: false,
    autoWhen: () => true,
    mailboxThreadBytes: 32,
    // A reduce-scatter and an all-gather chunk of 16-byte groups.
    mailboxBytesPerPeer: (bytes, world) => 2 * 16 * Math.ceil(Math.ceil(bytes / 16) / world),
    kernels: [LAMPORT_TWO_SHOT_ALL_REDUCE],
    launch: (ctx, c) => {
      if (trivial(ctx, c)) return;
      const k = ctx.reducing(LAMPORT_TWO_SHOT_ALL_REDUCE, c.x.dtype, c.op);
      ctx.push(ALL_REDUCE.lamport_two_shot, k, c, c.x.numel, c.x.nbytes);
    },
  },
  one_shot: {
    collective: "all-reduce",
    summary: "every rank reads every peer's buffer between two barriers and reduces all of it",
    rankOrder: true,
    cpu: true,
    autoWhen: (bytes, world) => bytes <= oneShotMaxBytes(world),
    benchPlain: true,
    mailboxBytesPerPeer: none,
    stagingBytes: staged,
    kernels: [ONE_SHOT_ALL_REDUCE],
    launch: (ctx, c) => {
      if (trivial(ctx, c)) return;
      const [view, input] = ctx.stage(c);
      const k = ctx.reducing(ONE_SHOT_ALL_REDUCE, c.x.dtype, c.op);
      const grid = ctx.blocks(c.x.nbytes);
      k.launch({ grid, block: THREADS, stream: c.stream }, view, input, c.output, c.x.numel, c.tag);
    },
  },
  two_shot: {
    collective: "all-reduce",
    summary: "reduce-scatter by loads, then all-gather by loads, in one kernel",
    rankOrder: true,
    cpu: true,
    autoWhen: () => true,
    benchPlain: true,
    mailboxBytesPerPeer: none,
    stagingBytes: staged,
    kernels: [TWO_SHOT_ALL_REDUCE],
    launch: (ctx, c) => {
      if (trivial(ctx, c)) return;
      const [view, input] = ctx.stage(c, true);
      // The reduced chunks go into every rank's scratch buffer: the staging buffer, or a symmetric input
      // itself only when the call is in place.
      let scratch = view;
      if (input === 0n && c.output.ptr !== c.x.ptr) {
        checkCapacity(`${c.what} (two-shot scratch)`, c.x.nbytes, ctx.capacityBytes);
        scratch = ctx.stagingView;
      }
      const k = ctx.reducing(TWO_SHOT_ALL_REDUCE, c.x.dtype, c.op);
      const grid = ctx.blocks(Math.ceil(c.x.nbytes / ctx.world));
      const cfg = { grid, block: THREADS, stream: c.stream };
      k.launch(cfg, view, scratch, input, c.output, c.x.numel, c.tag);
    },
  },
  copy_engine: {
    collective: "all-reduce",
    summary:
      "the copy engines push each peer its chunk, a local reduce kernel, then the copy engines gather the reduced chunks: no SM moves a byte between GPUs",
    rankOrder: true,
    cpu: false,
    mailboxBytesPerPeer: none,
    stagingBytes: (bytes, _staged, world) => (world + 1) * copyEngineChunkBytes(bytes, world),
    kernels: [COPY_ENGINE_REDUCE_SCATTER],
    launch: (ctx, c) => {
      if (!trivial(ctx, c)) copyEngineAllReduce(ctx, c);
    },
  },
  nccl: {
    collective: "all-reduce",
    summary: "NCCL (its own reduction order)",
    // NCCL rounds to the dtype at every hop of its ring or tree: 1 ulp off the rank-order sum now and
    // then from three ranks on.
    rankOrder: false,
    cpu: false,
    mailboxBytesPerPeer: none,
    kernels: [],
    launch: (ctx, c) => {
      fingerprintNccl(ctx, c);
      ctx.comm.allReduce(c.x, c.output, c.op, c.stream);
    },
  },
} as const satisfies Record<string, CollectiveAlgorithm<"all-reduce">>;

/** The room the copy-engine all-reduce gives each chunk in the staging buffer (16-byte groups, so that the
 * reduced chunk lies aligned): at least any rank's chunk of a `bytes` input. */
const copyEngineChunkBytes = (bytes: number, world: number): number => 16 * Math.ceil(bytes / (16 * world));

/**
 * Copy-engine all-reduce, all in stream order: the copy-engine reduce-scatter, its reduced chunk left in
 * the staging buffer, then a copy-engine all-gather of the reduced chunks. Rank r owns elements
 * [r per, (r + 1) per) of the n (per = ceil(n / world); the last chunks may be short or empty): every peer
 * pushes it that chunk into slot `peer` of its staging buffer (slots of that chunk's size, as
 * copy_engine_reduce_scatter reads them), which reduces them in rank order into the staging buffer at
 * world chunk rooms in; every rank then copies every rank's reduced chunk into its output. Barrier kernels
 * between the steps: (0) peers are done with their staging buffers, (1) every chunk pushed here has
 * landed, (0) every reduced chunk is ready, (1) no peer still reads ours, so the next call may rewrite it.
 * In place is safe: the output is written only after every read of the input.
 */
function copyEngineAllReduce(ctx: CollectiveContext, c: CollectiveCall): void {
  const { world, rank, staging } = ctx;
  const { x, output, stream } = c;
  const e = x.elementBytes;
  const per = Math.ceil(x.numel / world);
  const bytesOf = (r: number): number => Math.max(0, Math.min(x.numel, (r + 1) * per) - r * per) * e;
  const room = copyEngineChunkBytes(x.nbytes, world);
  checkCapacity(
    `${c.what} (copy-engine slots)`,
    (world + 1) * room,
    ctx.capacityBytes,
    "pass a larger stagingBytes to init(), or use another algorithm",
  );
  const reduced = BigInt(world * room);
  ctx.groupBarrier(ctx.stagingView, stream, c.tag);
  for (let k = 1; k < world; k++) {
    const d = (rank + k) % world;
    const bytes = bytesOf(d);
    if (bytes > 0)
      copyDeviceToDevice(
        staging.bufferPtrs[d]! + BigInt(rank * bytes),
        x.ptr + BigInt(d * per * e),
        bytes,
        stream,
      );
  }
  ctx.groupBarrier(ctx.stagingView, stream, c.tag, 1);
  const mine = bytesOf(rank);
  if (mine > 0)
    ctx
      .reducing(COPY_ENGINE_REDUCE_SCATTER, x.dtype, c.op)
      .launch(
        { grid: ctx.blocks(mine), block: THREADS, stream },
        staging.tensor.ptr,
        x.ptr + BigInt(rank * per * e),
        staging.tensor.ptr + reduced,
        mine / e,
        rank,
      );
  ctx.groupBarrier(ctx.stagingView, stream, c.tag);
  for (let k = 0; k < world; k++) {
    const r = (rank + k) % world;
    const bytes = bytesOf(r);
    if (bytes > 0)
      copyDeviceToDevice(output.ptr + BigInt(r * per * e), staging.bufferPtrs[r]! + reduced, bytes, stream);
  }
  ctx.groupBarrier(ctx.stagingView, stream, c.tag, 1);
}

/**
 * Copy-engine all-gather, all in stream order: (plain input: copy it into the staging buffer), zero the
 * flags, a barrier kernel (every rank's buffer is complete before any peer copies from it), one
 * cuMemcpyDtoDAsync per rank starting at our own (rotated, so the W copy engines pulling from one rank's
 * buffer do not all start on the same rank), each followed by its flag, and a closing barrier kernel
 * (nobody rewrites its buffer while a peer's copy engine may still read it). No SM does the copying.
 */
function copyEngineAllGather(ctx: CollectiveContext, c: CollectiveCall): void {
  const { world, rank } = ctx;
  const { x, output, stream, flags } = c;
  let source: SymmetricTensor;
  let view: Uint8Array;
  if (c.input instanceof Tensor) {
    checkCapacity(c.what, x.nbytes, ctx.capacityBytes);
    copyDeviceToDevice(ctx.staging.tensor.ptr, x.ptr, x.nbytes, stream);
    [source, view] = [ctx.staging, ctx.stagingView];
  } else {
    source = c.input;
    view = source.deviceView();
  }
  if (flags) memset(flags.ptr, 0, 4, world, stream);
  ctx.groupBarrier(view, stream, c.tag);
  for (let k = 0; k < world; k++) {
    const r = (rank + k) % world;
    copyDeviceToDevice(output.ptr + BigInt(r * x.nbytes), source.bufferPtrs[r]!, x.nbytes, stream);
    if (flags) writeValue32(flags.ptr + BigInt(4 * r), 1, stream);
  }
  ctx.groupBarrier(view, stream, c.tag, 1);
}

const ALL_GATHER = {
  ll: {
    collective: "all-gather",
    summary: "pushes flagged words into every peer's mailbox (coll/mailbox.cuh), no barrier",
    rankOrder: true,
    cpu: false,
    autoWhen: (bytes) => bytes <= MAILBOX_AUTO_MAX_BYTES,
    mailboxThreadBytes: 8,
    mailboxBytesPerPeer: sameBytes,
    kernels: [LL_ALL_GATHER],
    launch: (ctx, c) => {
      if (trivial(ctx, c)) return;
      const k = ctx.moving(LL_ALL_GATHER);
      ctx.push(ALL_GATHER.ll, k, c, c.x.nbytes, c.x.nbytes);
    },
  },
  copy_engine: {
    collective: "all-gather",
    summary: "one copy-engine copy per rank, rank-rotated, between barrier kernels, with progress flags",
    rankOrder: true,
    cpu: false,
    autoWhen: (bytes, world) => bytes * world >= COPY_ENGINE_ALL_GATHER_MIN_BYTES,
    mailboxBytesPerPeer: none,
    stagingBytes: staged,
    kernels: [],
    launch: (ctx, c) => {
      if (!trivial(ctx, c)) copyEngineAllGather(ctx, c);
    },
  },
  pull: {
    collective: "all-gather",
    summary: "every rank copies every peer's buffer between two barriers",
    rankOrder: true,
    cpu: true,
    autoWhen: () => true,
    mailboxBytesPerPeer: none,
    stagingBytes: staged,
    kernels: [ALL_GATHER_PULL],
    launch: (ctx, c) => {
      if (trivial(ctx, c)) return;
      const [view, input] = ctx.stage(c);
      const k = ctx.moving(ALL_GATHER_PULL);
      const grid = ctx.blocks(c.x.nbytes * ctx.world);
      k.launch({ grid, block: THREADS, stream: c.stream }, view, input, c.output, c.x.nbytes, c.tag);
    },
  },
  nccl: {
    collective: "all-gather",
    summary: "NCCL",
    rankOrder: true,
    cpu: false,
    mailboxBytesPerPeer: none,
    kernels: [],
    launch: (ctx, c) => {
      fingerprintNccl(ctx, c);
      ctx.comm.allGather(c.x, c.output, c.stream);
    },
  },
} as const satisfies Record<string, CollectiveAlgorithm<"all-gather">>;

/**
 * Copy-engine reduce-scatter, all in stream order: a barrier kernel (every peer finished whatever it did
 * with its staging buffer before), one cuMemcpyDtoDAsync per peer pushing it its chunk of `x` into slot
 * `rank` of its staging buffer, starting at the next rank (rotated, so that the W copy engines write into
 * W different ranks at each step), a barrier kernel (every chunk pushed here has landed), then
 * copy_engine_reduce_scatter reduces the W chunks in rank order, reading this rank's own chunk from `x`
 * itself, local memory only. The next call's opening barrier keeps peers from pushing into the slots
 * before that reduce finished.
 */
function copyEngineReduceScatter(ctx: CollectiveContext, c: CollectiveCall): void {
  const { world, rank } = ctx;
  const { x, output, stream } = c;
  const chunk = output.nbytes;
  const stride = c.chunkStride ?? chunk;
  checkCapacity(
    `${c.what} (copy-engine slots)`,
    chunk * world,
    ctx.capacityBytes,
    "pass a larger stagingBytes to init(), or use another algorithm",
  );
  ctx.groupBarrier(ctx.stagingView, stream, c.tag);
  for (let k = 1; k < world; k++) {
    const d = (rank + k) % world;
    const slot = ctx.staging.bufferPtrs[d]! + BigInt(rank * chunk);
    copyDeviceToDevice(slot, x.ptr + BigInt(d * stride), chunk, stream);
  }
  ctx.groupBarrier(ctx.stagingView, stream, c.tag, 1);
  const k = ctx.reducing(COPY_ENGINE_REDUCE_SCATTER, x.dtype, c.op);
  k.launch(
    { grid: ctx.blocks(chunk), block: THREADS, stream },
    ctx.staging.tensor.ptr,
    x.ptr + BigInt(rank * stride),
    output,
    output.numel,
    rank,
  );
}

const REDUCE_SCATTER = {
  lamport: {
    collective: "reduce-scatter",
    summary: "pushes each peer its chunk into its mailbox (coll/mailbox.cuh), no barrier",
    rankOrder: true,
    cpu: false,
    autoWhen: (bytes) => bytes <= LAMPORT_REDUCE_SCATTER_MAX_BYTES,
    mailboxThreadBytes: 16,
    mailboxBytesPerPeer: sameBytes,
    kernels: [LAMPORT_REDUCE_SCATTER],
    launch: (ctx, c) => {
      if (trivial(ctx, c)) return;
      const k = ctx.reducing(LAMPORT_REDUCE_SCATTER, c.x.dtype, c.op);
      ctx.push(REDUCE_SCATTER.lamport, k, c, c.output.numel, c.output.nbytes);
    },
  },
  pull: {
    collective: "reduce-scatter",
    summary: "every rank reads its chunk of every peer's buffer between two barriers and reduces it",
    rankOrder: true,
    cpu: true,
    autoWhen: () => true,
    mailboxBytesPerPeer: none,
    stagingBytes: staged,
    kernels: [REDUCE_SCATTER_PULL],
    launch: (ctx, c) => {
      if (trivial(ctx, c)) return;
      const [view, input] = ctx.stage(c);
      const k = ctx.reducing(REDUCE_SCATTER_PULL, c.x.dtype, c.op);
      const cfg = { grid: ctx.blocks(c.output.nbytes), block: THREADS, stream: c.stream };
      k.launch(cfg, view, input, c.output, c.output.numel, c.tag);
    },
  },
  copy_engine: {
    collective: "reduce-scatter",
    summary: "the copy engines push each peer its chunk (rank-rotated), then a local reduce kernel",
    rankOrder: true,
    cpu: false,
    mailboxBytesPerPeer: none,
    // It receives world chunks of its output size, whatever its input.
    stagingBytes: (bytes, _staged, world) => bytes * world,
    kernels: [COPY_ENGINE_REDUCE_SCATTER],
    launch: (ctx, c) => {
      if (!trivial(ctx, c)) copyEngineReduceScatter(ctx, c);
    },
  },
  nccl: {
    collective: "reduce-scatter",
    summary: "NCCL (its own reduction order)",
    rankOrder: false,
    cpu: false,
    mailboxBytesPerPeer: none,
    kernels: [],
    launch: (ctx, c) => {
      fingerprintNccl(ctx, c);
      ctx.comm.reduceScatter(c.x, c.output, c.op, c.stream);
    },
  },
} as const satisfies Record<string, CollectiveAlgorithm<"reduce-scatter">>;

/** Every algorithm by collective, in auto's order of preference among the rank-order ones (nccl last). */
export const COLLECTIVE_ALGORITHMS = {
  "all-reduce": ALL_REDUCE,
  "all-gather": ALL_GATHER,
  "reduce-scatter": REDUCE_SCATTER,
} as const;

export type GpuAllReduceAlgorithm = "auto" | keyof typeof ALL_REDUCE;
export type GpuAllGatherAlgorithm = "auto" | keyof typeof ALL_GATHER;
export type GpuReduceScatterAlgorithm = "auto" | keyof typeof REDUCE_SCATTER;
/** What `algorithm` may name, by collective, on GPUs. */
export interface GpuAlgorithmsByCollective {
  "all-reduce": GpuAllReduceAlgorithm;
  "all-gather": GpuAllGatherAlgorithm;
  "reduce-scatter": GpuReduceScatterAlgorithm;
}
export type GpuAlgorithm<C extends CollectiveName> = Exclude<GpuAlgorithmsByCollective[C], "auto">;

const names = <C extends CollectiveName>(
  c: C,
  keep: (r: CollectiveAlgorithm) => boolean = () => true,
): GpuAlgorithm<C>[] =>
  Object.entries(COLLECTIVE_ALGORITHMS[c])
    .filter(([, r]) => keep(r as CollectiveAlgorithm))
    .map(([n]) => n as GpuAlgorithm<C>);
const onCpu = (r: CollectiveAlgorithm): boolean => r.cpu;
const inRankOrder = (r: CollectiveAlgorithm): boolean => r.rankOrder;

export const GPU_ALL_REDUCE_ALGORITHMS: readonly GpuAllReduceAlgorithm[] = ["auto", ...names("all-reduce")];
export const GPU_ALL_GATHER_ALGORITHMS: readonly GpuAllGatherAlgorithm[] = ["auto", ...names("all-gather")];
export const GPU_REDUCE_SCATTER_ALGORITHMS: readonly GpuReduceScatterAlgorithm[] = [
  "auto",
  ...names("reduce-scatter"),
];
/** Every algorithm by collective: what `symmkit tune` and `symmkit bench` measure (the baselines among
 * them, for reference). */
export const TUNABLE_ALGORITHMS: { readonly [C in CollectiveName]: readonly GpuAlgorithm<C>[] } = {
  "all-reduce": names("all-reduce"),
  "all-gather": names("all-gather"),
  "reduce-scatter": names("reduce-scatter"),
};
/** What auto picks from, by collective, and what a tune table may name: the rank-order algorithms (for
 * all-gather every one). */
export const AUTO_ALGORITHMS: { readonly [C in CollectiveName]: readonly GpuAlgorithm<C>[] } = {
  "all-reduce": names("all-reduce", inRankOrder),
  "all-gather": names("all-gather", inRankOrder),
  "reduce-scatter": names("reduce-scatter", inRankOrder),
};
/** The algorithms a caller may name but auto never picks, by collective: NCCL's reductions. */
export const BASELINE_ALGORITHMS: { readonly [C in CollectiveName]: readonly GpuAlgorithm<C>[] } = {
  "all-reduce": names("all-reduce", (r) => !r.rankOrder),
  "all-gather": names("all-gather", (r) => !r.rankOrder),
  "reduce-scatter": names("reduce-scatter", (r) => !r.rankOrder),
};

/** The names of the records the CPU backend runs too. */
type CpuNames<R> = { [K in keyof R]: R[K] extends { readonly cpu: true } ? K : never }[keyof R];
export type CpuAllReduceAlgorithm = "auto" | CpuNames<typeof ALL_REDUCE>;
export type CpuAllGatherAlgorithm = "auto" | CpuNames<typeof ALL_GATHER>;
export type CpuReduceScatterAlgorithm = "auto" | CpuNames<typeof REDUCE_SCATTER>;
/** The CPU backend's algorithms: the GPU ones it implements as their reference, and auto. */
export const CPU_ALL_REDUCE_ALGORITHMS = [
  "auto",
  ...names("all-reduce", onCpu),
] as readonly CpuAllReduceAlgorithm[];
export const CPU_ALL_GATHER_ALGORITHMS = [
  "auto",
  ...names("all-gather", onCpu),
] as readonly CpuAllGatherAlgorithm[];
export const CPU_REDUCE_SCATTER_ALGORITHMS = [
  "auto",
  ...names("reduce-scatter", onCpu),
] as readonly CpuReduceScatterAlgorithm[];

/** The record of `algorithm` (not auto). */
export function algorithmRecord(collective: CollectiveName, algorithm: string): CollectiveAlgorithm {
  return (COLLECTIVE_ALGORITHMS[collective] as Record<string, CollectiveAlgorithm>)[algorithm]!;
}

/** Each algorithm's call kind ("collective/algorithm"), made once: an eager call builds no string. */
const CALL_KIND_NAMES = Object.fromEntries(
  Object.entries(COLLECTIVE_ALGORITHMS).map(([c, records]) => [
    c,
    Object.fromEntries(Object.keys(records).map((a) => [a, `${c}/${a}`])),
  ]),
) as Readonly<Record<CollectiveName, Readonly<Record<string, string>>>>;

/** The call kind a fingerprint names for `algorithm` of `collective` (see src/ops/call-kinds.ts). */
export const collectiveKind = (collective: CollectiveName, algorithm: string): string =>
  CALL_KIND_NAMES[collective][algorithm]!;

/** Every collective's kinds, in record order. */
export const COLLECTIVE_KINDS: readonly string[] = Object.values(CALL_KIND_NAMES).flatMap((k) =>
  Object.values(k),
);

/** What `algorithm` pushes into each peer's mailbox for `bytes` per rank (0: it uses no mailbox). */
export function mailboxBytesPerPeer(
  collective: CollectiveName,
  algorithm: string,
  bytes: number,
  world: number,
): number {
  return algorithmRecord(collective, algorithm).mailboxBytesPerPeer(bytes, world);
}

/** What can run a call, given the group's mailbox slot and staging capacity. */
export interface Capacity {
  readonly world: number;
  readonly mailboxSlotBytes: number;
  readonly stagingBytes: number;
}

/** Whether `algorithm` can run `bytes` per rank (`staged`: see stagingBytes) in a group of `cap`. */
export function canRun(
  collective: CollectiveName,
  algorithm: string,
  bytes: number,
  staged: number,
  cap: Capacity,
): boolean {
  const r = algorithmRecord(collective, algorithm);
  return (
    r.mailboxBytesPerPeer(bytes, cap.world) <= cap.mailboxSlotBytes &&
    (r.stagingBytes === undefined || r.stagingBytes(bytes, staged, cap.world) <= cap.stagingBytes)
  );
}

/**
 * auto's built-in rule, among the rank-order records only: the first whose autoWhen holds and which can
 * run; else the first that needs neither mailbox nor staging buffer (all-gather: NCCL); else undefined,
 * when no rank-order algorithm can take the call whole (a plain input larger than the staging buffer:
 * GpuCollectives runs it in pieces, see pieceBytes).
 */
export function builtInPick<C extends CollectiveName>(
  collective: C,
  bytes: number,
  staged: number,
  cap: Capacity,
): GpuAlgorithm<C> | undefined {
  // auto's candidates: the rank-order records, in record order (AUTO_ALGORITHMS, listed once).
  const names = AUTO_ALGORITHMS[collective] as readonly GpuAlgorithm<C>[];
  for (const name of names)
    if (
      algorithmRecord(collective, name).autoWhen?.(bytes, cap.world) &&
      canRun(collective, name, bytes, staged, cap)
    )
      return name;
  for (const name of names) {
    const r = algorithmRecord(collective, name);
    if (r.stagingBytes === undefined && r.mailboxBytesPerPeer(bytes, cap.world) === 0) return name;
  }
  return undefined;
}

/** The reduce-scatter algorithm a call in pieces runs: it reads each rank's chunk where it lies
 * (CollectiveCall.chunkStride), so a piece needs no copy of its input. */
export const REDUCE_SCATTER_PIECES = "copy_engine" satisfies GpuAlgorithm<"reduce-scatter">;

/**
 * The bytes per rank of each piece (all-reduce: of the input, reduce-scatter: of the output) when auto
 * runs a call in pieces: as much as the staging buffer holds (reduce-scatter: world pieces, the copy-engine
 * slots), in whole 16-byte groups so that every piece keeps the kernels' vector alignment. Each piece is a
 * call of its own; the sums are elementwise, so the pieces give the bits of the whole call. 0: the staging
 * buffer holds no piece at all.
 */
export function pieceBytes(collective: CollectiveName, cap: Capacity): number {
  const room = collective === "reduce-scatter" ? cap.stagingBytes / cap.world : cap.stagingBytes;
  return Math.floor(room / 16) * 16;
}

/** Every GPU program the collectives use, each once (records may share a kernel), for the catalog. */
export function collectivePrograms(): ProgramSpec[] {
  const byName = new Map<string, ProgramSpec>();
  for (const byAlgorithm of Object.values(COLLECTIVE_ALGORITHMS))
    for (const r of Object.values(byAlgorithm) as CollectiveAlgorithm[])
      for (const p of algorithmPrograms(r)) byName.set(p.name, p);
  return [...byName.values()];
}
