// send/recv, allToAll and allToAllV: their algorithms, one record each (the shape: src/ops/records.ts).
// They move bits, so every algorithm gives the reference's. Auto's rules are in the records (autoWhen)
// over what each op's auto knows of the call: the message's size for send/recv, x's and the chunk's size,
// whether x is plain and whether the staging buffer holds it for allToAll, where the counts are for
// allToAllV. Every rank knows the same of a call when the ranks pass alike (allToAll: x plain or symmetric
// on every rank), so every rank picks the same algorithm.
import { autoOrder, type OpRecords } from "../records.js";
import { A2AV_PROGRAM, ALL_TO_ALL_PROGRAM, P2P_PROGRAM } from "./programs.js";

/** What allToAll's auto knows: whether the staging buffer holds x (or x is symmetric, read in place),
 * whether x is a plain tensor (pull copies it in first), and x's bytes and the bytes each rank sends each
 * rank. */
export interface AllToAllSituation {
  readonly world: number;
  readonly fitsStaging: boolean;
  readonly plain: boolean;
  readonly bytes: number;
  readonly chunkBytes: number;
}
/** What allToAllV's auto knows: whether the counts come on the device (an i32 tensor) or as an array. */
export interface AllToAllVSituation {
  readonly countsOnDevice: boolean;
}

/** What send/recv's auto knows: the message's bytes (each side's own, which a matched pair shares). */
export interface SendRecvSituation {
  readonly bytes: number;
}

const always = (): boolean => true;

/** The largest message auto sends by ll: two ll chunks (P2P_LL_CHUNK_BYTES), so that a send never waits
 * on its own receiver's acknowledgement (past it ll's acknowledgements cap it). On 2 H200s one way, ll /
 * put / NCCL: 3.6 / 8.0 / 7.3 us at 256 KiB, 9.5 / 10.1 / 11.4 at 1 MiB (both ways 11.5 / 10.5 / 14.5). */
export const LL_AUTO_MAX_BYTES = 512 << 10;

export const SEND_RECV = {
  ll: {
    summary:
      "the sender stores the message as flagged lines into the receiver's inbox and is done; the receiver polls its own memory (no signal, no round trip)",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["inbox"],
    kinds: ["send-recv/ll"],
    programs: () => [P2P_PROGRAM],
    autoWhen: (s: SendRecvSituation) => s.bytes <= LL_AUTO_MAX_BYTES,
  },
  put: {
    summary:
      "the sender's blocks store the message into the receiver's inbox in chunks, signalling each stripe",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["inbox"],
    kinds: ["send-recv"],
    programs: () => [P2P_PROGRAM],
    autoWhen: (s: SendRecvSituation) => s.bytes > LL_AUTO_MAX_BYTES,
  },
  copy_engine: {
    summary:
      "the sender stages chunks in its staging buffer, the receiver's copy engine reads them (no SMs move data)",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["send-recv/copy_engine"],
    programs: () => [P2P_PROGRAM],
  },
  nccl: {
    summary: "NCCL's send and receive (sendRecv as one NCCL group)",
    backends: ["cuda"],
    rankOrder: true,
    needs: [],
    kinds: [],
  },
  pull: {
    summary: "the sender stages the message in its symmetric buffer, the receiver pulls it",
    backends: ["cpu"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["send-recv"],
    autoWhen: always,
  },
} as const satisfies OpRecords;

/** The largest chunk (what a rank sends each rank) auto sends by allToAll's ll: two ll chunks, so that no
 * sender waits on an acknowledgement from the same call (past that, the call needs every block of both
 * ranks' kernels on an SM at once, which another stream's work could deny it). On 2 H200s, ll / pull /
 * NCCL: 4.4 / 7.4 / 9.2 us at 128 KiB chunks, 6.8 / 9.1 / 13.7 at 512 KiB, 20.5 / 15.7 / 21.0 at 2 MiB; on
 * 4 H200s with 128 KiB ll chunks 8.8 / 10.1 / 14.9 at 256 KiB (512 KiB chunks there are unmeasured). */
export const A2A_LL_AUTO_MAX_BYTES = 512 << 10;
const smallChunk = (s: AllToAllSituation): boolean => s.chunkBytes <= A2A_LL_AUTO_MAX_BYTES;
/** The largest plain x (bytes per rank) auto moves by allToAll's pull; copy_engine (world 2) or NCCL
 * above. Pull copies x into the staging buffer and reads its chunks with SM loads; NCCL streams them. u8
 * graph timings, pull against NCCL through symmkit, µs: 2 H200s 47.1 / 56.6 at 16 MiB, 72.1 / 74.8 at 24,
 * 96.3 / 93.6 at 32, 183.7 / 161.0 at 64; 4 H200s 59.5 / 67.9 at 16, 225.0 / 194.1 at 64 (crossing near
 * 27 MiB). */
export const A2A_PULL_AUTO_MAX_BYTES = 24 << 20;
/** Past these bytes of x per rank auto moves a plain x by allToAll's copy_engine at world 2 (and, there, a
 * plain x the staging buffer cannot hold, past ll's chunks), and a symmetric x past the second. Graph timings on 2 H200s,
 * µs, copy_engine (64 MiB staging) / pull / NCCL: 46.5 / 47.6 / 54.4 at 16 MiB, 132.3 / 185.8 / 158.0 at 64,
 * 437.2 / 712.8 / 531.5 at 256; a symmetric x, read in place, copy_engine / pull: 42.4 / 35.0 at 16 MiB,
 * 113.9 / 134.1 at 64 (crossing near 29 MiB). Unmeasured at larger worlds, where auto keeps pull and NCCL. */
export const A2A_CE_AUTO_MIN_BYTES = 16 << 20;
export const A2A_CE_AUTO_MIN_SYMMETRIC_BYTES = 32 << 20;
/** Whether copy_engine takes the call: world 2, past ll's chunks and the bytes above. */
const copiesByEngine = (s: AllToAllSituation): boolean =>
  s.world === 2 &&
  !smallChunk(s) &&
  (s.plain ? !s.fitsStaging || s.bytes > A2A_CE_AUTO_MIN_BYTES : s.bytes > A2A_CE_AUTO_MIN_SYMMETRIC_BYTES);
/** Whether pull takes the call: past ll's chunks, where the staging buffer holds x and neither copy_engine
 * nor NCCL is faster (on one rank pull is one copy). */
const pulls = (s: AllToAllSituation): boolean =>
  s.fitsStaging &&
  !smallChunk(s) &&
  !copiesByEngine(s) &&
  (s.world === 1 || !(s.plain && s.bytes > A2A_PULL_AUTO_MAX_BYTES));

export const ALL_TO_ALL = {
  ll: {
    summary:
      "one kernel sends each peer its chunk as send/recv's ll message (flagged lines into its inbox) and polls its own inbox for theirs: no barrier, no round trip",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["inbox"],
    kinds: ["all-to-all/ll"],
    programs: () => [P2P_PROGRAM],
    autoWhen: smallChunk,
  },
  pull: {
    summary:
      "one kernel stages x (a symmetric x is read in place) and reads this rank's chunk from every rank, between barriers",
    backends: ["cuda", "cpu"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["all-to-all/pull"],
    programs: () => [ALL_TO_ALL_PROGRAM],
    autoWhen: pulls,
  },
  copy_engine: {
    summary:
      "copy engines move every byte: x staged piece by piece in half the staging buffer while the peers read the other half (a symmetric x read in place), at any size",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["all-to-all/copy_engine", "all-to-all/copy_engine (symmetric x)"],
    programs: () => [P2P_PROGRAM],
    autoWhen: copiesByEngine,
  },
  nccl: {
    summary:
      "one NCCL group of matched sends and receives, after a barrier kernel carrying the call's fingerprint",
    backends: ["cuda"],
    rankOrder: true,
    needs: [],
    kinds: ["all-to-all/nccl"],
    autoWhen: (s: AllToAllSituation) => !smallChunk(s) && !pulls(s) && !copiesByEngine(s),
  },
} as const satisfies OpRecords;

// Auto takes NCCL for counts as an array until copy_engine is measured against it.
export const ALL_TO_ALL_V = {
  copy_engine: {
    summary:
      "counts exchanged and judged on the host; x staged, then one copy-engine copy from each rank's staging buffer",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["staging buffer", "host wait"],
    kinds: ["all-to-all-v/copy_engine"],
  },
  nccl: {
    summary: "counts exchanged through NCCL and judged on the host, then NCCL's matched sends and receives",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["host wait"],
    kinds: ["all-to-all-v/nccl"],
    autoWhen: (s: AllToAllVSituation) => !s.countsOnDevice,
  },
  pull: {
    summary:
      "counts on the device: one kernel judges every rank's published side and pulls this rank's rows (capturable)",
    backends: ["cuda", "cpu"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["all-to-all-v/pull"],
    programs: () => [A2AV_PROGRAM],
    autoWhen: (s: AllToAllVSituation) => s.countsOnDevice,
  },
} as const satisfies OpRecords;

/** What auto may run on GPUs, per op (autoPick takes the first whose rule holds). */
export const GPU_SEND_RECV_AUTO = autoOrder(SEND_RECV, "cuda");
export const GPU_ALL_TO_ALL_AUTO = autoOrder(ALL_TO_ALL, "cuda");
export const GPU_ALL_TO_ALL_V_AUTO = autoOrder(ALL_TO_ALL_V, "cuda");
