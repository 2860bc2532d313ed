// Call fingerprints: every operation that signals has a code, fields decode to what differed, and the
// value is never an idle slot.
import assert from "node:assert/strict";
import { test } from "node:test";
import { COLLECTIVE_ALGORITHMS } from "../src/ops/coll/registry.js";
import { KernelStallError, SymmTimeoutError } from "../src/distributed/sync-watch.js";
import { FUSED_TUNABLE } from "../src/ops/fused-checks.js";
import { AR_NORM_TUNABLE } from "../src/ops/ar-norm-checks.js";
import {
  CALL_KINDS,
  CollectiveMismatchError,
  fingerprint,
  fingerprintDifferences,
  SIGNAL_MARK,
  SPENT_CALL,
  takeTurns,
  type Turns,
} from "../src/distributed/fingerprint.js";
import { InvalidArgumentError } from "../src/errors.js";

test("every collective and fused algorithm has a call kind, and kinds fit their 6 bits", () => {
  const kinds = new Set<string>(CALL_KINDS);
  const missing = [
    ...Object.entries(COLLECTIVE_ALGORITHMS).flatMap(([c, recs]) =>
      Object.keys(recs).map((a) => `${c}/${a}`),
    ),
    ...Object.entries(FUSED_TUNABLE).flatMap(([c, algs]) => algs.map((a) => `${c}/${a}`)),
    ...AR_NORM_TUNABLE.map((a) => `all-reduce-rms-norm/${a}`),
  ].filter((k) => !kinds.has(k));
  assert.deepEqual(missing, [], "add these to CALL_KINDS (src/distributed/fingerprint.ts)");
  assert.ok(CALL_KINDS.length <= 64);
});

test("a fingerprint is a u32 with the mark set and step bit clear; each field decodes on its own", () => {
  const base = { kind: "all-reduce/one_shot", dtype: "bf16", op: "sum", count: 4096 } as const;
  const v = fingerprint(5, base);
  assert.ok(v >= SIGNAL_MARK && v <= 0xffff_ffff && (v & 1) === 0);
  assert.equal(fingerprint(5 + 1024, base), v, "the call number is kept mod 1024");
  const cases: [Parameters<typeof fingerprint>, RegExp][] = [
    [[6, base], /call number.*#5.*#6/],
    [[5, { ...base, kind: "all-reduce/two_shot" }], /operation or algorithm.*one_shot.*two_shot/],
    [[5, { ...base, dtype: "f32" }], /dtype: ours bf16, theirs f32/],
    [[5, { ...base, op: "max" }], /reduction: ours sum, theirs max/],
    [[5, { ...base, count: 4104 }], /element count/],
    [[5, { ...base, peer: 1 }], /element count or root\/peer/],
  ];
  for (const [args, expected] of cases) {
    const d = fingerprintDifferences(v, fingerprint(...args));
    assert.equal(d.length, 1, `${JSON.stringify(args)}: ${d.join("; ")}`);
    assert.match(d[0]!, expected);
  }
  assert.deepEqual(fingerprintDifferences(v, v + 1), [
    "barrier step: ours first barrier, theirs second barrier",
  ]);
});

test("sizes that differ almost always differ in the fingerprint (9-bit hash)", () => {
  const fp = (count: number): number => fingerprint(0, { kind: "all-gather/pull", dtype: "u8", count });
  let same = 0;
  const trials = 20000;
  for (let i = 1; i <= trials; i++) if (fp(i) === fp(i + 1) || fp(i) === fp(2 * i)) same++;
  assert.ok(same / (2 * trials) < 0.01, `${same} of ${2 * trials} neighbouring sizes collide`);
});

test("CollectiveMismatchError names both ranks, both calls and what differed", () => {
  const ours = fingerprint(3, { kind: "all-reduce/lamport", dtype: "f16", op: "sum", count: 8 });
  const theirs = fingerprint(3, { kind: "all-reduce/lamport", dtype: "f16", op: "sum", count: 16 });
  const e = new CollectiveMismatchError(0, 1, ours, theirs);
  assert.equal(e.code, "SYMMKIT_COLLECTIVE_MISMATCH");
  assert.match(e.message, /rank 0 and rank 1 are out of step/);
  assert.match(e.message, /all-reduce\/lamport f16 sum/);
  assert.deepEqual(e.differences.length, 1);
});

test("a difference in the call number alone says a rank skipped or refused a call", () => {
  const shape = { kind: "all-reduce/two_shot", dtype: "bf16", op: "sum", count: 4096 } as const;
  const e = new CollectiveMismatchError(0, 1, fingerprint(7, shape), fingerprint(6, shape));
  assert.match(
    e.message,
    /differ in the call number only, call #7 against #6 \(mod 1024\): a rank skipped or refused a call\./,
  );
  const message = { kind: "send-recv", dtype: "f32", count: 16, peer: 1 } as const;
  const m = new CollectiveMismatchError(0, 1, fingerprint(1, message), fingerprint(0, message));
  assert.match(m.message, /send-recv f32 none, message #1 \(mod 1024\)/);
  assert.match(
    m.message,
    /message number only, message #1 against #0 \(mod 1024\): a rank skipped or refused a send or recv/,
  );
  assert.match(m.differences[0]!, /^message number between the pair/);
  // With other fields, each difference is listed.
  const other = new CollectiveMismatchError(
    0,
    1,
    fingerprint(7, shape),
    fingerprint(6, { ...shape, count: 8 }),
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
        throw new CollectiveMismatchError(0, 1, fingerprint(0, { kind: "barrier", count: 0 }), 0);
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
  assert.ok(refused.stack!.includes(SPENT_CALL), "the stack shows the message as it is now");
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
    expected: 0,
    got: 0,
  };
  const fp = fingerprint(5, { kind: "all-gather-matmul/fused_copy_engine", dtype: "bf16", count: 4096 });
  const signal = new SymmTimeoutError({ ...record, phase: fp }, 3000);
  assert.match(
    signal.message,
    /^rank 0 \(block 2, thread 3\) waited 3000 ms for rank 1 in all-gather-matmul\/fused_copy_engine bf16 none, call #5 \(mod 1024\), which never signalled \(timeout 3000 ms\)/,
  );
  const tile = new SymmTimeoutError({ ...record, phase: 17 }, 3000);
  assert.match(tile.message, /waited 3000 ms for rank 1 at phase 17, which never signalled/);
});

test("KernelStallError names the wait and the stage that stalled, and blames no peer", () => {
  const e = new KernelStallError({
    kind: "stalled",
    rank: 1,
    peer: 0xffffffff,
    block: 7,
    thread: 128,
    phase: (2 << 24) | 3,
    waitedMs: 40000,
    expected: 1,
    got: 0,
  });
  assert.equal(e.code, "SYMMKIT_KERNEL_STALL");
  assert.match(
    e.message,
    /^rank 1 \(block 7, thread 128\) stalled 40000 ms in a consumer's wait for the loads of stage 3 \(waiting for 1\) of its GEMM pipeline/,
  );
  assert.match(e.message, /a bug in symmkit/);
  assert.doesNotMatch(e.message, /4294967295/);
});
