// MoE dispatch and combine on GPUs, algorithm pull (device/include/symmkit/moe/moe.cuh): the CPU
// backend's reference construction (src/cpu/collectives.ts) with the data moved by kernels over NVLink.
//
// dispatch: this rank's ids, weights, tokens (and scales) are copied into its staging buffer and
// moe_positions writes each pair's position among the pairs of its expert and the per-expert counts
// (plus the first out-of-range id, if any) into its header; a barrier kernel; the host reads every rank's
// header (copies from the peers' staging, one wait) and judges the call alike on every rank (bad ids,
// a maxRows too small: every rank throws, nothing written), sizes the outputs and uploads the base rows
// (src/ops/moe-route.ts routeBases); moe_gather pulls this rank's experts' rows from every source and
// writes the handle's rows; a barrier kernel. The host wait keeps dispatch out of CUDA graphs.
// combine: the expert output's rows are staged, a barrier, moe_combine reads each pair's row from its
// owner in slot order, a barrier: graph-capturable.
import { InvalidArgumentError } from "../errors.js";
import type { CallShape } from "../distributed/fingerprint.js";
import { SYMM_VIEW_PARAM } from "../distributed/device-layouts.js";
import type { Device } from "../runtime/device.js";
import { Graph } from "../runtime/graph.js";
import type { Kernel } from "../runtime/kernel.js";
import {
  copyDeviceToDevice,
  copyDeviceToHost,
  copyHostToDevice,
  DeviceMemory,
  memset,
} from "../runtime/memory.js";
import { sharedModule, type ProgramSpec } from "../runtime/module.js";
import type { Stream } from "../runtime/stream.js";
import { Tensor } from "../runtime/tensor.js";
import { WORLD_SIZES } from "./coll/programs.js";
import type { CollectiveContext } from "./coll/registry.js";
import {
  dispatchHeader,
  dispatchVerdict,
  MOE_HEADER_FIXED,
  type CombineOptions,
  type DispatchOptions,
  type DispatchResult,
  type MoeHandle,
  type MoeProblem,
} from "./moe-checks.js";
import { receivedCounts, routeBases } from "./moe-route.js";
import { checkCapacity } from "./validate.js";

export const GPU_MOE_ALGORITHMS = ["auto", "pull"] as const;
export type GpuMoeAlgorithm = (typeof GPU_MOE_ALGORITHMS)[number];

export const MOE_PROGRAM: ProgramSpec = {
  name: "symmkit/moe/moe",
  source: '#include "symmkit/moe/moe.cuh"\n',
  nameExpressions: [
    "symmkit::moe::moe_positions",
    "symmkit::moe::moe_combine",
    // World 1 too: a lone rank's experts are all local, and the gather is its layout.
    ...[1, ...WORLD_SIZES].map((w) => `symmkit::moe::moe_gather<${w}>`),
  ],
};
const POSITIONS_PARAMS = ["ptr", "u64", "u32", "u32", "ptr", "u64"] as const;
const GATHER_PARAMS = [
  SYMM_VIEW_PARAM,
  "ptr",
  "ptr",
  "ptr",
  "ptr",
  "ptr",
  "u64",
  "u64",
  "u32",
  "u32",
  "u32",
] as const;
const COMBINE_PARAMS = [
  SYMM_VIEW_PARAM,
  "ptr",
  "ptr",
  "ptr",
  "ptr",
  "u64",
  "u32",
  "u32",
  "u32",
  "u32",
] as const;
/** moe.cuh's kThreads. */
const THREADS = 512;

const align16 = (n: number): number => Math.ceil(n / 16) * 16;

/** moe.cuh's staged_at: offsets (from the header's end) of a rank's staged dispatch. */
export function moeStagedAt(tokens: number, topk: number, rowBytes: number) {
  const pairs = tokens * topk;
  const pos = align16(4 * pairs);
  const weights = align16(pos + 4 * pairs);
  const at = align16(weights + 4 * pairs);
  const scales = align16(at + tokens * rowBytes);
  return { ids: 0, pos, weights, tokens: at, scales, end: scales + 4 * tokens };
}

export const moeHeaderBytes = (experts: number): number => align16(4 * (MOE_HEADER_FIXED + experts));

/** What MoE uses of the group's collectives. */
export type MoeContext = Pick<
  CollectiveContext,
  "rank" | "world" | "staging" | "stagingView" | "groupBarrier"
> & {
  readonly device: Device;
  /** The next group call's fingerprint, for its kernels' phase. */
  phase(shape: CallShape, stream: Stream): number;
};

interface Kernels {
  readonly positions: Kernel<typeof POSITIONS_PARAMS>;
  readonly gather: Kernel<typeof GATHER_PARAMS>;
  readonly combine: Kernel<typeof COMBINE_PARAMS>;
}

export class GpuMoe {
  readonly #ctx: MoeContext;
  #kernels: Kernels | undefined;
  /** Every rank's header, copied here for the host to read; the base rows the gather reads. Grown as
   * needed; written on a call's stream after it waited for the stream that used them last. */
  #headers: DeviceMemory | undefined;
  #plan: DeviceMemory | undefined;
  #lastStream: Stream | undefined;

  constructor(ctx: MoeContext) {
    this.#ctx = ctx;
  }

  #k(): Kernels {
    if (this.#kernels) return this.#kernels;
    const m = sharedModule(MOE_PROGRAM, this.#ctx.device);
    return (this.#kernels = {
      positions: m.kernel("symmkit::moe::moe_positions", POSITIONS_PARAMS),
      gather: m.kernel(`symmkit::moe::moe_gather<${this.#ctx.world}>`, GATHER_PARAMS),
      combine: m.kernel("symmkit::moe::moe_combine", COMBINE_PARAMS),
    });
  }

  /** Device scratch of at least `bytes`, grown by doubling. */
  #scratch(which: "headers" | "plan", bytes: number): DeviceMemory {
    const have = which === "headers" ? this.#headers : this.#plan;
    if (have && have.bytes >= bytes) return have;
    have?.dispose();
    const fresh = DeviceMemory.alloc(Math.max(bytes, 2 * (have?.bytes ?? 0)), this.#ctx.device);
    if (which === "headers") this.#headers = fresh;
    else this.#plan = fresh;
    return fresh;
  }

  dispatch(
    p: MoeProblem,
    tokens: Tensor,
    topkIdx: Tensor,
    topkWeights: Tensor,
    o: DispatchOptions<Tensor>,
    stream: Stream,
  ): DispatchResult<Tensor> {
    const what = "dispatch";
    const { rank, world, staging, device } = this.#ctx;
    if (Graph.activeCapture(stream) !== undefined)
      throw new InvalidArgumentError(
        `${what}: algorithm pull learns the peers' counts through the host, which a CUDA graph cannot hold; call it outside the capture`,
      );
    const E = p.numExperts;
    const rowBytes = p.hidden * tokens.elementBytes;
    const headerBytes = moeHeaderBytes(E);
    const at = moeStagedAt(p.tokens, p.topk, rowBytes);
    const capacity = staging.tensor.nbytes;
    // The header fits where the group's does (E is the group's); the data may not, which every rank then
    // learns from the header and refuses alike.
    checkCapacity(what, headerBytes, capacity);
    const fits = headerBytes + at.end <= capacity;
    const k = this.#k();
    if (this.#lastStream && this.#lastStream !== stream) this.#lastStream.synchronize();
    this.#lastStream = stream;
    const phase = this.#ctx.phase(
      { kind: "moe-dispatch/pull", dtype: p.dtype, count: p.hidden * p.topk, peer: E },
      stream,
    );
    copyHostToDevice(
      staging.tensor.ptr,
      dispatchHeader(p, o.maxRows, headerBytes + at.end, capacity),
      stream,
    );
    if (fits) {
      const own = staging.tensor.ptr + BigInt(headerBytes);
      copyDeviceToDevice(own + BigInt(at.ids), topkIdx.ptr, topkIdx.nbytes, stream);
      copyDeviceToDevice(own + BigInt(at.weights), topkWeights.ptr, topkWeights.nbytes, stream);
      copyDeviceToDevice(own + BigInt(at.tokens), tokens.ptr, tokens.nbytes, stream);
      if (o.scales) copyDeviceToDevice(own + BigInt(at.scales), o.scales.ptr, o.scales.nbytes, stream);
      k.positions.launch(
        { grid: E, block: THREADS, stream },
        topkIdx,
        p.tokens,
        p.topk,
        E,
        staging.tensor.ptr,
        headerBytes,
      );
    }
    this.#ctx.groupBarrier(this.#ctx.stagingView, stream, phase);
    // Every rank's header, then one wait.
    const side = MOE_HEADER_FIXED + E;
    const headers = this.#scratch("headers", world * 4 * side);
    for (let r = 0; r < world; r++)
      copyDeviceToDevice(headers.ptr + BigInt(r * 4 * side), staging.bufferPtrs[r]!, 4 * side, stream);
    const h = new Int32Array(world * side);
    copyDeviceToHost(h, headers.ptr, stream);
    const header = (r: number): Int32Array => h.subarray(r * side, (r + 1) * side);
    const counts = Array.from({ length: world }, (_, r) => header(r).subarray(MOE_HEADER_FIXED));
    const received = Array.from({ length: world }, (_, r) => receivedCounts(counts, r, p));
    const total = received.map((c) => c.reduce((a, b) => a + b, 0));
    const verdict = dispatchVerdict(
      what,
      Array.from({ length: world }, (_, r) => header(r)),
      total,
      E,
      capacity,
    );
    if (verdict !== undefined) {
      // Every rank refuses; the closing barrier still runs, so no one restages while a peer reads.
      this.#ctx.groupBarrier(this.#ctx.stagingView, stream, phase + 1);
      throw new InvalidArgumentError(verdict);
    }
    const rowsOut = o.maxRows ?? total[rank]!;
    const out = {
      tokens: Tensor.empty([rowsOut, p.hidden], p.dtype, { device }),
      weights: Tensor.empty([rowsOut], "f32", { device }),
      scales: p.dtype === "fp8e4m3" ? Tensor.empty([rowsOut], "f32", { device }) : undefined,
    };
    const spare = rowsOut - total[rank]!;
    if (spare > 0) {
      memset(out.tokens.ptr + BigInt(total[rank]! * rowBytes), 0, 1, spare * rowBytes, stream);
      memset(out.weights.ptr + BigInt(4 * total[rank]!), 0, 4, spare, stream);
      if (out.scales) memset(out.scales.ptr + BigInt(4 * total[rank]!), 0, 4, spare, stream);
    }
    const handle: MoeHandle<Tensor> = {
      problem: p,
      rank,
      world,
      received: total[rank]!,
      receivedByRank: total,
      expert: Tensor.empty([p.tokens, p.topk], "i32", { device }),
      row: Tensor.empty([p.tokens, p.topk], "i32", { device }),
      weights: Tensor.empty([p.tokens, p.topk], "f32", { device }),
    };
    handle.expert.copyFrom(topkIdx, stream);
    handle.weights.copyFrom(topkWeights, stream);
    const plan = new Int32Array(world + world * E);
    for (let s = 0; s < world; s++) {
      plan[s] = header(s)[0]!;
      plan.set(routeBases(counts, s, p), world + s * E);
    }
    const planMemory = this.#scratch("plan", plan.byteLength);
    copyHostToDevice(planMemory.ptr, plan, stream);
    let pairs = 0;
    for (let s = 0; s < world; s++) pairs += plan[s]! * p.topk;
    if (pairs > 0)
      k.gather.launch(
        {
          grid: Math.min(4 * device.props.smCount, Math.ceil(pairs / (THREADS / 32))),
          block: THREADS,
          stream,
        },
        this.#ctx.stagingView,
        planMemory.ptr,
        out.tokens,
        out.weights,
        out.scales?.ptr ?? 0n,
        handle.row,
        rowBytes,
        headerBytes,
        E,
        p.localExperts,
        p.topk,
      );
    this.#ctx.groupBarrier(this.#ctx.stagingView, stream, phase + 1);
    const countsOut = Tensor.fromHost(received[rank]!, "i32", { device, stream });
    return { ...out, counts: countsOut, handle };
  }

  combine(expertOut: Tensor, handle: MoeHandle<Tensor>, o: CombineOptions<Tensor>, stream: Stream): Tensor {
    const what = "combine";
    const { staging, device } = this.#ctx;
    const p = handle.problem;
    const out = o.out ?? Tensor.empty([p.tokens, p.hidden], "bf16", { device });
    const bytes = handle.received * p.hidden * 2;
    // The largest rank's rows: every rank judges the staging buffer's room alike.
    checkCapacity(what, Math.max(...handle.receivedByRank) * p.hidden * 2, staging.tensor.nbytes);
    const k = this.#k();
    const phase = this.#ctx.phase(
      { kind: "moe-combine/pull", dtype: "bf16", count: p.hidden * p.topk, peer: p.numExperts },
      stream,
    );
    copyDeviceToDevice(staging.tensor.ptr, expertOut.ptr, bytes, stream);
    this.#ctx.groupBarrier(this.#ctx.stagingView, stream, phase);
    const vectors = p.hidden % 8 === 0 && out.ptr % 16n === 0n ? 1 : 0;
    if (p.tokens > 0)
      k.combine.launch(
        { grid: Math.min(p.tokens, 4 * device.props.smCount), block: THREADS, stream },
        this.#ctx.stagingView,
        handle.expert,
        handle.row,
        handle.weights,
        out,
        p.tokens,
        p.topk,
        p.hidden,
        p.localExperts,
        vectors,
      );
    this.#ctx.groupBarrier(this.#ctx.stagingView, stream, phase + 1);
    return out;
  }

  dispose(): void {
    this.#headers?.dispose();
    this.#plan?.dispose();
  }
}
