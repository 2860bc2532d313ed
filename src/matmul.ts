// matmul on either backend's tensors: a GPU Tensor runs symmkit's GEMM or cuBLASLt (src/ops/gemm/matmul.ts), a
// HostTensor the CPU backend's reference GEMM (src/cpu/matmul.ts), after the same checks of shapes,
// dtypes and layouts, so a program written once for both backends (AnyTensor) runs on either.
import { HostTensor, hostOverlaps } from "./cpu/host-tensor.js";
import { hostMatmul } from "./cpu/matmul.js";
import { InvalidArgumentError } from "./errors.js";
import {
  checkOutput,
  matmul as gpuMatmul,
  matmulShapes,
  type BLayout,
  type MatmulOptions,
} from "./ops/gemm/matmul.js";
import { Tensor, type AnyTensor } from "./runtime/tensor.js";

/** The options matmul takes on either backend (GPUs add `impl` and `stream`: MatmulOptions). */
export interface PortableMatmulOptions<T extends AnyTensor = AnyTensor> {
  /** How B is stored: "nk" (default) row-major [n, k]; "kn" row-major [k, n]. */
  readonly layoutB?: BLayout;
  /** bf16 [m, n]; allocated when absent. Must not overlap a or b. */
  readonly out?: T;
  /** fp8 only: per-tensor scales, f32 tensors of one element (default 1). */
  readonly scaleA?: T;
  readonly scaleB?: T;
}

/** a x b^T (B as [n, k], or [k, n] with layoutB "kn"): bf16, or fp8 e4m3 with scales, into a bf16 result. */
export function matmul(a: Tensor, b: Tensor, options?: MatmulOptions): Tensor<"bf16">;
export function matmul(
  a: HostTensor,
  b: HostTensor,
  options?: PortableMatmulOptions<HostTensor>,
): HostTensor<"bf16">;
export function matmul(a: AnyTensor, b: AnyTensor, options?: PortableMatmulOptions): AnyTensor<"bf16">;
export function matmul(
  a: AnyTensor,
  b: AnyTensor,
  options: PortableMatmulOptions & Omit<MatmulOptions, keyof PortableMatmulOptions> = {},
): AnyTensor<"bf16"> {
  const kind = a instanceof Tensor ? Tensor : a instanceof HostTensor ? HostTensor : undefined;
  if (!kind) throw new InvalidArgumentError("matmul: a must be a Tensor (GPU) or a HostTensor (CPU)");
  for (const [name, t] of [
    ["b", b],
    ["out", options.out],
    ["scaleA", options.scaleA],
    ["scaleB", options.scaleB],
  ] as const) {
    if (t !== undefined && !(t instanceof kind))
      throw new InvalidArgumentError(
        `matmul: a is a ${kind.name} but ${name} is not: every operand on one backend (group.tensors makes them)`,
      );
  }
  // Every operand checked above to be of a's kind.
  if (kind === Tensor) return gpuMatmul(a as Tensor, b as Tensor, options as MatmulOptions) as Tensor<"bf16">;
  const o = options as PortableMatmulOptions<HostTensor>;
  const [h, hb] = [a as HostTensor, b as HostTensor];
  const p = matmulShapes("matmul", h, hb, o);
  if (o.out) {
    checkOutput("matmul", "out", o.out, p.m, p.n, "bf16");
    if (hostOverlaps(o.out, h) || hostOverlaps(o.out, hb))
      throw new InvalidArgumentError("matmul: out overlaps an input");
  }
  return hostMatmul(p, h, hb, o.out ?? HostTensor.empty([p.m, p.n], "bf16"), o) as HostTensor<"bf16">;
}
