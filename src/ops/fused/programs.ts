// The kernels the fused matmuls add besides the GEMM variants (../gemm/programs.ts): the SM producer of
// all-gather + GEMM (device/include/symmkit/fused/all_gather_pull.cuh).
import { CALL_TAG_PARAM, SYMM_VIEW_PARAM } from "../../distributed/device-layouts.js";
import type { ProgramSpec } from "../../runtime/module.js";

export const ALL_GATHER_PULL_EXPR = "symmkit::all_gather_pull_flagged";

export const FUSED_PROGRAMS: readonly ProgramSpec[] = [
  {
    name: "symmkit/fused/all_gather_pull",
    source: '#include "symmkit/fused/all_gather_pull.cuh"\n',
    nameExpressions: [ALL_GATHER_PULL_EXPR],
  },
];

/** all_gather_pull_flagged(view, gathered, shard_bytes, flags, tag). */
export const ALL_GATHER_PULL_PARAMS = [SYMM_VIEW_PARAM, "ptr", "u64", "ptr", CALL_TAG_PARAM] as const;
