// Point-to-point and all-to-all as every backend checks them: shapes, dtypes and split counts judged from
// the tensors' descriptions, with the same typed errors on CPU and GPU, before anything is written.
// allToAllV's counts and row sizes of other ranks are only known once exchanged: allToAllVVerdict judges
// the whole group's the same way on every rank, so that every rank refuses (or runs) the same call.
import { InvalidArgumentError } from "../../errors.js";
import { algorithmList } from "../records.js";
import { checkTensorArg, type Described } from "../validate.js";
import { ALL_TO_ALL, ALL_TO_ALL_V, SEND_RECV } from "./records.js";

/** The GPU backend's algorithms, auto first (what each does: ./records.ts): send, recv and sendRecv share
 * one list; allToAll; allToAllV. */
export const GPU_SEND_RECV_ALGORITHMS = algorithmList(SEND_RECV, "cuda");
export type GpuSendRecvAlgorithm = (typeof GPU_SEND_RECV_ALGORITHMS)[number];
export const GPU_ALL_TO_ALL_ALGORITHMS = algorithmList(ALL_TO_ALL, "cuda");
export type GpuAllToAllAlgorithm = (typeof GPU_ALL_TO_ALL_ALGORITHMS)[number];
export const GPU_ALL_TO_ALL_V_ALGORITHMS = algorithmList(ALL_TO_ALL_V, "cuda");
export type GpuAllToAllVAlgorithm = (typeof GPU_ALL_TO_ALL_V_ALGORITHMS)[number];
/** The CPU backend's, the same for every exchange: every rank stages what it sends in its symmetric
 * buffer and the receivers pull. */
export const CPU_EXCHANGE_ALGORITHMS = algorithmList(SEND_RECV, "cpu");
export type CpuExchangeAlgorithm = (typeof CPU_EXCHANGE_ALGORITHMS)[number];

/** A tensor as rows: its first dimension, each row the elements of the others (a 1-D tensor's rows are
 * its elements). allToAllV's counts count rows. */
export interface Rows {
  readonly rows: number;
  readonly rowElems: number;
}

export function rowsOf(t: Described): Rows {
  if (t.shape.length <= 1) return { rows: t.numel, rowElems: 1 };
  return { rows: t.shape[0]!, rowElems: t.shape.slice(1).reduce((a, b) => a * b, 1) };
}

/** How a backend tells whether two of its tensors share memory (called once both are known tensors). */
type Overlaps<T> = (a: T, b: T) => boolean;

/** sendRecv: x goes to peer, out comes from it; same dtype (sizes may differ), no shared memory. */
export function checkSendRecv<T extends Described>(what: string, x: T, out: T, overlaps: Overlaps<T>): void {
  checkTensorArg(what, "x", x);
  checkTensorArg(what, "out", out);
  if (x.dtype !== out.dtype)
    throw new InvalidArgumentError(`${what}: x is ${x.dtype} but out is ${out.dtype}`);
  if (overlaps(x, out))
    throw new InvalidArgumentError(
      `${what}: out overlaps x; the peer's data would land on what this rank still sends: pass separate tensors`,
    );
}

/** allToAll: x holds world equal chunks (chunk j goes to rank j), out the same size (chunk i from rank i). */
export function checkAllToAll<T extends Described>(
  what: string,
  world: number,
  x: T,
  out: T,
  overlaps: Overlaps<T>,
): void {
  checkTensorArg(what, "x", x);
  checkTensorArg(what, "out", out);
  if (x.dtype !== out.dtype)
    throw new InvalidArgumentError(`${what}: x is ${x.dtype} but out is ${out.dtype}`);
  if (x.numel % world !== 0)
    throw new InvalidArgumentError(
      `${what}: x's ${x.numel} elements do not split into ${world} equal chunks, one per rank`,
    );
  if (out.numel !== x.numel)
    throw new InvalidArgumentError(
      `${what}: out must have x's ${x.numel} elements, got ${out.numel} (shape ${JSON.stringify(out.shape)})`,
    );
  if (overlaps(x, out)) throw new InvalidArgumentError(`${what}: out overlaps x: pass separate tensors`);
}

/** Counts as the host gives them: world non-negative integers. */
export function checkCountList(
  what: string,
  name: string,
  counts: unknown,
  world: number,
): readonly number[] {
  if (!Array.isArray(counts) || counts.length !== world)
    throw new InvalidArgumentError(`${what}: ${name} must be an array of ${world} row counts, one per rank`);
  for (const c of counts as unknown[])
    if (typeof c !== "number" || !Number.isSafeInteger(c) || c < 0 || c > 0x7fff_ffff)
      throw new InvalidArgumentError(
        `${what}: ${name} must hold integers from 0 to 2^31 - 1, got ${String(c)} in ${JSON.stringify(counts)}`,
      );
  return counts as readonly number[];
}

/** allToAllV's options beside the counts: recvCounts (the rows expected) goes with counts as an array,
 * recvCountsOut (where the rows received go) with counts in a tensor. */
export interface CountOptions<T> {
  readonly recvCounts?: readonly number[] | undefined;
  readonly recvCountsOut?: T | undefined;
}

/** allToAllV with the counts as an array: x and out; sendCounts (host) add up to x's rows; recvCounts,
 * when given, a count list; no recvCountsOut. */
export function checkAllToAllV<T extends Described>(
  what: string,
  world: number,
  x: T,
  out: T,
  sendCounts: readonly number[],
  options: CountOptions<T>,
  overlaps: Overlaps<T>,
): { readonly x: Rows; readonly out: Rows } {
  const rows = checkAllToAllVTensors(what, x, out, overlaps);
  checkCountList(what, "sendCounts", sendCounts, world);
  const total = sendCounts.reduce((a, b) => a + b, 0);
  if (total !== rows.x.rows)
    throw new InvalidArgumentError(
      `${what}: sendCounts ${JSON.stringify(sendCounts)} add up to ${total} rows, x has ${rows.x.rows}`,
    );
  if (options.recvCounts !== undefined) checkCountList(what, "recvCounts", options.recvCounts, world);
  if (options.recvCountsOut !== undefined)
    throw new InvalidArgumentError(
      `${what}: recvCountsOut goes with counts in a tensor; with counts as an array the rows received come back as an array: leave recvCountsOut out`,
    );
  return rows;
}

/** allToAllV with the counts in a tensor: x and out; the counts, and recvCountsOut when given, i32 tensors
 * of world elements, recvCountsOut apart from x and out (it is written once the rows are); no recvCounts.
 * Whether the counts fit x and out is the group's to judge (allToAllVVerdict, coll/all_to_all_v.cuh). */
export function checkAllToAllVCounts<T extends Described>(
  what: string,
  world: number,
  x: T,
  out: T,
  sendCounts: T,
  options: CountOptions<T>,
  overlaps: Overlaps<T>,
): { readonly x: Rows; readonly out: Rows } {
  const rows = checkAllToAllVTensors(what, x, out, overlaps);
  if (options.recvCounts !== undefined)
    throw new InvalidArgumentError(
      `${what}: recvCounts (the rows expected) goes with counts as an array; with counts in a tensor, read the returned recvCounts`,
    );
  const into = options.recvCountsOut;
  if (into !== undefined) checkTensorArg(what, "recvCountsOut", into);
  for (const t of into === undefined ? [sendCounts] : [sendCounts, into])
    if (t.dtype !== "i32" || t.numel !== world)
      throw new InvalidArgumentError(`${what}: counts in a tensor are i32 tensors of ${world} elements`);
  if (into !== undefined && (overlaps(x, into) || overlaps(out, into)))
    throw new InvalidArgumentError(`${what}: recvCountsOut overlaps x or out: pass a tensor of its own`);
  return rows;
}

/** allToAllV's x and out, whatever holds the counts: the same dtype and row, apart. */
export function checkAllToAllVTensors<T extends Described>(
  what: string,
  x: T,
  out: T,
  overlaps: Overlaps<T>,
): { readonly x: Rows; readonly out: Rows } {
  checkTensorArg(what, "x", x);
  checkTensorArg(what, "out", out);
  if (x.dtype !== out.dtype)
    throw new InvalidArgumentError(`${what}: x is ${x.dtype} but out is ${out.dtype}`);
  const xr = rowsOf(x);
  const or = rowsOf(out);
  if (xr.rowElems !== or.rowElems)
    throw new InvalidArgumentError(
      `${what}: a row of x has ${xr.rowElems} elements, a row of out ${or.rowElems} (shapes ${JSON.stringify(x.shape)}, ${JSON.stringify(out.shape)})`,
    );
  if (overlaps(x, out)) throw new InvalidArgumentError(`${what}: out overlaps x: pass separate tensors`);
  return { x: xr, out: or };
}

/** One rank's side of an allToAllV, as the group sees it once the counts are exchanged. */
export interface AllToAllVSide {
  /** Rows it sends to each rank. */
  readonly sendCounts: Int32Array;
  /** Rows its out holds. */
  readonly outRows: number;
  /** What it said it receives from each rank, if it said. */
  readonly recvCounts: Int32Array | undefined;
  /** Staging bytes its x needs where they exceed the buffer (0: it fits, or nothing is staged). */
  readonly needed: number;
  /** Rows its x holds (the counts may send fewer: a tensor of counts, on a buffer of fixed capacity). */
  readonly xRows: number;
  /** Bytes of a row of its x. */
  readonly rowBytes: number;
}

/** A row or byte count as a side's i32 holds it: at most 2^31 - 1. */
export const clampI32 = (n: number): number => Math.min(n, 0x7fff_ffff);

/** i32s of one side as ranks publish it: [out rows, recvCounts given, needed, x rows, row bytes,
 * sendCounts, recvCounts]. */
export const sideLength = (world: number): number => 5 + 2 * world;

/** This rank's side, published. */
export function encodeSide(
  outRows: number,
  sendCounts: readonly number[],
  recvCounts: readonly number[] | undefined,
  needed: number,
  xRows: number,
  rowBytes: number,
): Int32Array {
  const said = recvCounts === undefined ? 0 : 1;
  return Int32Array.from([
    clampI32(outRows),
    said,
    clampI32(needed),
    clampI32(xRows),
    clampI32(rowBytes),
    ...sendCounts,
    ...(recvCounts ?? sendCounts),
  ]);
}

/** Every rank's side from `world` published ones laid end to end (views into `h`). */
export function decodeSides(h: Int32Array, world: number): AllToAllVSide[] {
  const n = sideLength(world);
  return Array.from({ length: world }, (_, r) => {
    const s = h.subarray(r * n, (r + 1) * n);
    return {
      outRows: s[0]!,
      needed: s[2]!,
      xRows: s[3]!,
      rowBytes: s[4]!,
      sendCounts: s.subarray(5, 5 + world),
      recvCounts: s[1] === 1 ? s.subarray(5 + world) : undefined,
    };
  });
}

/** A rank whose rows are of another size than rank 0's (`rowBytes` each), as every backend's verdict says
 * it (allToAllVVerdict; on GPUs all_to_all_v.cuh's kRowBytes). */
export const rowSizeRefusal = (r: number, rowBytes: number): string =>
  `rank ${r}'s rows are ${rowBytes} bytes, not the size of rank 0's: pass rows of one size (x's and out's elements past the first dimension) on every rank`;

/**
 * The group's verdict on an allToAllV, judged alike on every rank from every rank's side, in the order
 * all_to_all_v.cuh judges: undefined when the call can run, else the message of the InvalidArgumentError
 * every rank throws (nothing written). `unstaged`: an algorithm of the backend that needs no staging
 * buffer, offered where an x does not fit it.
 */
export function allToAllVVerdict(
  what: string,
  sides: readonly AllToAllVSide[],
  capacityBytes: number,
  unstaged?: string,
): string | undefined {
  const world = sides.length;
  const instead = unstaged === undefined ? "" : `, or use algorithm ${unstaged}`;
  for (const [r, s] of sides.entries())
    if (s.needed > 0)
      return `${what}: rank ${r}'s x needs ${s.needed} bytes of the ${capacityBytes}-byte symmetric staging buffer; pass a larger stagingBytes to init() (or SYMMKIT_STAGING_BYTES)${instead}; nothing was written`;
  // With counts in a tensor the fingerprint leaves the row size to this verdict, so a rank whose rows
  // differ is refused on every rank and the group stays in step; with counts as an array the fingerprint's
  // element count (a row's) has already found it.
  for (let r = 1; r < world; r++)
    if (sides[r]!.rowBytes !== sides[0]!.rowBytes)
      return `${what}: ${rowSizeRefusal(r, sides[r]!.rowBytes)}; nothing was written`;
  // Counts from a tensor are judged here, by the group, rather than by their rank alone.
  for (const [r, s] of sides.entries()) {
    const negative = s.sendCounts.findIndex((c) => c < 0);
    if (negative >= 0)
      return `${what}: rank ${r} sends a negative row count to rank ${negative}; nothing was written`;
    const sent = s.sendCounts.reduce((a, b) => a + b, 0);
    if (sent > s.xRows)
      return `${what}: rank ${r}'s sendCounts add up to ${sent} rows, more than its x has (${s.xRows}); nothing was written`;
  }
  for (let r = 0; r < world; r++) {
    const from = sides.map((s) => s.sendCounts[r]!);
    const total = from.reduce((a, b) => a + b, 0);
    const said = sides[r]!.recvCounts;
    if (said !== undefined && from.some((c, i) => c !== said[i]))
      return `${what}: rank ${r} expects ${JSON.stringify(Array.from(said))} rows from ranks 0..${world - 1}, the ranks send it ${JSON.stringify(from)}; nothing was written`;
    if (total > sides[r]!.outRows)
      return `${what}: rank ${r} receives ${total} rows (${JSON.stringify(from)} from ranks 0..${world - 1}) but its out holds ${sides[r]!.outRows}; nothing was written`;
  }
  return undefined;
}
