// MoE dispatch and combine: their algorithms, one record each (the shape: src/ops/records.ts). Both give
// the host reference's bits (src/ops/moe/route.ts).
import type { OpRecords } from "../records.js";

export const MOE = {
  pull: {
    summary:
      "tokens staged; the host reads every rank's header, judges and routes; the owners pull their experts' rows",
    backends: ["cuda", "cpu"],
    rankOrder: true,
    needs: ["staging buffer", "host wait"],
    kinds: ["moe-dispatch/pull", "moe-combine/pull", "moe-combine/in-place"],
  },
  pull_device: {
    summary:
      "the same with the judging and routing in a kernel: no host wait, capturable (maxRows fixes the rows)",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["moe-dispatch/pull_device"],
  },
} as const satisfies OpRecords;
