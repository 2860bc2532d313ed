// A call's fingerprint: what every rank's call of a collective must agree on, as the CallTag its kernels
// take (device/include/symmkit/sync/call_tag.cuh; the CPU backend's src/cpu/sync.ts): the 64-bit call
// word every signal of the call carries, and the shape word its first signals carry beside it. A put
// writes a word, a wait expects it: a peer whose signal carries another word is out of step. That is
// found at no extra round trip (the words ride on the signals the call sends anyway), and
// CollectiveMismatchError decodes both words to say what differed. A call takes its number even when it
// is refused before any signal (takeTurns), so that a refusal on some ranks only is found too.
//
// Every field is exact, so two calls that differ in what the ranks must agree on never share a tag.
// Call word, from bit 0: the element count (39 bits: more elements than any GPU's memory holds bytes;
// larger counts are refused), the reduction (2), the dtype (4), the operation (7: its code, defineCallKinds), the
// group's call number mod 1024 (10; a skipped or refused call is caught at its first signal, long before
// numbers could wrap), the barrier step within the call (1: a kernel's second barrier sets it), and bit
// 63, always set (a slot holding 0 is idle). Shape word: what else the ranks must pass alike for the
// operation (SHAPES: a fused matmul's n and k, allReduceRmsNorm's hidden size, ...), its values packed
// one after another behind their bit lengths, bit 63 set; 0 for operations whose count says it all.
import { InvalidArgumentError, SymmkitError } from "../errors.js";
import type { DType } from "../runtime/dtype.js";
import type { ParamStruct } from "../runtime/kernel.js";

/** The calls the group makes itself, whatever operations run on it: codes 0 and 1. */
export const GROUP_KINDS = ["barrier", "broadcast"] as const;
/** A kind of call a fingerprint names: one of GROUP_KINDS, or an operation's "collective/algorithm" as its
 * algorithm record names it (src/ops/call-kinds.ts defines them). */
export type CallKind = string;

const DTYPE_CODES: Readonly<Record<DType, number>> = {
  f32: 0,
  f16: 1,
  bf16: 2,
  fp8e4m3: 3,
  fp8e5m2: 4,
  i32: 5,
  u32: 6,
  u8: 7,
  i64: 8,
};
/** A call that moves no elements of any dtype (a barrier). */
const NO_DTYPE = 15;
const OP_CODES: Readonly<Record<string, number>> = { none: 0, sum: 1, max: 2, min: 3 };

/**
 * What else each operation's ranks must pass alike, beyond the element count, by kind or by operation (a
 * kind's part before "/"): the values CallShape.dims holds, in this order. A fused matmul's count is its A's
 * elements (m x k): k pins m, and n the other operand (the exchanged partials of reduce-scatter and
 * all-reduce are m x n; all-gather's n stays on its rank).
 */
export const SHAPES: Readonly<Record<string, readonly string[]>> = {
  broadcast: ["root"],
  "all-gather-matmul": ["k"],
  "matmul-reduce-scatter": ["n", "k"],
  "matmul-all-reduce": ["n", "k"],
  // The digest where it was taken (normOperandsDigest: always on the CPU backend, with
  // SYMMKIT_CHECK_CALLS on GPUs), 0 where not.
  "all-reduce-rms-norm": ["hidden size", "weight and bias digest"],
  "moe-dispatch": ["topk", "experts"],
  "moe-combine": ["topk", "experts"],
  // Read in place: every rank must pass its own part of the same symmetric tensor.
  "moe-combine/in-place": ["topk", "experts", "symmetric tensor"],
};

/** What a call's fingerprint is made of. */
export interface CallShape {
  readonly kind: CallKind;
  readonly dtype?: DType | undefined;
  /** Reduction; none for a call that does not reduce. */
  readonly op?: "sum" | "max" | "min" | undefined;
  /** Elements of the input (what the caller passed), below 2^39. */
  readonly count: number;
  /** What else the ranks must agree on: SHAPES' values for the kind's operation (none for the others). */
  readonly dims?: readonly number[] | undefined;
}

/** The fused call a collective runs for (a fused matmul's sequential construction, allReduceRmsNorm's):
 * its fingerprint names that call and carries its shape instead of the collective's own. */
export interface CallAs {
  readonly kind: CallKind;
  readonly dims?: readonly number[] | undefined;
}

const NO_DIMS: readonly number[] = [];
/** The names of a kind's shape values (SHAPES). */
const shapeNames = (kind: string): readonly string[] => SHAPES[kind] ?? SHAPES[kind.split("/", 1)[0]!] ?? [];
/** Bits of the call word's high half (word bit 32 + i is bit i here); the count fills the low half and
 * the high half's bits below op. */
const FIELDS = {
  op: { shift: 7, bits: 2 },
  dtype: { shift: 9, bits: 4 },
  kind: { shift: 13, bits: 7 },
  seq: { shift: 20, bits: 10 },
  step: { shift: 30, bits: 1 },
} as const;
type Field = keyof typeof FIELDS | "count";
const MARK = 0x8000_0000;
const COUNT_BITS = 39;
const TWO_32 = 0x1_0000_0000;
/** The kinds by code (a code is a place here), and each kind's code with how many values its shape word
 * holds (one lookup a call); the group's own until defineCallKinds adds the operations'. */
let kindNames: readonly string[] = [];
let kindCodes = new Map<string, { readonly code: number; readonly dims: number }>();

/**
 * Makes the fingerprints name GROUP_KINDS and then `kinds` (every operation's, in record order, each
 * once), coded by their places, and returns that list. The operations' layer calls it once, as it loads
 * (src/ops/call-kinds.ts), so that a new algorithm's kind comes from its record: ranks of one job run the
 * same code, hence the same codes, and messages name the kinds.
 */
export function defineCallKinds(kinds: readonly string[]): readonly string[] {
  const all = [...new Set<string>([...GROUP_KINDS, ...kinds])];
  if (all.length > 1 << FIELDS.kind.bits)
    throw new Error(`${all.length} call kinds: a fingerprint codes at most ${1 << FIELDS.kind.bits}`);
  kindNames = all;
  kindCodes = new Map(all.map((k, i) => [k, { code: i, dims: shapeNames(k).length }]));
  return all;
}
defineCallKinds([]);

/** Bits of a shape word's length fields (each value's bit length, but the last's). */
const LENGTH_BITS = 6;

/** The most elements a call's fingerprint holds exactly. */
export const MAX_FINGERPRINT_COUNT = 2 ** COUNT_BITS - 1;

/**
 * A call's fingerprint as its kernels take it (CallTag, sync/call_tag.cuh: CALL_TAG_LAYOUT): the call
 * word and the shape word, each as 32-bit halves so that making one allocates no BigInt.
 */
export class CallTag implements ParamStruct {
  constructor(
    readonly hi: number,
    readonly lo: number,
    readonly shapeHi = 0,
    readonly shapeLo = 0,
  ) {}

  get paramBytes(): number {
    return 16;
  }

  /** The call word (what every signal carries). */
  get word(): bigint {
    return (BigInt(this.hi >>> 0) << 32n) | BigInt(this.lo >>> 0);
  }

  /** The shape word (0: none). */
  get shape(): bigint {
    return (BigInt(this.shapeHi >>> 0) << 32n) | BigInt(this.shapeLo >>> 0);
  }

  /** The tag of the call's barrier number `step` (0 or 1): its word's step bit set for 1. */
  step(step: 0 | 1): CallTag {
    return step === 0
      ? this
      : new CallTag((this.hi | (1 << FIELDS.step.shift)) >>> 0, this.lo, this.shapeHi, this.shapeLo);
  }

  writeParam(view: DataView, offset: number): void {
    view.setUint32(offset, this.lo, true);
    view.setUint32(offset + 4, this.hi, true);
    view.setUint32(offset + 8, this.shapeLo, true);
    view.setUint32(offset + 12, this.shapeHi, true);
  }
}

const bitLength = (v: number): number =>
  v < TWO_32 ? 32 - Math.clz32(v) : 64 - Math.clz32(Math.floor(v / TWO_32));

/** Whether `v` is an integer from 0 to `limit`. */
const exact = (v: number, limit: number): boolean => Number.isSafeInteger(v) && v >= 0 && v <= limit;

/** The refusal of a value `what` names that is not exact (only then is the message made: fingerprints
 * are made on every call). */
const inexact = (what: string, v: number, limit: number): InvalidArgumentError =>
  new InvalidArgumentError(
    `${what} ${v} is not an integer from 0 to ${limit}: no call can be fingerprinted with it exactly`,
  );

/** Packs `dims` into a shape word (high and low halves, mark set): each value but the last behind its bit
 * length. Exact wherever it fits 63 bits, and refused (InvalidArgumentError) where it does not. */
function shapeWord(kind: string, dims: readonly number[]): [number, number] {
  let hi = 0;
  let lo = 0;
  let at = 0;
  // Appends v (below 2^bits, bits <= 53) at bit `at`; the caller has checked that it fits.
  const put = (v: number, bits: number): void => {
    const low = Math.min(bits, Math.max(0, 32 - at));
    if (low > 0) lo += (v % 2 ** low) * 2 ** at;
    if (bits > low) hi += Math.floor(v / 2 ** low) * 2 ** (at + low - 32);
    at += bits;
  };
  let bits = 0;
  for (let i = 0; i < dims.length; i++) {
    if (!exact(dims[i]!, Number.MAX_SAFE_INTEGER))
      throw inexact(`${kind}: ${shapeNames(kind)[i] ?? "value"}`, dims[i]!, Number.MAX_SAFE_INTEGER);
    bits += bitLength(dims[i]!) + (i < dims.length - 1 ? LENGTH_BITS : 0);
  }
  if (bits > 63)
    throw new InvalidArgumentError(
      `${kind}: the shape ${dims.join(" x ")} takes ${bits} bits, more than a call's fingerprint holds exactly (63)`,
    );
  for (let i = 0; i < dims.length - 1; i++) put(bitLength(dims[i]!), LENGTH_BITS);
  for (let i = 0; i < dims.length; i++) put(dims[i]!, i < dims.length - 1 ? bitLength(dims[i]!) : 63 - at);
  return [(hi + MARK) >>> 0, lo >>> 0];
}

/** The fingerprint of call number `seq` (its barrier step 0). */
export function fingerprint(seq: number, shape: CallShape): CallTag {
  const kind = kindCodes.get(shape.kind);
  if (kind === undefined) throw new InvalidArgumentError(`unknown call kind ${shape.kind}`);
  const count = shape.count;
  if (!exact(count, MAX_FINGERPRINT_COUNT))
    throw inexact(`${shape.kind}: element count`, count, MAX_FINGERPRINT_COUNT);
  const hi =
    MARK |
    ((seq & 0x3ff) << FIELDS.seq.shift) |
    (kind.code << FIELDS.kind.shift) |
    ((shape.dtype === undefined ? NO_DTYPE : DTYPE_CODES[shape.dtype]) << FIELDS.dtype.shift) |
    (OP_CODES[shape.op ?? "none"]! << FIELDS.op.shift) |
    Math.floor(count / TWO_32);
  const dims = shape.dims ?? NO_DIMS;
  if (dims.length !== kind.dims)
    throw new InvalidArgumentError(
      `${shape.kind}: its fingerprint takes ${kind.dims} shape values (SHAPES), got ${dims.length}`,
    );
  if (dims.length === 0) return new CallTag(hi >>> 0, count >>> 0);
  const [shapeHi, shapeLo] = shapeWord(shape.kind, dims);
  return new CallTag(hi >>> 0, count >>> 0, shapeHi, shapeLo);
}

const DTYPE_NAMES = new Map(Object.entries(DTYPE_CODES).map(([n, c]) => [c, n]));
const OP_NAMES = new Map(Object.entries(OP_CODES).map(([n, c]) => [c, n]));

/** One field of a call word, as a number. */
function field(word: bigint, f: Field): number {
  if (f === "count") return Number(word & BigInt(MAX_FINGERPRINT_COUNT));
  const { shift, bits } = FIELDS[f];
  return Number((word >> BigInt(32 + shift)) & BigInt((1 << bits) - 1));
}

/** Whether a word is a point-to-point message's: its number counts the pair's messages one way, not the
 * group's calls. */
const isMessage = (word: bigint): boolean => (kindNames[field(word, "kind")] ?? "").startsWith("send-recv");

/** One field of a call word, in words. */
function describeField(word: bigint, f: Field): string {
  const x = field(word, f);
  switch (f) {
    case "step":
      return x === 0 ? "first barrier" : "second barrier";
    case "seq":
      return `${isMessage(word) ? "message" : "call"} #${x} (mod 1024)`;
    case "kind":
      return kindNames[x] ?? `unknown operation ${x}`;
    case "dtype":
      return x === NO_DTYPE ? "no dtype" : (DTYPE_NAMES.get(x) ?? String(x));
    case "op":
      return OP_NAMES.get(x) ?? String(x);
    case "count":
      return `${x} elements`;
  }
}

const FIELD_WORDS: Readonly<Record<Field, string>> = {
  count: "element count",
  op: "reduction",
  dtype: "dtype",
  kind: "operation or algorithm (check auto's inputs: every rank must pass the same size)",
  seq: "call number (a rank skipped, added or refused a call)",
  step: "barrier step",
};
const FIELD_ORDER: readonly Field[] = ["step", "seq", "kind", "dtype", "op", "count"];

const MESSAGE_NUMBER_WORDS =
  "message number between the pair (a rank skipped, added or refused a send or recv)";

/** The fields in which two call words differ, each with both values in words. */
export function fingerprintDifferences(ours: bigint, theirs: bigint): string[] {
  return FIELD_ORDER.filter((f) => field(ours, f) !== field(theirs, f)).map((f) => {
    const words = f === "seq" && isMessage(ours) ? MESSAGE_NUMBER_WORDS : FIELD_WORDS[f];
    return `${words}: ours ${describeField(ours, f)}, theirs ${describeField(theirs, f)}`;
  });
}

/** A shape word's values (n of them), unpacked as shapeWord packed them. */
function shapeValues(shape: bigint, n: number): bigint[] {
  let at = 0n;
  const take = (bits: bigint): bigint => {
    const v = (shape >> at) & ((1n << bits) - 1n);
    at += bits;
    return v;
  };
  const lengths = Array.from({ length: Math.max(0, n - 1) }, () => take(BigInt(LENGTH_BITS)));
  return [...lengths.map((l) => take(l)), take(63n - at)];
}

/** The values in which two shape words of a call (its word `word`) differ, with both in words. */
export function shapeDifferences(word: bigint, ours: bigint, theirs: bigint): string[] {
  const kind = kindNames[field(word, "kind")] ?? "";
  const names = shapeNames(kind);
  if (ours === 0n || theirs === 0n || names.length === 0)
    return [`shape word: ours 0x${ours.toString(16)}, theirs 0x${theirs.toString(16)}`];
  const [a, b] = [shapeValues(ours, names.length), shapeValues(theirs, names.length)];
  return names.flatMap((name, i) => (a[i] === b[i] ? [] : [`${name}: ours ${a[i]}, theirs ${b[i]}`]));
}

/** What differs between two call words, as CollectiveMismatchError's message says it. */
function describeDifferences(ours: bigint, theirs: bigint, differences: readonly string[]): string {
  if (differences.length === 0) return "nothing decodable (a corrupted signal)";
  // The same call but for its number: a rank made a call fewer or more (a refused call takes its turn,
  // so a refusal on some ranks only ends here too).
  if (differences.length === 1 && field(ours, "seq") !== field(theirs, "seq")) {
    const [what, calls] = isMessage(ours) ? ["message", "send or recv"] : ["call", "call"];
    return (
      `the ${what} number only, ${what} #${field(ours, "seq")} against #${field(theirs, "seq")} (mod 1024): ` +
      `a rank skipped or refused a ${calls}`
    );
  }
  return differences.join("; ");
}

/** A call word in words: what the call was. */
export function describeFingerprint(word: bigint): string {
  return (
    `${describeField(word, "kind")} ${describeField(word, "dtype")} ${describeField(word, "op")} of ` +
    `${describeField(word, "count")}, ${describeField(word, "seq")}`
  );
}

/**
 * Two ranks made different collective calls at the same point (or one skipped a call): a peer's signal
 * carried another call's word, or the same call's word with another shape word (`shapes`: ours, theirs).
 * The group's signals are out of step from here on: destroy it.
 */
export class CollectiveMismatchError extends SymmkitError {
  readonly differences: readonly string[];
  /** For the same call with other shapes: the two shape words (ours, theirs). */
  readonly shapes: readonly [bigint, bigint] | undefined;
  constructor(
    readonly rank: number,
    readonly peer: number,
    readonly ours: bigint,
    readonly theirs: bigint,
    options: { shapes?: readonly [bigint, bigint] | undefined; note?: string; cause?: unknown } = {},
  ) {
    const shapes = options.shapes;
    const differences = shapes
      ? shapeDifferences(ours, shapes[0], shapes[1])
      : fingerprintDifferences(ours, theirs);
    const what = shapes
      ? `the shapes they passed: ${differences.join("; ")}`
      : describeDifferences(ours, theirs, differences);
    super(
      "SYMMKIT_COLLECTIVE_MISMATCH",
      `rank ${rank} and rank ${peer} are out of step: rank ${rank} is in ${describeFingerprint(ours)}, ` +
        `rank ${peer} signalled ${describeFingerprint(theirs)}. They differ in ${what}. ` +
        `Every rank of a group must make the same collective calls, in the same order, with the same ` +
        `sizes, dtypes and options; this group cannot be used any more: destroy it.` +
        (options.note ? ` ${options.note}` : ""),
      { cause: options.cause },
    );
    this.differences = differences;
    this.shapes = shapes;
  }
}

/**
 * How a class's calls take their turns: the number a call's fingerprints carry (the group's call number,
 * or a pair's message number) is read before the call and again if it throws.
 */
export interface Turns<T> {
  /** What a call takes its turn from: unchanged after a call that threw, it took none. */
  at(self: T): number;
  /** Takes the turn a call that threw without one would have taken (its arguments as passed); returns the
   * sentence its error gets, or undefined where there was none to take (a peer that is no peer). */
  spend(self: T, a: unknown, b: unknown, c: unknown, d: unknown): string | undefined;
}

/** What a group call refused on this rank says. */
export const SPENT_CALL =
  "The call still took its turn in the group's order of calls: ranks whose call went ahead fail with " +
  "CollectiveMismatchError at their next signal from this rank (SymmTimeoutError naming it, if it makes " +
  "no further call), instead of pairing with its next call.";
/** What a point-to-point call refused on this rank says. */
export const SPENT_MESSAGE =
  "The call still took its message number between this pair: a matching call that went ahead on the " +
  "peer fails with CollectiveMismatchError (or SymmTimeoutError) at the pair's next message, instead of " +
  "pairing with this rank's next call.";

/** Errors that say the group is out of step already: a spent turn adds nothing to them. */
const GROUP_FAILED = new Set<string>([
  "SYMMKIT_SYMM_TIMEOUT",
  "SYMMKIT_COLLECTIVE_MISMATCH",
  "SYMMKIT_NCCL_TIMEOUT",
  "SYMMKIT_KERNEL_STALL",
]);

/**
 * Makes every method `turns` names take its turn even when it throws before taking one (an argument
 * check, a capacity, a capture, ...): a call refused on some ranks only would otherwise leave their
 * numbers behind the peers' whose call went ahead, and the refusing ranks' next call would carry the
 * number of the call the peers are in, same shape and all, and pair with it on wrong data. With the turn
 * taken, the numbers differ and every rank ends in a typed error at the first signal; a call refused
 * alike on every rank leaves them all in step. Each method is wrapped once, here: a call costs a read
 * of the counter and a try, no closure and no allocation.
 */
export function takeTurns<T extends object>(
  proto: T,
  turns: { readonly [K in keyof T as T[K] extends (...args: never[]) => unknown ? K : never]?: Turns<T> },
): void {
  type Method = (this: T, a: unknown, b: unknown, c: unknown, d: unknown) => unknown;
  const methods = proto as unknown as Record<string, Method>;
  for (const [name, t] of Object.entries(turns as Record<string, Turns<T>>)) {
    // Four arguments pass through: no method wrapped takes more.
    const method = methods[name]!;
    methods[name] = function (this: T, a, b, c, d) {
      const at = t.at(this);
      try {
        return method.call(this, a, b, c, d);
      } catch (e) {
        if (t.at(this) === at) {
          const why = t.spend(this, a, b, c, d);
          if (why !== undefined && e instanceof SymmkitError && !GROUP_FAILED.has(e.code)) say(e, why);
        }
        throw e;
      }
    };
  }
}

/** The group calls both backends' collectives have (src/ops/collectives.ts), each taking the group's
 * next number, and the point-to-point ones, each taking its pair's (whether it sends, receives). */
export const GROUP_CALLS = [
  "allReduce",
  "allGather",
  "reduceScatter",
  "allGatherMatmul",
  "matmulReduceScatter",
  "matmulAllReduce",
  "allReduceRmsNorm",
  "allToAll",
  "allToAllV",
  "dispatch",
  "combine",
  "barrier",
] as const;
const PAIR_CALLS: Readonly<Record<string, readonly [boolean, boolean]>> = {
  send: [true, false],
  recv: [false, true],
  sendRecv: [true, true],
};

/** takeTurns for a backend's collectives: `call` for every group call (and the backend's `extra` ones),
 * `message(sends, receives)` for send, recv and sendRecv. */
export function takeCollectiveTurns<T extends object>(
  proto: T,
  call: Turns<T>,
  message: (sends: boolean, receives: boolean) => Turns<T>,
  extra: readonly string[] = [],
): void {
  const turns: Record<string, Turns<T>> = {};
  for (const name of [...GROUP_CALLS, ...extra]) turns[name] = call;
  for (const [name, [sends, receives]] of Object.entries(PAIR_CALLS)) turns[name] = message(sends, receives);
  for (const name of Object.keys(turns))
    if (typeof (proto as Record<string, unknown>)[name] !== "function")
      throw new Error(`takeCollectiveTurns: ${proto.constructor.name} has no method ${name}`);
  takeTurns(proto, turns as Parameters<typeof takeTurns<T>>[1]);
}

/** Appends `sentence` to an error's message (and to its stack, which holds the message as made). */
function say(e: Error, sentence: string): void {
  const before = e.message;
  if (before.endsWith(sentence)) return; // an error object thrown again
  // Read first: V8 formats a stack lazily, from the message at that moment (it would hold the sentence
  // already, and the replace below would add it twice).
  const stack = e.stack;
  e.message = `${before} ${sentence}`;
  if (stack?.includes(before)) e.stack = stack.replace(before, () => e.message);
}
