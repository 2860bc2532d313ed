// The kernels of allReduceRmsNorm (device/include/symmkit/fused/ar_rms_norm.cuh): one program per
// (kernel, dtype), the communicating ones instantiated for world sizes 2..8, and the norm alone.
import { CALL_TAG_PARAM, SYMM_VIEW_PARAM } from "../../distributed/device-layouts.js";
import { DTYPES, type DType } from "../../runtime/dtype.js";
import type { ParamType } from "../../runtime/kernel.js";
import type { ProgramSpec } from "../../runtime/module.js";
import { WORLD_SIZES } from "../coll/programs.js";

/** The dtypes the kernels are made for: those of x (and weight, bias, residual), accumulated and
 * normalised in f32. */
export const NORM_DTYPES: readonly DType[] = ["bf16", "f16"];

export type ArNormKernel =
  | "lamport_ar_rms_norm"
  | "lamport_two_shot_ar_rms_norm"
  | "pull_ar_rms_norm"
  | "pull_two_shot_ar_rms_norm"
  | "rms_norm_rows";

const SOURCE = '#include "symmkit/fused/ar_rms_norm.cuh"\n';

/** Every kernel's trailing parameters: bias, residual, residual_out, weight, out, rows, hidden, eps,
 * out_scale_inv. */
const NORM_PARAMS = ["ptr", "ptr", "ptr", "ptr", "ptr", "u64", "u32", "f32", "f32"] as const;

export const AR_NORM_PARAMS = {
  /** Mailbox SymmView, x, MailboxState, slot bytes, CallTag. */
  lamport_ar_rms_norm: [SYMM_VIEW_PARAM, "ptr", "ptr", "u64", CALL_TAG_PARAM, ...NORM_PARAMS],
  lamport_two_shot_ar_rms_norm: [SYMM_VIEW_PARAM, "ptr", "ptr", "u64", CALL_TAG_PARAM, ...NORM_PARAMS],
  /** The input's SymmView, the plain x to copy in (0: read in place), CallTag. */
  pull_ar_rms_norm: [SYMM_VIEW_PARAM, "ptr", CALL_TAG_PARAM, ...NORM_PARAMS],
  /** The input's SymmView, the scratch's, the plain x (or 0), CallTag. */
  pull_two_shot_ar_rms_norm: [SYMM_VIEW_PARAM, SYMM_VIEW_PARAM, "ptr", CALL_TAG_PARAM, ...NORM_PARAMS],
  /** The all-reduced sum. */
  rms_norm_rows: ["ptr", ...NORM_PARAMS],
} as const satisfies Record<ArNormKernel, readonly ParamType[]>;
export type ArNormParams = typeof AR_NORM_PARAMS;

/** The slots template parameter the kernels take for a hidden size (ar_rms_norm.cuh: groups of 8
 * elements a thread holds per row); it changes no arithmetic, only registers. */
export const NORM_SLOTS = [2, 4] as const;
export type NormSlots = (typeof NORM_SLOTS)[number];
export const normSlots = (hidden: number): NormSlots => (hidden <= 8192 ? 2 : 4);

export function arNormExpr(kernel: ArNormKernel, dtype: DType, world: number, slots: NormSlots): string {
  const t = DTYPES[dtype].cType;
  return kernel === "rms_norm_rows"
    ? `symmkit::${kernel}<${t}, ${slots}>`
    : `symmkit::${kernel}<${t}, ${world}, ${slots}>`;
}

export function arNormProgram(kernel: ArNormKernel, dtype: DType): ProgramSpec {
  const worlds = kernel === "rms_norm_rows" ? [0] : WORLD_SIZES;
  return {
    name: `symmkit/fused/${kernel}/${dtype}`,
    source: SOURCE,
    nameExpressions: worlds.flatMap((w) => NORM_SLOTS.map((slots) => arNormExpr(kernel, dtype, w, slots))),
  };
}

/** `kernel`'s programs, one per dtype of NORM_DTYPES. */
export function arNormPrograms(kernel: ArNormKernel): ProgramSpec[] {
  return NORM_DTYPES.map((d) => arNormProgram(kernel, d));
}
