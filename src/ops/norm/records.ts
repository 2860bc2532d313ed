// allReduceRmsNorm's algorithms, one record each (the shape: src/ops/records.ts), with what this op adds:
// its kernel, auto's built-in rule and the room it needs. Every algorithm but nccl gives the rank-order
// reference's bits (the norm's order is fixed: device/include/symmkit/fused/ar_rms_norm.cuh); nccl sums
// in NCCL's order, the same on 2 ranks, within rounding beyond.
import type { OpAlgorithm } from "../records.js";
import { arNormPrograms, type ArNormKernel } from "./programs.js";

/** What an algorithm needs for `bytes` of x per rank in `rows` rows at `world` ranks: bytes pushed to
 * each peer's mailbox, and of the staging buffer (a symmetric x read in place needs none). Both fields
 * always, so that auto's checks on the call path see one shape. */
export interface NormRoom {
  readonly mailbox: number;
  readonly staging: number;
}

export interface ArNormRecord extends OpAlgorithm {
  /** Its kernel (none: the group's all-reduce, then the norm kernel). */
  readonly kernel?: ArNormKernel;
  /** auto's built-in rule: the first record (in record order) with a bound at least x's bytes whose room
   * this group has. */
  readonly autoMaxBytes?: number;
  readonly room?: (bytes: number, rows: number, world: number, inPlace: boolean) => NormRoom;
}

/** auto's built-in rule (2 H200s, bench/results/h200x2/ar-norm*.json): lamport up to this many bytes of
 * x per rank, lamport_two_shot up to AR_NORM_LAMPORT_TWO_SHOT_MAX_BYTES, then one_shot. */
export const AR_NORM_LAMPORT_MAX_BYTES = 1024 * 1024;
export const AR_NORM_LAMPORT_TWO_SHOT_MAX_BYTES = 4 * 1024 * 1024;

export const AR_NORM = {
  lamport: {
    summary:
      "every rank pushes x to every peer's Lamport mailbox and normalises every row itself (one kernel, no barrier)",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["mailbox"],
    kinds: ["all-reduce-rms-norm/lamport"],
    kernel: "lamport_ar_rms_norm",
    programs: () => arNormPrograms("lamport_ar_rms_norm"),
    autoMaxBytes: AR_NORM_LAMPORT_MAX_BYTES,
    room: (bytes) => ({ mailbox: bytes, staging: 0 }),
  },
  lamport_two_shot: {
    summary:
      "each row goes to its owner's mailbox, which reduces, normalises and pushes the pre-norm sum back",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["mailbox"],
    kinds: ["all-reduce-rms-norm/lamport_two_shot"],
    kernel: "lamport_two_shot_ar_rms_norm",
    programs: () => arNormPrograms("lamport_two_shot_ar_rms_norm"),
    autoMaxBytes: AR_NORM_LAMPORT_TWO_SHOT_MAX_BYTES,
    room: (bytes, rows, world) => ({ mailbox: 2 * Math.ceil(rows / world) * (bytes / rows), staging: 0 }),
  },
  one_shot: {
    summary:
      "every rank pulls every peer's x from the staging buffers between barriers and normalises every row",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["all-reduce-rms-norm/one_shot"],
    kernel: "pull_ar_rms_norm",
    programs: () => arNormPrograms("pull_ar_rms_norm"),
    autoMaxBytes: Infinity,
    room: (bytes, _rows, _world, inPlace) => ({ mailbox: 0, staging: inPlace ? 0 : bytes }),
  },
  two_shot: {
    summary: "each rank reduces and normalises its rows from the staging buffers, then gathers the others'",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["all-reduce-rms-norm/two_shot"],
    kernel: "pull_two_shot_ar_rms_norm",
    programs: () => arNormPrograms("pull_two_shot_ar_rms_norm"),
    room: (bytes) => ({ mailbox: 0, staging: bytes }),
  },
  sequential: {
    summary: "symmkit's all-reduce (auto, rank order at every size), then the norm kernel",
    backends: ["cuda", "cpu"],
    rankOrder: true,
    needs: [],
    kinds: ["all-reduce-rms-norm/sequential"],
    programs: () => arNormPrograms("rms_norm_rows"),
  },
  nccl: {
    summary: "NCCL's all-reduce, then the same norm kernel (NCCL's order of summation)",
    backends: ["cuda"],
    rankOrder: false,
    needs: [],
    kinds: ["all-reduce-rms-norm/nccl"],
    programs: () => arNormPrograms("rms_norm_rows"),
  },
} as const satisfies Readonly<Record<string, ArNormRecord>>;
