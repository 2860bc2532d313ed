// send/recv, allToAll and allToAllV: their algorithms, one record each (the shape: src/ops/records.ts).
// They move bits, so every algorithm gives the reference's.
import type { OpRecords } from "../records.js";

export const SEND_RECV = {
  put: {
    summary:
      "the sender's blocks store the message into the receiver's inbox in chunks, signalling each stripe",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["inbox"],
    kinds: ["send-recv"],
  },
  copy_engine: {
    summary:
      "the sender stages chunks in its staging buffer, the receiver's copy engine reads them (no SMs move data)",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["send-recv/copy_engine"],
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
  },
} as const satisfies OpRecords;

export const ALL_TO_ALL = {
  pull: {
    summary:
      "one kernel stages x (a symmetric x is read in place) and reads this rank's chunk from every rank, between barriers",
    backends: ["cuda", "cpu"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["all-to-all/pull"],
  },
  nccl: {
    summary:
      "one NCCL group of matched sends and receives, after a barrier kernel carrying the call's fingerprint",
    backends: ["cuda"],
    rankOrder: true,
    needs: [],
    kinds: ["all-to-all/nccl"],
  },
} as const satisfies OpRecords;

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
  },
  pull: {
    summary:
      "counts on the device: one kernel judges every rank's published side and pulls this rank's rows (capturable)",
    backends: ["cuda", "cpu"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["all-to-all-v/pull"],
  },
} as const satisfies OpRecords;
