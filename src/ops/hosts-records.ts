// The routes of the collectives across hosts (HostsCollectives, ./hosts-collectives.ts), one record each.
import { algorithmList, type OpRecords } from "./records.js";

/** The routes of all-reduce, all-gather and reduce-scatter across hosts, one record each (the shape:
 * src/ops/records.ts). Neither gives the rank-order bits: NCCL sums across hosts in its own order. */
export const HOSTS = {
  hierarchical: {
    summary:
      "symmkit's collective within each host, NCCL across hosts on the rails (one communicator per position within the host)",
    backends: ["hosts"],
    rankOrder: false,
    needs: [],
    kinds: ["all-reduce/hierarchical", "all-gather/hierarchical", "reduce-scatter/hierarchical"],
  },
  nccl: {
    summary: "NCCL's collective over the whole group",
    backends: ["hosts"],
    rankOrder: false,
    needs: [],
    kinds: ["all-reduce/nccl", "all-gather/nccl", "reduce-scatter/nccl"],
  },
} as const satisfies OpRecords;

export const HOSTS_ALGORITHMS = algorithmList(HOSTS, "hosts");
export type HostsAlgorithm = (typeof HOSTS_ALGORITHMS)[number];
