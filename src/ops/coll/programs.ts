// The collective kernels symmkit ships (device/include/symmkit/coll/: collectives.cuh pulls from peers'
// buffers between barriers, mailbox.cuh pushes into peers' mailboxes with no barrier), named by
// collective and construction: one program per (kernel, dtype, op), instantiated for world sizes 2..8
// (the registry, ./registry.ts, lists which programs each algorithm uses).
// A rank compiles only the programs it uses; CI compiles all of them (src/catalog.ts). The group barrier
// kernels the collectives enqueue between copy-engine steps (sync/barrier_kernels.cuh) are here too.
import {
  BARRIER_THREADS,
  CALL_TAG_PARAM,
  SYMM_VIEW_PARAM,
  WAIT_ENV_LAYOUT,
} from "../../distributed/device-layouts.js";
import { DTYPES, type DType } from "../../runtime/dtype.js";
import type { ParamType } from "../../runtime/kernel.js";
import type { ProgramSpec } from "../../runtime/module.js";
import type { ReduceOp } from "../validate.js";

export type ReducingKernel =
  | "one_shot_all_reduce"
  | "two_shot_all_reduce"
  | "reduce_scatter_pull"
  | "lamport_all_reduce"
  | "lamport_two_shot_all_reduce"
  | "lamport_reduce_scatter"
  | "copy_engine_reduce_scatter";
export const WORLD_SIZES = [2, 3, 4, 5, 6, 7, 8] as const;

const OP_TYPES: Record<ReduceOp, string> = {
  sum: "symmkit::OpSum",
  max: "symmkit::OpMax",
  min: "symmkit::OpMin",
};
const SOURCE = '#include "symmkit/coll/mailbox.cuh"\n';

export function reducingExpr(kernel: ReducingKernel, dtype: DType, op: ReduceOp, world: number): string {
  return `symmkit::${kernel}<${DTYPES[dtype].cType}, ${OP_TYPES[op]}, ${world}>`;
}

/** The kernels that move bytes without reducing: all-gather's, and all-to-all's pull. */
export type AllGatherKernel = "all_gather_pull" | "ll_all_gather" | "all_to_all_pull";

export function allGatherExpr(kernel: AllGatherKernel, world: number): string {
  return `symmkit::${kernel}<${world}>`;
}

export function reducingProgram(kernel: ReducingKernel, dtype: DType, op: ReduceOp): ProgramSpec {
  return {
    name: `symmkit/coll/${kernel}/${dtype}/${op}`,
    source: SOURCE,
    nameExpressions: WORLD_SIZES.map((w) => reducingExpr(kernel, dtype, op, w)),
  };
}

export function allGatherProgram(kernel: AllGatherKernel): ProgramSpec {
  return {
    name: `symmkit/coll/${kernel}`,
    source: SOURCE,
    nameExpressions: WORLD_SIZES.map((w) => allGatherExpr(kernel, w)),
  };
}

/** allToAll's pull kernel (not a registry record: all-to-all has no tune table yet). */
export const ALL_TO_ALL_PROGRAM: ProgramSpec = allGatherProgram("all_to_all_pull");

/** group_barrier and barrier_hold (sync/barrier_kernels.cuh). */
export const BARRIER_KERNELS: ProgramSpec = {
  name: "symmkit/sync/barrier_kernels",
  source: '#include "symmkit/sync/barrier_kernels.cuh"\n',
  nameExpressions: ["symmkit::group_barrier", "symmkit::barrier_hold", "symmkit::check_fingerprints"],
};
/** The barrier kernels' block: the threads a block needs to meet its peers (BARRIER_THREADS), in warps. */
export const BARRIER_KERNEL_THREADS = Math.ceil(BARRIER_THREADS / 32) * 32;
/** group_barrier: the SymmView, the call's CallTag, the barrier's step within the call. */
export const GROUP_BARRIER_PARAMS = [SYMM_VIEW_PARAM, CALL_TAG_PARAM, "u32"] as const;
export const BARRIER_HOLD_PARAMS = [SYMM_VIEW_PARAM, "u64", CALL_TAG_PARAM] as const;
/** check_fingerprints: the gathered tags, their count (the group's ranks), this rank's, then WaitEnv by
 * value (WAIT_ENV_LAYOUT). */
export const CHECK_FINGERPRINTS_PARAMS = [
  "ptr",
  "u32",
  CALL_TAG_PARAM,
  { bytes: WAIT_ENV_LAYOUT.bytes, align: 8 },
] as const;

/** Parameters of the collective kernels: the SymmView blob, the plain input to copy in (0 when the input
 * is the symmetric buffer itself), the output, the element count, the call's CallTag. */
export const COLL_PARAMS = [SYMM_VIEW_PARAM, "ptr", "ptr", "u64", CALL_TAG_PARAM] as const;
/** two_shot_all_reduce also takes the SymmView of its scratch buffers, after the input's. */
export const TWO_SHOT_PARAMS = [
  SYMM_VIEW_PARAM,
  SYMM_VIEW_PARAM,
  "ptr",
  "ptr",
  "u64",
  CALL_TAG_PARAM,
] as const;
/** Parameters of the mailbox kernels (coll/mailbox.cuh): the mailbox's SymmView, the input, the output,
 * the element count, the MailboxState, the bytes per slot, the CallTag. */
export const MAILBOX_PARAMS = [SYMM_VIEW_PARAM, "ptr", "ptr", "u64", "ptr", "u64", CALL_TAG_PARAM] as const;
/** The reduce stage of the copy-engine reduce-scatter: the staging slots, this rank's own input chunk,
 * the output, the element count, the rank. */
export const COPY_ENGINE_REDUCE_PARAMS = ["ptr", "ptr", "ptr", "u64", "u32"] as const;

/** Each reducing kernel's parameters. */
export const REDUCING_PARAMS = {
  one_shot_all_reduce: COLL_PARAMS,
  two_shot_all_reduce: TWO_SHOT_PARAMS,
  reduce_scatter_pull: COLL_PARAMS,
  lamport_all_reduce: MAILBOX_PARAMS,
  lamport_two_shot_all_reduce: MAILBOX_PARAMS,
  lamport_reduce_scatter: MAILBOX_PARAMS,
  copy_engine_reduce_scatter: COPY_ENGINE_REDUCE_PARAMS,
} as const satisfies Record<ReducingKernel, readonly ParamType[]>;
export type ReducingParams = typeof REDUCING_PARAMS;

/** Each all-gather kernel's parameters. */
export const ALL_GATHER_PARAMS = {
  all_gather_pull: COLL_PARAMS,
  ll_all_gather: MAILBOX_PARAMS,
  /** The count is the chunk's bytes (what each rank sends each rank). */
  all_to_all_pull: COLL_PARAMS,
} as const satisfies Record<AllGatherKernel, readonly ParamType[]>;
export type AllGatherParams = typeof ALL_GATHER_PARAMS;
