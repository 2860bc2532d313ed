// A call's fingerprint: what every rank's call of a collective must agree on, packed into the 32-bit
// value its signals carry (device/include/symmkit/sync/signal.cuh; the CPU backend's src/cpu/sync.ts).
// A put writes the value, a wait expects it: a peer whose signal carries another value is out of step.
// That is found at no extra round trip (the value rides on the signal the call sends anyway), and
// CollectiveMismatchError decodes both values to say what differed.
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

/** One field of a fingerprint, in words. */
function describeField(v: number, f: Field): string {
  const x = field(v, f);
  switch (f) {
    case "step":
      return x === 0 ? "first barrier" : "second barrier";
    case "seq":
      return `call #${x} (mod 1024)`;
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
  seq: "call number (a rank skipped or added a collective call)",
  kind: "operation or algorithm (check auto's inputs: every rank must pass the same size)",
  dtype: "dtype",
  op: "reduction",
  size: "element count or root/peer",
};

/** The fields in which two fingerprints differ, each with both values in words. */
export function fingerprintDifferences(ours: number, theirs: number): string[] {
  return (Object.keys(FIELDS) as Field[])
    .filter((f) => field(ours, f) !== field(theirs, f))
    .map((f) => `${FIELD_WORDS[f]}: ours ${describeField(ours, f)}, theirs ${describeField(theirs, f)}`);
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
        `${differences.length ? differences.join("; ") : "nothing decodable (a corrupted signal)"}. ` +
        `Every rank of a group must make the same collective calls, in the same order, with the same ` +
        `sizes, dtypes and options; this group cannot be used any more: destroy it.` +
        (options.note ? ` ${options.note}` : ""),
      { cause: options.cause },
    );
    this.differences = differences;
  }
}
