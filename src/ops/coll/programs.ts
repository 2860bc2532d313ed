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

export const WORLD_SIZES = [2, 3, 4, 5, 6, 7, 8] as const;

/** A collective kernel (coll/*.cuh, all reached from mailbox.cuh): its name and the parameters its launches
 * pass. A reducing kernel is a template over <element type, op, world>, compiled as one program per
 * (dtype, op); a moving one (all-gather's, all-to-all's) a template over <world>, one program. Each is
 * declared beside the records that launch it (./registry.ts, exchange/programs.ts), so that a new kernel
 * touches nothing here. */
export interface CollKernel<P extends readonly ParamType[] = readonly ParamType[]> {
  readonly name: string;
  readonly reduces: boolean;
  readonly params: P;
}

const collKernel =
  (reduces: boolean) =>
  <const P extends readonly ParamType[]>(name: string, params: P): CollKernel<P> => ({
    name,
    reduces,
    params,
  });
export const reducingKernel = collKernel(true);
export const movingKernel = collKernel(false);

const OP_TYPES: Record<ReduceOp, string> = {
  sum: "symmkit::OpSum",
  max: "symmkit::OpMax",
  min: "symmkit::OpMin",
};
const SOURCE = '#include "symmkit/coll/mailbox.cuh"\n';

export function reducingExpr(kernel: CollKernel, dtype: DType, op: ReduceOp, world: number): string {
  return `symmkit::${kernel.name}<${DTYPES[dtype].cType}, ${OP_TYPES[op]}, ${world}>`;
}

export function movingExpr(kernel: CollKernel, world: number): string {
  return `symmkit::${kernel.name}<${world}>`;
}

export function reducingProgram(kernel: CollKernel, dtype: DType, op: ReduceOp): ProgramSpec {
  return {
    name: `symmkit/coll/${kernel.name}/${dtype}/${op}`,
    source: SOURCE,
    nameExpressions: WORLD_SIZES.map((w) => reducingExpr(kernel, dtype, op, w)),
  };
}

export function movingProgram(kernel: CollKernel): ProgramSpec {
  return {
    name: `symmkit/coll/${kernel.name}`,
    source: SOURCE,
    nameExpressions: WORLD_SIZES.map((w) => movingExpr(kernel, w)),
  };
}

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
