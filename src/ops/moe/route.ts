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

/**
 * One token's combine, as the kernels compute it: over slots 0..topk-1 in order, skipping unused ones,
 * acc = acc + weight x value in f32, each operation rounded; the sum rounded once to bf16. `value(k, i)`
 * gives element i of slot k's expert output as bf16 bits.
 */
export function combineToken(
  hidden: number,
  topk: number,
  used: (k: number) => boolean,
  weight: (k: number) => number,
  value: (k: number, i: number) => number,
  out: Uint16Array,
  at: number,
): void {
  const f = Math.fround;
  for (let i = 0; i < hidden; i++) {
    let acc = 0;
    for (let k = 0; k < topk; k++) if (used(k)) acc = f(acc + f(weight(k) * decodeBF16(value(k, i))));
    out[at + i] = f32ToBf16Bits(acc);
  }
}

/**
 * One token's combine per_rank, as its kernels compute it: for each rank r in order that owns any of the
 * token's used slots, r's partial = bf16 of (over r's slots in slot order, acc = acc + weight x value in
 * f32, each operation rounded); acc = acc + partial in f32, rounded; the sum rounded once to bf16.
 * `owner(k)` is slot k's expert's rank.
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
  const f = Math.fround;
  const slots = Array.from({ length: world }, (_, r) =>
    Array.from({ length: topk }, (_, k) => k).filter((k) => used(k) && owner(k) === r),
  );
  for (let i = 0; i < hidden; i++) {
    let acc = 0;
    for (const mine of slots) {
      if (mine.length === 0) continue;
      let partial = 0;
      for (const k of mine) partial = f(partial + f(weight(k) * decodeBF16(value(k, i))));
      acc = f(acc + decodeBF16(f32ToBf16Bits(partial)));
    }
    out[at + i] = f32ToBf16Bits(acc);
  }
}
