// Where MoE dispatch puts each (token, slot) pair, and how combine sums them back: the host computation
// every backend's layout follows (src/ops/moe/checks.ts describes the layout). Every rank can compute
// every rank's rows from the count matrix alone (pairs per expert from each rank), so a dispatch needs
// one exchange of counts before data moves, and combine needs no second one.
import { decodeBF16, f32ToBf16Bits } from "../../runtime/dtype.js";
import type { MoeProblem } from "./checks.js";

type Layout = Pick<MoeProblem, "numExperts" | "localExperts">;

/** Pairs of one rank by expert: counts[e] (ids -1 count nowhere). */
export function expertCounts(ids: Int32Array, numExperts: number): Int32Array {
  const counts = new Int32Array(numExperts);
  for (const e of ids) if (e >= 0) counts[e]!++;
  return counts;
}

/** Rows rank `owner` receives for each of its local experts, from every rank's counts. */
export function receivedCounts(counts: readonly ArrayLike<number>[], owner: number, p: Layout): Int32Array {
  const out = new Int32Array(p.localExperts);
  for (let j = 0; j < p.localExperts; j++) for (const c of counts) out[j]! += c[owner * p.localExperts + j]!;
  return out;
}

/** The row of rank `source`'s first pair of each expert at the expert's owner: the owner's rows of
 * earlier local experts, then this expert's rows from earlier ranks. */
export function routeBases(counts: readonly ArrayLike<number>[], source: number, p: Layout): Int32Array {
  const bases = new Int32Array(p.numExperts);
  // One pass per expert over the ranks: its rows from ranks before `source`, and in all (which the
  // owner's next local expert starts after).
  let owned = 0;
  for (let e = 0; e < p.numExperts; e++) {
    if (e % p.localExperts === 0) owned = 0;
    let before = 0;
    let all = 0;
    for (let s = 0; s < counts.length; s++) {
      if (s < source) before += counts[s]![e]!;
      all += counts[s]![e]!;
    }
    bases[e] = owned + before;
    owned += all;
  }
  return bases;
}

/**
 * The row each pair of rank `source` lands in, in its expert owner's dispatched tensor (-1 for an unused
 * slot): the owner's rows of earlier local experts, then the rows of this expert from earlier ranks,
 * then this rank's earlier pairs of the expert in (token, slot) order.
 */
export function routeRows(
  counts: readonly ArrayLike<number>[],
  source: number,
  ids: Int32Array,
  p: Layout,
): Int32Array {
  const L = p.localExperts;
  const next = new Int32Array(p.numExperts);
  for (let e = 0; e < p.numExperts; e++) {
    const first = e - (e % L);
    let base = 0;
    for (let j = first; j < e; j++) for (const c of counts) base += c[j]!;
    for (let s = 0; s < source; s++) base += counts[s]![e]!;
    next[e] = base;
  }
  const rows = new Int32Array(ids.length);
  for (let i = 0; i < ids.length; i++) rows[i] = ids[i]! < 0 ? -1 : next[ids[i]!]!++;
  return rows;
}

/** Element `i` of a token's sum over its slots in slot order, as the kernels compute it: acc = acc +
 * weight x value over the used slots from +0, in f32 with each operation rounded (a float32, unrounded to
 * bf16). `value(k, i)` gives element i of slot k's expert output as bf16 bits. */
function slotSum(
  i: number,
  topk: number,
  used: (k: number) => boolean,
  weight: (k: number) => number,
  value: (k: number, i: number) => number,
): number {
  const f = Math.fround;
  let acc = 0;
  for (let k = 0; k < topk; k++) if (used(k)) acc = f(acc + f(weight(k) * decodeBF16(value(k, i))));
  return acc;
}

/** One token's combine, as the kernels compute it: its slot-order sum (slotSum) rounded once to bf16. */
export function combineToken(
  hidden: number,
  topk: number,
  used: (k: number) => boolean,
  weight: (k: number) => number,
  value: (k: number, i: number) => number,
  out: Uint16Array,
  at: number,
): void {
  for (let i = 0; i < hidden; i++) out[at + i] = f32ToBf16Bits(slotSum(i, topk, used, weight, value));
}

/**
 * One token's combine per_rank, as its kernels compute it: for each rank r in order that owns any of the
 * token's used slots, r's partial is the slot-order sum of r's slots rounded to bf16; acc = acc + partial
 * in f32, rounded; the sum rounded once to bf16. `owner(k)` is slot k's expert's rank.
 */
export function combineTokenByRank(
  hidden: number,
  topk: number,
  world: number,
  used: (k: number) => boolean,
  owner: (k: number) => number,
  weight: (k: number) => number,
  value: (k: number, i: number) => number,
  out: Uint16Array,
  at: number,
): void {
  // Each rank that owns any used slot, in rank order, with its slots.
  const ranks = Array.from({ length: world }, (_, r) => r).filter((r) =>
    Array.from({ length: topk }, (_, k) => k).some((k) => used(k) && owner(k) === r),
  );
  const onRank = ranks.map((r) => (k: number) => used(k) && owner(k) === r);
  for (let i = 0; i < hidden; i++) {
    let acc = 0;
    for (const mine of onRank)
      acc = Math.fround(acc + decodeBF16(f32ToBf16Bits(slotSum(i, topk, mine, weight, value))));
    out[at + i] = f32ToBf16Bits(acc);
  }
}
