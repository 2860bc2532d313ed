// The collective kernels symmkit ships (device/include/symmkit/coll/: collectives.cuh pulls from peers'
// buffers between barriers, mailbox.cuh pushes into peers' mailboxes with no barrier), named by
// collective and construction: one program per (kernel, dtype, op), instantiated for world sizes 2..8.
// A rank compiles only the programs it uses; CI compiles all of them (src/catalog.ts).
import { DTYPES, type DType } from "../runtime/dtype.js";
import type { ProgramSpec } from "../runtime/module.js";
import { REDUCE_DTYPES, REDUCE_OPS, type ReduceOp } from "./validate.js";

export type ReducingKernel =
  | "one_shot_all_reduce"
  | "two_shot_all_reduce"
  | "reduce_scatter_pull"
  | "lamport_all_reduce"
  | "lamport_two_shot_all_reduce"
  | "lamport_reduce_scatter"
  | "copy_engine_reduce_scatter";
export const REDUCING_KERNELS: readonly ReducingKernel[] = [
  "one_shot_all_reduce",
  "two_shot_all_reduce",
  "reduce_scatter_pull",
  "lamport_all_reduce",
  "lamport_two_shot_all_reduce",
  "lamport_reduce_scatter",
  "copy_engine_reduce_scatter",
];
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

export type AllGatherKernel = "all_gather_pull" | "ll_all_gather";

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

/** Every (kernel, dtype, op) the package ships. */
export const COLL_PROGRAMS: readonly ProgramSpec[] = [
  ...REDUCING_KERNELS.flatMap((k) =>
    REDUCE_DTYPES.flatMap((d) => REDUCE_OPS.map((op) => reducingProgram(k, d, op))),
  ),
  allGatherProgram("all_gather_pull"),
  allGatherProgram("ll_all_gather"),
];

/** Parameters of the collective kernels: the SymmView blob, the plain input to copy in (0 when the input
 * is the symmetric buffer itself), the output, the element count, the phase. */
export const COLL_PARAMS = [{ bytes: 160, align: 8 }, "ptr", "ptr", "u64", "u32"] as const;
/** two_shot_all_reduce also takes the SymmView of its scratch buffers, after the input's. */
export const TWO_SHOT_PARAMS = [
  { bytes: 160, align: 8 },
  { bytes: 160, align: 8 },
  "ptr",
  "ptr",
  "u64",
  "u32",
] as const;
/** Parameters of the mailbox kernels (coll/mailbox.cuh): the mailbox's SymmView, the input, the output,
 * the element count, the MailboxState, the bytes per slot, the phase. */
export const MAILBOX_PARAMS = [{ bytes: 160, align: 8 }, "ptr", "ptr", "u64", "ptr", "u64", "u32"] as const;
/** MailboxState's size (coll/mailbox.cuh). */
export const MAILBOX_STATE_BYTES = 48;
/** The reduce stage of the copy-engine reduce-scatter: the staging slots, this rank's own input chunk,
 * the output, the element count, the rank. */
export const COPY_ENGINE_REDUCE_PARAMS = ["ptr", "ptr", "ptr", "u64", "u32"] as const;
