// Call fingerprints: every operation that signals has a code, every field is exact (no two calls that
// differ share a tag), fields decode to what differed, and a word is never an idle slot.
import assert from "node:assert/strict";
import { test } from "node:test";
import { COLLECTIVE_ALGORITHMS } from "../src/ops/coll/registry.js";
import { KernelStallError, SymmTimeoutError } from "../src/distributed/sync-watch.js";
import { CALL_KINDS } from "../src/ops/call-kinds.js";
import { OP_RECORDS } from "../src/ops/op-records.js";
import {
  CollectiveMismatchError,
  defineCallKinds,
  describeFingerprint,
  fingerprint,
  fingerprintDifferences,
  GROUP_KINDS,
  MAX_FINGERPRINT_COUNT,
  SHAPES,
  shapeDifferences,
  SPENT_CALL,
  takeTurns,
  type CallKind,
  type CallShape,
  type CallTag,
  type Turns,
} from "../src/distributed/fingerprint.js";
import { CALL_TAG_LAYOUT } from "../src/distributed/device-layouts.js";
import { normOperandsDigest } from "../src/ops/norm/checks.js";
import { InvalidArgumentError } from "../src/errors.js";

test("the call kinds are the group's and every algorithm record's, each once, coded by place in 7 bits", () => {
  const claimed = [
    ...Object.entries(COLLECTIVE_ALGORITHMS).flatMap(([c, recs]) =>
      Object.keys(recs).map((a) => `${c}/${a}`),
    ),
    ...OP_RECORDS.flatMap(([, records]) => Object.values(records).flatMap((r) => r.kinds)),
  ];
  assert.deepEqual(CALL_KINDS.slice(0, GROUP_KINDS.length), GROUP_KINDS);
  assert.deepEqual(new Set(CALL_KINDS), new Set([...GROUP_KINDS, ...claimed]));
  assert.equal(new Set(CALL_KINDS).size, CALL_KINDS.length, "each kind once");
  assert.ok(CALL_KINDS.length <= 128);
  // Every kind is coded and decodes to its name: a word of each names that kind.
  for (const kind of CALL_KINDS) {
    const dims = Array.from({ length: (SHAPES[kind] ?? SHAPES[kind.split("/")[0]!] ?? []).length }, () => 3);
    const literal = kind.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    assert.match(
      describeFingerprint(fingerprint(0, { kind, count: 1, dims }).word),
      new RegExp(`^${literal} `),
    );
  }
  assert.throws(() => fingerprint(0, { kind: "all-reduce/no_such", count: 1 }), /unknown call kind/);
  assert.throws(
    () => defineCallKinds(Array.from({ length: 127 }, (_, i) => `op/${i}`)),
    /129 call kinds: a fingerprint codes at most 128/,
  );
  assert.equal(
    (fingerprint(0, { kind: "all-reduce/one_shot", count: 1 }).word >> 45n) & 127n,
    BigInt(CALL_KINDS.indexOf("all-reduce/one_shot")),
  );
});

const BASE = { kind: "all-reduce/one_shot", dtype: "bf16", op: "sum", count: 4096 } as const;

test("a call word has bit 63 set and its step bit clear; each field decodes on its own", () => {
  const t = fingerprint(5, BASE);
  assert.ok(t.word >= 1n << 63n && t.word < 1n << 64n && (t.word & (1n << 62n)) === 0n);
  assert.equal(t.shape, 0n, "an all-reduce has no shape word");
  assert.equal(fingerprint(5 + 1024, BASE).word, t.word, "the call number is kept mod 1024");
  const cases: [Parameters<typeof fingerprint>, RegExp][] = [
    [[6, BASE], /call number.*#5.*#6/],
    [[5, { ...BASE, kind: "all-reduce/two_shot" }], /operation or algorithm.*one_shot.*two_shot/],
    [[5, { ...BASE, dtype: "f32" }], /dtype: ours bf16, theirs f32/],
    [[5, { ...BASE, dtype: "i64", op: undefined }], /dtype: ours bf16, theirs i64/],
    [[5, { ...BASE, op: "max" }], /reduction: ours sum, theirs max/],
    [[5, { ...BASE, count: 4104 }], /element count: ours 4096 elements, theirs 4104 elements/],
    [[5, { ...BASE, count: 4096 + 2 ** 38 }], /element count: ours 4096 elements, theirs 274877911040/],
  ];
  for (const [args, expected] of cases) {
    const d = fingerprintDifferences(t.word, fingerprint(...args).word).filter(
      (x) => !(args[1].op === undefined && x.startsWith("reduction")),
    );
    assert.equal(d.length, 1, `${JSON.stringify(args)}: ${d.join("; ")}`);
    assert.match(d[0]!, expected);
  }
  assert.deepEqual(fingerprintDifferences(t.word, t.step(1).word), [
    "barrier step: ours first barrier, theirs second barrier",
  ]);
});

test("the element count is exact: every two counts differ in the word, up to 2^39 - 1; larger is refused", () => {
  // Pairs a hash of few bits would collide on (1 in 512 did, 3603 and 4096 among them), and random ones.
  const word = (count: number): bigint => fingerprint(0, { ...BASE, count }).word;
  for (const other of [3603, 1023, 4341, 5013, 8972, 4096 + 512, 4096 + 2 ** 32, 0, MAX_FINGERPRINT_COUNT])
    assert.notEqual(word(other), word(4096), `count ${other}`);
  let state = 12345;
  const next = (): number => (state = (Math.imul(state, 1103515245) + 12345) >>> 0);
  for (let i = 0; i < 10000; i++) {
    const a = (next() * 128 + (next() & 127)) % (MAX_FINGERPRINT_COUNT + 1);
    const b = (a + 1 + (next() % 2 ** 20)) % (MAX_FINGERPRINT_COUNT + 1);
    assert.notEqual(word(a), word(b), `counts ${a} and ${b}`);
  }
  assert.throws(() => word(MAX_FINGERPRINT_COUNT + 1), InvalidArgumentError);
  assert.throws(() => word(-1), InvalidArgumentError);
  assert.throws(() => word(1.5), InvalidArgumentError);
});

test("shape words: exact for every op that has one, each value named where two differ", () => {
  const n = (shape: Omit<CallShape, "count" | "dtype">, dims: number[], count = 4096): CallTag =>
    fingerprint(3, { dtype: "bf16", count, ...shape, dims });
  const ar = { kind: "matmul-reduce-scatter/fused" } as const;
  const t = n(ar, [8192, 1024]);
  assert.ok(t.shape >= 1n << 63n);
  assert.equal(n(ar, [8192, 1024]).shape, t.shape);
  // (m, n, k) = (4, 8192, 1024) against (8, 8192, 512): the same count, other shapes.
  assert.notEqual(n(ar, [8192, 512]).shape, t.shape);
  assert.deepEqual(shapeDifferences(t.word, t.shape, n(ar, [8192, 512]).shape), ["k: ours 1024, theirs 512"]);
  assert.deepEqual(shapeDifferences(t.word, t.shape, n(ar, [4096, 1024]).shape), [
    "n: ours 8192, theirs 4096",
  ]);
  // Random pairs of differing shapes, for every operation with one: never the same words.
  let state = 99;
  const next = (bits: number): number => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state % 2 ** bits;
  };
  for (const [kind, names] of Object.entries(SHAPES)) {
    const k = CALL_KINDS.find((c) => c === kind || c.startsWith(`${kind}/`)) as CallKind;
    // Values as wide as the word holds them all (6 bits of length for each but the last).
    const bits = Math.floor((63 - 6 * (names.length - 1)) / names.length) - 1;
    for (let i = 0; i < 10000; i++) {
      const a = names.map(() => next(bits));
      const at = next(8) % a.length;
      const b = a.map((v, j) => (j === at ? v + 1 + next(10) : v));
      assert.notEqual(n({ kind: k }, a).shape, n({ kind: k }, b).shape, `${k}: ${a.join()} and ${b.join()}`);
    }
  }
  // The widest values that fit, and one that does not.
  const wide = n({ kind: "all-gather-matmul/fused" }, [Number.MAX_SAFE_INTEGER]);
  assert.deepEqual(
    shapeDifferences(wide.word, wide.shape, n({ kind: "all-gather-matmul/fused" }, [1]).shape),
    [`k: ours ${Number.MAX_SAFE_INTEGER}, theirs 1`],
  );
  assert.throws(() => n(ar, [2 ** 40, 2 ** 20]), /more than a call's fingerprint holds exactly/);
  assert.throws(() => n(ar, [8192]), /takes 2 shape values/);
  assert.throws(() => fingerprint(0, { ...BASE, dims: [1] }), /takes 0 shape values/);
});

test("allReduceRmsNorm's operand digest: any byte of weight or bias, and a bias or none, changes it", () => {
  const w = new Uint8Array(256).map((_, i) => i);
  const d = normOperandsDigest(w, undefined);
  assert.ok(d > 0 && d <= 0xffff_ffff);
  assert.equal(normOperandsDigest(w.slice(), undefined), d, "the bytes, not the array");
  for (const at of [0, 17, 255]) {
    const v = w.slice();
    v[at] = v[at]! ^ 1;
    assert.notEqual(normOperandsDigest(v, undefined), d, `byte ${at}`);
  }
  assert.notEqual(normOperandsDigest(w, new Uint8Array(2)), d, "a bias of zeros is not no bias");
  assert.notEqual(
    normOperandsDigest(w, new Uint8Array([1, 0])),
    normOperandsDigest(w, new Uint8Array([0, 1])),
  );
});

test("a CallTag writes itself as CALL_TAG_LAYOUT: word, then shape, little-endian", () => {
  const t = fingerprint(7, { kind: "broadcast", dtype: "f32", count: 2 ** 35 + 3, dims: [1] });
  const v = new DataView(new ArrayBuffer(24));
  t.writeParam(v, 8);
  assert.equal(v.getBigUint64(8 + CALL_TAG_LAYOUT.word, true), t.word);
  assert.equal(v.getBigUint64(8 + CALL_TAG_LAYOUT.shape, true), t.shape);
  assert.equal(t.paramBytes, CALL_TAG_LAYOUT.bytes);
  assert.match(describeFingerprint(t.word), /^broadcast f32 none of 34359738371 elements, call #7/);
});

test("CollectiveMismatchError names both ranks, both calls and what differed", () => {
  const ours = fingerprint(3, { kind: "all-reduce/lamport", dtype: "f16", op: "sum", count: 8 });
  const theirs = fingerprint(3, { kind: "all-reduce/lamport", dtype: "f16", op: "sum", count: 16 });
  const e = new CollectiveMismatchError(0, 1, ours.word, theirs.word);
  assert.equal(e.code, "SYMMKIT_COLLECTIVE_MISMATCH");
  assert.match(e.message, /rank 0 and rank 1 are out of step/);
  assert.match(e.message, /all-reduce\/lamport f16 sum of 8 elements/);
  assert.deepEqual(e.differences, ["element count: ours 8 elements, theirs 16 elements"]);
  const norm = (hidden: number, digest = 0): CallTag =>
    fingerprint(3, {
      kind: "all-reduce-rms-norm/one_shot",
      dtype: "bf16",
      op: "sum",
      count: 8192,
      dims: [hidden, digest],
    });
  const s = new CollectiveMismatchError(1, 0, norm(4096).word, norm(4096).word, {
    shapes: [norm(4096).shape, norm(2048).shape],
  });
  assert.match(s.message, /They differ in the shapes they passed: hidden size: ours 4096, theirs 2048\./);
  assert.deepEqual(s.shapes, [norm(4096).shape, norm(2048).shape]);
  const w = new CollectiveMismatchError(1, 0, norm(4096).word, norm(4096).word, {
    shapes: [norm(4096, 0xdeadbeef).shape, norm(4096, 7).shape],
  });
  assert.deepEqual(w.differences, ["weight and bias digest: ours 3735928559, theirs 7"]);
});

test("a difference in the call number alone says a rank skipped or refused a call", () => {
  const shape = { kind: "all-reduce/two_shot", dtype: "bf16", op: "sum", count: 4096 } as const;
  const e = new CollectiveMismatchError(0, 1, fingerprint(7, shape).word, fingerprint(6, shape).word);
  assert.match(
    e.message,
    /differ in the call number only, call #7 against #6 \(mod 1024\): a rank skipped or refused a call\./,
  );
  const message = { kind: "send-recv", dtype: "f32", count: 16 } as const;
  const m = new CollectiveMismatchError(0, 1, fingerprint(1, message).word, fingerprint(0, message).word);
  assert.match(m.message, /send-recv f32 none of 16 elements, message #1 \(mod 1024\)/);
  assert.match(
    m.message,
    /message number only, message #1 against #0 \(mod 1024\): a rank skipped or refused a send or recv/,
  );
  assert.match(m.differences[0]!, /^message number between the pair/);
  // With other fields, each difference is listed.
  const other = new CollectiveMismatchError(
    0,
    1,
    fingerprint(7, shape).word,
    fingerprint(6, { ...shape, count: 8 }).word,
  );
  assert.match(
    other.message,
    /call number \(a rank skipped, added or refused a call\): ours call #7 .*; element count/,
  );
});

test("takeTurns: a call that throws before taking its turn takes it, once; the error says so", () => {
  class Group {
    seq = 0;
    log: unknown[] = [];
    /** Takes its turn, then throws when told to. */
    call(a: number, b: string, c?: boolean, d?: object): number {
      this.log.push([a, b, c, d]);
      if (b === "refuse") throw new InvalidArgumentError("call: refused");
      if (b === "mismatch")
        throw new CollectiveMismatchError(0, 1, fingerprint(0, { kind: "barrier", count: 0 }).word, 0n);
      if (b === "type") throw new TypeError("not a tensor");
      this.seq++;
      if (b === "late") throw new InvalidArgumentError("call: refused after its turn");
      return a * 2;
    }
    /** Calls `call` inside: a refusal there takes one turn, not two. */
    outer(b: string): number {
      return this.call(1, b);
    }
    /** A call with nothing to take (a peer that is no peer). */
    nowhere(): void {
      throw new InvalidArgumentError("nowhere: refused");
    }
  }
  const turns: Turns<Group> = {
    at: (g) => g.seq,
    spend: (g) => {
      g.seq++;
      return SPENT_CALL;
    },
  };
  takeTurns(Group.prototype, {
    call: turns,
    outer: turns,
    nowhere: { at: (g) => g.seq, spend: () => undefined },
  });
  const g = new Group();
  assert.equal(g.call(21, "ok"), 42, "arguments and result pass through");
  assert.deepEqual(g.log, [[21, "ok", undefined, undefined]]);
  assert.equal(g.seq, 1);
  const refused = (() => {
    try {
      g.call(1, "refuse", true, { x: 1 });
    } catch (e) {
      return e as InvalidArgumentError;
    }
  })()!;
  assert.equal(g.seq, 2, "the refused call took its turn");
  assert.ok(refused instanceof InvalidArgumentError);
  assert.equal(refused.code, "SYMMKIT_INVALID_ARGUMENT");
  assert.equal(refused.message, `call: refused ${SPENT_CALL}`);
  // V8 formats a stack when it is first read, from the message of that moment: once, not twice.
  assert.equal(refused.stack!.split(SPENT_CALL).length, 2, "the stack shows the message as it is now, once");
  assert.throws(
    () => g.call(1, "late"),
    (e: Error) => !e.message.includes(SPENT_CALL),
  );
  assert.equal(g.seq, 3, "a call that took its turn and then threw takes no other");
  assert.throws(
    () => g.outer("refuse"),
    (e: Error) => e.message === `call: refused ${SPENT_CALL}`,
  );
  assert.equal(g.seq, 4, "nested, the innermost call takes the turn and the outer one takes none");
  assert.throws(
    () => g.call(1, "mismatch"),
    (e: Error) => !e.message.includes(SPENT_CALL),
  );
  assert.throws(
    () => g.call(1, "type"),
    (e: Error) => e instanceof TypeError && e.message === "not a tensor",
  );
  assert.equal(g.seq, 6, "whatever it threw, the call took its turn; only a refusal says so");
  assert.throws(
    () => g.nowhere(),
    (e: Error) => e.message === "nowhere: refused",
  );
});

test("SymmTimeoutError says which call a signal wait was in (its fingerprint), or the kernel's phase", () => {
  const record = {
    kind: "gave-up" as const,
    rank: 0,
    peer: 1,
    block: 2,
    thread: 3,
    waitedMs: 3000,
    expected: 0n,
    got: 0n,
  };
  const fp = fingerprint(5, {
    kind: "all-gather-matmul/fused_copy_engine",
    dtype: "bf16",
    count: 4096,
    dims: [512],
  });
  const signal = new SymmTimeoutError({ ...record, phase: fp.word }, 3000);
  assert.match(
    signal.message,
    /^rank 0 \(block 2, thread 3\) waited 3000 ms for rank 1 in all-gather-matmul\/fused_copy_engine bf16 none of 4096 elements, call #5 \(mod 1024\), which never signalled \(timeout 3000 ms\)/,
  );
  const tile = new SymmTimeoutError({ ...record, phase: 17n }, 3000);
  assert.match(tile.message, /waited 3000 ms for rank 1 at phase 17, which never signalled/);
  assert.doesNotMatch(tile.message, /line it polled/, "a signal wait records no line");
  const line = new SymmTimeoutError({ ...record, phase: 17n, expected: 7n, got: 5n | (7n << 32n) }, 3000);
  assert.match(
    line.message,
    /The line it polled awaited flag 7; its two words held flags 5 and 7 \(0: never written\)\./,
  );
  assert.doesNotMatch(line.message, /overwritten/, "an earlier flag: not written yet");
  const over = new SymmTimeoutError({ ...record, phase: 17n, expected: 7n, got: 9n | (9n << 32n) }, 3000);
  assert.match(
    over.message,
    /held flags 9 and 9 \(0: never written\)\. A later flag means the line was overwritten before it was read: a bug in symmkit/,
  );
});

test("KernelStallError names the wait and the stage that stalled, and blames no peer", () => {
  const e = new KernelStallError({
    kind: "stalled",
    rank: 1,
    peer: 0xffffffff,
    block: 7,
    thread: 128,
    phase: BigInt((2 << 24) | 3),
    waitedMs: 40000,
    expected: 1n,
    got: 0n,
  });
  assert.equal(e.code, "SYMMKIT_KERNEL_STALL");
  assert.match(
    e.message,
    /^rank 1 \(block 7, thread 128\) stalled 40000 ms in a consumer's wait for the loads of stage 3 \(waiting for 1\) of its GEMM pipeline/,
  );
  assert.match(e.message, /a bug in symmkit/);
  assert.doesNotMatch(e.message, /4294967295/);
});
