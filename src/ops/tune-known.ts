// What a tune table may name, by op (src/ops/tune-table.ts): auto's candidates, which for every op that
// sums over ranks are the algorithms giving the rank-order bits; and the baselines a table is refused for
// naming (NCCL's sums). Both come from the records; `symmkit tune` writes its rules from the same lists.
import { AUTO_ALGORITHMS, BASELINE_ALGORITHMS } from "./coll/registry.js";
import { FUSED_RECORDS } from "./fused/checks.js";
import { AR_NORM } from "./norm/records.js";
import { autoCandidates, type OpRecords } from "./records.js";
import type { TuneKnown } from "./tune-table.js";

const baselines = (r: OpRecords): string[] => Object.keys(r).filter((a) => !r[a]!.rankOrder);

export const TUNE_KNOWN: TuneKnown = {
  ...AUTO_ALGORITHMS,
  "all-gather-matmul": autoCandidates(FUSED_RECORDS["all-gather-matmul"]),
  "matmul-reduce-scatter": autoCandidates(FUSED_RECORDS["matmul-reduce-scatter"]),
  "matmul-all-reduce": autoCandidates(FUSED_RECORDS["matmul-all-reduce"]),
  arNorm: autoCandidates(AR_NORM),
  baselines: {
    ...BASELINE_ALGORITHMS,
    "matmul-reduce-scatter": baselines(FUSED_RECORDS["matmul-reduce-scatter"]),
    "matmul-all-reduce": baselines(FUSED_RECORDS["matmul-all-reduce"]),
    arNorm: baselines(AR_NORM),
  },
};
