// allReduceRmsNorm on GPUs: checks (src/ops/norm/checks.ts, shared with the CPU backend), then one
// kernel of device/include/symmkit/fused/ar_rms_norm.cuh (lamport, lamport_two_shot: the group's Lamport
// mailbox; one_shot, two_shot: its staging buffer between barriers), or symmkit's or NCCL's all-reduce
// followed by the norm kernel (sequential, nccl). Kernels are resolved before anything is enqueued. Every
// algorithm but nccl gives the rank-order bits at every size, and auto picks only those.
import { InvalidArgumentError, UnsupportedError } from "../../errors.js";
import type { CallAs } from "../../distributed/fingerprint.js";
import type { SymmetricTensor } from "../../distributed/symmetric-memory.js";
import type { DType } from "../../runtime/dtype.js";
import type { Kernel } from "../../runtime/kernel.js";
import { Graph } from "../../runtime/graph.js";
import { sharedModule } from "../../runtime/module.js";
import { defaultStream, type Stream } from "../../runtime/stream.js";
import { Tensor } from "../../runtime/tensor.js";
import {
  AR_NORM_ALGORITHMS,
  checkAllReduceRmsNorm,
  checkNormAliasing,
  normOperandsDigest,
  type AllReduceRmsNormOptions,
  type ArNormAlgorithm,
  type NormProblem,
} from "./checks.js";
import {
  AR_NORM_PARAMS,
  arNormExpr,
  arNormProgram,
  normSlots,
  type ArNormKernel,
  type NormSlots,
  type ArNormParams,
} from "./programs.js";
import { overlaps, sameSpan } from "../gemm/matmul.js";
import { launchNorm, normKernel } from "./rms-norm-op.js";
import { Memo3 } from "../memo.js";
import { pickRule } from "../tune-table.js";
import { AR_NORM, type ArNormRecord } from "./records.js";
import type { GpuColl } from "../coll/gpu-coll.js";
import type { GpuGroup } from "../gpu-group.js";
import { checkAlgorithm, checkCapacity, checkTensorArg } from "../validate.js";

/** The kernels' block: one row at a time (NORM_THREADS in src/ops/norm/rms-norm.ts). */
const BLOCK = 512;
/** What one block of a mailbox kernel sends at most, where rows are fewer than SMs (the plain Lamport
 * all-reduce spreads 16 KiB over 8 blocks too). */
const SEND_BYTES_PER_BLOCK = 2048;

export type ArNormInput = Tensor | SymmetricTensor;
export interface ArNormResult {
  readonly output: Tensor;
  /** The pre-norm sum, when residualOut was given. */
  readonly residualOut: Tensor | undefined;
}

export class ArNorm {
  readonly #ctx: GpuGroup;
  readonly #coll: GpuColl;
  /** Kernel handles by kernel, dtype and slots, resolved once. */
  readonly #kernels: Memo3<ArNormKernel, DType, NormSlots, Kernel>;

  /** The group's context, and its collectives for the sequential constructions' all-reduce. */
  constructor(ctx: GpuGroup, coll: GpuColl) {
    this.#ctx = ctx;
    this.#coll = coll;
    this.#kernels = new Memo3((kernel, dtype, slots) =>
      sharedModule(arNormProgram(kernel, dtype), ctx.device).kernel(
        arNormExpr(kernel, dtype, ctx.world, slots),
        AR_NORM_PARAMS[kernel],
      ),
    );
  }

  /**
   * Every check run() makes before it enqueues anything, on a plain x whose output is given: what
   * matmulAllReduce asks before its GEMM, so that a call the norm would refuse is refused first.
   */
  check(x: Tensor, o: AllReduceRmsNormOptions<Tensor> & { algorithm?: ArNormAlgorithm }, what: string): void {
    this.#prepare(x, o, what, defaultStream(this.#ctx.device));
  }

  /** The checks; the problem, the output (allocated on `stream` once x passed), whether x is read in place,
   * and the algorithm. */
  #prepare(
    input: ArNormInput,
    o: AllReduceRmsNormOptions<Tensor> & { algorithm?: ArNormAlgorithm },
    what: string,
    stream: Stream,
  ): {
    x: Tensor;
    p: NormProblem;
    output: Tensor;
    inPlace: boolean;
    algorithm: Exclude<ArNormAlgorithm, "auto">;
  } {
    const ctx = this.#ctx;
    const x = ctx.local(input, what);
    const p = checkAllReduceRmsNorm(what, x, o);
    const requested = o.algorithm ?? "auto";
    checkAlgorithm(what, requested, AR_NORM_ALGORITHMS);
    for (const t of [o.weight, o.bias, o.residual, o.output, o.residualOut]) if (t) ctx.onDevice(what, t);
    const output = o.output ?? Tensor.empty(x.shape, x.dtype, { device: ctx.device, stream });
    try {
      checkNormAliasing(what, x, o, output, overlaps, sameSpan);
      // A symmetric x is read in place unless an output overlaps it (peers may still read it).
      const inPlace =
        !(input instanceof Tensor) && !overlaps(output, x) && !(o.residualOut && overlaps(o.residualOut, x));
      const algorithm = requested === "auto" ? this.autoAlgorithm(x.nbytes, p.rows, inPlace) : requested;
      this.#checkRoom(what, algorithm, p, x.nbytes, inPlace, o, output);
      if (ctx.checkCalls && Graph.activeCapture(stream) !== undefined)
        throw new UnsupportedError(
          `${what}: with SYMMKIT_CHECK_CALLS, each call reads its weight and bias back to the host, which a ` +
            "CUDA graph cannot hold; capture without it, or call outside the capture",
        );
      return { x, p, output, inPlace, algorithm };
    } catch (e) {
      if (output !== o.output) output.dispose(); // refused (nothing enqueued): the output this call made goes back
      throw e;
    }
  }

  /** With SYMMKIT_CHECK_CALLS, the digest of this call's weight and bias, read back on `stream` (so after
   * whatever wrote them there; #prepare refused a capture); else 0 (not taken). */
  #operandsDigest(o: AllReduceRmsNormOptions<Tensor>, stream: Stream): number {
    if (!this.#ctx.checkCalls) return 0;
    const bias = o.bias?.toHost({ stream });
    return normOperandsDigest(o.weight.toHost({ stream }), bias);
  }

  run(
    input: ArNormInput,
    o: AllReduceRmsNormOptions<Tensor> & { algorithm?: ArNormAlgorithm },
    stream: Stream,
  ): ArNormResult {
    const what = "allReduceRmsNorm";
    const ctx = this.#ctx;
    checkTensorArg(what, "x", input);
    const { x, p, output, inPlace, algorithm } = this.#prepare(input, o, what, stream);
    const norm = this.#normArgs(p, o, output);
    // Its fingerprint: the algorithm, the hidden size (the count alone does not pin the rows), and with
    // SYMMKIT_CHECK_CALLS the digest of weight and bias.
    const as: CallAs = {
      kind: AR_NORM[algorithm].kinds[0],
      dims: [p.hidden, this.#operandsDigest(o, stream)],
    };
    const sequential = algorithm === "sequential" || algorithm === "nccl";
    if (ctx.world === 1 || sequential) {
      // The all-reduce's sum goes where the norm can read it in place (see #checkRoom); one rank has
      // nothing to reduce.
      const sum = ctx.world === 1 ? x : p.outDtype === p.dtype ? output : o.residualOut!;
      const k = normKernel(ctx.device, p.dtype, p.hidden);
      // symmkit's all-reduce (auto: rank order at every size, in pieces where the staging buffer is too
      // small) or NCCL's, fingerprinted as this op.
      const inner = algorithm === "nccl" ? "nccl" : "auto";
      if (ctx.world > 1) this.#coll.runAllReduce(what, input, x, sum, "sum", inner, { stream }, as);
      launchNorm(k, sum, o, output, p.rows, p.hidden, p.eps, p.outScaleInv, stream);
      return { output, residualOut: o.residualOut };
    }
    const kernel = (AR_NORM[algorithm] as ArNormRecord).kernel!;
    const k = this.#kernels.get(kernel, p.dtype, normSlots(p.hidden)) as Kernel<ArNormParams[typeof kernel]>;
    const tag = ctx.tag({ ...as, dtype: p.dtype, op: "sum", count: x.numel }, stream);
    const sm = ctx.device.props.smCount;
    const cfg = { grid: Math.min(p.rows, sm), block: BLOCK, stream };
    const m = ctx.mailbox;
    if (kernel === "lamport_ar_rms_norm" || kernel === "lamport_two_shot_ar_rms_norm") {
      // Every block of a mailbox kernel sends: at most SEND_BYTES_PER_BLOCK each, one block per SM.
      const grid = Math.min(sm, Math.max(p.rows, Math.ceil(x.nbytes / SEND_BYTES_PER_BLOCK)));
      (k as Kernel<ArNormParams["lamport_ar_rms_norm"]>).launch(
        { grid, block: BLOCK, stream },
        m.view,
        x,
        m.state,
        m.stride,
        tag,
        ...norm,
      );
      return { output, residualOut: o.residualOut };
    }
    const [view, copyIn] =
      inPlace && !(input instanceof Tensor) ? [input.deviceView(), 0n] : [ctx.stagingView, x.ptr];
    if (kernel === "pull_ar_rms_norm") {
      (k as Kernel<ArNormParams["pull_ar_rms_norm"]>).launch(cfg, view, copyIn, tag, ...norm);
    } else {
      // The pre-norm rows go into every rank's scratch: the staged input itself, or the staging buffer
      // when x is read in place (a caller's symmetric tensor is never overwritten).
      const scratch = inPlace ? ctx.stagingView : view;
      (k as Kernel<ArNormParams["pull_two_shot_ar_rms_norm"]>).launch(
        cfg,
        view,
        scratch,
        copyIn,
        tag,
        ...norm,
      );
    }
    return { output, residualOut: o.residualOut };
  }

  /**
   * What auto picks for `bytes` of x per rank: the tune table's rule, else the built-in one, the first
   * that fits this group's mailbox and staging buffer (`inPlace`: a symmetric x read in place); at the
   * latest sequential, which always runs. Every pick gives the rank-order bits (a table may name nothing
   * else: src/ops/tune-table.ts).
   */
  autoAlgorithm(bytes: number, rows: number, inPlace = false): Exclude<ArNormAlgorithm, "auto"> {
    const ctx = this.#ctx;
    const fits = (a: Exclude<ArNormAlgorithm, "auto">): boolean =>
      roomFor(a, bytes, rows, ctx.world, ctx.mailbox.slotBytes, ctx.staging.tensor.nbytes, inPlace) ===
      undefined;
    const tuned =
      ctx.tuned?.arNorm &&
      (pickRule(ctx.tuned.arNorm.rules, bytes) as Exclude<ArNormAlgorithm, "auto"> | undefined);
    if (tuned && AR_NORM[tuned].rankOrder && fits(tuned)) return tuned;
    for (const [a, max] of AUTO_ORDER) if (bytes <= max && fits(a)) return a;
    return "sequential";
  }

  #checkRoom(
    what: string,
    algorithm: Exclude<ArNormAlgorithm, "auto">,
    p: NormProblem,
    bytes: number,
    inPlace: boolean,
    o: AllReduceRmsNormOptions<Tensor>,
    output: Tensor,
  ): void {
    const ctx = this.#ctx;
    const why = roomFor(
      algorithm,
      bytes,
      p.rows,
      ctx.world,
      ctx.mailbox.slotBytes,
      ctx.staging.tensor.nbytes,
      inPlace,
    );
    if (why?.kind === "mailbox")
      throw new InvalidArgumentError(
        `${what}: ${algorithm} pushes ${why.bytes} bytes to each peer, more than the ${ctx.mailbox.slotBytes}-byte mailbox slot; use another algorithm, or a larger mailboxSlotBytes`,
      );
    if (why?.kind === "staging")
      checkCapacity(`${what} (${algorithm})`, why.bytes, ctx.staging.tensor.nbytes);
    if ((algorithm === "sequential" || algorithm === "nccl") && output.dtype !== p.dtype) {
      // The sum needs a home of x's dtype: residualOut, unless that is the residual it still has to read.
      const r = o.residualOut;
      if (!r || (o.residual && overlaps(r, o.residual)))
        throw new InvalidArgumentError(
          `${what}: ${algorithm} with an fp8 output keeps the all-reduced sum in residualOut, which must be given and must not be the residual; pass another residualOut or use a fused algorithm`,
        );
    }
  }

  #normArgs(p: NormProblem, o: AllReduceRmsNormOptions<Tensor>, output: Tensor) {
    return [
      o.bias?.ptr ?? 0n,
      o.residual?.ptr ?? 0n,
      o.residualOut?.ptr ?? 0n,
      o.weight,
      output,
      p.rows,
      p.hidden,
      p.eps,
      p.outScaleInv,
    ] as const;
  }
}

/** What `algorithm` needs that this group lacks (undefined: it can run): mailbox bytes per peer, or
 * staging bytes. The inner all-reduce of sequential judges its own needs. */
/** auto's built-in rule, read once from the records: the rank-order algorithms with a bound, in record
 * order, each up to its bytes of x (sequential's all-reduce runs at any size). */
const AUTO_ORDER = (Object.entries(AR_NORM) as [Exclude<ArNormAlgorithm, "auto">, ArNormRecord][]).flatMap(
  ([a, r]) => (r.rankOrder && r.autoMaxBytes !== undefined ? [[a, r.autoMaxBytes] as const] : []),
);

export function roomFor(
  algorithm: Exclude<ArNormAlgorithm, "auto">,
  bytes: number,
  rows: number,
  world: number,
  slotBytes: number,
  stagingBytes: number,
  inPlace: boolean,
): { kind: "mailbox" | "staging"; bytes: number } | undefined {
  const room = (AR_NORM[algorithm] as ArNormRecord).room;
  if (world === 1 || room === undefined) return undefined;
  const { mailbox, staging } = room(bytes, rows, world, inPlace);
  // Written as "fits" so that a size that is no number never counts as fitting.
  if (!(mailbox <= slotBytes)) return { kind: "mailbox", bytes: mailbox };
  if (!(staging <= stagingBytes)) return { kind: "staging", bytes: staging };
  return undefined;
}
