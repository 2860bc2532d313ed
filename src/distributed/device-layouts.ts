// Structs laid out twice: in the device headers (C++) and here (the byte offsets the host writes or
// reads). NVRTC has no offsetof, so the headers fix only each struct's size (static_assert);
// test/device-layouts.test.ts lays the headers' structs out by the C rules and compares every offset
// named here, so a member moved on either side fails there, not as a garbled kernel argument.

/** Bytes of a device pointer: the stride of the per-rank pointer arrays below. */
export const DEVICE_POINTER_BYTES = 8;

/**
 * SymmView (device/include/symmkit/sync/barrier.cuh), which kernels take by value and
 * SymmetricMemory.deviceView() fills: kMaxWorld (8) buffer pointers, then kMaxWorld signal-pad pointers
 * (rank i's at +8 i), this rank and the world size, then the bounded-wait settings (WaitEnv's:
 * timeout, host-mapped abort flag and TimeoutRecord; see SYNC_WATCH_LAYOUT).
 */
export const SYMM_VIEW_LAYOUT = {
  buffers: 0,
  pads: 64,
  rank: 128,
  world: 132,
  timeoutNs: 136,
  abortFlag: 144,
  record: 152,
  bytes: 160,
} as const;

export const SYMM_VIEW_BYTES = SYMM_VIEW_LAYOUT.bytes;
/** Threads a block needs to meet its peers at a barrier (kBarrierThreads in sync/barrier.cuh): a call word
 * thread per peer in the first warp, a shape word thread per peer in the second. */
export const BARRIER_THREADS = 40;
/** Bytes of signal pad a block that meets its peers takes: a call word and a shape word (u64 each) per
 * rank of the world (sync/barrier.cuh word_slot). */
export const PAD_BYTES_PER_BLOCK_AND_RANK = 16;
/** SymmView as a kernel parameter: its size, and the alignment of its widest member (a pointer). */
export const SYMM_VIEW_PARAM = { bytes: SYMM_VIEW_BYTES, align: 8 } as const;

/** WaitEnv (sync/wait.cuh) as a kernel's by-value parameter: byte offsets of its fields. */
export const WAIT_ENV_LAYOUT = {
  timeoutNs: 0,
  abortFlag: 8,
  record: 16,
  rank: 24,
  bytes: 32,
} as const;

/**
 * TimeoutRecord (device/include/symmkit/sync/wait.cuh): what the first thread that gives up a bounded
 * wait writes into host-mapped memory, and SyncWatch.record() reads. The device writes `flag` last
 * (after a system fence), so the host reads the other fields only once `flag` is non-zero; `flag` is
 * the kind (RECORD_KINDS). `phase` (u64) is what the wait was for (a call word, or a kernel's own step);
 * a mismatch also records the word waited for and the one found (u64 each), a wait on a flagged line that
 * gave up the flag it awaited and the flags the line held.
 */
export const TIMEOUT_RECORD_LAYOUT = {
  flag: 0,
  rank: 4,
  block: 8,
  peer: 12,
  thread: 16,
  spare: 20,
  phase: 24,
  waitedNs: 32,
  expected: 40,
  got: 48,
  bytes: 56,
} as const;

/** TimeoutRecord's kinds: kGaveUp, kMismatch, kStalled, kShapeMismatch (sync/wait.cuh), and the NCCL
 * watchdog's, written by the host (src/distributed/nccl-watchdog-worker.ts; `phase` holds the watchdog's id). */
export const RECORD_KINDS = { gaveUp: 1, mismatch: 2, ncclTimeout: 3, stalled: 4, shapeMismatch: 5 } as const;

/** CallTag (device/include/symmkit/sync/call_tag.cuh), a kernel's by-value parameter: the call word every
 * signal carries, then the shape word beside it on the call's first signals (0: none). */
export const CALL_TAG_LAYOUT = {
  word: 0,
  shape: 8,
  bytes: 16,
} as const;
/** CallTag as a kernel parameter. */
export const CALL_TAG_PARAM = { bytes: CALL_TAG_LAYOUT.bytes, align: 8 } as const;

/** A kStalled record's phase: which of a kernel's waits on itself (gemm/tma.cuh kStall*) in bits 24-31, the
 * pipeline stage (or consumer) below; `expected` holds the parity or count it waited for. */
export const PIPELINE_WAITS: Readonly<Record<number, string>> = {
  1: "the producer's wait for the consumers to release stage",
  2: "a consumer's wait for the loads of stage",
  3: "a consumer's wait for the signaller to take its tile (consumer)",
};

/**
 * Refusal (device/include/symmkit/coll/all_to_all_v.cuh): a call the GPU judged invalid from every
 * rank's published side (so every rank refuses alike and nothing was written). The device writes `code`
 * last, after a system fence; SyncWatch.throwIfRefused() reads it and clears `code`. One record per
 * process: every group's refusals land here, codes by op (allToAllV's from 0x101, MoE dispatch's from 0x201; sync/refusal.cuh).
 */
export const REFUSAL_LAYOUT = {
  code: 0,
  rank: 4,
  detail: 8,
  bytes: 12,
} as const;

/**
 * SyncWatch's host-mapped block (host-only: kernels get the addresses through SymmView, WaitEnv or their
 * parameters). The abort flag (a u32 kernels poll), the Refusal and the TimeoutRecord (8-byte aligned,
 * for its u64 fields) sit apart, in one 128-byte block.
 */
export const SYNC_WATCH_LAYOUT = {
  abortFlag: 0,
  refusal: 4,
  record: 16,
  bytes: 128,
} as const;

/**
 * MailboxState (device/include/symmkit/coll/mailbox.cuh): per-rank call counts of the mailbox
 * collectives, in device memory the host allocates and zeroes (only its size matters to the host
 * today). calls[2] by protocol, used[3] by Lamport buffer, then the blocks of the running call.
 */
export const MAILBOX_STATE_LAYOUT = {
  calls: 0,
  used: 16,
  arrived: 40,
  reserved: 44,
  bytes: 48,
} as const;

/** The header at the end of every mailbox slot (kHeaderBytes in coll/mailbox.cuh): the sender's CallTag,
 * its call word and its shape word in a 16-byte group (LL: line) each. A slot's stride is the payload the
 * host allows plus this. */
export const MAILBOX_HEADER_BYTES = 32;
