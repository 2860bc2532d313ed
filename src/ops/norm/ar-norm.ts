// allReduceRmsNorm on GPUs: checks (src/ops/norm/checks.ts, shared with the CPU backend), then one
// kernel of device/include/symmkit/fused/ar_rms_norm.cuh (lamport, lamport_two_shot: the group's Lamport
// mailbox; one_shot, two_shot: its staging buffer between barriers), or symmkit's or NCCL's all-reduce
// followed by the norm kernel (sequential, nccl). Kernels are resolved before anything is enqueued. Every
// algorithm but nccl gives the rank-order bits at every size, and auto picks only those.
import { InvalidArgumentError, UnsupportedError } from "../../errors.js";
import type { CallAs, CallKind, CallShape, CallTag } from "../../distributed/fingerprint.js";
import type { SymmetricTensor } from "../../distributed/symmetric-memory.js";
import type { DeviceMemory } from "../../runtime/memory.js";
import type { Device } from "../../runtime/device.js";
import type { DType } from "../../runtime/dtype.js";
import type { Kernel } from "../../runtime/kernel.js";
import { Graph } from "../../runtime/graph.js";
import { sharedModule } from "../../runtime/module.js";
import { defaultStream, type Stream } from "../../runtime/stream.js";
import { Tensor } from "../../runtime/tensor.js";
import {
  AR_NORM_ALGORITHMS,
  AR_NORM_RANK_ORDER,
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
import { pickRule, type TuneRule } from "../tune-table.js";
import { checkAlgorithm, checkCapacity } from "../validate.js";

/** The kernels' block: one row at a time (NORM_THREADS in src/ops/norm/rms-norm.ts). */
const BLOCK = 512;
/** What one block of a mailbox kernel sends at most, where rows are fewer than SMs (the plain Lamport
 * all-reduce spreads 16 KiB over 8 blocks too). */
const SEND_BYTES_PER_BLOCK = 2048;
/** auto's built-in rule (2 H200s, bench/results/h200x2/ar-norm*.json): lamport up to this many bytes of
 * x per rank, lamport_two_shot up to LAMPORT_TWO_SHOT_MAX_BYTES, then one_shot. */
export const AR_NORM_LAMPORT_MAX_BYTES = 1024 * 1024;
export const AR_NORM_LAMPORT_TWO_SHOT_MAX_BYTES = 4 * 1024 * 1024;

/** What the op uses of the group's collectives (GpuCollectives provides it). */
export interface ArNormContext {
  readonly device: Device;
  readonly rank: number;
  readonly world: number;
  readonly staging: SymmetricTensor;
  readonly stagingView: Uint8Array;
  readonly mailbox: {
    readonly view: Uint8Array;
    readonly state: DeviceMemory;
    readonly stride: number;
    readonly slotBytes: number;
  };
  /** The tune table's rules for this op, if any. */
  readonly rules: readonly TuneRule[] | undefined;
  /** SYMMKIT_CHECK_CALLS, as every rank of the group set it: weight and bias digested at every call. */
  readonly checkCalls: boolean;
  /** The call's fingerprint (and the group's checks before any call). */
  tag(shape: CallShape, stream: Stream): CallTag;
  /** symmkit's all-reduce of `input` (whose local tensor is `x`) into `output` with `algorithm`: "auto"
   * (rank order at every size, in pieces where the staging buffer is too small) or "nccl"; fingerprinted
   * `as` this op. */
  allReduce(
    input: Tensor | SymmetricTensor,
    x: Tensor,
    output: Tensor,
    algorithm: "auto" | "nccl",
    as: CallAs,
    stream: Stream,
  ): void;
  /** The local tensor of an input, checked to be this group's and on its GPU. */
  local(input: Tensor | SymmetricTensor, what: string): Tensor;
  onDevice(what: string, t: Tensor): void;
}

export type ArNormInput = Tensor | SymmetricTensor;
export interface ArNormResult {
  readonly output: Tensor;
  /** The pre-norm sum, when residualOut was given. */
  readonly residualOut: Tensor | undefined;
}

export class ArNorm {
  readonly #ctx: ArNormContext;
  /** Kernel handles by kernel, dtype and slots, resolved once. */
  readonly #kernels: Memo3<ArNormKernel, DType, NormSlots, Kernel>;

  constructor(ctx: ArNormContext) {
    this.#ctx = ctx;
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
    const { x, p, output, inPlace, algorithm } = this.#prepare(input, o, what, stream);
    const norm = this.#normArgs(p, o, output);
    // Its fingerprint: the algorithm, the hidden size (the count alone does not pin the rows), and with
    // SYMMKIT_CHECK_CALLS the digest of weight and bias.
    const as: CallAs = { kind: KINDS[algorithm], dims: [p.hidden, this.#operandsDigest(o, stream)] };
    const sequential = algorithm === "sequential" || algorithm === "nccl";
    if (ctx.world === 1 || sequential) {
      // The all-reduce's sum goes where the norm can read it in place (see #checkRoom); one rank has
      // nothing to reduce.
      const sum = ctx.world === 1 ? x : p.outDtype === p.dtype ? output : o.residualOut!;
      const k = normKernel(ctx.device, p.dtype, p.hidden);
      if (ctx.world > 1) ctx.allReduce(input, x, sum, algorithm === "nccl" ? "nccl" : "auto", as, stream);
      launchNorm(k, sum, o, output, p.rows, p.hidden, p.eps, p.outScaleInv, stream);
      return { output, residualOut: o.residualOut };
    }
    const kernel = KERNELS[algorithm];
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
    const tuned = ctx.rules && (pickRule(ctx.rules, bytes) as Exclude<ArNormAlgorithm, "auto"> | undefined);
    if (tuned && AR_NORM_RANK_ORDER[tuned] && fits(tuned)) return tuned;
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

/** The fingerprint's call kind of each algorithm. */
const KINDS = {
  lamport: "all-reduce-rms-norm/lamport",
  lamport_two_shot: "all-reduce-rms-norm/lamport_two_shot",
  one_shot: "all-reduce-rms-norm/one_shot",
  two_shot: "all-reduce-rms-norm/two_shot",
  sequential: "all-reduce-rms-norm/sequential",
  nccl: "all-reduce-rms-norm/nccl",
} as const satisfies Record<Exclude<ArNormAlgorithm, "auto">, CallKind>;

const KERNELS = {
  lamport: "lamport_ar_rms_norm",
  lamport_two_shot: "lamport_two_shot_ar_rms_norm",
  one_shot: "pull_ar_rms_norm",
  two_shot: "pull_two_shot_ar_rms_norm",
} as const satisfies Partial<Record<ArNormAlgorithm, ArNormKernel>>;

/** auto's built-in rule: the first of these that fits, each up to its bytes of x (sequential's all-reduce
 * runs at any size). */
const AUTO_ORDER: readonly (readonly [Exclude<ArNormAlgorithm, "auto">, number])[] = [
  ["lamport", AR_NORM_LAMPORT_MAX_BYTES],
  ["lamport_two_shot", AR_NORM_LAMPORT_TWO_SHOT_MAX_BYTES],
  ["one_shot", Infinity],
];

/** What `algorithm` needs that this group lacks (undefined: it can run): mailbox bytes per peer, or
 * staging bytes. The inner all-reduce of sequential judges its own needs. */
export function roomFor(
  algorithm: Exclude<ArNormAlgorithm, "auto">,
  bytes: number,
  rows: number,
  world: number,
  slotBytes: number,
  stagingBytes: number,
  inPlace: boolean,
): { kind: "mailbox" | "staging"; bytes: number } | undefined {
  if (world === 1) return undefined;
  const mailbox = (need: number) =>
    need <= slotBytes ? undefined : { kind: "mailbox" as const, bytes: need };
  switch (algorithm) {
    case "lamport":
      return mailbox(bytes);
    case "lamport_two_shot":
      return mailbox(2 * Math.ceil(rows / world) * (bytes / rows));
    case "one_shot":
      return inPlace || bytes <= stagingBytes ? undefined : { kind: "staging", bytes };
    case "two_shot":
      return bytes <= stagingBytes ? undefined : { kind: "staging", bytes };
    default:
      return undefined;
  }
}
