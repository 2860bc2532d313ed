// One rank of the MoE check, on the backend its argument names (symmkit run -n N moe.js cpu|cuda): dispatch
// and combine with every algorithm of that backend (the lists of src/ops/moe/checks.ts) and the default.
// The CPU backend runs it in test/cpu-moe.test.ts (worlds 2 and 3), GPUs in test/gpu/distributed.test.ts,
// shared-gpu.test.ts and bench/gpu-suite.sh (any world from 2 to 8).
//
// Every rank draws every rank's inputs from the shared seed, so each computes with plain code of its own
// the layout it must receive (expert-major, then source rank, token, slot) and the tokens combine must
// give it back (f32 in slot order, every operation rounded), and checks src/ops/moe/route.ts, the host
// reference both backends follow, against them. Both backends make every check, bit for bit: bf16 tokens
// of any finite value and fp8 e4m3 of any byte with scales; hidden 1, 7, 64, 999, 1031 and 7168; top-1 to
// top-8, 36 and 40 (over a warp's 32 lanes, and over 32 rows of one token on one rank) of 1 to 256
// experts; a rank with no tokens, one whose every slot is unused (-1), all pairs to one rank, a token
// picking two experts of one rank or one expert twice; inputs as slices of larger tensors; dispatch
// of exactly the rows that arrive and of maxRows (spare rows zero), and into an earlier result scribbled
// over; combine of an expert output with poison rows around it into a poisoned out, of the identity expert
// with weights where any other order or a fused multiply-add gives other bits, and exact (x times its
// summed weights), each in slot order (pull) and per_rank (owners' partials in rank order: route.ts
// combineTokenByRank), and per_rank after a dispatch into a scribbled result; inputs unwritten; a rank
// 50 ms late for 40 calls alternating shapes and algorithms; group-judged refusals (an expert id out of
// range, one rank's maxRows too small, one rank's tokens beyond the staging buffer) thrown by every rank
// alike, naming the rank, nothing written; local bad inputs as typed errors with a stable code, nothing
// written; the group usable after. On GPUs only: pull_device
// (routed on the device), combine in a CUDA graph replayed with new expert outputs and in place from a
// symmetric tensor, dispatch + combine in a graph replayed with new routes, capture rules, refusals on the
// device.
//
// Each section makes its inputs and poisoned outputs first, meets the peers at a store barrier, makes its
// calls back to back, waits once, and only then checks (test/support/batch.ts). Seeded, the seed printed;
// rank 0 prints each section with its seconds.
import assert from "node:assert/strict";
import { assertSameBits } from "../support/agree.js";
import type { Case } from "../support/batch.js";
import { startProgram, typed, untyped } from "../support/program.js";
import {
  asBytes,
  bytesOf,
  concat,
  expectPoisonedIn,
  fromBytes,
  poisonedIn,
  poisonOf,
  type Maker,
} from "../support/tensors.js";
import {
  CPU_COMBINE_ALGORITHMS,
  CPU_MOE_ALGORITHMS,
  GPU_COMBINE_ALGORITHMS,
  GPU_MOE_ALGORITHMS,
  dispatchTensors,
  type DispatchResult,
} from "../../src/ops/moe/checks.js";
import { moeRouteFits } from "../../src/ops/moe/moe.js";
import { GPU_MOE_AUTO, MOE } from "../../src/ops/moe/records.js";
import {
  combineToken,
  combineTokenByRank,
  expertCounts,
  receivedCounts,
  routeRows,
} from "../../src/ops/moe/route.js";
import { autoPick, type OpRecords } from "../../src/ops/records.js";
import { decodeBF16, encodeBF16, type DType, type RawArray } from "../../src/runtime/dtype.js";
import { Graph } from "../../src/runtime/graph.js";
import { defaultStream } from "../../src/runtime/stream.js";
import { Tensor, type AnyTensor } from "../../src/runtime/tensor.js";
import { readEnvVar } from "../../src/settings.js";

// GPUs: combine stages the rows of the reference shape (512 tokens of 7168, top-8: 58 MiB a rank); the
// CPU backend: small, so that tokens beyond it stay small.
const program = await startProgram("moe", { cuda: 256 << 20, cpu: 4 << 20 }, 2);
const { backend, cuda, group, gpu, c, make, rank, world, capacity, seed } = program;
const { agree, ranks, wait, batch, done, total } = program;
const f = Math.fround;
// Ranks sharing a GPU wait for its time slices at every call: there each configuration takes one
// algorithm rather than each, and fewer calls alternate.
const sharing = readEnvVar("SYMMKIT_SHARE_GPUS");

// ---- Algorithms: this backend's, the default (undefined) first.
type Algorithm = string | undefined;
const ALGORITHMS: readonly Algorithm[] = [undefined, ...(cuda ? GPU_MOE_ALGORITHMS : CPU_MOE_ALGORITHMS)];
/** combine's, the default first: pull (slot order) and per_rank (owner partials in rank order). */
const COMBINES: readonly Algorithm[] = [
  undefined,
  ...(cuda ? GPU_COMBINE_ALGORITHMS : CPU_COMBINE_ALGORITHMS),
];
const byRank = (a: Algorithm): boolean => a === "per_rank";
const named = (a: Algorithm): string => a ?? "default";
const opt = (a: Algorithm): { algorithm?: string } => (a === undefined ? {} : { algorithm: a });
/** Whether algorithm `name` routes on the device (by its record: no host wait). */
const routesOnDevice = (name: string): boolean =>
  (MOE as OpRecords)[name]?.needs.includes("host wait") === false;
/** Whether a dispatch with algorithm `a` (and maxRows when `fixedRows`) routes on the device: auto and the
 * default (GPUs) by auto's rule, which routes on the host but inside a capture, with `into` or with fixed
 * rows. */
const onDevice = (a: Algorithm, fixedRows = false): boolean =>
  a === undefined || a === "auto"
    ? cuda &&
      routesOnDevice(autoPick(GPU_MOE_AUTO, { capturing: false, into: false, fixedRows, routeFits: true }))
    : routesOnDevice(a);
/** What GPUs' auto runs with `into`: the device routing that writes into an earlier result. */
const DEVICE = autoPick(GPU_MOE_AUTO, { capturing: false, into: true, fixedRows: true, routeFits: true });
/** The algorithm of a dispatch `into` an earlier result made by algorithm `a`: GPUs write into one only
 * when routing on the device (DispatchOptions.into), so auto and the default pick it there. */
const withInto = (a: Algorithm): Algorithm => (cuda && (a === undefined || a === "auto") ? DEVICE : a);
const takesInto = (a: Algorithm): boolean => !cuda || onDevice(withInto(a));
/** The algorithms of `other` that this backend lacks: names its calls refuse. */
const theirs = (other: readonly string[]): Algorithm[] => other.filter((a) => !ALGORITHMS.includes(a));
const same = (got: RawArray, want: RawArray, what: string): void =>
  assertSameBits(got, want, `rank ${rank}: ${what}`, seed);
/** A tensor and the bytes it was made from. */
type Made<T extends AnyTensor = AnyTensor> = readonly [T, Uint8Array];
/** `whole` (made by poisonedIn) holds the poison in its guards and `inner` between them. */
const expectPoisoned = (whole: AnyTensor, inner: Uint8Array, what: string): void =>
  void expectPoisonedIn(make, whole, inner, `rank ${rank}: ${what}`, seed);
const unwritten = ([t, bytes]: Made, what: string): void =>
  assertSameBits(bytesOf(t), bytes, `rank ${rank}: ${what}: an input was written`, seed);

// ---- Values drawn from the seed.
/** Uniforms in [0, 1) (mulberry32). Streams are opened in the same order on every rank, so they match. */
let streams = 0;
function rng(): () => number {
  let a = (Number(seed & 0xffffffffn) ^ Math.imul(++streams, 0x9e3779b9)) | 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const below = (u: () => number, n: number): number => Math.floor(u() * n);

/** A hash of small integers and the seed, for values that are a function of where they are. */
function hash(...xs: number[]): number {
  let h = Number(seed & 0xffffffffn) | 0;
  for (const x of xs) {
    h = Math.imul(h ^ x, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
  }
  return h >>> 0;
}

/** bf16 bits of a finite value: +-0 now and then, else magnitude in [2^-10, 2^11), any mantissa. */
function bf16Bits(u: () => number): number {
  const sign = u() < 0.5 ? 0x8000 : 0;
  if (u() < 0.03) return sign;
  return sign | ((117 + below(u, 21)) << 7) | below(u, 128);
}

/** Expert outputs are rows of this, at an offset hashed from (case, owner, row): any finite bf16. */
const VALUES = (() => {
  const u = rng();
  return Uint16Array.from({ length: 1 << 16 }, () => bf16Bits(u));
})();
/** Row `row` of owner `owner`'s expert output, bf16 bits. */
type Rows = (owner: number, row: number) => Uint16Array;
/** The expert output of case `tag`: a function of (owner, row, column). */
const valuesOf =
  (tag: number, hidden: number): Rows =>
  (owner, row) => {
    const at = hash(tag, owner, row) % (VALUES.length - hidden + 1);
    return VALUES.subarray(at, at + hidden);
  };
let tags = 0;

// ---- Problems and the reference.
type TokenDtype = "bf16" | "fp8e4m3";
interface Problem {
  readonly hidden: number;
  readonly topk: number;
  readonly numExperts: number;
  /** Experts per rank. */
  readonly local: number;
  readonly dtype: TokenDtype;
}

/** One rank's dispatch inputs, as plain arrays (every rank holds every rank's). */
interface Side {
  readonly tokens: number;
  readonly ids: Int32Array;
  readonly weights: Float32Array;
  /** Raw token elements: bf16 (Uint16Array) or fp8 e4m3 (Uint8Array) bits, [tokens, hidden]. */
  readonly bits: Uint16Array | Uint8Array;
  readonly scales: Float32Array | undefined;
}

/** A pair: source rank, token, slot. */
interface Pair {
  readonly src: number;
  readonly t: number;
  readonly k: number;
}

/** Where every pair goes, written out: per owner its rows in order, rows per local expert, and per source
 * rank each pair's row at its owner (-1: none). */
interface Layout {
  readonly rows: Pair[][];
  readonly counts: number[][];
  readonly rowOf: Int32Array[];
}

function layout(p: Problem, sides: readonly Side[]): Layout {
  const rows: Pair[][] = [];
  const counts: number[][] = [];
  const rowOf = sides.map((s) => new Int32Array(s.ids.length).fill(-1));
  for (let owner = 0; owner < world; owner++) {
    const list: Pair[] = [];
    const perExpert: number[] = [];
    for (let j = 0; j < p.local; j++) {
      const e = owner * p.local + j;
      const before = list.length;
      for (let src = 0; src < world; src++) {
        const ids = sides[src]!.ids;
        for (let i = 0; i < ids.length; i++) {
          if (ids[i] !== e) continue;
          rowOf[src]![i] = list.length;
          list.push({ src, t: Math.floor(i / p.topk), k: i % p.topk });
        }
      }
      perExpert.push(list.length - before);
    }
    rows.push(list);
    counts.push(perExpert);
  }
  return { rows, counts, rowOf };
}

/**
 * The combined tokens of side `s`, as specified: for each token and column, over slots in order, skipping
 * -1, acc = fround(acc + fround(w x v)) from acc = +0, then acc to bf16 (round to nearest even; acc is a
 * float32, so encodeBF16 rounds it as a float32 -> bf16 conversion does). `rows(owner, row)` gives the
 * owner's expert output.
 */
function combined(p: Problem, s: Side, rowOf: Int32Array, rows: Rows): Uint16Array {
  const { hidden: H, topk: K } = p;
  const out = new Uint16Array(s.tokens * H);
  const acc = new Float32Array(H);
  for (let t = 0; t < s.tokens; t++) {
    acc.fill(0);
    for (let k = 0; k < K; k++) {
      const e = s.ids[t * K + k]!;
      if (e === -1) continue;
      const w = s.weights[t * K + k]!;
      const v = rows(Math.floor(e / p.local), rowOf[t * K + k]!);
      for (let col = 0; col < H; col++) acc[col] = f(acc[col]! + f(w * decodeBF16(v[col]!)));
    }
    for (let col = 0; col < H; col++) out[t * H + col] = encodeBF16(acc[col]!);
  }
  return out;
}

/**
 * combine per_rank of side `s`, as specified: for each token and column, over ranks in order, the rank's
 * partial is fround(acc + fround(w x v)) over its slots in slot order from +0, to bf16; acc =
 * fround(acc + partial) over the ranks that own any of the token's slots, from +0; acc to bf16.
 */
function combinedByRank(p: Problem, s: Side, rowOf: Int32Array, rows: Rows): Uint16Array {
  const { hidden: H, topk: K } = p;
  const out = new Uint16Array(s.tokens * H);
  const acc = new Float32Array(H);
  const part = new Float32Array(H);
  for (let t = 0; t < s.tokens; t++) {
    acc.fill(0);
    for (let owner = 0; owner < world; owner++) {
      part.fill(0);
      let any = false;
      for (let k = 0; k < K; k++) {
        const e = s.ids[t * K + k]!;
        if (e === -1 || Math.floor(e / p.local) !== owner) continue;
        any = true;
        const w = s.weights[t * K + k]!;
        const v = rows(owner, rowOf[t * K + k]!);
        for (let col = 0; col < H; col++) part[col] = f(part[col]! + f(w * decodeBF16(v[col]!)));
      }
      if (any) for (let col = 0; col < H; col++) acc[col] = f(acc[col]! + decodeBF16(encodeBF16(part[col]!)));
    }
    for (let col = 0; col < H; col++) out[t * H + col] = encodeBF16(acc[col]!);
  }
  return out;
}

/** A combine's want: slot order (pull), or per_rank's partials in rank order. */
interface Combined {
  readonly slots: Uint16Array;
  readonly byRank: Uint16Array;
}
const pick = (w: Combined, a: Algorithm): Uint16Array => (byRank(a) ? w.byRank : w.slots);

/** What the checks hold a drawn problem's results to (computed once, when first asked for). */
interface Want {
  /** This rank's combine of f(owner, row, column) (valuesOf(tag)). */
  readonly values: Combined;
  /** bf16: this rank's combine of the identity expert (each row its dispatched token). */
  readonly identity: Combined | undefined;
  /** This rank's exact combine: x times the sum of its weights. */
  readonly exact: Uint16Array;
}

/** A problem with every rank's inputs, drawn alike on every rank. */
interface Drawn {
  readonly what: string;
  readonly p: Problem;
  readonly sides: readonly Side[];
  readonly lay: Layout;
  /** The same ids; bf16 tokens, small integers (-16 to 16), and dyadic weights: combine is exact. */
  readonly exact: readonly Side[];
  readonly tag: number;
  want(): Want;
}

const bf16Problem = (p: Problem): Problem => ({ ...p, dtype: "bf16" });
/** Row `t` of a bf16 side's tokens. */
const tokenRow = (s: Side, t: number, hidden: number): Uint16Array =>
  (s.bits as Uint16Array).subarray(t * hidden, (t + 1) * hidden);

function drawn(what: string, p: Problem, sides: Side[]): Drawn {
  const lay = layout(p, sides);
  // src/ops/moe/route.ts gives the rows and counts written out here.
  const routed = { numExperts: p.numExperts, localExperts: p.local };
  const counts = sides.map((s) => expertCounts(s.ids, p.numExperts));
  sides.forEach((s, src) =>
    same(routeRows(counts, src, s.ids, routed), lay.rowOf[src]!, `${what}: route.ts's rows of rank ${src}`),
  );
  for (const r of ranks)
    same(
      receivedCounts(counts, r, routed),
      Int32Array.from(lay.counts[r]!),
      `${what}: route.ts's counts of rank ${r}`,
    );
  const exact = exactSides(p, sides);
  const tag = tags++;
  let want: Want | undefined;
  const mine = sides[rank]!;
  const rowOf = lay.rowOf[rank]!;
  const { hidden: H, topk: K } = p;
  const compute = (): Want => {
    const rows = valuesOf(tag, H);
    const values = combined(p, mine, rowOf, rows);
    const valuesByRank = combinedByRank(p, mine, rowOf, rows);
    // route.ts's combineToken, which both backends' combines follow, agrees.
    const viaRoute = new Uint16Array(mine.tokens * H);
    for (let t = 0; t < mine.tokens; t++) {
      const used = (k: number): boolean => mine.ids[t * K + k]! >= 0;
      const slots = Array.from({ length: K }, (_, k) =>
        used(k) ? rows(Math.floor(mine.ids[t * K + k]! / p.local), rowOf[t * K + k]!) : undefined,
      );
      combineToken(
        H,
        K,
        used,
        (k) => mine.weights[t * K + k]!,
        (k, i) => slots[k]![i]!,
        viaRoute,
        t * H,
      );
    }
    same(viaRoute, values, `${what}: route.ts's combineToken`);
    for (let t = 0; t < mine.tokens; t++) {
      const used = (k: number): boolean => mine.ids[t * K + k]! >= 0;
      const owner = (k: number): number => Math.floor(mine.ids[t * K + k]! / p.local);
      combineTokenByRank(
        H,
        K,
        world,
        used,
        owner,
        (k) => mine.weights[t * K + k]!,
        (k, i) => rows(owner(k), rowOf[t * K + k]!)[i]!,
        viaRoute,
        t * H,
      );
    }
    same(viaRoute, valuesByRank, `${what}: route.ts's combineTokenByRank`);
    const identity: Rows = (o, r) => {
      const pair = lay.rows[o]![r]!;
      return tokenRow(sides[pair.src]!, pair.t, H);
    };
    const ex = exact[rank]!;
    const exactOut = new Uint16Array(mine.tokens * H);
    for (let t = 0; t < mine.tokens; t++) {
      let sum = 0;
      for (let k = 0; k < K; k++) if (mine.ids[t * K + k] !== -1) sum += ex.weights[t * K + k]!;
      // + 0: the sum starts from +0, so a zero result is +0 (no experts too).
      for (let col = 0; col < H; col++)
        exactOut[t * H + col] = encodeBF16(decodeBF16(ex.bits[t * H + col]!) * sum + 0);
    }
    return {
      values: { slots: values, byRank: valuesByRank },
      identity:
        p.dtype === "bf16"
          ? { slots: combined(p, mine, rowOf, identity), byRank: combinedByRank(p, mine, rowOf, identity) }
          : undefined,
      exact: exactOut,
    };
  };
  return { what, p, sides, lay, exact, tag, want: () => (want ??= compute()) };
}

interface Config {
  readonly hidden: number;
  readonly topk: number;
  /** numExperts = perRank x world. */
  readonly perRank: number;
  readonly dtype: TokenDtype;
  /** Tokens of rank r: tokens[r mod its length]. */
  readonly tokens: readonly number[];
  /** This rank (mod world) has every slot -1. */
  readonly noneRank?: number;
  /** Every pair goes to rank 0's experts (the other ranks receive nothing). */
  readonly toRank0?: boolean;
}

/** Expert ids of rank `src`: mostly distinct per token, about 15% -1; on ranks with 2+ tokens and 2+ slots,
 * one token picks two experts of one rank (one expert twice when perRank is 1) in its first and last slot,
 * another picks one expert twice. */
function drawIds(cfg: Config, p: Problem, src: number, T: number, u: () => number): Int32Array {
  const K = p.topk;
  const ids = new Int32Array(T * K).fill(-1);
  if (cfg.noneRank !== undefined && src === cfg.noneRank % world) return ids;
  const pool = cfg.toRank0 ? p.local : p.numExperts;
  for (let t = 0; t < T; t++) {
    const used = new Set<number>();
    for (let k = 0; k < K; k++) {
      if (u() < 0.15) continue;
      let e = below(u, pool);
      while (used.has(e) && used.size < pool) e = below(u, pool);
      used.add(e);
      ids[t * K + k] = e;
    }
  }
  if (K >= 2 && T >= 2) {
    const a = src % T;
    const b = (src + 1) % T;
    const owner = cfg.toRank0 ? 0 : below(u, world);
    const j0 = below(u, p.local);
    const j1 = p.local > 1 ? (j0 + 1 + below(u, p.local - 1)) % p.local : j0;
    ids[a * K] = owner * p.local + j0;
    ids[a * K + K - 1] = owner * p.local + j1;
    const e = below(u, pool);
    ids[b * K] = e;
    ids[b * K + K - 1] = e;
  }
  return ids;
}

/**
 * Weights: "random", float32 in (-1, 1) with some zeros; on tokens t = 2 mod 3 with 3+ slots the pattern
 * 1, 2^24, -2^24 (then 0.375), where rounding after every operation in slot order gives another answer
 * than any other order or a wider accumulator; on tokens t = 1 mod 3 with 2+ slots r, -r, r, -r (r a
 * float32 with a full mantissa), where a product left unrounded (a fused multiply-add) leaves its rounding
 * error behind (the identity expert gives both slots the same value). "dyadic": multiples of 1/8 summing
 * to at most 1 over the used slots. Unused slots get 7.5, which combine must skip.
 */
function drawWeights(p: Problem, ids: Int32Array, mode: "random" | "dyadic", u: () => number): Float32Array {
  const K = p.topk;
  const w = new Float32Array(ids.length);
  for (let t = 0; t < ids.length / K; t++) {
    let budget = 8;
    const r = f(u() * 2 - 1);
    for (let k = 0; k < K; k++) {
      const i = t * K + k;
      if (ids[i] === -1) {
        w[i] = 7.5;
      } else if (mode === "dyadic") {
        const a = below(u, budget + 1);
        budget -= a;
        w[i] = a / 8;
      } else if (K >= 3 && t % 3 === 2) {
        w[i] = [1, 2 ** 24, -(2 ** 24), 0.375][k] ?? 0.375;
      } else if (K >= 2 && t % 3 === 1) {
        w[i] = k % 2 === 0 ? r : -r;
      } else {
        w[i] = u() < 0.05 ? 0 : f(u() * 2 - 1);
      }
    }
  }
  return w;
}

/** Same ids; bf16 tokens, small integers (-16 to 16), and dyadic weights: combine is exact. */
function exactSides(p: Problem, sides: readonly Side[]): Side[] {
  const u = rng();
  return sides.map((s) => ({
    tokens: s.tokens,
    ids: s.ids,
    weights: drawWeights(p, s.ids, "dyadic", u),
    bits: Uint16Array.from({ length: s.tokens * p.hidden }, () => encodeBF16(below(u, 33) - 16)),
    scales: undefined,
  }));
}

/** Every rank's inputs of `cfg`: random finite bf16 tokens (or any fp8 byte, with scales), random weights. */
function drawProblem(cfg: Config, what: string): Drawn {
  const p: Problem = {
    hidden: cfg.hidden,
    topk: cfg.topk,
    numExperts: cfg.perRank * world,
    local: cfg.perRank,
    dtype: cfg.dtype,
  };
  const u = rng();
  const sides = ranks.map((src) => {
    const T = cfg.tokens[src % cfg.tokens.length]!;
    const ids = drawIds(cfg, p, src, T, u);
    const n = T * p.hidden;
    const bits =
      p.dtype === "fp8e4m3"
        ? Uint8Array.from({ length: n }, () => below(u, 256))
        : Uint16Array.from({ length: n }, () => bf16Bits(u));
    const scales = p.dtype === "fp8e4m3" ? Float32Array.from({ length: T }, () => f(u() * 8 - 4)) : undefined;
    return { tokens: T, ids, weights: drawWeights(p, ids, "random", u), bits, scales };
  });
  const name = `${what} (${p.dtype} hidden ${p.hidden} top-${p.topk} of ${p.numExperts} experts, tokens ${sides.map((s) => s.tokens).join("/")})`;
  return drawn(name, p, sides);
}

// ---- Tensors.
/** Side `s`'s inputs, each a tensor made from the bytes given (`made`: whole, for the unwritten checks);
 * `sliced`: each from row 1 of a tensor whose row 0 is poison (NaN, and as ids 0xa5a5a5a5, out of range),
 * so that offsets into memory count. */
function upload<T extends AnyTensor>(m: Maker<T>, p: Problem, s: Side, sliced: boolean) {
  const lead = sliced ? 1 : 0;
  const made: Made<T>[] = [];
  const one = (dtype: DType, raw: RawArray, row: number[]): T => {
    const width = row.reduce((a, b) => a * b, 1);
    const bytes = concat([poisonOf(m, dtype, lead * width), asBytes(raw)]);
    const whole = fromBytes(m, dtype, bytes, [s.tokens + lead, ...row]);
    made.push([whole, bytes]);
    // A maker's tensor slices as its own kind.
    return whole.slice(lead) as T;
  };
  return {
    tokens: one(p.dtype, s.bits, [p.hidden]),
    topkIdx: one("i32", s.ids, [p.topk]),
    topkWeights: one("f32", s.weights, [p.topk]),
    scales: s.scales && one("f32", s.scales, []),
    made,
  };
}

/** This rank's expert output of `rows` rows of valuesOf(tag) between a poison row before and two after
 * (which combine must not read); the rows are whole.slice(1, rows + 1). */
function expertOutput<T extends AnyTensor>(m: Maker<T>, hidden: number, tag: number, rows: number): Made<T> {
  const v = valuesOf(tag, hidden);
  const bytes = concat([
    poisonOf(m, "bf16", hidden),
    ...Array.from({ length: rows }, (_, r) => asBytes(v(rank, r))),
    poisonOf(m, "bf16", 2 * hidden),
  ]);
  return [fromBytes(m, "bf16", bytes, [rows + 3, hidden]), bytes];
}

/** Checks this rank's dispatch of `sides` bit for bit against the layout, `rows` rows (spare rows zero),
 * and its handle: routed on the device (`device`), it says maxRows rows received and no rank's. */
function checkDispatched(
  what: string,
  p: Problem,
  sides: readonly Side[],
  lay: Layout,
  got: DispatchResult<AnyTensor>,
  rows: number,
  device: boolean,
): void {
  const mine = lay.rows[rank]!;
  const H = p.hidden;
  assert.deepEqual(got.tokens.shape, [rows, H], `${what}: tokens shape`);
  assert.equal(got.tokens.dtype, p.dtype, `${what}: tokens dtype`);
  assert.deepEqual(got.weights.shape, [rows], `${what}: weights shape`);
  assert.equal(got.weights.dtype, "f32", `${what}: weights dtype`);
  assert.deepEqual(got.counts.shape, [p.local], `${what}: counts shape`);
  assert.equal(got.counts.dtype, "i32", `${what}: counts dtype`);
  const tokens = p.dtype === "bf16" ? new Uint16Array(rows * H) : new Uint8Array(rows * H);
  const weights = new Float32Array(rows);
  const scales = new Float32Array(rows);
  mine.forEach((pair, row) => {
    const s = sides[pair.src]!;
    tokens.set(s.bits.subarray(pair.t * H, (pair.t + 1) * H), row * H);
    weights[row] = s.weights[pair.t * p.topk + pair.k]!;
    if (s.scales) scales[row] = s.scales[pair.t]!;
  });
  same(got.tokens.toHost(), tokens, `${what}: tokens`);
  same(got.weights.toHost(), weights, `${what}: weights`);
  same(got.counts.toHost(), Int32Array.from(lay.counts[rank]!), `${what}: counts`);
  if (p.dtype === "fp8e4m3") {
    assert.ok(got.scales, `${what}: fp8 dispatch returns scales`);
    assert.deepEqual(got.scales.shape, [rows], `${what}: scales shape`);
    assert.equal(got.scales.dtype, "f32", `${what}: scales dtype`);
    same(got.scales.toHost(), scales, `${what}: scales`);
  } else {
    assert.equal(got.scales, undefined, `${what}: bf16 dispatch returns no scales`);
  }
  const h = got.handle;
  assert.equal(h.rank, rank, `${what}: handle rank`);
  assert.equal(h.world, world, `${what}: handle world`);
  assert.equal(h.received, device ? rows : mine.length, `${what}: handle received`);
  assert.deepEqual(
    h.receivedByRank,
    device ? undefined : lay.rows.map((r) => r.length),
    `${what}: handle receivedByRank`,
  );
  same(h.expert.toHost(), sides[rank]!.ids, `${what}: handle experts`);
  same(h.row.toHost(), lay.rowOf[rank]!, `${what}: handle rows`);
  same(h.weights.toHost(), sides[rank]!.weights, `${what}: handle weights`);
}

/** Writes over a dispatch's result (NaN, and as i32 -7), so that a dispatch into it must write it all. */
const scribble = (r: DispatchResult<AnyTensor>): void => {
  for (const t of [r.tokens, r.weights, r.scales, r.counts, r.handle.expert, r.handle.row, r.handle.weights])
    t?.fill(t.dtype === "i32" ? -7 : NaN);
  // GPUs' links: every row a token's first, chained to row 1 (combine per_rank would sum wrong rows).
  r.handle.links?.fill(1);
  r.handle.rowWeights?.fill(NaN);
};

/**
 * Problem `d` with algorithm `a`, case `k` varying the rest: dispatch of exactly the rows that arrive
 * (routed on the device, as maxRows), then of maxRows (as many on some ranks, more on others: spare rows
 * zero), and where `a` takes one, into an earlier result of the same shapes scribbled over; combine of
 * f(owner, row, column) into a poisoned out from an expert output with poison rows around it, of the
 * identity expert (bf16: the maxRows dispatch's own tokens, its default out), and of the exact problem.
 * Inputs as slices of larger tensors in every other case; inputs and expert outputs unwritten.
 */
function moeCase(d: Drawn, a: Algorithm, k: number): Case {
  const { p, sides, lay, exact } = d;
  const what = `${d.what} ${named(a)}`;
  const mine = sides[rank]!;
  const received = lay.rows[rank]!.length;
  const device = onDevice(a);
  const exactRows = device ? received : undefined;
  const maxRows = (rank + k) % 2 === 0 ? received : received + rank + 2;
  const q = bf16Problem(p);
  const inp = upload(make, p, mine, k % 2 === 1);
  const ex = upload(make, q, exact[rank]!, k % 2 === 0);
  const values = expertOutput(make, p.hidden, d.tag, received);
  const [outWhole, out] = poisonedIn(make, "bf16", [mine.tokens, p.hidden]);
  const [exWhole, exOut] = poisonedIn(make, "bf16", [mine.tokens, p.hidden]);
  const made = [...inp.made, ...ex.made, values];
  const tensors = [...made.map(([t]) => t), outWhole, exWhole];
  const o = { numExperts: p.numExperts, scales: inp.scales, ...opt(a) };
  // Combine's algorithms turn with the case: c1 and c2 (bf16 only) each take another, and per_rank (other
  // bits, other kernels) runs in every case: c3 takes it unless c1 or c2 did. Past top-32 c1 takes it (its
  // values tell the order of a token's rows).
  const b1 = p.topk > 32 ? "per_rank" : COMBINES[k % COMBINES.length];
  const b2 = COMBINES[(k + 1) % COMBINES.length];
  const b3 =
    byRank(b1) || (p.dtype === "bf16" && byRank(b2)) ? COMBINES[(k + 2) % COMBINES.length] : "per_rank";
  const calls = () => {
    const { tokens, topkIdx, topkWeights } = inp;
    const d1 = c.dispatch(tokens, topkIdx, topkWeights, { ...o, maxRows: exactRows });
    const c1 = c.combine(values[0].slice(1, received + 3), d1.handle, { out, ...opt(b1) });
    const d2 = c.dispatch(tokens, topkIdx, topkWeights, { ...o, maxRows });
    const c2 = p.dtype === "bf16" ? c.combine(d2.tokens, d2.handle, opt(b2)) : undefined;
    const d3 = c.dispatch(ex.tokens, ex.topkIdx, ex.topkWeights, {
      numExperts: p.numExperts,
      maxRows: exactRows,
      ...opt(a),
    });
    const c3 = c.combine(d3.tokens, d3.handle, { out: exOut, ...opt(b3) });
    let into: [DispatchResult<AnyTensor>, DispatchResult<AnyTensor>] | undefined;
    if (takesInto(a)) {
      const target = c.dispatch(tokens, topkIdx, topkWeights, { ...o, ...opt(withInto(a)), maxRows });
      scribble(target);
      into = [target, c.dispatch(tokens, topkIdx, topkWeights, { ...o, maxRows, into: target })];
    }
    // per_rank after dispatch into a scribbled result: its links and weights written again.
    const c4 =
      into && p.dtype === "bf16"
        ? c.combine(into[1].tokens, into[1].handle, { algorithm: "per_rank" })
        : undefined;
    tensors.push(
      ...[d1, d2, d3, ...(into ?? [])].flatMap(dispatchTensors),
      ...(c2 ? [c2] : []),
      ...(c4 ? [c4] : []),
    );
    return { d1, d2, d3, into, c1, c2, c3, c4 };
  };
  let got: ReturnType<typeof calls> | undefined;
  return {
    run: () => void (got = calls()),
    check: () => {
      assert.ok(got);
      const want = d.want();
      checkDispatched(`${what}: dispatch`, p, sides, lay, got.d1, received, device);
      assert.equal(got.c1, out, `${what}: combine returns the given out`);
      expectPoisoned(
        outWhole,
        asBytes(pick(want.values, b1)),
        `${what}: combine ${named(b1)} of f(owner, row, column)`,
      );
      checkDispatched(
        `${what}: dispatch maxRows ${maxRows}`,
        p,
        sides,
        lay,
        got.d2,
        maxRows,
        onDevice(a, true),
      );
      if (got.c2) {
        assert.deepEqual(got.c2.shape, [mine.tokens, p.hidden], `${what}: combine shape`);
        assert.equal(got.c2.dtype, "bf16", `${what}: combine dtype`);
        same(
          got.c2.toHost(),
          pick(want.identity!, b2),
          `${what}: combine ${named(b2)} of the identity expert`,
        );
      }
      checkDispatched(`${what}: exact dispatch`, q, exact, lay, got.d3, received, device);
      assert.equal(got.c3, exOut, `${what}: exact combine returns the given out`);
      expectPoisoned(exWhole, asBytes(want.exact), `${what}: exact combine ${named(b3)}`);
      if (got.into) {
        const [target, d4] = got.into;
        assert.equal(d4, target, `${what}: dispatch into returns its result`);
        checkDispatched(`${what}: dispatch into`, p, sides, lay, d4, maxRows, onDevice(withInto(a)));
        if (got.c4) same(got.c4.toHost(), want.identity!.byRank, `${what}: combine per_rank after into`);
      }
      for (const m of made) unwritten(m, what);
    },
    tensors,
  };
}

/** A small problem with algorithm `a`: after refusals, the group still works. */
const small = (what: string, a: Algorithm, k: number): Case =>
  moeCase(drawProblem({ hidden: 8, topk: 2, perRank: 2, dtype: "bf16", tokens: [3, 5] }, what), a, k);
/** After refusals: every algorithm runs. */
const usable = (what: string): Promise<void> => batch(ALGORITHMS.map((a, k) => small(what, a, k)));

// ---- Configurations, each with every algorithm. Each world size meets a rank with no tokens, a rank whose
// every slot is -1, all pairs to one rank, one source rank only, and two or more source ranks per expert;
// then tokens varying by rank, top-8 of 256 experts (less what the world does not divide), and a model's
// shape, hidden 7168 (on the CPU backend 16 tokens a rank, so that combine's rows fit its staging buffer).
{
  const many = Math.floor(256 / world);
  const CONFIGS: Config[] = [
    { hidden: 7, topk: 2, perRank: 2, dtype: "bf16", tokens: [6, 4, 0] },
    { hidden: 64, topk: 4, perRank: 4, dtype: "bf16", tokens: [9, 5, 7], noneRank: 1 },
    { hidden: 1, topk: 1, perRank: 1, dtype: "bf16", tokens: [3, 4, 2], noneRank: 2 },
    { hidden: 7, topk: 4, perRank: 1, dtype: "fp8e4m3", tokens: [0, 5, 7] },
    { hidden: 64, topk: 2, perRank: 4, dtype: "fp8e4m3", tokens: [12, 3, 8] },
    { hidden: 1, topk: 4, perRank: 2, dtype: "bf16", tokens: [1, 2, 0] },
    { hidden: 64, topk: 4, perRank: 2, dtype: "bf16", tokens: [40, 33, 25] },
    { hidden: 7, topk: 2, perRank: 2, dtype: "bf16", tokens: [5, 4, 3], toRank0: true },
    { hidden: 1, topk: 2, perRank: 2, dtype: "fp8e4m3", tokens: [4, 6, 0], noneRank: 1 },
    { hidden: 7, topk: 4, perRank: 4, dtype: "bf16", tokens: [2, 0, 5] },
    { hidden: 64, topk: 2, perRank: 4, dtype: "bf16", tokens: ranks.map((r) => 17 + r) },
    { hidden: 64, topk: 2, perRank: 1, dtype: "bf16", tokens: ranks.map((r) => (r === 0 ? 0 : 33)) },
    { hidden: 7, topk: 1, perRank: 4, dtype: "bf16", tokens: ranks.map((r) => 9 + 2 * r) },
    { hidden: 64, topk: 8, perRank: many, dtype: "fp8e4m3", tokens: ranks.map((r) => 40 - r) },
    { hidden: 64, topk: 2, perRank: 4, dtype: "bf16", tokens: [21] },
    { hidden: 7168, topk: 8, perRank: many, dtype: "bf16", tokens: [cuda ? 512 : 16] },
    // Rows of 1031 bytes and of 999 bf16 (not 16-byte vectors), split over warps.
    { hidden: 1031, topk: 4, perRank: 4, dtype: "fp8e4m3", tokens: [5, 3, 6] },
    { hidden: 999, topk: 4, perRank: 2, dtype: "bf16", tokens: [4, 6, 2] },
    // Over 32 slots: a warp reads them in two rounds; on rank 0 a token's rows chain past 32.
    { hidden: 64, topk: 40, perRank: 48, dtype: "bf16", tokens: [6, 5, 4], toRank0: true },
    { hidden: 7, topk: 36, perRank: 20, dtype: "fp8e4m3", tokens: [4, 3, 5] },
  ];
  /** What the configurations met, over all ranks' inputs (checked below: the test covers what it says). */
  const met = {
    noTokens: false,
    everySlotUnused: false,
    someSlotsUnused: false,
    oneExpertTwice: false,
    twoExpertsOfOneRank: false,
    twoSourcesOneExpert: false,
    nothingReceived: false,
    over32SlotsOnOneRank: false,
  };
  let pairs = 0;
  let calls = 0;
  for (const [index, cfg] of CONFIGS.entries()) {
    const d = drawProblem(cfg, `config ${index}`);
    const { p, sides, lay } = d;
    for (const s of sides) {
      if (s.tokens === 0) met.noTokens = true;
      else if (s.ids.every((e) => e === -1)) met.everySlotUnused = true;
      for (let t = 0; t < s.tokens; t++) {
        const ids = Array.from(s.ids.subarray(t * p.topk, (t + 1) * p.topk)).filter((e) => e !== -1);
        if (ids.length < p.topk) met.someSlotsUnused = true;
        if (new Set(ids).size < ids.length) met.oneExpertTwice = true;
        const experts = [...new Set(ids)];
        if (new Set(experts.map((e) => Math.floor(e / p.local))).size < experts.length)
          met.twoExpertsOfOneRank = true;
        for (const r of ranks)
          if (ids.filter((e) => Math.floor(e / p.local) === r).length > 32) met.over32SlotsOnOneRank = true;
      }
    }
    const expertOf = (a: Pair): number => sides[a.src]!.ids[a.t * p.topk + a.k]!;
    for (const rows of lay.rows) {
      if (rows.length === 0) met.nothingReceived = true;
      for (let i = 1; i < rows.length; i++)
        if (rows[i]!.src !== rows[i - 1]!.src && expertOf(rows[i]!) === expertOf(rows[i - 1]!))
          met.twoSourcesOneExpert = true;
    }
    pairs += lay.rows.reduce((a, r) => a + r.length, 0);
    const algorithms = sharing ? [ALGORITHMS[index % ALGORITHMS.length]] : ALGORITHMS;
    await batch(algorithms.map((a, k) => moeCase(d, a, index + k)));
    calls += algorithms.length;
  }
  for (const [what, yes] of Object.entries(met)) assert.ok(yes, `the configurations never met ${what}`);
  done(
    `configs: ${CONFIGS.length} at world ${world} (${pairs} pairs), ${calls} cases: dispatch, maxRows and ` +
      "into bit for bit; combine vs the float32 reference, identity, exact",
  );
}

// ---- More experts than the route kernel's one block holds (16 bytes of shared memory each): on GPUs pull,
// and auto with or without maxRows, route on the host there; pull_device refuses. Both backends: dispatch
// of exactly the rows that arrive and of maxRows bit for bit, combine of f(owner, row, column), fp8 too.
{
  const perRank = Math.ceil(16384 / world);
  const manyCase = (d: Drawn, a: Algorithm, k: number): Case => {
    const { p, sides, lay } = d;
    const what = `${d.what} ${named(a)}`;
    const received = lay.rows[rank]!.length;
    const maxRows = received + rank + 1;
    const inp = upload(make, p, sides[rank]!, k % 2 === 1);
    const values = expertOutput(make, p.hidden, d.tag, received);
    const [outWhole, out] = poisonedIn(make, "bf16", [sides[rank]!.tokens, p.hidden]);
    const made = [...inp.made, values];
    const tensors = [...made.map(([t]) => t), outWhole];
    const o = { numExperts: p.numExperts, scales: inp.scales, ...opt(a) };
    let got: { d1: DispatchResult<AnyTensor>; d2: DispatchResult<AnyTensor> } | undefined;
    return {
      run: () => {
        const d1 = c.dispatch(inp.tokens, inp.topkIdx, inp.topkWeights, o);
        c.combine(values[0].slice(1, received + 3), d1.handle, { out });
        const d2 = c.dispatch(inp.tokens, inp.topkIdx, inp.topkWeights, { ...o, maxRows });
        tensors.push(...[d1, d2].flatMap(dispatchTensors));
        got = { d1, d2 };
      },
      check: () => {
        assert.ok(got);
        checkDispatched(`${what}: dispatch`, p, sides, lay, got.d1, received, false);
        expectPoisoned(outWhole, asBytes(pick(d.want().values, undefined)), `${what}: combine`);
        checkDispatched(`${what}: dispatch maxRows ${maxRows}`, p, sides, lay, got.d2, maxRows, false);
        for (const m of made) unwritten(m, what);
      },
      tensors,
    };
  };
  const draws = (["bf16", "fp8e4m3"] as const).map((dtype) =>
    drawProblem({ hidden: 64, topk: 4, perRank, dtype, tokens: [5, 3, 4] }, `${perRank * world} experts`),
  );
  if (gpu)
    assert.ok(
      !moeRouteFits(draws[0]!.p.numExperts, gpu.device),
      `${draws[0]!.p.numExperts} experts fit the route kernel's block: the section would not route on the host`,
    );
  const algorithms = ALGORITHMS.filter((a) => a !== "pull_device");
  await batch(draws.flatMap((d, i) => algorithms.map((a, k) => manyCase(d, a, i + k))));
  if (gpu) {
    const d = draws[0]!;
    const inp = upload(make, d.p, d.sides[rank]!, false);
    assert.throws(
      () =>
        c.dispatch(inp.tokens, inp.topkIdx, inp.topkWeights, {
          numExperts: d.p.numExperts,
          maxRows: 8,
          algorithm: "pull_device",
        }),
      typed,
      "pull_device past the route kernel's experts",
    );
    for (const [t] of inp.made) t.dispose();
  }
  done(
    `${draws[0]!.p.numExperts} experts (routed on the host on GPUs), ${draws.length * algorithms.length} cases: dispatch and maxRows bit for bit, combine`,
  );
}

// Combine of an expert output changed between the replays of a CUDA graph, staged and read in place from
// a symmetric tensor (as many rows on every rank); the first replay eager; each replay's outputs copied
// aside. The CPU backend has no graphs, and its calls take its symmetric tensors as the plain tensors they
// are.
if (gpu) {
  const gc = gpu.collectives;
  const stream = defaultStream(gpu.device);
  const d = drawProblem(
    { hidden: 96, topk: 4, perRank: 4, dtype: "bf16", tokens: ranks.map((r) => 50 + 3 * r) },
    "combine in a graph",
  );
  const { p, lay } = d;
  const H = p.hidden;
  const mine = d.sides[rank]!;
  const totals = lay.rows.map((r) => r.length);
  const n = totals[rank]!;
  const inp = upload(Tensor, p, mine, false);
  const expertOut = Tensor.empty([n, H], "bf16");
  const shared = await gpu.symmetric.empty([Math.max(...totals), H], "bf16");
  const inShared = shared.tensor.view([shared.tensor.numel]).slice(0, n * H);
  const [whole, out] = poisonedIn(Tensor, "bf16", [mine.tokens, H]);
  const [wholeInPlace, outInPlace] = poisonedIn(Tensor, "bf16", [mine.tokens, H]);
  const [wholeByRank, outByRank] = poisonedIn(Tensor, "bf16", [mine.tokens, H]);
  const outs = [out, outInPlace, outByRank];
  const replays = [0, 1, 2, 3].map(() => {
    const tag = tags++;
    return {
      tag,
      values: expertOutput(Tensor, H, tag, n)[0],
      outs: outs.map(() => Tensor.empty([mine.tokens, H], "bf16")),
    };
  });
  await group.barrier();
  const r = gc.dispatch(inp.tokens, inp.topkIdx, inp.topkWeights, { numExperts: p.numExperts, stream });
  const combineAll = (): void => {
    gc.combine(expertOut, r.handle, { out, stream });
    gc.combine(shared, r.handle, { out: outInPlace, stream });
    gc.combine(shared, r.handle, { out: outByRank, stream, algorithm: "per_rank" });
  };
  const graph = Graph.capture(stream, combineAll);
  for (const [i, replay] of replays.entries()) {
    expertOut.copyFrom(replay.values.slice(1, n + 1), stream);
    inShared.copyFrom(expertOut.view([n * H]), stream);
    if (i === 0) combineAll();
    else graph.launch(stream);
    replay.outs.forEach((o, j) => o.copyFrom(outs[j]!, stream));
  }
  gpu.synchronize(stream);
  for (const [i, replay] of replays.entries()) {
    const want = combined(p, mine, lay.rowOf[rank]!, valuesOf(replay.tag, H));
    same(replay.outs[0]!.toHost(), want, `combine, replay ${i}`);
    same(replay.outs[1]!.toHost(), want, `combine in place, replay ${i}`);
    const wantByRank = combinedByRank(p, mine, lay.rowOf[rank]!, valuesOf(replay.tag, H));
    same(replay.outs[2]!.toHost(), wantByRank, `combine per_rank, replay ${i}`);
  }
  const last = replays[3]!.outs;
  expectPoisoned(whole, bytesOf(last[0]!), "combine out");
  expectPoisoned(wholeInPlace, bytesOf(last[1]!), "combine in place out");
  expectPoisoned(wholeByRank, bytesOf(last[2]!), "combine per_rank out");
  graph.dispose();
  for (const t of [
    ...inp.made.map(([t]) => t),
    expertOut,
    whole,
    wholeInPlace,
    wholeByRank,
    ...replays.flatMap((x) => [x.values, ...x.outs]),
    ...dispatchTensors(r),
  ])
    t.dispose();
  await shared.dispose();
  done("combine against the reference, staged, in place and per_rank, eager and in a graph: bit for bit");
}

// A straggler, then calls alternating shapes, dtypes and algorithms back to back (fewer when ranks share a
// GPU).
{
  const CALLS = sharing ? 12 : 40;
  const cases = Array.from({ length: CALLS }, (_, i) =>
    moeCase(
      drawProblem(
        {
          hidden: [7, 64][i % 2]!,
          topk: 1 + (i % 3),
          perRank: [1, 4, Math.floor(256 / world)][i % 3]!,
          dtype: i % 5 === 4 ? "fp8e4m3" : "bf16",
          tokens: ranks.map((r) => 1 + ((i * 7 + r) % 23)),
        },
        `call ${i}`,
      ),
      ALGORITHMS[i % ALGORITHMS.length],
      i,
    ),
  );
  await batch(cases, world - 1);
  done(`a straggler and ${CALLS} cases alternating shapes and algorithms back to back: bit for bit`);
}

// ---- A valid problem for the refusals: 3 tokens, 2 slots, 2 experts per rank; rank r's pair i goes to
// expert (6r + i) mod E, so every expert receives 3 rows at any world, every rank 6.
const T = 3;
const P: Problem = { hidden: 8, topk: 2, numExperts: 2 * world, local: 2, dtype: "bf16" };
const BASE = (() => {
  const u = rng();
  const sides = ranks.map((r) => ({
    tokens: T,
    ids: Int32Array.from({ length: T * 2 }, (_, i) => (T * 2 * r + i) % P.numExperts),
    weights: Float32Array.from({ length: T * 2 }, () => f(u() * 2 - 1)),
    bits: Uint16Array.from({ length: T * P.hidden }, () => bf16Bits(u)),
    scales: undefined,
  }));
  return drawn("the base problem", P, sides);
})();

// Judged by the group, with every algorithm that routes on the host (there the call throws): one rank's
// maxRows too small; expert ids out of range (on one rank, or all), with an earlier result to write into
// where the algorithm takes one; one rank's tokens beyond the staging buffer. Every rank throws the same
// typed error naming the rank (the messages agreed through the store), no input written, nor the result
// given to write into; after each kind, a valid call of the algorithm.
{
  const said: string[] = [];
  /** Into: the base problem's dispatch of these rows, made first. */
  const intoRows = T * 2 * world;
  function refused(
    what: string,
    a: Algorithm,
    names: RegExp,
    p: Problem,
    side: Side,
    maxRows: number | undefined,
    into = false,
  ): Case {
    const name = `${what} (${named(a)})`;
    const inp = upload(make, p, side, false);
    const base = into ? upload(make, P, BASE.sides[rank]!, false) : undefined;
    const made = [...inp.made, ...(base?.made ?? [])];
    const tensors = made.map(([t]) => t);
    let target: DispatchResult<AnyTensor> | undefined;
    let error: unknown;
    return {
      run: () => {
        target =
          base &&
          c.dispatch(base.tokens, base.topkIdx, base.topkWeights, {
            numExperts: P.numExperts,
            maxRows: intoRows,
            ...opt(withInto(a)),
          });
        if (target) tensors.push(...dispatchTensors(target));
        try {
          const o = { numExperts: p.numExperts, scales: inp.scales, ...opt(a) };
          c.dispatch(inp.tokens, inp.topkIdx, inp.topkWeights, {
            ...o,
            maxRows: target ? intoRows : maxRows,
            into: target,
          });
        } catch (e) {
          error = e;
        }
      },
      check: () => {
        assert.ok(typed(error), `rank ${rank}: ${name}: expected InvalidArgumentError, got ${String(error)}`);
        assert.match(error.message, names, `rank ${rank}: ${name}`);
        said.push(error.message);
        for (const m of made) unwritten(m, name);
        if (target) checkDispatched(`${name}: into`, P, BASE.sides, BASE.lay, target, intoRows, false);
      },
      tensors,
    };
  }
  const mine = BASE.sides[rank]!;
  const E = P.numExperts;
  // Past the staging buffer by a token of 8192 bf16 on the last rank.
  const hidden = 8192;
  const big = Math.floor(capacity / (2 * hidden)) + 1;
  const tokens = rank === world - 1 ? big : T;
  const large: Side = {
    tokens,
    ids: Int32Array.from({ length: tokens * 2 }, (_, i) => i % E),
    weights: new Float32Array(tokens * 2),
    bits: new Uint16Array(tokens * hidden),
    scales: undefined,
  };
  // What, the rank with a bad id (undefined: all), pair, id.
  const BAD_IDS: [string, number | undefined, number, number][] = [
    ["id numExperts on the last rank", world - 1, 1, E],
    ["id -2 on rank 0", 0, 4, -2],
    ["id numExperts + 5 on every rank", undefined, 0, E + 5],
    ["id 2^31 - 1 on rank 1", 1, 5, 0x7fffffff],
    ["id -2^31 on the last rank", world - 1, 3, -(2 ** 31)],
  ];
  const cases: Case[] = [];
  for (const a of ALGORITHMS.filter((x) => !onDevice(x))) {
    // maxRows on some ranks only: with fixed rows auto routes on the device on GPUs (refusals at the wait:
    // the section below), so here only what routes on the host whatever the rows.
    for (const bad of onDevice(a, true) ? [] : new Set([world - 1, 0])) {
      const n = BASE.lay.rows[bad]!.length;
      assert.ok(n >= 2);
      const maxRows = rank === bad ? n - 1 : rank === 0 ? undefined : BASE.lay.rows[rank]!.length + 3;
      cases.push(
        refused(
          `maxRows ${n - 1} on rank ${bad}`,
          a,
          new RegExp(`\\brank ${bad} receives ${n} rows but its maxRows is ${n - 1}\\b`),
          P,
          mine,
          maxRows,
        ),
      );
    }
    cases.push(small("after refusals", a, cases.length));
    for (const [what, on, pair, id] of BAD_IDS) {
      const ids = mine.ids.slice();
      if (on === undefined || on === rank) ids[pair] = id;
      cases.push(
        refused(
          what,
          a,
          new RegExp(`\\brank ${on ?? 0}'s topkIdx has an expert id out of range at pair ${pair}\\b`),
          P,
          { ...mine, ids },
          undefined,
          // Into an earlier result where that routes on the host: on the device a refusal comes at the
          // wait (the section below).
          takesInto(a) && !onDevice(withInto(a)),
        ),
      );
    }
    cases.push(small("after refusals", a, cases.length));
    cases.push(
      refused(
        "tokens beyond the staging buffer on the last rank",
        a,
        new RegExp(
          `\\brank ${world - 1}'s dispatch needs \\d+ bytes of the \\d+-byte symmetric staging buffer`,
        ),
        { ...P, hidden },
        large,
        undefined,
      ),
    );
    cases.push(small("after refusals", a, cases.length));
  }
  await batch(cases);
  await agree(new TextEncoder().encode(said.join("\n")), "group-judged refusals: the messages");
  done(`group-judged refusals: ${said.length} alike on every rank, nothing written; usable after each kind`);
}

// pull_device in a CUDA graph: dispatch into an eager result's tensors, then combine, replayed with new
// ids, weights and tokens each time (the routes change, the outputs' rows stay maxRows); each replay's
// outputs copied aside. Capture rules. Then refusals on the device, alike on every rank: the next
// synchronize throws, counts are -1 and the outputs keep what they held; one refusal per wait, as a GPU
// reports one at a time. The CPU backend has no device routing and no graphs.
if (gpu) {
  const gc = gpu.collectives;
  const stream = defaultStream(gpu.device);
  const cfg: Config = { hidden: 64, topk: 2, perRank: 4, dtype: "bf16", tokens: [24] };
  const { hidden: H, topk: K } = cfg;
  const tokens = cfg.tokens[0]!;
  const experts = cfg.perRank * world;
  const maxRows = tokens * K * world;
  // The eager call's problem, then each replay's.
  const problems = [0, 1, 2, 3, 4].map((i) => drawProblem(cfg, `pull_device in a graph ${i}`));
  const loads = problems.map((d) => upload(Tensor, d.p, d.sides[rank]!, false));
  const x = Tensor.empty([tokens, H], "bf16");
  const ids = Tensor.empty([tokens, K], "i32");
  const w = Tensor.empty([tokens, K], "f32");
  const load = (i: number): void => {
    const l = loads[i]!;
    x.copyFrom(l.tokens, stream);
    ids.copyFrom(l.topkIdx, stream);
    w.copyFrom(l.topkWeights, stream);
  };
  const [whole, out] = poisonedIn(Tensor, "bf16", [tokens, H]);
  /** Copies of a result's tensors and of a combine's out, made on the stream. */
  const snaps = problems.map(() => ({
    tokens: Tensor.empty([maxRows, H], "bf16"),
    weights: Tensor.empty([maxRows], "f32"),
    counts: Tensor.empty([cfg.perRank], "i32"),
    expert: Tensor.empty([tokens, K], "i32"),
    row: Tensor.empty([tokens, K], "i32"),
    handleWeights: Tensor.empty([tokens, K], "f32"),
    out: Tensor.empty([tokens, H], "bf16"),
    outByRank: Tensor.empty([tokens, H], "bf16"),
  }));
  const options = { numExperts: experts, maxRows, stream } as const;
  await group.barrier();
  load(0);
  const d = gc.dispatch(x, ids, w, { ...options, algorithm: DEVICE });
  const eager = gc.combine(d.tokens, d.handle, { stream });
  const eagerByRank = gc.combine(d.tokens, d.handle, { stream, algorithm: "per_rank" });
  const [wholeByRank, outByRank] = poisonedIn(Tensor, "bf16", [tokens, H]);
  const snapshot = (i: number, combinedOut: Tensor, byRankOut: Tensor): void => {
    const s = snaps[i]!;
    const h = d.handle;
    s.tokens.copyFrom(d.tokens, stream);
    s.weights.copyFrom(d.weights, stream);
    s.counts.copyFrom(d.counts, stream);
    s.expert.copyFrom(h.expert, stream);
    s.row.copyFrom(h.row, stream);
    s.handleWeights.copyFrom(h.weights, stream);
    s.out.copyFrom(combinedOut, stream);
    s.outByRank.copyFrom(byRankOut, stream);
  };
  snapshot(0, eager, eagerByRank);
  const capture = (fn: () => unknown): Graph => Graph.capture(stream, () => void fn());
  // Inside a capture every algorithm needs into: routed on the host it cannot be captured at all, on the
  // device its outputs must exist before.
  for (const a of [undefined, ...GPU_MOE_ALGORITHMS])
    assert.throws(
      () => capture(() => gc.dispatch(x, ids, w, { ...options, ...(a && { algorithm: a }) })),
      typed,
      `${named(a)} captured without into`,
    );
  const graph = capture(() => {
    gc.dispatch(x, ids, w, { ...options, into: d });
    gc.combine(d.tokens, d.handle, { out, stream });
    gc.combine(d.tokens, d.handle, { out: outByRank, stream, algorithm: "per_rank" });
  });
  for (let i = 1; i < problems.length; i++) {
    load(i);
    graph.launch(stream);
    snapshot(i, out, outByRank);
  }
  gpu.synchronize(stream);
  for (const [i, s] of snaps.entries()) {
    const { p, sides, lay } = problems[i]!;
    const what = i === 0 ? "pull_device before the capture" : `pull_device graph replay ${i}`;
    const result = {
      ...s,
      scales: undefined,
      handle: { ...d.handle, expert: s.expert, row: s.row, weights: s.handleWeights },
    };
    checkDispatched(what, p, sides, lay, result, maxRows, true);
    const identity = problems[i]!.want().identity!;
    same(s.out.toHost(), identity.slots, `${what}: combine of the identity expert`);
    same(s.outByRank.toHost(), identity.byRank, `${what}: combine per_rank of the identity expert`);
  }
  expectPoisoned(whole, bytesOf(snaps[4]!.out), "pull_device graph combine out");
  expectPoisoned(wholeByRank, bytesOf(snaps[4]!.outByRank), "pull_device graph combine per_rank out");
  graph.dispose();

  /** Enqueues `call` after a store barrier; the synchronize then throws a typed error `names` matches.
   * Returns what the call did. */
  const refusedOnDevice = async <R>(what: string, names: RegExp, call: () => R): Promise<R> => {
    await group.barrier();
    const r = call();
    assert.throws(
      () => gpu.synchronize(stream),
      (e: unknown) => typed(e) && names.test(e.message),
      what,
    );
    return r;
  };
  // An id out of range on rank 0 only, into d; a combine enqueued after it (as in a graph, before anyone
  // synchronizes) reads no row: zeros.
  const held = [d.tokens.toHost(), d.weights.toHost()] as const;
  const bad = Int32Array.from({ length: tokens * K }, (_, i) => i % experts);
  if (rank === 0) bad[5] = experts + 3;
  const badIds = Tensor.fromHost(bad, "i32", { shape: [tokens, K] });
  const fine = Tensor.fromHost(
    bad.map((e) => e % experts),
    "i32",
    { shape: [tokens, K] },
  );
  const none = await refusedOnDevice(
    "pull_device bad id",
    /refused on every rank: rank 0's topkIdx has an expert id out of range at pair 5/,
    () => {
      ids.copyFrom(badIds, stream);
      gc.dispatch(x, ids, w, { ...options, into: d });
      return [
        gc.combine(d.tokens, d.handle, { stream }),
        gc.combine(d.tokens, d.handle, { stream, algorithm: "per_rank" }),
      ];
    },
  );
  for (const [j, o] of none.entries())
    same(o.toHost(), new Uint16Array(tokens * H), `combine ${["pull", "per_rank"][j]} after a refusal`);
  same(d.counts.toHost(), new Int32Array(cfg.perRank).fill(-1), "refused counts");
  same(d.tokens.toHost(), held[0], "refused: tokens kept");
  same(d.weights.toHost(), held[1], "refused: weights kept");
  // The last rank's maxRows too small.
  const tooFew = await refusedOnDevice(
    "pull_device maxRows",
    new RegExp(`rank ${world - 1} receives \\d+ rows, more than its maxRows`),
    () => {
      ids.copyFrom(fine, stream);
      const r = gc.dispatch(x, ids, w, {
        ...options,
        maxRows: rank === world - 1 ? 0 : maxRows,
        algorithm: DEVICE,
      });
      return [r, gc.combine(r.tokens, r.handle, { stream })] as const;
    },
  );
  // Rank 0's maxRows rows would not fit the staging buffer for combine: refused on every rank, and the
  // combine after it throws on no rank (it stages what fits and reads nothing).
  const huge = Math.floor(capacity / (H * 2)) + 1;
  const tooLarge = await refusedOnDevice(
    "pull_device combine room",
    /rank 0's maxRows \(\d+\) rows of bf16 would not fit/,
    () => {
      const r = gc.dispatch(x, ids, w, {
        ...options,
        maxRows: rank === 0 ? huge : maxRows,
        algorithm: DEVICE,
      });
      return [r, gc.combine(r.tokens, r.handle, { stream })] as const;
    },
  );
  same(tooLarge[1].toHost(), new Uint16Array(tokens * H), "combine after a room refusal");
  for (const t of [
    x,
    ids,
    w,
    whole,
    badIds,
    fine,
    eager,
    eagerByRank,
    wholeByRank,
    ...none,
    tooFew[1],
    tooLarge[1],
    ...loads.flatMap((l) => l.made.map(([t]) => t)),
    ...snaps.flatMap((s) => Object.values(s)),
    ...[d, tooFew[0], tooLarge[0]].flatMap(dispatchTensors),
  ])
    t.dispose();
  await usable("after device refusals");
  done("pull_device: in a replayed graph, capture rules, refusals on the device on every rank: bit for bit");
}

// Local bad inputs, the same on every rank: typed errors with a stable code before any communication,
// nothing written (inputs, results to write into, combine's out), the group usable after. Arguments that
// are not tensors are typed errors too, never TypeErrors.
{
  const H = P.hidden;
  const K = P.topk;
  const E = P.numExperts;
  const inp = upload(make, P, BASE.sides[rank]!, false);
  const { tokens, topkIdx, topkWeights } = inp;
  const [outWhole, out] = poisonedIn(make, "bf16", [T, H]);
  const ok = { numExperts: E };
  await group.barrier();
  // A result to write into (maxRows 40), one routed on the host (GPUs: not one to write into), and one to
  // combine.
  const earlier = c.dispatch(tokens, topkIdx, topkWeights, {
    ...ok,
    maxRows: 40,
    ...opt(withInto(undefined)),
  });
  const hostRouted = cuda
    ? c.dispatch(tokens, topkIdx, topkWeights, { ...ok, maxRows: 40, algorithm: "pull" })
    : undefined;
  const r = c.dispatch(tokens, topkIdx, topkWeights, ok);
  wait();
  const watched: Made[] = [
    ...inp.made,
    ...[earlier.tokens, earlier.handle.row, r.tokens, r.handle.row].map((t): Made => [t, bytesOf(t)]),
  ];
  const fp8 = make.zeros([T, H], "fp8e4m3");
  const ids = BASE.sides[rank]!.ids;
  const n = r.handle.received;
  const h = r.handle;
  const large = make.zeros([n + T, H], "bf16");
  type Bad = [string, () => unknown];
  const dd = (t: unknown, i: unknown, w: unknown, o: unknown) => (): unknown =>
    c.dispatch(t as AnyTensor, i as AnyTensor, w as AnyTensor, o as Parameters<typeof c.dispatch>[3]);
  const cb =
    (e: unknown, handle: unknown, o: unknown = { out }) =>
    (): unknown =>
      c.combine(e as AnyTensor, handle as typeof h, o as Parameters<typeof c.combine>[2]);
  const each = (
    algorithms: readonly Algorithm[],
    what: string,
    call: (o: { algorithm?: string }) => unknown,
  ): Bad[] => algorithms.map((a) => [`${what} ${named(a)}`, () => call(opt(a))]);
  const OTHER = theirs(cuda ? CPU_MOE_ALGORITHMS : GPU_MOE_ALGORITHMS);
  const dispatches: Bad[] = [
    ["tokens f32", dd(make.zeros([T, H], "f32"), topkIdx, topkWeights, ok)],
    ["tokens f16", dd(make.zeros([T, H], "f16"), topkIdx, topkWeights, ok)],
    ["tokens 1-D", dd(tokens.view([T * H]), topkIdx, topkWeights, ok)],
    ["tokens hidden 0", dd(make.zeros([T, 0], "bf16"), topkIdx, topkWeights, ok)],
    ["tokens not a tensor", dd({}, topkIdx, topkWeights, ok)],
    ["fp8 tokens without scales", dd(fp8, topkIdx, topkWeights, ok)],
    [
      "fp8 tokens, scales of T + 1",
      dd(fp8, topkIdx, topkWeights, { ...ok, scales: make.zeros([T + 1], "f32") }),
    ],
    ["fp8 tokens, scales bf16", dd(fp8, topkIdx, topkWeights, { ...ok, scales: make.zeros([T], "bf16") })],
    ["scales with bf16 tokens", dd(tokens, topkIdx, topkWeights, { ...ok, scales: make.zeros([T], "f32") })],
    ["topkIdx f32", dd(tokens, make.fromHost(Array.from(ids), "f32", { shape: [T, K] }), topkWeights, ok)],
    ["topkIdx u32", dd(tokens, make.fromHost(Array.from(ids), "u32", { shape: [T, K] }), topkWeights, ok)],
    ["topkIdx i64", dd(tokens, make.zeros([T, K], "i64"), topkWeights, ok)],
    ["topkIdx [T + 1, K]", dd(tokens, make.zeros([T + 1, K], "i32"), topkWeights, ok)],
    ["topkIdx 1-D", dd(tokens, topkIdx.view([T * K]), topkWeights, ok)],
    ["topkIdx [T, 0]", dd(tokens, make.zeros([T, 0], "i32"), make.zeros([T, 0], "f32"), ok)],
    ["topkIdx null", dd(tokens, null, topkWeights, ok)],
    ["topkWeights [T, K + 1]", dd(tokens, topkIdx, make.zeros([T, K + 1], "f32"), ok)],
    ["topkWeights [K, T]", dd(tokens, topkIdx, topkWeights.view([K, T]), ok)],
    ["topkWeights [T]", dd(tokens, topkIdx, make.zeros([T], "f32"), ok)],
    ["topkWeights bf16", dd(tokens, topkIdx, make.zeros([T, K], "bf16"), ok)],
    ["numExperts world + 1", dd(tokens, topkIdx, topkWeights, { numExperts: world + 1 })],
    ["numExperts 3 x world - 1", dd(tokens, topkIdx, topkWeights, { numExperts: 3 * world - 1 })],
    ["numExperts world - 1", dd(tokens, topkIdx, topkWeights, { numExperts: world - 1 })],
    ["numExperts 0", dd(tokens, topkIdx, topkWeights, { numExperts: 0 })],
    ["numExperts -E", dd(tokens, topkIdx, topkWeights, { numExperts: -E })],
    ["numExperts E + 0.5", dd(tokens, topkIdx, topkWeights, { numExperts: E + 0.5 })],
    ["numExperts NaN", dd(tokens, topkIdx, topkWeights, { numExperts: NaN })],
    ["numExperts as a string", dd(tokens, topkIdx, topkWeights, { numExperts: String(E) })],
    ["numExperts missing", dd(tokens, topkIdx, topkWeights, {})],
    ["options missing", dd(tokens, topkIdx, topkWeights, undefined)],
    ["options null", dd(tokens, topkIdx, topkWeights, null)],
    ["maxRows -1", dd(tokens, topkIdx, topkWeights, { ...ok, maxRows: -1 })],
    ["maxRows 2.5", dd(tokens, topkIdx, topkWeights, { ...ok, maxRows: 2.5 })],
    ["maxRows NaN", dd(tokens, topkIdx, topkWeights, { ...ok, maxRows: NaN })],
    ["algorithm one_shot (all-reduce's)", dd(tokens, topkIdx, topkWeights, { ...ok, algorithm: "one_shot" })],
    ["algorithm nccl", dd(tokens, topkIdx, topkWeights, { ...ok, algorithm: "nccl" })],
    ...each(OTHER, "algorithm of the other backend:", (o) =>
      c.dispatch(tokens, topkIdx, topkWeights, { ...ok, ...o }),
    ),
    // Routed on the device, the outputs' rows are fixed in advance.
    ...each(
      ALGORITHMS.filter((a) => onDevice(a)),
      "without maxRows, algorithm",
      (o) => c.dispatch(tokens, topkIdx, topkWeights, { ...ok, ...o }),
    ),
    // into: a result of another shape, without maxRows, of other maxRows, not a result at all; an algorithm
    // that does not write into one (GPUs: routed on the host), a result routed on the host (GPUs).
    ["into without maxRows", dd(tokens, topkIdx, topkWeights, { ...ok, into: earlier })],
    ["into of other maxRows", dd(tokens, topkIdx, topkWeights, { ...ok, maxRows: 41, into: earlier })],
    [
      "into of another hidden",
      dd(make.zeros([T, 16], "bf16"), topkIdx, topkWeights, { ...ok, maxRows: 40, into: earlier }),
    ],
    ["into not a result", dd(tokens, topkIdx, topkWeights, { ...ok, maxRows: 40, into: {} })],
    ...each(
      ALGORITHMS.filter((a) => !takesInto(a)),
      "into with algorithm",
      (o) => c.dispatch(tokens, topkIdx, topkWeights, { ...ok, maxRows: 40, into: earlier, ...o }),
    ),
    ...(hostRouted
      ? ([
          [
            "into a result routed on the host",
            dd(tokens, topkIdx, topkWeights, { ...ok, maxRows: 40, into: hostRouted }),
          ],
        ] satisfies Bad[])
      : []),
  ];
  const combines: Bad[] = [
    ["expertOut of received - 1 rows", cb(r.tokens.slice(0, n - 1), h)],
    ["expertOut hidden + 1", cb(make.zeros([n, H + 1], "bf16"), h)],
    ["expertOut hidden - 1", cb(make.zeros([n, H - 1], "bf16"), h)],
    ["expertOut f32", cb(make.zeros([n, H], "f32"), h)],
    ["expertOut fp8", cb(make.zeros([n, H], "fp8e4m3"), h)],
    ["expertOut 1-D", cb(r.tokens.view([n * H]), h)],
    ["expertOut not a tensor", cb(undefined, h)],
    ["out of T + 1 rows", cb(r.tokens, h, { out: make.zeros([T + 1, H], "bf16") })],
    ["out f32", cb(r.tokens, h, { out: make.zeros([T, H], "f32") })],
    ["out overlapping expertOut", cb(large.slice(0, n), h, { out: large.slice(n - 1, n - 1 + T) })],
    ["handle of another rank", cb(r.tokens, { ...h, rank: (rank + 1) % world })],
    ["handle of a larger group", cb(r.tokens, { ...h, world: world + 1 })],
    ["handle missing", cb(r.tokens, undefined)],
    ["handle {}", cb(r.tokens, {})],
    ["algorithm one_shot (all-reduce's)", cb(r.tokens, h, { out, algorithm: "one_shot" })],
    ["algorithm nccl", cb(r.tokens, h, { out, algorithm: "nccl" })],
    ["algorithm pull_device (dispatch's)", cb(r.tokens, h, { out, algorithm: "pull_device" })],
    ...each(OTHER, "algorithm of the other backend:", (o) => c.combine(r.tokens, h, { out, ...o })),
  ];
  const wrong = untyped([
    ...dispatches.map(([w, f]): Bad => [`dispatch: ${w}`, f]),
    ...combines.map(([w, f]): Bad => [`combine: ${w}`, f]),
  ]);
  wait();
  assert.deepEqual(wrong, [], `rank ${rank}: bad inputs must give InvalidArgumentError`);
  for (const m of watched) unwritten(m, "bad inputs");
  expectPoisoned(outWhole, poisonOf(make, "bf16", T * H), "bad combine: out was written");
  // The group in step: a valid combine into that out.
  await group.barrier();
  const back = c.combine(r.tokens, h, { out });
  wait();
  assert.equal(back, out, "after bad inputs: combine returns the given out");
  expectPoisoned(outWhole, asBytes(BASE.want().identity!.slots), "after bad inputs: combine");
  for (const t of [
    ...inp.made.map(([t]) => t),
    outWhole,
    fp8,
    large,
    ...[earlier, r, ...(hostRouted ? [hostRouted] : [])].flatMap(dispatchTensors),
  ])
    t.dispose();
  await usable("after bad inputs");
  done(
    `bad inputs: ${dispatches.length} dispatches and ${combines.length} combines refused with typed errors, nothing written; usable after`,
  );
}

c.barrier();
wait();
total(world);
console.log(`${backend} moe ok rank ${rank}`);
await group.destroy();
