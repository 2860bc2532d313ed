// rmsNorm on either backend's tensors: the norm of allReduceRmsNorm on one device, without communication
// (bias and residual added first, the pre-norm sum written to residualOut). A GPU tensor runs the norm
// kernel (src/ops/norm/rms-norm-op.ts), a host tensor the host reference (src/ops/norm/rms-norm.ts); both give the
// fused op's bits.
import { HostTensor, hostOverlaps, sameHostSpan } from "./cpu/host-tensor.js";
import { checkAllReduceRmsNorm, checkNormAliasing, type AllReduceRmsNormOptions } from "./ops/norm/checks.js";
import { overlaps, sameSpan } from "./ops/gemm/matmul.js";
import { rmsNormRows } from "./ops/norm/rms-norm.js";
import { launchNorm, normKernel } from "./ops/norm/rms-norm-op.js";
import { defaultStream, type Stream } from "./runtime/stream.js";
import { Tensor } from "./runtime/tensor.js";

/** y = RMSNorm((x + bias) + residual) x weight over the last dimension (see allReduceRmsNorm). */
export function rmsNorm<T extends Tensor | HostTensor>(
  x: T,
  options: AllReduceRmsNormOptions<T> & { stream?: Stream },
): { output: T; residualOut: T | undefined } {
  const what = "rmsNorm";
  const p = checkAllReduceRmsNorm(what, x, options);
  if (x instanceof Tensor) {
    const o = options as AllReduceRmsNormOptions<Tensor> & { stream?: Stream };
    const output = o.output ?? Tensor.empty(x.shape, x.dtype, { device: x.device });
    checkNormAliasing(what, x, o, output, overlaps, sameSpan);
    launchNorm(
      normKernel(x.device, x.dtype, p.hidden),
      x,
      o,
      output,
      p.rows,
      p.hidden,
      p.eps,
      p.outScaleInv,
      o.stream ?? defaultStream(x.device),
    );
    return { output: output as T, residualOut: options.residualOut };
  }
  const h: HostTensor = x;
  const o = options as AllReduceRmsNormOptions<HostTensor>;
  const output = o.output ?? HostTensor.empty(h.shape, h.dtype);
  checkNormAliasing(what, h, o, output, hostOverlaps, sameHostSpan);
  const inputs = { weight: o.weight.raw, bias: o.bias?.raw, residual: o.residual?.raw };
  rmsNormRows(p, h.raw, inputs, output.raw, o.residualOut?.raw);
  return { output: output as T, residualOut: options.residualOut };
}
