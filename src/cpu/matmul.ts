// The reference GEMM of the CPU backend: D[m, n] = scaleA * scaleB * (A[m, k] x B), bf16 or fp8 e4m3
// operands decoded exactly to float32, products accumulated in float32 in k order, scaled once and rounded
// once to bf16, as symmkit's GPU GEMM does (its accumulation order inside a tile differs, so results are
// bitwise equal where every partial sum is exact, e.g. small integers, and within rounding otherwise).
import { decodeToF32, f32ToBf16Bits } from "../runtime/dtype.js";
import type { MatmulProblem } from "../ops/gemm/matmul.js";
import type { HostTensor } from "./host-tensor.js";

/** Writes a x b into `out` (bf16 [m, n]); `p` is the checked problem (matmulShapes). */
export function hostMatmul(
  p: MatmulProblem,
  a: HostTensor,
  b: HostTensor,
  out: HostTensor,
  scales: { readonly scaleA?: HostTensor | undefined; readonly scaleB?: HostTensor | undefined } = {},
): HostTensor {
  const { m, n, k } = p;
  const av = decodeToF32(a.dtype, a.raw);
  const bv = decodeToF32(b.dtype, b.raw);
  // B as [n, k] rows, so the inner loop walks both operands contiguously.
  const bt = p.layoutB === "nk" ? bv : transpose(bv, k, n);
  const scale = Math.fround(
    (scales.scaleA ? scales.scaleA.toHost({ decode: true })[0]! : 1) *
      (scales.scaleB ? scales.scaleB.toHost({ decode: true })[0]! : 1),
  );
  const d = out.raw as Uint16Array;
  for (let i = 0; i < m; i++) {
    const ar = i * k;
    for (let j = 0; j < n; j++) {
      const br = j * k;
      let acc = 0;
      for (let t = 0; t < k; t++) acc = Math.fround(acc + Math.fround(av[ar + t]! * bt[br + t]!));
      d[i * n + j] = f32ToBf16Bits(Math.fround(acc * scale));
    }
  }
  return out;
}

function transpose(x: Float32Array, rows: number, cols: number): Float32Array {
  const t = new Float32Array(x.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) t[c * rows + r] = x[r * cols + c]!;
  return t;
}
