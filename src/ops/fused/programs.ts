// The kernels the fused matmuls add besides the GEMM variants (../gemm/programs.ts): the SM producer of
// all-gather + GEMM (device/include/symmkit/fused/all_gather_pull.cuh).
import {
  CALL_TAG_PARAM,
  PAD_BYTES_PER_BLOCK_AND_RANK,
  SYMM_VIEW_PARAM,
} from "../../distributed/device-layouts.js";
import type { ProgramSpec } from "../../runtime/module.js";

/** Bytes at the start of the staging buffer's signal pad kept for barrier slots: 256 blocks at world 8
 * (PAD_BYTES_PER_BLOCK_AND_RANK per block and rank; kernels run at most one block per SM). */
export const SCATTER_FLAGS_OFFSET_BYTES = 256 * 8 * PAD_BYTES_PER_BLOCK_AND_RANK;
/** The staging buffer's pad: barrier slots, then GEMM + reduce-scatter's tile flags (256 Ki of them). */
export const STAGING_PAD_BYTES = SCATTER_FLAGS_OFFSET_BYTES + 1024 * 1024;

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
