// MoE dispatch and combine: their algorithms, one record each (the shape: src/ops/records.ts). Dispatch's
// give the host reference's layout (src/ops/moe/route.ts); its auto routes on the device inside a capture,
// into a given result or with fixed rows (maxRows: no host wait, eager too, where the device's router holds
// the experts), on the host otherwise (its errors then thrown by the call itself). Combine's
// differ in the order they add a token's slots (route.ts combineToken, combineTokenByRank); auto keeps
// slot order.
import { autoOrder, type OpRecords } from "../records.js";
import { MOE_PROGRAM } from "./programs.js";

/** What dispatch's auto knows: whether the call is being captured, whether it writes into a given result
 * (`into`), whether its outputs' rows are fixed (`maxRows`), and whether the device's router holds this
 * many experts (one block's shared memory). */
export interface MoeSituation {
  readonly capturing: boolean;
  readonly into: boolean;
  readonly fixedRows: boolean;
  readonly routeFits: boolean;
}

export const MOE = {
  pull: {
    summary:
      "tokens staged; every rank's header judged alike by the host (on GPUs read with the rows received from a routing kernel's plan: one small wait), the outputs sized to the rows received; the owners pull their experts' rows",
    backends: ["cuda", "cpu"],
    rankOrder: true,
    needs: ["staging buffer", "host wait"],
    kinds: ["moe-dispatch/pull"],
    programs: () => [MOE_PROGRAM],
    autoWhen: (s: MoeSituation) => !s.capturing && !s.into && (!s.fixedRows || !s.routeFits),
  },
  pull_device: {
    summary:
      "the same with the judging and routing in a kernel: no host wait, capturable (maxRows fixes the rows)",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["moe-dispatch/pull_device"],
    programs: () => [MOE_PROGRAM],
    // In a capture or into a result only it can run (it says so when the experts do not fit).
    autoWhen: (s: MoeSituation) => s.capturing || s.into || (s.fixedRows && s.routeFits),
  },
} as const satisfies OpRecords;

/** What dispatch's auto may run on GPUs (autoPick takes the first whose rule holds). */
export const GPU_MOE_AUTO = autoOrder(MOE, "cuda");

/** Combine's: every dispatch's result takes either. */
export const MOE_COMBINE = {
  pull: {
    summary:
      "each rank reads its tokens' rows from their experts' owners (NVLink) and sums them in slot order: a row crosses once per slot",
    backends: ["cuda", "cpu"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["moe-combine/pull", "moe-combine/in-place"],
    programs: () => [MOE_PROGRAM],
    autoWhen: () => true,
  },
  per_rank: {
    summary:
      "each owner sums a token's slots on it (slot order, rounded to bf16); each rank reads one such partial per owner and sums them in rank order: a row crosses once per rank",
    backends: ["cuda", "cpu"],
    rankOrder: false,
    needs: ["staging buffer"],
    kinds: ["moe-combine/per_rank"],
    programs: () => [MOE_PROGRAM],
  },
} as const satisfies OpRecords;
