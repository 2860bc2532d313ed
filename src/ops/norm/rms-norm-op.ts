// The norm kernel of allReduceRmsNorm on its own (rms_norm_rows): what the sequential and nccl
// algorithms run after their all-reduce, and what rmsNorm (src/norm.ts) runs on a GPU tensor.
import type { Device } from "../../runtime/device.js";
import type { DType } from "../../runtime/dtype.js";
import type { Kernel } from "../../runtime/kernel.js";
import { sharedModule } from "../../runtime/module.js";
import type { Stream } from "../../runtime/stream.js";
import type { Tensor } from "../../runtime/tensor.js";
import type { AllReduceRmsNormOptions } from "./checks.js";
import { AR_NORM_PARAMS, arNormExpr, arNormProgram, normSlots, type NormSlots } from "./programs.js";
import { Memo3 } from "../memo.js";

const BLOCK = 512;
export type NormKernel = Kernel<typeof AR_NORM_PARAMS.rms_norm_rows>;
/** rms_norm_rows by device, dtype and slots, resolved once. */
const kernels = new Memo3<Device, DType, NormSlots, NormKernel>((device, dtype, slots) =>
  sharedModule(arNormProgram("rms_norm_rows", dtype), device).kernel(
    arNormExpr("rms_norm_rows", dtype, 1, slots),
    AR_NORM_PARAMS.rms_norm_rows,
  ),
);

/** rms_norm_rows for `dtype` on `device`, loaded on first use (which waits for the GPU: resolve it before
 * enqueuing anything that may wait for a peer). */
export function normKernel(device: Device, dtype: DType, hidden: number): NormKernel {
  return kernels.get(device, dtype, normSlots(hidden));
}

/** The norm kernel `k` (normKernel) on checked arguments (src/ops/norm/checks.ts): `sum` holds the
 * rows to normalise. */
export function launchNorm(
  k: NormKernel,
  sum: Tensor,
  o: AllReduceRmsNormOptions<Tensor>,
  output: Tensor,
  rows: number,
  hidden: number,
  eps: number,
  outScaleInv: number,
  stream: Stream,
): void {
  k.launch(
    { grid: Math.min(rows, 4 * sum.device.props.smCount), block: BLOCK, stream },
    sum,
    o.bias?.ptr ?? 0n,
    o.residual?.ptr ?? 0n,
    o.residualOut?.ptr ?? 0n,
    o.weight,
    output,
    rows,
    hidden,
    eps,
    outScaleInv,
  );
}
