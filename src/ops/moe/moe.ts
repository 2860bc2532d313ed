// MoE dispatch and combine on GPUs, algorithm pull (device/include/symmkit/moe/moe.cuh): the CPU
// backend's reference construction (src/cpu/collectives.ts) with the data moved by kernels over NVLink.
//
// dispatch: moe_positions copies this rank's ids, weights, tokens (and scales) into its staging buffer and
// writes each pair's position among the pairs of its expert and the per-expert counts
// (plus the first out-of-range id, if any) into its header; a barrier kernel; moe_route plans the gather
// (the base rows of src/ops/moe/route.ts routeBases) and copies every rank's header and rows received
// into the plan's tail; the host reads that tail (one small copy and wait) and judges the call alike on
// every rank (bad ids, a maxRows too small: every rank throws, nothing written) and sizes the outputs;
// moe_gather pulls this rank's experts' rows from every source and writes the handle's rows (and zeroes
// the spare rows); a barrier kernel. The host wait keeps it out of CUDA graphs. Past the experts the route
// kernel's block holds, the host reads every rank's header itself and routes (routeBases, uploaded).
// dispatch, algorithm pull_device (auto inside a capture or with `into`): the same staging and barrier, then moe_route
// judges and plans on the device what the host did (every rank alike; a refusal recorded for the next
// group.synchronize(), counts -1, nothing written), moe_gather, a barrier: no host wait, so capturable.
// The outputs' rows are fixed (maxRows); a capture writes into the tensors of an earlier result (`into`).
// combine pull: the expert output's rows are staged, a barrier, moe_combine reads each pair's row from its
// owner in slot order, a barrier. combine per_rank: moe_partials sums each token's rows here into the
// staging at its first row (the dispatch's links), a barrier, moe_sum_partials reads one partial per owner
// and sums them in rank order, a barrier. Both graph-capturable.
import { InvalidArgumentError } from "../../errors.js";
import type { Ptr } from "../../cuda/native.js";
import type { CallTag } from "../../distributed/fingerprint.js";
import { SYMM_VIEW_PARAM } from "../../distributed/device-layouts.js";
import type { SymmetricTensor } from "../../distributed/symmetric-memory.js";
import { Graph } from "../../runtime/graph.js";
import type { Device } from "../../runtime/device.js";
import type { DType } from "../../runtime/dtype.js";
import type { Kernel } from "../../runtime/kernel.js";
import {
  copyDeviceToDevice,
  copyDeviceToHost,
  copyHostToDevice,
  DeviceMemory,
} from "../../runtime/memory.js";
import { sharedModule } from "../../runtime/module.js";
import type { Stream } from "../../runtime/stream.js";
import { Tensor } from "../../runtime/tensor.js";
import { overlaps } from "../gemm/matmul.js";
import type { CollectiveOptions, GpuGroup } from "../gpu-group.js";
import {
  GPU_COMBINE_ALGORITHMS,
  GPU_MOE_ALGORITHMS,
  type GpuCombineAlgorithm,
  type GpuMoeAlgorithm,
  checkCombine,
  checkDispatch,
  checkDispatchInto,
  dispatchHeader,
  dispatchTensors,
  dispatchVerdict,
  MOE_HEADER_FIXED,
  stagedRows,
  type CombineOptions,
  type DispatchOptions,
  type DispatchResult,
  type MoeHandle,
  type MoeProblem,
} from "./checks.js";
import { MOE_PROGRAM } from "./programs.js";
import { GPU_MOE_AUTO } from "./records.js";
import { receivedCounts, routeBases } from "./route.js";
import { autoPick } from "../records.js";
import { checkAlgorithm, checkCapacity, checkTensorArg } from "../validate.js";

/** moe_route: the staging buffer's SymmView; experts, local experts, combine's row bytes, the staging
 * buffer's bytes; the plan, counts out, the handle's experts and rows and its pairs, its links, the
 * refusal record. */
const ROUTE_PARAMS = [
  SYMM_VIEW_PARAM,
  "u32",
  "u32",
  "u64",
  "u64",
  "ptr",
  "ptr",
  "ptr",
  "ptr",
  "u64",
  "ptr",
  "ptr",
] as const;
/** moe.cuh's kRouteSharedPerExpert: the route kernel's dynamic shared memory per expert. */
const MOE_ROUTE_SHARED_PER_EXPERT = 16;

/** Whether moe_route's one block holds `experts` experts' sums in shared memory on `device` (with a KiB of
 * margin for its own): past that, dispatch routes on the host. */
export function moeRouteFits(experts: number, device: Device): boolean {
  return MOE_ROUTE_SHARED_PER_EXPERT * experts + 1024 <= device.props.sharedBytesPerBlockOptin;
}
/** The refusals moe_route records (moe.cuh kStaging .. kMaxRows), in words. */
export const MOE_REFUSALS: Readonly<Record<number, (rank: number, detail: number) => string>> = {
  0x201: (r, d) =>
    `rank ${r}'s dispatch needs ${d} bytes of the symmetric staging buffer; pass a larger stagingBytes to init() (or SYMMKIT_STAGING_BYTES)`,
  0x202: (r, d) =>
    `rank ${r}'s topkIdx has an expert id out of range at pair ${d}; expert ids are -1 (none) or below numExperts`,
  0x203: (r, d) =>
    `rank ${r}'s maxRows (${d}) rows of bf16 would not fit the symmetric staging buffer for combine; pass a smaller maxRows or a larger stagingBytes to init()`,
  0x204: (r, d) => `rank ${r} receives ${d} rows, more than its maxRows`,
};

/** moe.cuh's plan_layout (i32 offsets): tokens per source, base rows, rows received; then, for the host,
 * every rank's rows received and every rank's header's fixed part. */
export function moePlanLayout(world: number, experts: number) {
  const bases = world;
  const received = bases + world * experts;
  const byRank = received + 1;
  const headers = byRank + world;
  return { bases, received, byRank, headers, end: headers + world * MOE_HEADER_FIXED };
}
/** moe_positions: ids, tokens, topk, experts, staging, header bytes, maxRows, bytes needed; then the
 * weights, token rows and scales (0: none) it copies into the staging, a row's bytes, and the handle's
 * expert and weights tensors it copies the ids and weights into (pull_device; 0: none). */
const POSITIONS_PARAMS = [
  "ptr",
  "u64",
  "u32",
  "u32",
  "ptr",
  "u64",
  "i32",
  "i32",
  "ptr",
  "ptr",
  "ptr",
  "u64",
  "ptr",
  "ptr",
] as const;
const GATHER_PARAMS = [
  SYMM_VIEW_PARAM,
  "ptr",
  "ptr",
  "ptr",
  "ptr",
  "ptr",
  "ptr",
  "ptr",
  "u64",
  "u64",
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
/** moe_partials: expert output, links, row weights, rows, hidden, topk, groups per warp, partials, vectors. */
const PARTIALS_PARAMS = ["ptr", "ptr", "ptr", "u64", "u32", "u32", "u32", "ptr", "u32"] as const;
/** moe_sum_partials: the staging buffer's SymmView, the handle's experts and rows, out, tokens, topk, hidden,
 * local experts, groups per warp, vectors. */
const SUM_PARTIALS_PARAMS = [
  SYMM_VIEW_PARAM,
  "ptr",
  "ptr",
  "ptr",
  "u64",
  "u32",
  "u32",
  "u32",
  "u32",
  "u32",
] as const;
/** moe.cuh's kThreads. */
const THREADS = 512;

const align16 = (n: number): number => Math.ceil(n / 16) * 16;

/** How many parts a kernel splits each of `items` rows of `units` into, so that about twice the warps of
 * `grid` blocks have work (a warp per row left too few loads in flight at small counts); parts of at
 * least `least` units. */
function parts(items: number, units: number, grid: number, least: number): number {
  const want = Math.ceil((2 * grid * (THREADS / 32)) / Math.max(items, 1));
  return Math.max(1, Math.min(want, Math.floor(units / least)));
}

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

interface Kernels {
  readonly positions: Kernel<typeof POSITIONS_PARAMS>;
  readonly gather: Kernel<typeof GATHER_PARAMS>;
  readonly route: Kernel<typeof ROUTE_PARAMS>;
  readonly combine: Kernel<typeof COMBINE_PARAMS>;
  readonly partials: Kernel<typeof PARTIALS_PARAMS>;
  readonly sumPartials: Kernel<typeof SUM_PARTIALS_PARAMS>;
}

/** What dispatch's staging step leaves for the routing: the header's bytes, a row's, the call's tag. */
interface Staged {
  readonly headerBytes: number;
  readonly rowBytes: number;
  readonly tag: CallTag;
}

/** Frees a dispatch result's tensors (one this call made and then refused). */
function disposeResult(r: DispatchResult<Tensor>): void {
  for (const t of dispatchTensors(r)) t.dispose();
}

/** The tensors of a dispatch's result made before its rows are known (GpuMoe #early). */
interface Early {
  readonly expert: Tensor;
  readonly row: Tensor;
  readonly weights: Tensor;
  readonly counts: Tensor;
}

/** What `make` returns, its tensors made by `empty` on `device` and `stream`; if it throws (a tensor that
 * cannot be made), those it made are freed. */
function allOrNone<T>(
  device: Device,
  stream: Stream,
  make: (empty: (shape: number[], dtype: DType) => Tensor) => T,
): T {
  const made: Tensor[] = [];
  try {
    return make((shape, dtype) => {
      const t = Tensor.empty(shape, dtype, { device, stream });
      made.push(t);
      return t;
    });
  } catch (e) {
    for (const t of made) t.dispose();
    throw e;
  }
}

function disposeEarly(e: Early): void {
  for (const t of [e.expert, e.row, e.weights, e.counts]) t.dispose();
}

/** pull's gather plan in device memory, every rank's rows received, and the tokens of every rank. */
interface PullPlan {
  readonly ptr: Ptr;
  readonly total: readonly number[];
  readonly tokensAll: number;
}

export class GpuMoe {
  readonly #ctx: GpuGroup;
  #kernels: Kernels | undefined;
  /** pull's: every rank's header, copied here for the host to read where it routes; the plan the gather
   * reads. Grown as needed; written on a call's stream after it waited for the stream that used them last.
   * (pull_device keeps its plan in the result's handle.) */
  #headers: DeviceMemory | undefined;
  #plan: DeviceMemory | undefined;
  #lastStream: Stream | undefined;

  constructor(ctx: GpuGroup) {
    this.#ctx = ctx;
    ctx.group.watch.describeRefusals("dispatch (pull_device)", MOE_REFUSALS);
  }

  #k(): Kernels {
    if (this.#kernels) return this.#kernels;
    const m = sharedModule(MOE_PROGRAM, this.#ctx.device);
    return (this.#kernels = {
      positions: m.kernel("symmkit::moe::moe_positions", POSITIONS_PARAMS),
      gather: m.kernel(`symmkit::moe::moe_gather<${this.#ctx.world}>`, GATHER_PARAMS),
      route: m.kernel(`symmkit::moe::moe_route<${this.#ctx.world}>`, ROUTE_PARAMS),
      combine: m.kernel("symmkit::moe::moe_combine", COMBINE_PARAMS),
      partials: m.kernel("symmkit::moe::moe_partials", PARTIALS_PARAMS),
      sumPartials: m.kernel(`symmkit::moe::moe_sum_partials<${this.#ctx.world}>`, SUM_PARTIALS_PARAMS),
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

  /** dispatch (see GpuCollectives.dispatch). */
  dispatch(
    tokens: Tensor,
    topkIdx: Tensor,
    topkWeights: Tensor,
    o: DispatchOptions<Tensor> & CollectiveOptions & { algorithm?: GpuMoeAlgorithm },
  ): DispatchResult<Tensor> {
    const what = "dispatch";
    const ctx = this.#ctx;
    const p = checkDispatch(what, ctx.world, tokens, topkIdx, topkWeights, o);
    checkAlgorithm(what, o.algorithm ?? "auto", GPU_MOE_ALGORITHMS);
    for (const t of [tokens, topkIdx, topkWeights, o.scales]) if (t) ctx.onDevice(what, t);
    const stream = ctx.stream(o);
    const capturing = Graph.activeCapture(stream) !== undefined;
    const routeFits = moeRouteFits(p.numExperts, ctx.device);
    const algorithm =
      o.algorithm === "auto" || o.algorithm === undefined
        ? autoPick(GPU_MOE_AUTO, {
            capturing,
            into: o.into !== undefined,
            fixedRows: o.maxRows !== undefined,
            routeFits,
          })
        : o.algorithm;
    if (algorithm === "pull" && capturing)
      throw new InvalidArgumentError(
        `${what}: algorithm pull learns the peers' counts through the host, which a CUDA graph cannot hold; use pull_device (with maxRows) or call it outside the capture`,
      );
    if (algorithm === "pull" && o.into !== undefined)
      throw new InvalidArgumentError(
        `${what}: into goes with algorithm pull_device, whose outputs' rows are fixed`,
      );
    if (algorithm === "pull_device") {
      if (!routeFits)
        throw new InvalidArgumentError(
          `${what}: algorithm pull_device routes ${p.numExperts} experts in one block's shared memory, more than this GPU holds; use pull`,
        );
      if (o.maxRows === undefined)
        throw new InvalidArgumentError(
          `${what}: algorithm pull_device routes on the device, so the outputs' rows are fixed in advance: pass maxRows`,
        );
      if (o.into !== undefined) this.#checkInto(what, p, o.maxRows, o.into);
      else if (capturing)
        throw new InvalidArgumentError(
          `${what}: inside a CUDA graph capture, pass into: the result of an eager pull_device dispatch of the same shapes (its tensors are written again)`,
        );
    }
    if (algorithm === "pull") {
      const early = this.#early(p, stream);
      let staged: Staged;
      try {
        staged = this.#stage(p, tokens, topkIdx, topkWeights, o, "pull", stream, early);
        // The scratch the host plans in was last read on that stream (pull_device keeps its plan in the
        // result's handle: it stays capturable).
        if (this.#lastStream && this.#lastStream !== stream) this.#lastStream.synchronize();
        this.#lastStream = stream;
      } catch (e) {
        disposeEarly(early); // refused before anything was enqueued
        throw e;
      }
      return this.#pullSized(p, o, early, staged, stream, () =>
        routeFits ? this.#planOnDevice(p, early, staged, stream) : this.#planOnHost(p, early, staged, stream),
      );
    }
    // Rows received are known on the device only: the handle says maxRows, combine stages that many. Made
    // first, so that the positions kernel fills the handle's ids and weights.
    const out = o.into ?? this.#fresh(p, o.maxRows!, o.maxRows!, undefined, stream);
    let staged: Staged;
    try {
      staged = this.#stage(p, tokens, topkIdx, topkWeights, o, "pull_device", stream, out.handle);
    } catch (e) {
      if (out !== o.into) disposeResult(out); // refused before anything was enqueued
      throw e;
    }
    return this.#routeOnDevice(p, o.maxRows!, out, staged.headerBytes, staged.rowBytes, staged.tag, stream);
  }

  /** Stages this rank's header, ids, weights, tokens (and scales), writes the positions and counts (and
   * `handle`'s ids and weights), and meets the group: every rank's staging is then complete and visible. */
  #stage(
    p: MoeProblem,
    tokens: Tensor,
    topkIdx: Tensor,
    topkWeights: Tensor,
    o: DispatchOptions<Tensor>,
    algorithm: "pull" | "pull_device",
    stream: Stream,
    handle?: Pick<MoeHandle<Tensor>, "expert" | "weights">,
  ): Staged {
    const { staging } = this.#ctx;
    const E = p.numExperts;
    const rowBytes = p.hidden * tokens.elementBytes;
    const headerBytes = moeHeaderBytes(E);
    const at = moeStagedAt(p.tokens, p.topk, rowBytes);
    const capacity = staging.tensor.nbytes;
    // The header fits where the group's does (E is the group's); the data may not, which every rank then
    // learns from the header and refuses alike.
    checkCapacity("dispatch", headerBytes, capacity);
    const fits = headerBytes + at.end <= capacity;
    const k = this.#k();
    const tag = this.#ctx.tag(
      { kind: `moe-dispatch/${algorithm}`, dtype: p.dtype, count: p.hidden, dims: [p.topk, E] },
      stream,
    );
    const [, , maxRows, needed] = dispatchHeader(p, o.maxRows, headerBytes + at.end, capacity);
    // The header and the staged ids, weights, rows and scales (no copy from the host: a capture holds the
    // kernel); one block, and nothing staged, when the data does not fit.
    k.positions.launch(
      { grid: fits ? Math.max(E, this.#ctx.device.props.smCount) : 1, block: THREADS, stream },
      topkIdx,
      p.tokens,
      p.topk,
      E,
      staging.tensor.ptr,
      headerBytes,
      maxRows!,
      needed!,
      topkWeights,
      tokens,
      o.scales ?? 0n,
      rowBytes,
      handle?.expert ?? 0n,
      handle?.weights ?? 0n,
    );
    this.#ctx.groupBarrier(this.#ctx.stagingView, stream, tag);
    return { headerBytes, rowBytes, tag };
  }

  /** The tensors of a dispatch's result that do not depend on the rows received, made on `stream`: the
   * handle's per pair (made before the positions kernel, which fills its ids and weights) and the counts. */
  #early(p: MoeProblem, stream: Stream): Early {
    return allOrNone(this.#ctx.device, stream, (empty) => ({
      expert: empty([p.tokens, p.topk], "i32"),
      row: empty([p.tokens, p.topk], "i32"),
      weights: empty([p.tokens, p.topk], "f32"),
      counts: empty([p.localExperts], "i32"),
    }));
  }

  /** Tensors of a dispatch's result, made on `stream`: `rows` rows, with the handle's (and pull_device's
   * route), around `early`'s (made here when not given). If one cannot be made, those made here are freed. */
  #fresh(
    p: MoeProblem,
    rows: number,
    received: number,
    receivedByRank: readonly number[] | undefined,
    stream: Stream,
    given?: Early,
  ): DispatchResult<Tensor> {
    const { device, rank, world } = this.#ctx;
    const early = given ?? this.#early(p, stream);
    try {
      return allOrNone(device, stream, (empty) => {
        const handle: MoeHandle<Tensor> = {
          problem: p,
          rank,
          world,
          received,
          receivedByRank,
          expert: early.expert,
          row: early.row,
          weights: early.weights,
          links: empty([rows, 2], "i32"),
          rowWeights: empty([rows], "f32"),
          ...(receivedByRank === undefined
            ? { route: empty([moePlanLayout(world, p.numExperts).end], "i32") }
            : {}),
        };
        return {
          tokens: empty([rows, p.hidden], p.dtype),
          weights: empty([rows], "f32"),
          scales: p.dtype === "fp8e4m3" ? empty([rows], "f32") : undefined,
          counts: early.counts,
          handle,
        };
      });
    } catch (e) {
      if (given === undefined) disposeEarly(early);
      throw e;
    }
  }

  /** `into` is a pull_device result of this group with this dispatch's shapes. */
  #checkInto(what: string, p: MoeProblem, maxRows: number, into: DispatchResult<Tensor>): void {
    checkDispatchInto(what, p, maxRows, this.#ctx.rank, this.#ctx.world, into);
    if (!(into.handle.route instanceof Tensor))
      throw new InvalidArgumentError(`${what}: into must be the result of a pull_device dispatch`);
  }

  /** pull_device after #stage, into `out` (whose handle has the ids and weights already). */
  #routeOnDevice(
    p: MoeProblem,
    maxRows: number,
    out: DispatchResult<Tensor>,
    headerBytes: number,
    rowBytes: number,
    tag: CallTag,
    stream: Stream,
  ): DispatchResult<Tensor> {
    const { device } = this.#ctx;
    const { handle } = out;
    const route = handle.route!;
    this.#route(p, route.ptr, out.counts, handle, stream);
    // The peers' tokens are known on the device only: as many as this rank's, the guess.
    const grid = 2 * device.props.smCount;
    this.#gather(p, out, route.ptr, rowBytes, headerBytes, maxRows, grid, p.tokens * this.#ctx.world, stream);
    this.#ctx.groupBarrier(this.#ctx.stagingView, stream, tag, 1);
    return out;
  }

  /** moe_route (after #stage) into `plan` and `counts`. With `handle` (pull_device) it judges the call and
   * records a refusal; without (pull) it leaves the judging to the host, which reads the plan's tail. */
  #route(
    p: MoeProblem,
    plan: bigint,
    counts: Tensor,
    handle: MoeHandle<Tensor> | undefined,
    stream: Stream,
  ): void {
    const { staging } = this.#ctx;
    this.#k().route.launch(
      { grid: 1, block: THREADS, stream, sharedBytes: MOE_ROUTE_SHARED_PER_EXPERT * p.numExperts },
      this.#ctx.stagingView,
      p.numExperts,
      p.localExperts,
      p.hidden * 2,
      staging.tensor.nbytes,
      plan,
      counts,
      handle?.expert ?? 0n,
      handle?.row ?? 0n,
      p.tokens * p.topk,
      handle?.links ?? 0n,
      handle ? this.#ctx.refusalPtr : 0n,
    );
  }

  /** pull after #stage: `planned` plans the gather and judges the call alike on every rank (one host wait);
   * then the outputs, sized by the rows received, around `early`, and the gather. */
  #pullSized(
    p: MoeProblem,
    o: DispatchOptions<Tensor>,
    early: Early,
    staged: Staged,
    stream: Stream,
    planned: () => PullPlan,
  ): DispatchResult<Tensor> {
    const { rank } = this.#ctx;
    let plan: PullPlan;
    let out: DispatchResult<Tensor>;
    try {
      plan = planned();
      out = this.#fresh(p, o.maxRows ?? plan.total[rank]!, plan.total[rank]!, plan.total, stream, early);
    } catch (e) {
      disposeEarly(early);
      throw e;
    }
    this.#gatherSized(p, out, plan.ptr, staged, plan.total[rank]!, plan.tokensAll, stream);
    return out;
  }

  /** pull's plan where the route kernel holds the experts: it plans on the device, and the host reads every
   * rank's header and rows received from the plan's tail (one small copy and wait, no routing on the host)
   * and judges. */
  #planOnDevice(p: MoeProblem, early: Early, staged: Staged, stream: Stream): PullPlan {
    const { world } = this.#ctx;
    const layout = moePlanLayout(world, p.numExperts);
    const plan = this.#scratch("plan", 4 * layout.end);
    this.#route(p, plan.ptr, early.counts, undefined, stream);
    const tail = new Int32Array(layout.end - layout.byRank);
    copyDeviceToHost(tail, plan.ptr + BigInt(4 * layout.byRank), stream);
    const total = Array.from(tail.subarray(0, world));
    const headers = Array.from({ length: world }, (_, r) =>
      tail.subarray(world + r * MOE_HEADER_FIXED, world + (r + 1) * MOE_HEADER_FIXED),
    );
    this.#judge(p, headers, total, staged, stream);
    let tokensAll = 0;
    for (const h of headers) tokensAll += h[0]!;
    return { ptr: plan.ptr, total, tokensAll };
  }

  /** pull's plan past the experts the route kernel holds: the host reads every rank's header (one copy
   * each, then one wait), judges, routes (routeBases) and uploads the plan. */
  #planOnHost(p: MoeProblem, early: Early, staged: Staged, stream: Stream): PullPlan {
    const { rank, world, staging } = this.#ctx;
    const E = p.numExperts;
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
    this.#judge(
      p,
      Array.from({ length: world }, (_, r) => header(r)),
      total,
      staged,
      stream,
    );
    copyHostToDevice(early.counts.ptr, received[rank]!, stream);
    const layout = moePlanLayout(world, E);
    const plan = new Int32Array(layout.end);
    let tokensAll = 0;
    for (let s = 0; s < world; s++) {
      plan[s] = header(s)[0]!;
      tokensAll += plan[s]!;
      plan.set(routeBases(counts, s, p), layout.bases + s * E);
    }
    plan[layout.received] = total[rank]!;
    const planMemory = this.#scratch("plan", plan.byteLength);
    copyHostToDevice(planMemory.ptr, plan, stream);
    return { ptr: planMemory.ptr, total, tokensAll };
  }

  /** pull's verdict on every rank's header and rows received (dispatchVerdict): where it refuses, every rank
   * throws alike after the closing barrier, so no one restages while a peer reads. */
  #judge(
    p: MoeProblem,
    headers: readonly Int32Array[],
    total: readonly number[],
    staged: Staged,
    stream: Stream,
  ): void {
    const { staging } = this.#ctx;
    const verdict = dispatchVerdict("dispatch", headers, total, p.numExperts, staging.tensor.nbytes);
    if (verdict === undefined) return;
    this.#ctx.groupBarrier(this.#ctx.stagingView, stream, staged.tag, 1);
    throw new InvalidArgumentError(verdict);
  }

  /** pull's gather into outputs the host sized (rows past the `received` ones zeroed), about `tokens` tokens
   * from all sources, and the closing barrier. */
  #gatherSized(
    p: MoeProblem,
    out: DispatchResult<Tensor>,
    plan: bigint,
    staged: Staged,
    received: number,
    tokens: number,
    stream: Stream,
  ): void {
    const rows = out.tokens.shape[0]!;
    const work = Math.max(tokens, rows - received);
    // As many blocks as routing on the device takes (the gather splits rows to fill them); none, no work.
    const grid = work === 0 ? 0 : 2 * this.#ctx.device.props.smCount;
    this.#gather(p, out, plan, staged.rowBytes, staged.headerBytes, rows, grid, tokens, stream);
    this.#ctx.groupBarrier(this.#ctx.stagingView, stream, staged.tag, 1);
  }

  /** moe_gather over `plan` (nothing to launch for a grid of 0), about `tokens` tokens from all sources. */
  #gather(
    p: MoeProblem,
    out: DispatchResult<Tensor>,
    plan: bigint,
    rowBytes: number,
    headerBytes: number,
    rows: number,
    grid: number,
    tokens: number,
    stream: Stream,
  ): void {
    const { handle } = out;
    // Chunks of at least 512 bytes (a warp's 16-byte vectors), a multiple of 16.
    const chunkBytes = align16(Math.ceil(rowBytes / parts(tokens, rowBytes, grid, 512)));
    if (grid > 0)
      this.#k().gather.launch(
        { grid, block: THREADS, stream },
        this.#ctx.stagingView,
        plan,
        out.tokens,
        out.weights,
        out.scales?.ptr ?? 0n,
        handle.row,
        handle.links!,
        handle.rowWeights!,
        rowBytes,
        chunkBytes,
        headerBytes,
        rows,
        p.numExperts,
        p.localExperts,
        p.topk,
      );
  }

  /** combine (see GpuCollectives.combine): `input` is a plain expert output, or a symmetric one (pull
   * reads it in place). */
  combine(
    input: Tensor | SymmetricTensor,
    handle: MoeHandle<Tensor>,
    o: CombineOptions<Tensor> & CollectiveOptions & { algorithm?: GpuCombineAlgorithm },
  ): Tensor {
    const what = "combine";
    const ctx = this.#ctx;
    checkTensorArg(what, "expertOut", input);
    const expertOut = ctx.local(input, what);
    const algorithm = o.algorithm ?? "auto";
    checkAlgorithm(what, algorithm, GPU_COMBINE_ALGORITHMS);
    const byRank = algorithm === "per_rank";
    // In place (pull): the peers read each rank's own expertOut, so every rank's must hold the most rows.
    const inPlace = !byRank && !(input instanceof Tensor);
    checkCombine(what, ctx.rank, ctx.world, expertOut, handle, o.out, inPlace);
    if (byRank && !(handle.links instanceof Tensor && handle.rowWeights instanceof Tensor))
      throw new InvalidArgumentError(`${what}: handle must be the handle a dispatch of this group returned`);
    if (o.out) {
      ctx.onDevice(what, o.out);
      if (overlaps(o.out, expertOut)) throw new InvalidArgumentError(`${what}: out overlaps expertOut`);
    }
    const stream = ctx.stream(o);
    const { staging, device } = this.#ctx;
    const p = handle.problem;
    const rowBytes = p.hidden * 2;
    // Routed on the device, the dispatch made sure every rank's maxRows fit, or was refused on every
    // rank: its pairs are then unused and no row is read, and the rows staged are cut to the buffer
    // (no rank may throw here alone). Routed on the host, the largest rank's rows: judged alike.
    // In place, nothing is staged. per_rank stages a partial at a token's first row: no more rows.
    if (handle.receivedByRank !== undefined && !inPlace)
      checkCapacity(what, stagedRows(handle) * rowBytes, staging.tensor.nbytes);
    const out = o.out ?? Tensor.empty([p.tokens, p.hidden], "bf16", { device, stream });
    // The handle's tensors were made on the dispatch's stream, which may not be this one.
    for (const t of [handle.expert, handle.row, handle.weights, handle.links, handle.rowWeights])
      t?.recordStream(stream);
    const k = this.#k();
    // The kind tells a rank that reads in place from one that stages (CollectiveMismatchError).
    // In place, the shape also carries the symmetric tensor's number: ranks that pass different tensors
    // of the group would read stale rows from each other.
    const dims = [p.topk, p.numExperts];
    const tag = this.#ctx.tag(
      {
        kind: byRank ? "moe-combine/per_rank" : inPlace ? "moe-combine/in-place" : "moe-combine/pull",
        dtype: "bf16",
        count: p.hidden,
        dims: inPlace ? [...dims, input.id] : dims,
      },
      stream,
    );
    const stagedCount = Math.min(handle.received, Math.floor(staging.tensor.nbytes / rowBytes));
    if (byRank) {
      const vectors = p.hidden % 8 === 0 && expertOut.ptr % 16n === 0n ? 1 : 0;
      const groups = vectors ? p.hidden / 8 : p.hidden;
      // Only a token's first row here does work: at least rows / min(topk, local experts) of them. The
      // grid takes two blocks a multiprocessor (the kernel's bounds); groups per warp at least a warp's.
      const heads = Math.ceil(stagedCount / Math.min(p.topk, p.localExperts));
      const grid = 2 * device.props.smCount;
      const chunkGroups = Math.ceil(groups / parts(heads, groups, grid, 32));
      if (stagedCount > 0)
        k.partials.launch(
          { grid, block: THREADS, stream },
          expertOut,
          handle.links!,
          handle.rowWeights!,
          stagedCount,
          p.hidden,
          p.topk,
          chunkGroups,
          staging.tensor.ptr,
          vectors,
        );
    } else if (!inPlace) {
      copyDeviceToDevice(staging.tensor.ptr, expertOut.ptr, stagedCount * rowBytes, stream);
    }
    // Every rank's expert output (pull) or partials (per_rank) complete: staged, or written in place
    // before the call.
    this.#ctx.groupBarrier(this.#ctx.stagingView, stream, tag);
    const vectors = p.hidden % 8 === 0 && out.ptr % 16n === 0n ? 1 : 0;
    if (p.tokens > 0 && byRank) {
      const groups = vectors ? p.hidden / 8 : p.hidden;
      const blocks = 2 * device.props.smCount;
      k.sumPartials.launch(
        { grid: blocks, block: THREADS, stream },
        this.#ctx.stagingView,
        handle.expert,
        handle.row,
        out,
        p.tokens,
        p.topk,
        p.hidden,
        p.localExperts,
        Math.ceil(groups / parts(p.tokens, groups, blocks, 32)),
        vectors,
      );
    } else if (p.tokens > 0)
      k.combine.launch(
        { grid: Math.min(p.tokens, 4 * device.props.smCount), block: THREADS, stream },
        inPlace ? input.deviceView() : this.#ctx.stagingView,
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
    this.#ctx.groupBarrier(this.#ctx.stagingView, stream, tag, 1);
    return out;
  }

  dispose(): void {
    this.#headers?.dispose();
    this.#plan?.dispose();
  }
}
