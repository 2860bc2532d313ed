// The tensor-parallel matmuls with their communication hidden under the GEMM, on GPU symmetric memory.
//
// all-gather + GEMM (allGatherMatmul): every rank's shard of A reaches every rank while the persistent
// GEMM runs. The GEMM starts at this rank's own rows, read in place (a second tensor map), and walks the
// peers' rows in the order they land, waiting per shard on a flag (RowFlagsReady). Producers: the copy
// engines (a barrier kernel, then one copy per peer shard, rank-rotated, each followed by its flag
// written by the stream), or a few SMs pulling the shards (fused/all_gather_pull.cuh) beside a GEMM on
// the other SMs. This rank's own shard is copied into `gathered` on a third stream, for the caller and
// for the tiles that straddle two shards.
//
// GEMM + reduce-scatter (matmulReduceScatter): after a barrier kernel (every owner has read the previous
// call's partials), one GEMM with the sharded order and the scatter-reduce epilogue
// (gemm/hopper_gemm.cuh): every tile is stored as a bf16 partial into its owner's receive slot and
// flagged there, and each owner reduces its rows in rank order while the GEMM still runs. The group's
// symmetric staging buffer is the receive buffer; its pad, beyond the barrier slots, holds the flags.
//
// GEMM + all-reduce (matmulAllReduce, fused): one GEMM with an all-reduce epilogue. At few rows the decode
// GEMM (gemm/decode_gemm.cuh), where its partial fits a mailbox slot, speaks the Lamport mailbox's protocol:
// every tile's bf16 partial goes into slot `rank` of every peer's mailbox buffer, the data its own mark, and
// every rank sums the ranks' partials in rank order as they land; no barrier, no flags. Otherwise (the
// split-K Hopper GEMM's AllReduceTiles, or a partial past a slot), after a barrier kernel, every tile's
// partial goes into slot `rank` of every rank's receive buffer (the staging buffer, world slots of [m, n])
// and is flagged there. The tile flags are the same words as GEMM + reduce-scatter's, and the three count
// their calls with one epoch, so a flag never holds a value from a later call.
//
// Every path is stream-ordered on the caller's stream (side streams fork from it and join it again), so
// the calls are graph-capturable; every wait is bounded.
import { InvalidArgumentError, UnsupportedError } from "../../errors.js";
import type { CallTag } from "../../distributed/fingerprint.js";
import type { SymmetricTensor } from "../../distributed/symmetric-memory.js";
import { Event } from "../../runtime/event.js";
import { copyDeviceToDevice, DeviceMemory, memset, writeValue32 } from "../../runtime/memory.js";
import { sharedModule } from "../../runtime/module.js";
import { defaultStream, Stream } from "../../runtime/stream.js";
import { Tensor } from "../../runtime/tensor.js";
import { SplitScratch } from "../gemm/split-scratch.js";
import { dtypeInfo } from "../../runtime/dtype.js";
import { CublasLtMatmul } from "../gemm/cublaslt-matmul.js";
import {
  ALL_GATHER_MATMUL_ALGORITHMS,
  BUILT_IN_FUSED_RULES,
  checkAllGatherMatmul,
  checkMatmulAllReduce,
  checkMatmulReduceScatter,
  MATMUL_ALL_REDUCE_ALGORITHMS,
  MATMUL_REDUCE_SCATTER_ALGORITHMS,
  type AllGatherMatmulAlgorithm,
  type AllGatherMatmulOptions,
  type FusedMatmulOptions,
  type FusedProblem,
  type MatmulAllReduceAlgorithm,
  type MatmulAllReduceOptions,
  type MatmulReduceScatterAlgorithm,
} from "./checks.js";
import { checkAllReduceRmsNorm, checkNormAliasing } from "../norm/checks.js";
import {
  ALL_GATHER_PULL_EXPR,
  ALL_GATHER_PULL_PARAMS,
  FUSED_PROGRAMS,
  SCATTER_FLAGS_OFFSET_BYTES,
} from "./programs.js";
import { GEMM_TILE_M, type GemmVariant } from "../gemm/programs.js";
import {
  GEMM_MAX_WORLD,
  gemmTiles,
  HopperGemm,
  scatterFlagCount,
  type GemmScatter,
} from "../gemm/hopper-gemm.js";
import {
  checkMatmul,
  gemmOperands,
  launchSymmkitGemm,
  overlaps,
  sameSpan,
  symmkitGemmPlan,
  TILE_GEMM_PLAN,
  type Span,
  type SymmkitGemmPlan,
} from "../gemm/matmul.js";
import {
  decodeFlagCount,
  decodeMailboxFits,
  DecodeGemm,
  decodeVariant,
  describeDecodeShape,
  type DecodeShape,
} from "../gemm/decode-gemm.js";
import { launchNorm, normKernel } from "../norm/rms-norm-op.js";
import { checkAlgorithm, checkCapacity, checkTensorArg } from "../validate.js";
import { pickFusedRule, type TunedFused } from "../tune-table.js";
import type { GpuColl } from "../coll/gpu-coll.js";
import type { GpuGroup } from "../gpu-group.js";
import type { ArNorm } from "../norm/ar-norm.js";

/** SMs the pull producer of all-gather + GEMM takes from the GEMM. */
export const PULL_BLOCKS = 16;
const PULL_THREADS = 512;

/** A plain tensor, or a symmetric one whose local tensor is read in place (all-gather + GEMM's shard). */
export type FusedInput = Tensor | SymmetricTensor;

type Options<T> = FusedMatmulOptions<T> & { readonly stream?: Stream };

interface Sides {
  readonly streams: [Stream, Stream];
  readonly fork: Event;
  readonly joins: [Event, Event];
}

/** The auto rules GpuCollectives shows for inspection (`collectives.fusedMatmul`). */
export type FusedAutoRules = Pick<
  FusedMatmul,
  "autoAllGatherMatmul" | "autoMatmulReduceScatter" | "autoMatmulAllReduce" | "scatterFlagCapacity"
>;

export class FusedMatmul {
  readonly #ctx: GpuGroup;
  readonly #coll: GpuColl;
  readonly #arNorm: ArNorm;
  readonly #gemms = new Map<string, HopperGemm>();
  readonly #decoders = new Map<string, DecodeGemm>();
  readonly #flags: DeviceMemory;
  /** GEMM + reduce-scatter's call count and its readers (ScatterReduce in gemm/hopper_gemm.cuh). */
  readonly #epoch: DeviceMemory;
  #side: Sides | undefined;
  #partial: Tensor | undefined;

  /** The group's context, its collectives and allReduceRmsNorm (the sequential constructions). */
  constructor(ctx: GpuGroup, coll: GpuColl, arNorm: ArNorm) {
    this.#ctx = ctx;
    this.#coll = coll;
    this.#arNorm = arNorm;
    this.#flags = DeviceMemory.alloc(4 * GEMM_MAX_WORLD, ctx.group.device);
    this.#epoch = DeviceMemory.alloc(8, ctx.group.device);
    const s = defaultStream(ctx.group.device);
    memset(this.#epoch.ptr, 0, 4, 2, s);
    s.synchronize();
  }

  /** Flags one GEMM + reduce-scatter may use: what the staging pad holds beyond the barrier slots. */
  get scatterFlagCapacity(): number {
    return (this.#ctx.staging.padBytes - SCATTER_FLAGS_OFFSET_BYTES) / 4;
  }

  /** All-gather + GEMM: see GpuCollectives.allGatherMatmul. */
  allGatherMatmul(
    input: FusedInput,
    b: Tensor,
    o: AllGatherMatmulOptions<Tensor> & {
      readonly stream: Stream;
      readonly algorithm?: AllGatherMatmulAlgorithm;
    },
  ): { out: Tensor; gathered: Tensor } {
    const what = "allGatherMatmul";
    checkTensorArg(what, "aShard", input);
    checkTensorArg(what, "b", b);
    const { group } = this.#ctx;
    const aShard = input instanceof Tensor ? input : input.tensor;
    if (!(input instanceof Tensor) && (input.worldSize !== group.worldSize || input.rank !== group.rank))
      throw new InvalidArgumentError(`${what}: the symmetric shard belongs to another group`);
    if (!(input instanceof Tensor)) input.checkBarrierRoom(what, PULL_BLOCKS);
    const requested = o.algorithm ?? "auto";
    checkAlgorithm(what, requested, ALL_GATHER_MATMUL_ALGORITHMS);
    this.#sameDevice(what, {
      aShard,
      b,
      out: o.out,
      gathered: o.gathered,
      scaleA: o.scaleA,
      scaleB: o.scaleB,
    });
    const p = checkAllGatherMatmul(what, group.worldSize, aShard, b, o);
    const staged = input instanceof Tensor ? p.shardRows * p.k * dtypeInfo(p.elem).bytes : 0;
    const algorithm =
      group.worldSize === 1
        ? "sequential"
        : requested === "auto"
          ? this.autoAllGatherMatmul(p, staged)
          : requested;
    if (algorithm.startsWith("fused")) {
      checkCapacity(`${what} (the shard staged for the peers)`, staged, this.#ctx.staging.tensor.nbytes);
    }
    if (aShard.ptr % 16n !== 0n)
      throw new InvalidArgumentError(`${what}: aShard must start on a 16-byte boundary`);
    const device = group.device;
    // New outputs are made on the call's stream (pooled), and given back if a check below refuses the call.
    const made = { device, stream: o.stream ?? defaultStream(device) };
    const gathered = o.gathered ?? Tensor.empty([p.m, p.k], p.elem, made);
    const out = o.out ?? Tensor.empty([p.m, p.n], "bf16", made);
    const scales = { scaleA: o.scaleA, scaleB: o.scaleB };
    try {
      checkMatmul(gathered, b, out, { layoutB: p.layoutB, ...spans(scales) }, what);
      for (const [name, t] of [
        ["aShard", aShard],
        ["b", b],
      ] as const) {
        if (overlaps(gathered, t)) throw new InvalidArgumentError(`${what}: gathered overlaps ${name}`);
      }
      if (overlaps(out, aShard)) throw new InvalidArgumentError(`${what}: out overlaps aShard`);
    } catch (e) {
      if (gathered !== o.gathered) gathered.dispose();
      if (out !== o.out) out.dispose();
      throw e;
    }
    const s = o.stream;
    if (algorithm === "nccl_cublaslt") {
      // NCCL carries no fingerprint of ours: a barrier that does goes first (as the nccl collectives').
      const tag = this.#ctx.tag(
        { kind: "all-gather-matmul/nccl_cublaslt", dtype: p.elem, count: aShard.numel, dims: [p.k] },
        s,
      );
      this.#ctx.groupBarrier(this.#ctx.staging.deviceView(), s, tag);
      this.#ctx.comm.allGather(aShard, gathered.view([p.m * p.k]), s);
      this.#cublas(p, gathered, b, out, scales, s);
    } else if (algorithm === "sequential") {
      this.#coll.allGather(
        aShard,
        gathered.view([p.m * p.k]),
        { stream: s },
        {
          kind: "all-gather-matmul/sequential",
          dims: [p.k],
        },
      );
      this.#tileGemm(p, gathered, b, out, scales, s);
    } else {
      const tag = this.#ctx.tag(
        {
          kind: `all-gather-matmul/${algorithm}`,
          dtype: p.elem,
          count: aShard.numel,
          dims: [p.k],
        },
        s,
      );
      this.#fusedAllGather(input, aShard, p, b, gathered, out, scales, s, algorithm === "fused_pull", tag);
    }
    return { out, gathered };
  }

  /** GEMM + reduce-scatter: see GpuCollectives.matmulReduceScatter. */
  matmulReduceScatter(
    a: Tensor,
    b: Tensor,
    o: Options<Tensor> & { readonly stream: Stream; readonly algorithm?: MatmulReduceScatterAlgorithm },
  ): Tensor {
    const what = "matmulReduceScatter";
    checkTensorArg(what, "a", a);
    checkTensorArg(what, "b", b);
    const { group } = this.#ctx;
    const requested = o.algorithm ?? "auto";
    checkAlgorithm(what, requested, MATMUL_REDUCE_SCATTER_ALGORITHMS);
    this.#sameDevice(what, { a, b, out: o.out, scaleA: o.scaleA, scaleB: o.scaleB });
    const p = checkMatmulReduceScatter(what, group.worldSize, a, b, o);
    const scales = { scaleA: o.scaleA, scaleB: o.scaleB };
    checkMatmul(a, b, undefined, { layoutB: p.layoutB, ...spans(scales) }, what);
    const algorithm =
      group.worldSize === 1
        ? "sequential"
        : requested === "auto"
          ? this.autoMatmulReduceScatter(p)
          : requested;
    if (algorithm.startsWith("fused")) this.#checkScatterRoom(what, p);
    const out =
      o.out ??
      Tensor.empty([p.shardRows, p.n], "bf16", {
        device: group.device,
        stream: o.stream ?? defaultStream(group.device),
      });
    if (out.ptr % 16n !== 0n) throw new InvalidArgumentError(`${what}: out must start on a 16-byte boundary`);
    if (overlaps(out, a) || overlaps(out, b))
      throw new InvalidArgumentError(`${what}: out overlaps an input`);
    const s = o.stream;
    if (algorithm === "sequential" || algorithm === "nccl_cublaslt") {
      const partial = this.#partialScratch(p);
      if (algorithm === "nccl_cublaslt") {
        const tag = this.#ctx.tag(
          { kind: "matmul-reduce-scatter/nccl_cublaslt", dtype: p.elem, count: a.numel, dims: [p.n, p.k] },
          s,
        );
        this.#ctx.groupBarrier(this.#ctx.staging.deviceView(), s, tag);
        this.#cublas(p, a, b, partial, scales, s);
        this.#ctx.comm.reduceScatter(partial, out.view([p.shardRows * p.n]), "sum", s);
      } else {
        this.#tileGemm(p, a, b, partial, scales, s);
        this.#coll.reduceScatter(
          partial,
          out.view([p.shardRows * p.n]),
          { stream: s },
          {
            kind: "matmul-reduce-scatter/sequential",
            dims: [p.n, p.k],
          },
        );
      }
      return out;
    }
    const { staging } = this.#ctx;
    // Kernels are resolved (compiled, loaded) before anything is enqueued: a module load waits for the
    // GPU, which would otherwise wait for a peer inside the call.
    const gemm = this.#gemm(p, "sharded", "none", "scatter-reduce");
    // Every owner finished reading its receive buffer in the previous call.
    const tag = this.#ctx.tag(
      { kind: "matmul-reduce-scatter/fused", dtype: p.elem, count: a.numel, dims: [p.n, p.k] },
      s,
    );
    this.#ctx.groupBarrier(staging.deviceView(), s, tag);
    gemm.launch({
      ...gemmOperands(p, a, b, out, scales),
      stream: s,
      waitRank: group.rank,
      scatter: this.#exchange(p.shardRows),
    });
    return out;
  }

  /**
   * GEMM + all-reduce (see GpuCollectives.matmulAllReduce): this rank's partial product by symmkit's GEMM
   * (sequential) or cuBLASLt (nccl_cublaslt) into a scratch [m, n] bf16, then the group's all-reduce of
   * it into out (auto, or NCCL's), or allReduceRmsNorm with out as its output.
   */
  matmulAllReduce(
    a: Tensor,
    b: Tensor,
    o: MatmulAllReduceOptions<Tensor> & {
      readonly stream: Stream;
      readonly algorithm?: MatmulAllReduceAlgorithm;
    },
  ): Tensor {
    const what = "matmulAllReduce";
    checkTensorArg(what, "a", a);
    checkTensorArg(what, "b", b);
    const { group } = this.#ctx;
    const requested = o.algorithm ?? "auto";
    checkAlgorithm(what, requested, MATMUL_ALL_REDUCE_ALGORITHMS);
    const norm = o.rmsNorm;
    this.#sameDevice(what, {
      a,
      b,
      out: o.out,
      scaleA: o.scaleA,
      scaleB: o.scaleB,
      weight: norm?.weight,
      bias: norm?.bias,
      residual: norm?.residual,
      residualOut: norm?.residualOut,
    });
    const { p } = checkMatmulAllReduce(what, a, b, o);
    const scales = { scaleA: o.scaleA, scaleB: o.scaleB };
    checkMatmul(a, b, undefined, { layoutB: p.layoutB, ...spans(scales) }, what);
    const dtype = norm?.outputScale !== undefined ? "fp8e4m3" : "bf16";
    const out = o.out ?? Tensor.empty([p.m, p.n], dtype, { device: group.device, stream: o.stream });
    try {
      this.#matmulAllReduceInto(what, p, a, b, out, o, scales, requested);
      return out;
    } catch (e) {
      // Refused before anything was enqueued: the output this call made goes back.
      if (out !== o.out && (e instanceof InvalidArgumentError || e instanceof UnsupportedError))
        out.dispose();
      throw e;
    }
  }

  #matmulAllReduceInto(
    what: string,
    p: FusedProblem,
    a: Tensor,
    b: Tensor,
    out: Tensor,
    o: MatmulAllReduceOptions<Tensor> & { readonly stream: Stream },
    scales: Scales,
    requested: MatmulAllReduceAlgorithm,
  ): void {
    const { group } = this.#ctx;
    const norm = o.rmsNorm;
    if (overlaps(out, a) || overlaps(out, b))
      throw new InvalidArgumentError(`${what}: out overlaps an input`);
    if (norm?.residualOut && (overlaps(norm.residualOut, a) || overlaps(norm.residualOut, b)))
      throw new InvalidArgumentError(`${what}: rmsNorm.residualOut overlaps an input`);
    const s = o.stream;
    const partial = this.#partialScratch(p);
    for (const t of [out, norm?.residual, norm?.residualOut, norm?.weight, norm?.bias])
      if (t && overlaps(t, partial))
        throw new InvalidArgumentError(`${what}: a tensor overlaps symmkit's scratch`);
    const algorithm =
      requested !== "auto" ? requested : group.worldSize === 1 ? "sequential" : this.autoMatmulAllReduce(p);
    if (algorithm === "fused") {
      this.#fusedAllReduce(what, p, a, b, out, norm, scales, s);
      return;
    }
    const viaNccl = algorithm === "nccl_cublaslt";
    const inner = viaNccl ? "nccl" : "auto";
    // The norm's refusals (aliasing, room) come before the GEMM is enqueued.
    if (norm)
      this.#arNorm.check(partial, { ...norm, output: out, algorithm: inner }, "matmulAllReduce (rmsNorm)");
    if (viaNccl) this.#cublas(p, a, b, partial, scales, s);
    else this.#plainGemm(p, a, b, partial, scales, s);
    if (norm === undefined)
      this.#coll.allReduce(
        partial,
        { output: out, algorithm: inner, stream: s },
        {
          kind: viaNccl ? "matmul-all-reduce/nccl_cublaslt" : "matmul-all-reduce/sequential",
          dims: [p.n, p.k],
        },
      );
    else this.#arNorm.run(partial, { ...norm, output: out, algorithm: inner }, s);
  }

  /** The fused GEMM + all-reduce of matmulAllReduce (see the file's comment), then the norm kernel on the
   * sum (in the partial scratch) with `norm`. Everything it refuses is refused before anything is
   * enqueued. */
  #fusedAllReduce(
    what: string,
    p: FusedProblem,
    a: Tensor,
    b: Tensor,
    out: Tensor,
    norm: MatmulAllReduceOptions<Tensor>["rmsNorm"],
    scales: Scales,
    s: Stream,
  ): void {
    const { group, staging } = this.#ctx;
    const plan = this.#allReduceKernel(p);
    const why = this.#allReduceRoom(p, plan);
    if (why) throw new InvalidArgumentError(`${what}: ${why}`);
    const sum = norm ? this.#partialScratch(p) : out;
    if (sum.ptr % 16n !== 0n) throw new InvalidArgumentError(`${what}: out must start on a 16-byte boundary`);
    const normed = norm && {
      options: { ...norm, output: out },
      problem: checkAllReduceRmsNorm(`${what} (rmsNorm)`, sum, { ...norm, output: out }),
      kernel: normKernel(group.device, "bf16", p.n),
    };
    if (normed) checkNormAliasing(`${what} (rmsNorm)`, sum, normed.options, out, overlaps, sameSpan);
    const common = {
      ...gemmOperands(p, a, b, sum, scales),
      stream: s,
      splits: plan.splits,
      waitRank: group.rank,
    };
    // Kernels are resolved before anything is enqueued (see matmulReduceScatter).
    let launch: (tag: CallTag) => void;
    const viaMailbox = this.#viaMailbox(p, plan);
    if (plan.kernel === "decode") {
      const g = this.#decoder(p.elem, plan);
      const { mailbox } = this.#ctx;
      launch = viaMailbox
        ? (tag) =>
            g.launch({
              ...common,
              mailbox: {
                rank: group.rank,
                world: group.worldSize,
                buffers: mailbox.buffers.bufferPtrs,
                state: mailbox.state.ptr,
                stride: mailbox.stride,
                tag,
              },
            })
        : () => g.launch({ ...common, exchange: this.#exchange(p.m) });
    } else {
      const g = this.#gemm(p, "grouped", "none", "all-reduce", { narrow: plan.narrow, splitK: true });
      launch = () => g.launch({ ...common, scatter: this.#exchange(p.m) });
    }
    // And the split scratch: a failure to allocate it leaves nothing enqueued.
    if (plan.splits > 1) SplitScratch.of(group.device).on(s);
    const tag = this.#ctx.tag(
      { kind: "matmul-all-reduce/fused", dtype: p.elem, count: a.numel, dims: [p.n, p.k] },
      s,
    );
    // Through the staging buffer: every rank finished reading its receive buffer in the previous call.
    // The mailbox needs no barrier: its three buffers in turn, as every Lamport call.
    if (!viaMailbox) this.#ctx.groupBarrier(staging.deviceView(), s, tag);
    launch(tag);
    if (normed) {
      const q = normed.problem;
      launchNorm(normed.kernel, sum, normed.options, out, q.rows, q.hidden, q.eps, q.outScaleInv, s);
    }
  }

  /** The exchange of GEMM + reduce-scatter (shardRows: a shard's) and GEMM + all-reduce (shardRows = m):
   * the staging buffers as receive slots, their pads' flags, and the shared call epoch. */
  #exchange(shardRows: number): GemmScatter {
    const { group, staging } = this.#ctx;
    return {
      rank: group.rank,
      world: group.worldSize,
      shardRows,
      recv: staging.bufferPtrs,
      flags: staging.padPtrs.map((x) => x + BigInt(SCATTER_FLAGS_OFFSET_BYTES)),
      epoch: this.#epoch.ptr,
    };
  }

  /**
   * What auto picks for all-gather + GEMM: the tune table's rule for the problem's rows, else the built-in
   * rule (BUILT_IN_FUSED_RULES), but a fused construction only where the shard fits the staging buffer
   * (`staged`: its bytes for a plain shard, 0 for a symmetric one); otherwise the sequential path.
   */
  autoAllGatherMatmul(p: FusedProblem, staged: number): AllGatherMatmulAlgorithm {
    const pick = this.#rule("all-gather-matmul", p.m) as AllGatherMatmulAlgorithm;
    if (pick.startsWith("fused") && staged > this.#ctx.staging.tensor.nbytes) return "sequential";
    return pick;
  }

  /** What auto picks for GEMM + reduce-scatter: likewise, fused only where the receive buffer and the
   * flags fit. */
  autoMatmulReduceScatter(p: FusedProblem): MatmulReduceScatterAlgorithm {
    const pick = this.#rule("matmul-reduce-scatter", p.m) as MatmulReduceScatterAlgorithm;
    if (pick.startsWith("fused") && this.#scatterRoom(p) !== undefined) return "sequential";
    return pick;
  }

  /** What auto picks for GEMM + all-reduce: likewise, fused only where the receive buffer and the flags
   * fit. */
  autoMatmulAllReduce(p: FusedProblem): MatmulAllReduceAlgorithm {
    const pick = this.#rule("matmul-all-reduce", p.m) as MatmulAllReduceAlgorithm;
    if (pick === "fused" && this.#allReduceRoom(p, this.#allReduceKernel(p)) !== undefined)
      return "sequential";
    return pick;
  }

  #rule(op: TunedFused, rows: number): string {
    const rules = this.#ctx.tuned?.fused?.[op] ?? BUILT_IN_FUSED_RULES[op];
    return pickFusedRule(rules, rows)!;
  }

  #checkScatterRoom(what: string, p: FusedProblem): void {
    const why = this.#scatterRoom(p);
    if (why) throw new InvalidArgumentError(`${what}: ${why}`);
  }

  /** Why the fused GEMM + reduce-scatter cannot run for `p` in this group, or undefined. */
  #scatterRoom(p: FusedProblem): string | undefined {
    const flags = scatterFlagCount(p.shardRows, p.n, this.#ctx.group.worldSize);
    return this.#exchangeRoom("m x n x 2", p.m * p.n * 2, flags);
  }

  /** Why the fused GEMM + all-reduce cannot run for `p` (on `plan`, its kernel) in this group, or undefined. */
  #allReduceRoom(p: FusedProblem, plan: SymmkitGemmPlan): string | undefined {
    if (this.#viaMailbox(p, plan)) return undefined;
    const world = this.#ctx.group.worldSize;
    const flags =
      plan.kernel === "decode" ? decodeFlagCount(p.m, p.n, world, plan) : scatterFlagCount(p.m, p.n, world);
    return this.#exchangeRoom("world x m x n x 2", world * p.m * p.n * 2, flags);
  }

  /** The fused GEMM + all-reduce's kernel: the one matmul() runs, with its all-reduce epilogue (the Hopper
   * GEMM's all-reduce has split-K compiled in), so fused and sequential do the same arithmetic. */
  #allReduceKernel(p: FusedProblem): SymmkitGemmPlan {
    return symmkitGemmPlan(this.#ctx.group.device, p);
  }

  /** Whether the fused GEMM + all-reduce of `p` goes through the Lamport mailbox: the decode GEMM's
   * one-pass tiles, the partial within a slot (decodeMailboxFits); the same on every rank. */
  #viaMailbox(p: FusedProblem, plan: SymmkitGemmPlan): boolean {
    return plan.kernel === "decode" && decodeMailboxFits(plan, p.m, p.n, this.#ctx.mailbox.stride);
  }

  #decoder(elem: FusedProblem["elem"], shape: DecodeShape): DecodeGemm {
    const key = `decode/${elem}/${describeDecodeShape(shape)}`;
    let g = this.#decoders.get(key);
    if (!g) {
      g = new DecodeGemm(this.#ctx.group.device, decodeVariant(shape, elem, true), this.#ctx.group.watch);
      this.#decoders.set(key, g);
    }
    return g;
  }

  /** Why a receive buffer of `bytes` (the formula `what`) and `flags` tile flags cannot fit this group's
   * staging buffer, or undefined. */
  #exchangeRoom(what: string, bytes: number, flags: number): string | undefined {
    const capacity = this.#ctx.staging.tensor.nbytes;
    if (bytes > capacity)
      return `the receive buffer needs ${what} = ${bytes} bytes of the ${capacity}-byte symmetric staging buffer; pass stagingBytes >= ${bytes} to init() (or SYMMKIT_STAGING_BYTES), or use algorithm sequential`;
    if (flags > this.scatterFlagCapacity)
      return `${flags} tile flags exceed the ${this.scatterFlagCapacity} the staging pad holds; use algorithm sequential`;
    return undefined;
  }

  #fusedAllGather(
    input: FusedInput,
    aShard: Tensor,
    p: FusedProblem,
    b: Tensor,
    gathered: Tensor,
    out: Tensor,
    scales: Scales,
    s: Stream,
    pull: boolean,
    tag: CallTag,
  ): void {
    const { group, staging } = this.#ctx;
    const { rank, worldSize: world } = group;
    const shardBytes = p.shardRows * p.k * dtypeInfo(p.elem).bytes;
    const source = input instanceof Tensor ? staging : input;
    const slot = (r: number): bigint => gathered.ptr + BigInt(r * shardBytes);
    const ready = pull ? PULL_BLOCKS : 1;
    // Kernels are resolved before anything is enqueued (see matmulReduceScatter).
    const gemm = this.#gemm(p, "grouped", "row-flags", "store");
    const pullKernel = sharedModule(FUSED_PROGRAMS[0]!, group.device).kernel(
      ALL_GATHER_PULL_EXPR,
      ALL_GATHER_PULL_PARAMS,
    );
    const side = this.#sides();
    const [s2, s3] = side.streams;
    memset(this.#flags.ptr, 0, 4, world, s);
    if (!pull) {
      if (input instanceof Tensor) copyDeviceToDevice(staging.tensor.ptr, aShard.ptr, shardBytes, s);
      // Every rank's shard is in its symmetric buffer before any copy engine reads it.
      this.#ctx.groupBarrier(source.deviceView(), s, tag);
    }
    side.fork.record(s);
    s2.waitEvent(side.fork);
    s3.waitEvent(side.fork);
    copyDeviceToDevice(slot(rank), aShard.ptr, shardBytes, s3);
    writeValue32(this.#flags.ptr + BigInt(4 * rank), ready, s3);
    side.joins[1].record(s3);
    if (pull) {
      if (input instanceof Tensor) copyDeviceToDevice(staging.tensor.ptr, aShard.ptr, shardBytes, s2);
      pullKernel.launch(
        { grid: PULL_BLOCKS, block: PULL_THREADS, stream: s2 },
        source.deviceView(),
        gathered,
        shardBytes,
        this.#flags,
        tag,
      );
    } else {
      for (let k = 1; k < world; k++) {
        const r = (rank + k) % world;
        copyDeviceToDevice(slot(r), source.bufferPtrs[r]!, shardBytes, s2);
        writeValue32(this.#flags.ptr + BigInt(4 * r), 1, s2);
      }
      // Nobody restages its shard (the next call) while a peer's copy engine may still read it.
      this.#ctx.groupBarrier(source.deviceView(), s2, tag, 1);
    }
    side.joins[0].record(s2);
    const { tilesM } = gemmTiles(p.m, p.n);
    gemm.launch({
      ...gemmOperands(p, gathered, b, out, scales),
      stream: s,
      readyFlags: this.#flags.ptr,
      flagRows: p.shardRows,
      readyValue: ready,
      rotateTileRows: Math.ceil((rank * p.shardRows) / GEMM_TILE_M) % tilesM,
      secondA: { a2: aShard.ptr, row0: rank * p.shardRows, rows: p.shardRows },
      waitRank: rank,
      // A copy between two ranks on one GPU (--share-gpus) is the driver's copy kernel, not a copy engine:
      // it needs SMs, which a GEMM on every SM, waiting for that copy, would never give up.
      ...(pull || group.sharesGpus ? { ctas: group.device.props.smCount - PULL_BLOCKS } : {}),
    });
    s.waitEvent(side.joins[0]);
    s.waitEvent(side.joins[1]);
  }

  /** The GEMM matmul() runs: the arithmetic of the fused GEMM + all-reduce. */
  #plainGemm(p: FusedProblem, a: Tensor, b: Tensor, d: Tensor, scales: Scales, s: Stream): void {
    launchSymmkitGemm(this.#ctx.group.device, p, gemmOperands(p, a, b, d, scales), s);
  }

  /** The unsplit tile GEMM: the arithmetic of the fused all-gather + GEMM and GEMM + reduce-scatter. */
  #tileGemm(p: FusedProblem, a: Tensor, b: Tensor, d: Tensor, scales: Scales, s: Stream): void {
    launchSymmkitGemm(this.#ctx.group.device, p, gemmOperands(p, a, b, d, scales), s, TILE_GEMM_PLAN);
  }

  #cublas(p: FusedProblem, a: Tensor, b: Tensor, d: Tensor, scales: Scales, s: Stream): void {
    CublasLtMatmul.for(this.#ctx.group.device).run({
      ...gemmOperands(p, a, b, d, scales),
      elem: p.elem,
      layoutB: p.layoutB,
      stream: s,
    });
  }

  #gemm(
    p: FusedProblem,
    order: GemmVariant["order"],
    ready: GemmVariant["ready"],
    epilogue: GemmVariant["epilogue"],
    kernel: Pick<GemmVariant, "splitK" | "narrow"> = {},
  ): HopperGemm {
    const variant: GemmVariant = { elem: p.elem, layoutB: p.layoutB, order, ready, epilogue, ...kernel };
    const key = `${p.elem}/${p.layoutB}/${order}/${ready}/${epilogue}/${kernel.splitK}/${kernel.narrow}`;
    let g = this.#gemms.get(key);
    if (!g) {
      g = new HopperGemm(this.#ctx.group.device, variant, this.#ctx.group.watch);
      this.#gemms.set(key, g);
    }
    return g;
  }

  /** The sequential paths' [m, n] partial product, kept between calls (it grows, never shrinks). */
  #partialScratch(p: FusedProblem): Tensor {
    const need = p.m * p.n;
    if (!this.#partial || this.#partial.numel < need) {
      this.#partial?.dispose();
      this.#partial = Tensor.empty([need], "bf16", { device: this.#ctx.group.device });
    }
    return this.#partial.slice(0, need).view([p.m, p.n]);
  }

  #sides(): Sides {
    const device = this.#ctx.group.device;
    this.#side ??= {
      streams: [Stream.create(device), Stream.create(device)],
      fork: Event.create(device, { timing: false }),
      joins: [Event.create(device, { timing: false }), Event.create(device, { timing: false })],
    };
    return this.#side;
  }

  #sameDevice(what: string, tensors: Record<string, Tensor | undefined>): void {
    const device = this.#ctx.group.device;
    for (const [name, t] of Object.entries(tensors)) {
      if (t && t.device !== device)
        throw new InvalidArgumentError(
          `${what}: ${name} is on cuda:${t.device.ordinal}, this group's GPU is cuda:${device.ordinal}`,
        );
    }
  }

  dispose(): void {
    this.#flags.dispose();
    this.#epoch.dispose();
    this.#partial?.dispose();
    if (this.#side) {
      for (const x of [...this.#side.streams, this.#side.fork, ...this.#side.joins]) x.dispose();
    }
  }
}

interface Scales {
  readonly scaleA?: Tensor | undefined;
  readonly scaleB?: Tensor | undefined;
}

function spans(s: Scales): { scaleA?: Span; scaleB?: Span } {
  return { ...(s.scaleA ? { scaleA: s.scaleA } : {}), ...(s.scaleB ? { scaleB: s.scaleB } : {}) };
}
