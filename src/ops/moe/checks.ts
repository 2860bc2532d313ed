// MoE dispatch and combine as every backend checks them: shapes, dtypes and options judged from the
// tensors' descriptions, before anything is written; expert ids and the rows each rank receives are
// data, judged by the whole group once every rank published them (dispatchVerdict).
//
// The layout (src/ops/moe/route.ts computes it): experts are split evenly over ranks, expert e living on
// rank e / localExperts as its local expert e % localExperts. Every (token, slot) pair whose expert id is
// not -1 becomes one row of its expert owner's dispatched tensor, expert-major: local expert 0's rows
// first, within an expert by source rank, within a rank by token, then slot. A token that picks two
// experts of one rank arrives twice, once per expert, as an expert's grouped GEMM wants it.
import { InvalidArgumentError } from "../../errors.js";
import type { DType } from "../../runtime/dtype.js";
import { algorithmList } from "../records.js";
import { checkTensorArg, type Described } from "../validate.js";
import { MOE, MOE_COMBINE } from "./records.js";

/** Token dtypes dispatch carries: bf16, or fp8 e4m3 with a per-token f32 scale. Combine takes bf16. */
export const MOE_TOKEN_DTYPES: readonly DType[] = ["bf16", "fp8e4m3"];
/** dispatch's algorithms on each backend, auto first (what each does: ./records.ts). */
export const GPU_MOE_ALGORITHMS = algorithmList(MOE, "cuda");
export type GpuMoeAlgorithm = (typeof GPU_MOE_ALGORITHMS)[number];
export const CPU_MOE_ALGORITHMS = algorithmList(MOE, "cpu");
export type CpuMoeAlgorithm = (typeof CPU_MOE_ALGORITHMS)[number];
/** combine's algorithms on each backend, auto first. */
export const GPU_COMBINE_ALGORITHMS = algorithmList(MOE_COMBINE, "cuda");
export type GpuCombineAlgorithm = (typeof GPU_COMBINE_ALGORITHMS)[number];
export const CPU_COMBINE_ALGORITHMS = algorithmList(MOE_COMBINE, "cpu");
export type CpuCombineAlgorithm = (typeof CPU_COMBINE_ALGORITHMS)[number];

export interface DispatchOptions<T> {
  /** Experts over the whole group: a multiple of the world size. */
  readonly numExperts: number;
  /** fp8e4m3 tokens only, and then required: [tokens] f32, token t's scale (value = fp8 x scale). Each
   * dispatched row carries its token's scale. */
  readonly scales?: T | undefined;
  /** Rows of the dispatched tensors; default: exactly the rows that arrive. A fixed size lets a caller
   * keep its buffers (and GPUs avoid a host round trip); rows past those that arrive are zero. */
  readonly maxRows?: number | undefined;
  /** An earlier result of this group's dispatch with the same tokens, hidden, topk, numExperts, dtype and
   * maxRows: its tensors are written again and returned (its handle then describes this dispatch). On
   * GPUs it goes with algorithm pull_device, and inside a CUDA graph capture it is required. */
  readonly into?: DispatchResult<T> | undefined;
}

/** A checked dispatch. */
export interface MoeProblem {
  readonly tokens: number;
  readonly hidden: number;
  readonly topk: number;
  readonly numExperts: number;
  /** Experts on each rank. */
  readonly localExperts: number;
  readonly dtype: DType;
}

/** What combine needs of a dispatch: this rank's pairs, where each went, and their weights. */
export interface MoeHandle<T> {
  readonly problem: MoeProblem;
  readonly rank: number;
  readonly world: number;
  /** Rows this rank received (its dispatched tensors' rows that hold tokens); maxRows when the dispatch
   * was routed on the device (pull_device), where only the device knows them. */
  readonly received: number;
  /** Rows every rank received (combine stages the largest: every rank judges its room alike); undefined
   * when routed on the device, which refused the dispatch unless every rank's maxRows fit for combine. */
  readonly receivedByRank: readonly number[] | undefined;
  /** [tokens, topk] i32: each pair's expert (-1: none), as dispatched. */
  readonly expert: T;
  /** [tokens, topk] i32: each pair's row in its expert owner's dispatched tensor (-1: none). */
  readonly row: T;
  /** [tokens, topk] f32: the weights combine applies, as dispatched. */
  readonly weights: T;
  /** pull_device: the plan the device wrote (dispatches `into` this result write it again). */
  readonly route?: T;
  /** GPUs: [rows, 2] i32 of each received row: the next row of its token here in slot order (-1: none),
   * and 1 on the token's first row here (combine per_rank sums each token's rows here from its first). */
  readonly links?: T;
  /** GPUs: [rows] f32, each received row's weight (combine per_rank applies it where the row is). */
  readonly rowWeights?: T;
}

/** `into` (DispatchOptions.into) is a result of this rank's dispatches in this group with this dispatch's
 * shapes and maxRows. */
export function checkDispatchInto(
  what: string,
  p: MoeProblem,
  maxRows: number | undefined,
  rank: number,
  world: number,
  into: DispatchResult<Described>,
): void {
  const h = (into as Partial<DispatchResult<Described>> | undefined)?.handle;
  const q = h?.problem;
  const same =
    maxRows !== undefined &&
    h !== undefined &&
    q !== undefined &&
    h.rank === rank &&
    h.world === world &&
    q.tokens === p.tokens &&
    q.hidden === p.hidden &&
    q.topk === p.topk &&
    q.numExperts === p.numExperts &&
    q.dtype === p.dtype &&
    into.tokens.shape[0] === maxRows;
  if (!same)
    throw new InvalidArgumentError(
      `${what}: into must be the result of a dispatch of this group on this rank with the same tokens, hidden, topk, numExperts, dtype and maxRows`,
    );
}

/** Every tensor of a dispatch's result, its handle's included. */
export function dispatchTensors<T>(r: DispatchResult<T>): T[] {
  const h = r.handle;
  const all = [
    r.tokens,
    r.weights,
    r.scales,
    r.counts,
    h.expert,
    h.row,
    h.weights,
    h.route,
    h.links,
    h.rowWeights,
  ];
  return all.filter((t): t is T => t !== undefined);
}

/** Rows combine stages on the rank that stages most (see MoeHandle.receivedByRank). */
export function stagedRows(handle: MoeHandle<unknown>): number {
  return Math.max(...(handle.receivedByRank ?? [handle.received]));
}

export interface DispatchResult<T> {
  /** [rows, hidden], the tokens' dtype: this rank's experts' tokens, expert-major. */
  readonly tokens: T;
  /** [rows] f32: each row's routing weight (its pair's topkWeights entry). */
  readonly weights: T;
  /** [rows] f32, fp8 dispatch only: each row's token scale. */
  readonly scales: T | undefined;
  /** [localExperts] i32: rows per local expert (their offsets are the running sums). */
  readonly counts: T;
  readonly handle: MoeHandle<T>;
}

export interface CombineOptions<T> {
  /** [tokens, hidden] bf16: where the combined tokens go (default: a new tensor). */
  readonly out?: T | undefined;
}

export function checkDispatch(
  what: string,
  world: number,
  tokens: Described,
  topkIdx: Described,
  topkWeights: Described,
  o: DispatchOptions<Described> | undefined,
): MoeProblem {
  checkTensorArg(what, "tokens", tokens);
  checkTensorArg(what, "topkIdx", topkIdx);
  checkTensorArg(what, "topkWeights", topkWeights);
  if (typeof o !== "object" || o === null)
    throw new InvalidArgumentError(`${what}: options with numExperts are required`);
  if (!MOE_TOKEN_DTYPES.includes(tokens.dtype))
    throw new InvalidArgumentError(
      `${what}: tokens must be ${MOE_TOKEN_DTYPES.join(" or ")}, not ${tokens.dtype}`,
    );
  if (tokens.shape.length !== 2 || tokens.shape[1]! < 1)
    throw new InvalidArgumentError(
      `${what}: tokens must be [tokens, hidden] with hidden >= 1, got shape ${JSON.stringify(tokens.shape)}`,
    );
  const [count, hidden] = tokens.shape as [number, number];
  if (
    topkIdx.dtype !== "i32" ||
    topkIdx.shape.length !== 2 ||
    topkIdx.shape[0] !== count ||
    topkIdx.shape[1]! < 1
  )
    throw new InvalidArgumentError(
      `${what}: topkIdx must be i32 [${count}, topk] with topk >= 1, got ${topkIdx.dtype} ${JSON.stringify(topkIdx.shape)}`,
    );
  const topk = topkIdx.shape[1]!;
  const [wRows, wCols] = topkWeights.shape;
  if (topkWeights.dtype !== "f32" || topkWeights.shape.length !== 2 || wRows !== count || wCols !== topk)
    throw new InvalidArgumentError(
      `${what}: topkWeights must be f32 [${count}, ${topk}] like topkIdx, got ${topkWeights.dtype} ${JSON.stringify(topkWeights.shape)}`,
    );
  const e = o.numExperts;
  if (typeof e !== "number" || !Number.isSafeInteger(e) || e < world || e % world !== 0 || e > 0x7fff_ffff)
    throw new InvalidArgumentError(
      `${what}: numExperts must be a positive multiple of the world size ${world}, got ${String(e)}`,
    );
  if (tokens.dtype === "fp8e4m3") {
    if (o.scales === undefined)
      throw new InvalidArgumentError(`${what}: fp8e4m3 tokens need scales, [${count}] f32 (one per token)`);
    checkTensorArg(what, "scales", o.scales);
    if (o.scales.dtype !== "f32" || o.scales.numel !== count)
      throw new InvalidArgumentError(
        `${what}: scales must be f32 with ${count} elements (one per token), got ${o.scales.dtype} ${JSON.stringify(o.scales.shape)}`,
      );
  } else if (o.scales !== undefined) {
    throw new InvalidArgumentError(`${what}: scales come with fp8e4m3 tokens only`);
  }
  const m = o.maxRows;
  if (m !== undefined && (typeof m !== "number" || !Number.isSafeInteger(m) || m < 0 || m > 0x7fff_ffff))
    throw new InvalidArgumentError(
      `${what}: maxRows must be an integer from 0 to 2^31 - 1, got ${String(m)}`,
    );
  return { tokens: count, hidden, topk, numExperts: e, localExperts: e / world, dtype: tokens.dtype };
}

/** What each rank publishes of a dispatch before any data moves (both backends; moe.cuh kHeaderFixed):
 * i32 tokens, the first pair whose expert id is out of range (-1: none), maxRows (-1: none), the staging
 * bytes its dispatch needs when they exceed the buffer (0: it fits; then its data is staged), then its
 * pairs per expert. */
export const MOE_HEADER_FIXED = 4;

/** This rank's header before its counts: [tokens, first bad pair (-1: none), maxRows (-1: none), staging
 * bytes needed when they exceed `capacityBytes` (else 0)], then zero counts. */
export function dispatchHeader(
  p: MoeProblem,
  maxRows: number | undefined,
  needed: number,
  capacityBytes: number,
): Int32Array {
  const h = new Int32Array(MOE_HEADER_FIXED + p.numExperts);
  h.set([p.tokens, -1, maxRows ?? -1, needed > capacityBytes ? Math.min(needed, 0x7fff_ffff) : 0]);
  return h;
}

/** The first pair whose id is neither -1 nor an expert, or -1. */
export function firstBadId(p: MoeProblem, ids: Int32Array): number {
  return ids.findIndex((e) => e < -1 || e >= p.numExperts);
}

/**
 * The group's verdict on a dispatch, judged alike on every rank from every rank's header and the rows
 * each receives: undefined when it can run, else the message every rank throws (nothing written). Ids
 * are data, so a bad one is found where they are read and refused by the whole group, not only by the
 * rank that passed it (which would leave the others waiting).
 */
export function dispatchVerdict(
  what: string,
  headers: readonly Int32Array[],
  received: readonly number[],
  experts: number,
  capacityBytes: number,
): string | undefined {
  for (const [r, h] of headers.entries()) {
    if (h[3]! > 0)
      return `${what}: rank ${r}'s dispatch needs ${h[3]} bytes of the ${capacityBytes}-byte symmetric staging buffer; pass a larger stagingBytes to init() (or SYMMKIT_STAGING_BYTES); nothing was written`;
  }
  for (const [r, h] of headers.entries()) {
    const bad = h[1]!;
    if (bad >= 0)
      return `${what}: rank ${r}'s topkIdx has an expert id out of range at pair ${bad}; expert ids are -1 (none) or 0 to ${experts - 1}; nothing was written`;
  }
  for (const [r, h] of headers.entries()) {
    const maxRows = h[2]!;
    if (maxRows >= 0 && received[r]! > maxRows)
      return `${what}: rank ${r} receives ${received[r]} rows but its maxRows is ${maxRows}; nothing was written`;
  }
  return undefined;
}

/** combine: expertOut holds at least the rows this rank received, bf16 of the dispatch's hidden size. */
export function checkCombine(
  what: string,
  rank: number,
  world: number,
  expertOut: Described,
  handle: MoeHandle<unknown> | undefined,
  out: Described | undefined,
  /** expertOut is symmetric, read in place: as many rows on every rank, judged alike against the most any
   * rank received. */
  symmetric = false,
): void {
  checkTensorArg(what, "expertOut", expertOut);
  if (
    typeof handle !== "object" ||
    handle === null ||
    typeof handle.problem !== "object" ||
    !(handle.receivedByRank === undefined || Array.isArray(handle.receivedByRank))
  )
    throw new InvalidArgumentError(`${what}: handle must be the handle a dispatch of this group returned`);
  if (handle.rank !== rank || handle.world !== world)
    throw new InvalidArgumentError(
      `${what}: handle comes from rank ${handle.rank} of a group of ${handle.world}, this is rank ${rank} of ${world}`,
    );
  const p = handle.problem;
  if (expertOut.dtype !== "bf16" || expertOut.shape.length !== 2 || expertOut.shape[1] !== p.hidden)
    throw new InvalidArgumentError(
      `${what}: expertOut must be bf16 [rows, ${p.hidden}], got ${expertOut.dtype} ${JSON.stringify(expertOut.shape)}`,
    );
  if (symmetric && expertOut.shape[0]! < stagedRows(handle))
    throw new InvalidArgumentError(
      `${what}: the symmetric expertOut has ${expertOut.shape[0]} rows; the dispatch brought a rank ${stagedRows(handle)}, which every rank's copy must hold`,
    );
  if (expertOut.shape[0]! < handle.received)
    throw new InvalidArgumentError(
      `${what}: expertOut has ${expertOut.shape[0]} rows, the dispatch brought this rank ${handle.received}`,
    );
  if (out === undefined) return;
  checkTensorArg(what, "out", out);
  if (
    out.dtype !== "bf16" ||
    out.shape.length !== 2 ||
    out.shape[0] !== p.tokens ||
    out.shape[1] !== p.hidden
  )
    throw new InvalidArgumentError(
      `${what}: out must be bf16 [${p.tokens}, ${p.hidden}], got ${out.dtype} ${JSON.stringify(out.shape)}`,
    );
}
