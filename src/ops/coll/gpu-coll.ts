// All-reduce, all-gather and reduce-scatter on GPUs: validate (src/ops/validate.ts, shared with the CPU
// backend), pick an algorithm (auto: the tune table's pick, else the registry's built-in rule, whichever
// can run with this group's staging buffer and mailbox, among the algorithms that give the rank-order
// bits; a reduction none of them can take whole runs in pieces), fingerprint the call and launch it
// through its record (registry.ts). An eager call builds no strings and allocates nothing but its
// argument objects (and its output, when none is given).
import { InvalidArgumentError } from "../../errors.js";
import type { CallAs } from "../../distributed/fingerprint.js";
import type { DType } from "../../runtime/dtype.js";
import { defaultStream } from "../../runtime/stream.js";
import { Tensor } from "../../runtime/tensor.js";
import type { CollectiveInput, CollectiveOptions, GpuGroup } from "../gpu-group.js";
import { overlaps, sameSpan } from "../gemm/matmul.js";
import { pickRule } from "../tune-table.js";
import {
  checkAlgorithm,
  checkDivisible,
  checkNumel,
  checkReduction,
  checkSameDtype,
  checkTensorArg,
  type ReduceOp,
} from "../validate.js";
import { BARRIER_KERNEL_THREADS } from "./programs.js";
import {
  algorithmRecord,
  builtInPick,
  canRun,
  collectiveKind,
  GPU_ALL_GATHER_ALGORITHMS,
  GPU_ALL_REDUCE_ALGORITHMS,
  GPU_REDUCE_SCATTER_ALGORITHMS,
  pieceBytes,
  REDUCE_SCATTER_PIECES,
  type CollectiveCall,
  type CollectiveName,
  type GpuAlgorithm,
  type GpuAllGatherAlgorithm,
  type GpuAllReduceAlgorithm,
  type GpuReduceScatterAlgorithm,
} from "./registry.js";

export type AllReduceOptions = CollectiveOptions & {
  op?: ReduceOp;
  algorithm?: GpuAllReduceAlgorithm;
  output?: Tensor;
};
export type AllGatherOptions = CollectiveOptions & {
  algorithm?: GpuAllGatherAlgorithm;
  /** With `copy_engine`: u32, at least world elements, zeroed when the call starts and flag r set to 1 once
   * rank r's chunk has landed in `output`, each by the stream itself (cuStreamWriteValue32): a kernel ordered
   * after the call's start may wait on them (gemm's row-flags ready policy does). */
  progressFlags?: Tensor;
};
export type ReduceScatterOptions = CollectiveOptions & {
  op?: ReduceOp;
  algorithm?: GpuReduceScatterAlgorithm;
};

/** What preload readies: calls of this many bytes (auto's pick there), in these dtypes. */
const PRELOAD_BYTES = 4096;
const PRELOAD_DTYPES: readonly DType[] = ["bf16", "f16", "f32"];

/** What the staging buffer must hold for `input`: a plain tensor is copied in, a symmetric one read in
 * place. */
const stagedBytes = (input: CollectiveInput, x: Tensor): number => (input instanceof Tensor ? x.nbytes : 0);

export class GpuColl {
  readonly #g: GpuGroup;

  /** Made once per group, as the group is made: readies the group's first calls (#preload). */
  constructor(g: GpuGroup) {
    this.#g = g;
    this.#preload();
  }

  /** allReduce (see GpuCollectives), fingerprinted `as` the fused call it runs for (if any). */
  allReduce(input: CollectiveInput, options: AllReduceOptions, as?: CallAs): Tensor {
    const what = "allReduce";
    const g = this.#g;
    checkTensorArg(what, "input", input);
    if (options.output !== undefined) checkTensorArg(what, "output", options.output);
    const x = g.local(input, what);
    const op = options.op ?? "sum";
    const requested = options.algorithm ?? "auto";
    checkReduction(what, op, x.dtype);
    checkAlgorithm(what, requested, GPU_ALL_REDUCE_ALGORITHMS);
    const output =
      options.output ?? Tensor.empty(x.shape, x.dtype, { device: g.device, stream: g.stream(options) });
    checkSameDtype(what, x, output);
    checkNumel(what, "output", output, x.numel);
    g.onDevice(what, output);
    this.runAllReduce(what, input, x, output, op, requested, options, as);
    return output;
  }

  /** An all-reduce whose arguments were checked: `algorithm` (auto: see #autoAllReduce) of `input` (local
   * tensor `x`) into `output`. */
  runAllReduce(
    what: string,
    input: CollectiveInput,
    x: Tensor,
    output: Tensor,
    op: ReduceOp,
    algorithm: GpuAllReduceAlgorithm,
    options: CollectiveOptions,
    as?: CallAs,
  ): void {
    if (algorithm === "auto") this.#autoAllReduce(what, input, x, output, op, options, as);
    else this.#launch("all-reduce", algorithm, what, input, x, output, op, options, {}, as);
  }

  /** allGather (see GpuCollectives), fingerprinted `as` the fused call it runs for (if any). */
  allGather(input: CollectiveInput, output: Tensor, options: AllGatherOptions, as?: CallAs): Tensor {
    const what = "allGather";
    const g = this.#g;
    checkTensorArg(what, "input", input);
    checkTensorArg(what, "output", output);
    const x = g.local(input, what);
    const requested = options.algorithm ?? "auto";
    checkAlgorithm(what, requested, GPU_ALL_GATHER_ALGORITHMS);
    const algorithm =
      requested === "auto" ? this.autoAlgorithm("all-gather", x.nbytes, stagedBytes(input, x)) : requested;
    const flags = options.progressFlags;
    if (flags) {
      if (algorithm !== "copy_engine")
        throw new InvalidArgumentError(`${what}: progressFlags come with algorithm copy_engine only`);
      if (flags.dtype !== "u32" || flags.numel < g.world)
        throw new InvalidArgumentError(
          `${what}: progressFlags must be u32 with at least ${g.world} elements`,
        );
      g.onDevice(what, flags);
    }
    checkSameDtype(what, x, output);
    checkNumel(what, "output", output, x.numel * g.world);
    g.onDevice(what, output);
    this.#launch("all-gather", algorithm, what, input, x, output, "sum", options, flags ? { flags } : {}, as);
    return output;
  }

  /** reduceScatter (see GpuCollectives), fingerprinted `as` the fused call it runs for (if any). */
  reduceScatter(input: CollectiveInput, output: Tensor, options: ReduceScatterOptions, as?: CallAs): Tensor {
    const what = "reduceScatter";
    const g = this.#g;
    checkTensorArg(what, "input", input);
    checkTensorArg(what, "output", output);
    const x = g.local(input, what);
    const op = options.op ?? "sum";
    const requested = options.algorithm ?? "auto";
    checkReduction(what, op, x.dtype);
    checkAlgorithm(what, requested, GPU_REDUCE_SCATTER_ALGORITHMS);
    checkSameDtype(what, x, output);
    checkDivisible(what, x, g.world);
    checkNumel(what, "output", output, x.numel / g.world);
    g.onDevice(what, output);
    if (requested === "auto") this.#autoReduceScatter(what, input, x, output, op, options, as);
    else this.#launch("reduce-scatter", requested, what, input, x, output, op, options, {}, as);
    return output;
  }

  /**
   * Readies what a process's first small calls would otherwise set up: the kernels auto runs for
   * PRELOAD_BYTES of each float dtype (sum; loaded from the disk cache only), and the device's memory pool,
   * whose first allocation maps its memory (milliseconds, measured) and which every fresh output comes from.
   */
  #preload(): void {
    const g = this.#g;
    if (g.world === 1) return;
    for (const collective of ["all-reduce", "all-gather", "reduce-scatter"] as const) {
      const input = collective === "reduce-scatter" ? PRELOAD_BYTES * g.world : PRELOAD_BYTES;
      const record = algorithmRecord(collective, this.autoAlgorithm(collective, PRELOAD_BYTES, input));
      for (const kernel of record.kernels)
        for (const dtype of kernel.reduces ? PRELOAD_DTYPES : PRELOAD_DTYPES.slice(0, 1))
          g.preload(kernel, dtype, "sum");
    }
    Tensor.empty([PRELOAD_BYTES], "u8", { device: g.device, stream: defaultStream(g.device) }).dispose();
  }

  /** A barrier on the GPUs (see GpuCollectives.barrier). */
  barrier(options: CollectiveOptions & { holdNs?: number }): void {
    const g = this.#g;
    const stream = g.stream(options);
    g.barrierHold.launch(
      { grid: 1, block: BARRIER_KERNEL_THREADS, stream },
      g.stagingView,
      options.holdNs ?? 0,
      g.tag({ kind: "barrier", count: 0 }, stream),
    );
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
        `${what}: the output overlaps the input without being it, and the call runs in pieces (the input is larger than the ${this.#g.capacityBytes}-byte staging buffer); pass the input itself or memory apart from it as output`,
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
        `${what}: the output overlaps the input other than as one rank's chunk, and the call runs in pieces (the input is larger than the ${this.#g.capacityBytes}-byte staging buffer); pass memory apart from the input as output`,
      );
    const step = this.#pieceElements("reduce-scatter", what, x.elementBytes);
    const xs = x.view([x.numel]);
    const outs = output.view([chunk]);
    const tail = (this.#g.world - 1) * chunk;
    const extra = { chunkStride: output.nbytes };
    for (let from = 0; from < chunk; from += step) {
      const end = Math.min(chunk, from + step);
      // From rank 0's piece to the last rank's, chunk elements apart (CollectiveCall.chunkStride).
      const piece = xs.slice(from, tail + end);
      const out = outs.slice(from, end);
      this.#launch("reduce-scatter", REDUCE_SCATTER_PIECES, what, piece, piece, out, op, options, extra, as);
    }
  }

  /** Elements per piece of a call auto runs in pieces (see pieceBytes). */
  #pieceElements(collective: CollectiveName, what: string, elementBytes: number): number {
    const bytes = pieceBytes(collective, this.#g.capacity);
    if (bytes === 0)
      throw new InvalidArgumentError(
        `${what}: the ${this.#g.capacityBytes}-byte staging buffer holds no piece of this call; pass a larger stagingBytes to init()`,
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
    extra: { flags?: Tensor; chunkStride?: number },
    as?: CallAs,
  ): void {
    const stream = this.#g.stream(options);
    const tag = this.#g.tag(
      {
        kind: as?.kind ?? collectiveKind(collective, algorithm),
        dtype: x.dtype,
        op: collective === "all-gather" ? undefined : op,
        count: x.numel,
        dims: as?.dims,
      },
      stream,
    );
    // One literal of one shape (the hot path's objects stay monomorphic: docs/perf-notes.md).
    const call: CollectiveCall = {
      what,
      input,
      x,
      output,
      op,
      stream,
      flags: extra.flags,
      chunkStride: extra.chunkStride,
      tag,
    };
    algorithmRecord(collective, algorithm).launch(this.#g, call);
  }

  /**
   * What auto runs for `bytes` (per rank: all-reduce and all-gather input, reduce-scatter output): the
   * tune table's pick, else the registry's built-in rule, the first that can run here: a mailbox
   * algorithm must fit the mailbox slot, and a staging one the staging buffer, which must hold `staged`
   * bytes (a plain input's size; 0 for a symmetric input; the copy-engine reduce-scatter needs world x
   * `bytes` either way). For all-reduce and reduce-scatter only algorithms that give the rank-order bits
   * are auto's, never NCCL's; where none can take the call whole (a plain input larger than the staging
   * buffer) auto runs it in pieces the staging buffer holds, each a call of its own, and this names the
   * pieces' algorithm (all-reduce: auto's pick for a piece; reduce-scatter: copy_engine).
   */
  autoAlgorithm<C extends CollectiveName>(collective: C, bytes: number, staged = 0): GpuAlgorithm<C> {
    const whole = this.#autoWhole(collective, bytes, staged);
    if (whole) return whole;
    if (collective === "reduce-scatter") return REDUCE_SCATTER_PIECES as GpuAlgorithm<C>;
    const piece = Math.min(bytes, pieceBytes(collective, this.#g.capacity));
    return this.#autoWhole(collective, piece, piece)!;
  }

  /** auto's pick for the whole call (see autoAlgorithm); undefined: none can take it whole. */
  #autoWhole<C extends CollectiveName>(
    collective: C,
    bytes: number,
    staged: number,
  ): GpuAlgorithm<C> | undefined {
    const { tuned, capacity } = this.#g;
    // The table names rank-order algorithms only: its loader refuses a baseline (src/ops/tune-table.ts).
    const pick = tuned && pickRule(tuned.rules[collective], bytes);
    if (pick && canRun(collective, pick, bytes, staged, capacity)) return pick as GpuAlgorithm<C>;
    return builtInPick(collective, bytes, staged, capacity);
  }

  canRun(collective: CollectiveName, algorithm: string, bytes: number, staged = 0): boolean {
    return canRun(collective, algorithm, bytes, staged, this.#g.capacity);
  }
}
