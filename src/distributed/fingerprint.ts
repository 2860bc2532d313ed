// A call's fingerprint: what every rank's call of a collective must agree on, packed into the 32-bit
// value its signals carry (device/include/symmkit/sync/signal.cuh; the CPU backend's src/cpu/sync.ts).
// A put writes the value, a wait expects it: a peer whose signal carries another value is out of step.
// That is found at no extra round trip (the value rides on the signal the call sends anyway), and
// CollectiveMismatchError decodes both values to say what differed. A call takes its number even when it
// is refused before any signal (takeTurns), so that a refusal on some ranks only is found too.
//
// Bits: 0 the barrier step within the call (a kernel's second barrier adds 1), 1-10 the group's call
// number mod 1024, 11-16 the operation (CALL_KINDS index), 17-19 the dtype, 20-21 the reduction, 22-30 a
// hash of the element count and the root or peer, 31 always set (a slot holding 0 is idle).
import { SymmkitError } from "../errors.js";
import type { DType } from "../runtime/dtype.js";

/**
 * Every operation whose signals carry a fingerprint, by code (its index): collective/algorithm as the
 * registry names them (src/ops/coll/registry.ts), the fused matmuls, and the group barrier.
 * test/fingerprint.test.ts checks that every algorithm has its entry. Append only: ranks of one job run
 * the same code, but codes in messages stay comparable across versions.
 */
export const CALL_KINDS = [
  "barrier",
  "all-reduce/lamport",
  "all-reduce/lamport_two_shot",
  "all-reduce/one_shot",
  "all-reduce/two_shot",
  "all-reduce/nccl",
  "all-gather/ll",
  "all-gather/copy_engine",
  "all-gather/pull",
  "all-gather/nccl",
  "reduce-scatter/lamport",
  "reduce-scatter/pull",
  "reduce-scatter/copy_engine",
  "reduce-scatter/nccl",
  "all-gather-matmul/fused",
  "all-gather-matmul/fused_copy_engine",
  "all-gather-matmul/fused_pull",
  "all-gather-matmul/sequential",
  "all-gather-matmul/nccl_cublaslt",
  "matmul-reduce-scatter/fused",
  "matmul-reduce-scatter/sequential",
  "matmul-reduce-scatter/nccl_cublaslt",
  "broadcast",
  "send-recv",
  "all-reduce-rms-norm/lamport",
  "all-reduce-rms-norm/lamport_two_shot",
  "all-reduce-rms-norm/one_shot",
  "all-reduce-rms-norm/two_shot",
  "all-reduce-rms-norm/sequential",
  "all-reduce-rms-norm/nccl",
  "all-to-all/pull",
  "all-to-all/nccl",
  "all-to-all-v/pull",
  "all-to-all-v/nccl",
  "moe-dispatch/pull",
  "moe-combine/pull",
  "matmul-all-reduce/sequential",
  "matmul-all-reduce/nccl_cublaslt",
  "all-to-all-v/copy_engine",
  "matmul-all-reduce/fused",
  "moe-dispatch/pull_device",
  "send-recv/copy_engine",
  "moe-combine/in-place",
  "all-reduce/hierarchical",
  "all-gather/hierarchical",
  "reduce-scatter/hierarchical",
] as const;
export type CallKind = (typeof CALL_KINDS)[number];

const DTYPE_CODES: Readonly<Record<DType, number>> = {
  f32: 0,
  f16: 1,
  bf16: 2,
  fp8e4m3: 3,
  fp8e5m2: 4,
  i32: 5,
  u32: 6,
  u8: 7,
  // i64 shares u8's code: the count hash still tells them apart in practice.
  i64: 7,
};
const OP_CODES: Readonly<Record<string, number>> = { none: 0, sum: 1, max: 2, min: 3 };

/** What a call's fingerprint is made of. */
export interface CallShape {
  readonly kind: CallKind;
  readonly dtype?: DType | undefined;
  /** Reduction; none for a call that does not reduce. */
  readonly op?: "sum" | "max" | "min" | undefined;
  /** Elements of the input (what the caller passed). */
  readonly count: number;
  /** Root or peer of a rooted or point-to-point call; -1 for none. */
  readonly peer?: number | undefined;
}

const KIND_CODE = new Map<string, number>(CALL_KINDS.map((k, i) => [k, i]));
export const SIGNAL_MARK = 0x8000_0000;
const FIELDS = {
  step: { shift: 0, bits: 1 },
  seq: { shift: 1, bits: 10 },
  kind: { shift: 11, bits: 6 },
  dtype: { shift: 17, bits: 3 },
  op: { shift: 20, bits: 2 },
  size: { shift: 22, bits: 9 },
} as const;
type Field = keyof typeof FIELDS;
const field = (v: number, f: Field): number => (v >>> FIELDS[f].shift) & ((1 << FIELDS[f].bits) - 1);

/** The fingerprint of call number `seq` (its step bit 0; the value as a u32). */
export function fingerprint(seq: number, shape: CallShape): number {
  // An FNV-style mix of count and peer folded to 9 bits: sizes that differ by any amount almost always
  // differ here (1 in 512 collide).
  let h = Math.imul((shape.count % 0x1_0000_0000) ^ 0x811c9dc5, 0x01000193);
  h = Math.imul(h ^ Math.floor(shape.count / 0x1_0000_0000), 0x01000193);
  h = Math.imul(h ^ ((shape.peer ?? -1) & 0xffff), 0x01000193);
  h = (h ^ (h >>> 15) ^ (h >>> 24)) & 0x1ff;
  return (
    (SIGNAL_MARK |
      ((seq & 0x3ff) << FIELDS.seq.shift) |
      (KIND_CODE.get(shape.kind)! << FIELDS.kind.shift) |
      ((shape.dtype === undefined ? 7 : DTYPE_CODES[shape.dtype]) << FIELDS.dtype.shift) |
      (OP_CODES[shape.op ?? "none"]! << FIELDS.op.shift) |
      (h << FIELDS.size.shift)) >>>
    0
  );
}

const DTYPE_NAMES = new Map(Object.entries(DTYPE_CODES).map(([n, c]) => [c, n]));
const OP_NAMES = new Map(Object.entries(OP_CODES).map(([n, c]) => [c, n]));

/** Whether a fingerprint is a point-to-point message's: its number counts the pair's messages one way,
 * not the group's calls. */
const isMessage = (v: number): boolean => (CALL_KINDS[field(v, "kind")] ?? "").startsWith("send-recv");

/** One field of a fingerprint, in words. */
function describeField(v: number, f: Field): string {
  const x = field(v, f);
  switch (f) {
    case "step":
      return x === 0 ? "first barrier" : "second barrier";
    case "seq":
      return `${isMessage(v) ? "message" : "call"} #${x} (mod 1024)`;
    case "kind":
      return CALL_KINDS[x] ?? `unknown operation ${x}`;
    case "dtype":
      return x === 7 ? "u8/i64/none" : (DTYPE_NAMES.get(x) ?? String(x));
    case "op":
      return OP_NAMES.get(x) ?? String(x);
    case "size":
      return `size/peer hash ${x}`;
  }
}

const FIELD_WORDS: Readonly<Record<Field, string>> = {
  step: "barrier step",
  seq: "call number (a rank skipped, added or refused a call)",
  kind: "operation or algorithm (check auto's inputs: every rank must pass the same size)",
  dtype: "dtype",
  op: "reduction",
  size: "element count or root/peer",
};

const MESSAGE_NUMBER_WORDS =
  "message number between the pair (a rank skipped, added or refused a send or recv)";

/** The fields in which two fingerprints differ, each with both values in words. */
export function fingerprintDifferences(ours: number, theirs: number): string[] {
  return (Object.keys(FIELDS) as Field[])
    .filter((f) => field(ours, f) !== field(theirs, f))
    .map((f) => {
      const words = f === "seq" && isMessage(ours) ? MESSAGE_NUMBER_WORDS : FIELD_WORDS[f];
      return `${words}: ours ${describeField(ours, f)}, theirs ${describeField(theirs, f)}`;
    });
}

/** What differs between two fingerprints, as CollectiveMismatchError's message says it. */
function describeDifferences(ours: number, theirs: number, differences: readonly string[]): string {
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

/** A fingerprint in words: what the call was. */
export function describeFingerprint(v: number): string {
  return `${describeField(v, "kind")} ${describeField(v, "dtype")} ${describeField(v, "op")}, ${describeField(v, "seq")}`;
}

/**
 * Two ranks made different collective calls at the same point (or one skipped a call): a peer's signal
 * carried another call's fingerprint. The group's signals are out of step from here on: destroy it.
 */
export class CollectiveMismatchError extends SymmkitError {
  readonly differences: readonly string[];
  constructor(
    readonly rank: number,
    readonly peer: number,
    readonly ours: number,
    readonly theirs: number,
    options: { note?: string; cause?: unknown } = {},
  ) {
    const differences = fingerprintDifferences(ours >>> 0, theirs >>> 0);
    super(
      "SYMMKIT_COLLECTIVE_MISMATCH",
      `rank ${rank} and rank ${peer} are out of step: rank ${rank} is in ${describeFingerprint(ours >>> 0)}, ` +
        `rank ${peer} signalled ${describeFingerprint(theirs >>> 0)}. They differ in ` +
        `${describeDifferences(ours >>> 0, theirs >>> 0, differences)}. ` +
        `Every rank of a group must make the same collective calls, in the same order, with the same ` +
        `sizes, dtypes and options; this group cannot be used any more: destroy it.` +
        (options.note ? ` ${options.note}` : ""),
      { cause: options.cause },
    );
    this.differences = differences;
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
  e.message = `${before} ${sentence}`;
  if (e.stack?.includes(before)) e.stack = e.stack.replace(before, () => e.message);
}
