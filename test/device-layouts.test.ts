// The structs the host and the device headers share outside the GEMM (src/distributed/device-layouts.ts):
// each host table against the header's struct laid out by the C rules (test/support/c-layout.ts), every
// named offset, every member named, the size, and the size the header's static_assert fixes.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  BARRIER_THREADS,
  CALL_TAG_LAYOUT,
  CALL_TAG_PARAM,
  DEVICE_POINTER_BYTES,
  MAILBOX_HEADER_BYTES,
  MAILBOX_STATE_LAYOUT,
  PAD_BYTES_PER_BLOCK_AND_RANK,
  PIPELINE_WAITS,
  RECORD_KINDS,
  REFUSAL_LAYOUT,
  SYMM_VIEW_BYTES,
  SYMM_VIEW_LAYOUT,
  SYMM_VIEW_PARAM,
  SYNC_WATCH_LAYOUT,
  TIMEOUT_RECORD_LAYOUT,
  WAIT_ENV_LAYOUT,
} from "../src/distributed/device-layouts.js";
import { assertedSize, checkLayout, constant, headers, structLayout } from "./support/c-layout.js";

const sources = headers(
  "sync/wait.cuh",
  "sync/call_tag.cuh",
  "sync/barrier.cuh",
  "coll/mailbox.cuh",
  "sync/refusal.cuh",
);

const TABLES = [
  ["SymmView", "sync/barrier.cuh", SYMM_VIEW_LAYOUT],
  ["TimeoutRecord", "sync/wait.cuh", TIMEOUT_RECORD_LAYOUT],
  ["WaitEnv", "sync/wait.cuh", WAIT_ENV_LAYOUT],
  ["MailboxState", "coll/mailbox.cuh", MAILBOX_STATE_LAYOUT],
  ["Refusal", "sync/refusal.cuh", REFUSAL_LAYOUT],
  ["CallTag", "sync/call_tag.cuh", CALL_TAG_LAYOUT],
] as const;

for (const [name, header, table] of TABLES) {
  test(`${name}: every member is where ${header} has it, and the sizes agree`, () => {
    checkLayout(sources, name, table, { everyMember: true });
    assert.equal(
      assertedSize(headers(header), name),
      table.bytes,
      `${header}: static_assert(sizeof(${name}) == ...) differs from the host's table`,
    );
  });
}

test("SymmView: the per-rank pointer arrays hold kMaxWorld pointers; the kernel parameter matches", () => {
  const maxWorld = constant(sources, "kMaxWorld");
  assert.equal(SYMM_VIEW_LAYOUT.pads - SYMM_VIEW_LAYOUT.buffers, maxWorld * DEVICE_POINTER_BYTES);
  assert.equal(SYMM_VIEW_LAYOUT.rank - SYMM_VIEW_LAYOUT.pads, maxWorld * DEVICE_POINTER_BYTES);
  assert.equal(SYMM_VIEW_BYTES, SYMM_VIEW_LAYOUT.bytes);
  assert.deepEqual(SYMM_VIEW_PARAM, {
    bytes: SYMM_VIEW_LAYOUT.bytes,
    align: structLayout(sources, "SymmView").align,
  });
});

test("CallTag as a parameter, the barrier's threads and pad slots, and the mailbox header are the headers'", () => {
  assert.deepEqual(CALL_TAG_PARAM, {
    bytes: CALL_TAG_LAYOUT.bytes,
    align: structLayout(sources, "CallTag").align,
  });
  assert.equal(BARRIER_THREADS, constant(sources, "kBarrierThreads"));
  // word_slot: a call word and a shape word, u64 each, per block and rank.
  assert.match(
    sources,
    /word_slot\(u32 block, u32 world, u32 from\) \{ return 2ull \* \(block \* world \+ from\); \}/,
  );
  assert.equal(PAD_BYTES_PER_BLOCK_AND_RANK, 2 * 8);
  assert.equal(MAILBOX_HEADER_BYTES, constant(sources, "kHeaderBytes"));
});

test("SyncWatch's block: the abort flag, the Refusal and the TimeoutRecord are aligned, apart and inside it", () => {
  const record = structLayout(sources, "TimeoutRecord");
  const refusal = structLayout(sources, "Refusal");
  const { abortFlag, refusal: ref, record: at, bytes } = SYNC_WATCH_LAYOUT;
  assert.equal(abortFlag % 4, 0, "the abort flag is a u32");
  assert.equal(ref % refusal.align, 0, `the Refusal needs ${refusal.align}-byte alignment`);
  assert.equal(at % record.align, 0, `the TimeoutRecord needs ${record.align}-byte alignment`);
  const spans = [
    [abortFlag, 4],
    [ref, refusal.size],
    [at, record.size],
  ].sort((a, b) => a[0]! - b[0]!);
  for (let i = 1; i < spans.length; i++)
    assert.ok(spans[i - 1]![0]! + spans[i - 1]![1]! <= spans[i]![0]!, "two members of the block overlap");
  assert.ok(
    spans.every(([o, n]) => o! + n! <= bytes),
    "the block is too small",
  );
});

test("the layout reader sees a moved member and a resized struct (the checks can fail)", () => {
  const moved = sources.replace(/u32 rank;\n\s*u32 world;/, "u32 world;\n  u32 rank;");
  assert.notEqual(moved, sources);
  assert.throws(() => checkLayout(moved, "SymmView", SYMM_VIEW_LAYOUT), /SymmView\.rank/);
  const grown = sources.replace("u32 reserved;", "u32 reserved;\n  u64 extra;");
  assert.throws(() => checkLayout(grown, "MailboxState", MAILBOX_STATE_LAYOUT), /MailboxState size/);
  assert.throws(
    () =>
      checkLayout(sources, "TimeoutRecord", { ...TIMEOUT_RECORD_LAYOUT, extra: 28 }, { everyMember: true }),
    /TimeoutRecord/,
  );
});

test("the record's kinds and the stalled waits' numbers are the headers' (sync/wait.cuh, gemm/tma.cuh)", () => {
  assert.equal(RECORD_KINDS.gaveUp, constant(sources, "kGaveUp"));
  assert.equal(RECORD_KINDS.mismatch, constant(sources, "kMismatch"));
  assert.equal(RECORD_KINDS.stalled, constant(sources, "kStalled"));
  assert.equal(RECORD_KINDS.shapeMismatch, constant(sources, "kShapeMismatch"));
  const tma = headers("gemm/tma.cuh");
  const waits = ["kStallStageEmpty", "kStallStageFull", "kStallHandoff"].map((n) => constant(tma, n));
  assert.deepEqual(waits, [1, 2, 3]);
  assert.deepEqual(Object.keys(PIPELINE_WAITS).map(Number), waits);
  assert.match(PIPELINE_WAITS[constant(tma, "kStallStageEmpty")]!, /producer/);
  assert.match(PIPELINE_WAITS[constant(tma, "kStallHandoff")]!, /signaller/);
});
