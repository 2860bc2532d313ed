// The fused matmuls and all-reduce + RMSNorm on the CPU backend, the references: the GPU backend fuses
// the collective with the GEMM or the norm; here they run one after the other, on the reference GEMM
// (src/cpu/matmul.ts) and the host norm (src/ops/norm/rms-norm.ts), the collective fingerprinted as the
// fused op with its shape.
import { checkAlgorithm, checkCapacity, checkTensorArg } from "../ops/validate.js";
import {
  checkAllGatherMatmul,
  checkMatmulAllReduce,
  checkMatmulReduceScatter,
  CPU_FUSED_MATMUL_ALGORITHMS,
  type AllGatherMatmulOptions,
  type CpuFusedMatmulAlgorithm,
  type FusedMatmulOptions,
  type MatmulAllReduceOptions,
} from "../ops/fused/checks.js";
import {
  checkAllReduceRmsNorm,
  checkNormAliasing,
  CPU_AR_NORM_ALGORITHMS,
  normOperandsDigest,
  type AllReduceRmsNormOptions,
  type CpuArNormAlgorithm,
} from "../ops/norm/checks.js";
import { rmsNormRows } from "../ops/norm/rms-norm.js";
import { InvalidArgumentError } from "../errors.js";
import { allGather, reduceScatter, runAllReduce } from "./coll.js";
import type { CpuGroup } from "./group.js";
import { HostTensor, hostOverlaps, sameHostSpan } from "./host-tensor.js";
import { hostMatmul } from "./matmul.js";

export function allReduceRmsNorm(
  g: CpuGroup,
  x: HostTensor,
  options: AllReduceRmsNormOptions<HostTensor> & { algorithm?: CpuArNormAlgorithm },
): { output: HostTensor; residualOut: HostTensor | undefined } {
  const what = "allReduceRmsNorm";
  const p = checkAllReduceRmsNorm(what, x, options);
  checkAlgorithm(what, options.algorithm ?? "auto", CPU_AR_NORM_ALGORITHMS);
  const output = options.output ?? HostTensor.empty(x.shape, x.dtype);
  checkNormAliasing(what, x, options, output, hostOverlaps, sameHostSpan);
  const sum = HostTensor.empty(x.shape, x.dtype);
  const o = options;
  // The digest of weight and bias joins the fingerprint: they must be the same on every rank.
  const digest = normOperandsDigest(o.weight.raw, o.bias?.raw);
  runAllReduce(g, x, sum, "sum", "auto", {
    kind: "all-reduce-rms-norm/sequential",
    dims: [p.hidden, digest],
  });
  rmsNormRows(
    p,
    sum.raw,
    { weight: o.weight.raw, bias: o.bias?.raw, residual: o.residual?.raw },
    output.raw,
    o.residualOut?.raw,
  );
  return { output, residualOut: o.residualOut };
}

/** The checks every fused matmul starts with (A is named as the call names it). */
function checkOperands(what: string, aName: string, a: HostTensor, b: HostTensor, algorithm?: string): void {
  checkTensorArg(what, aName, a);
  checkTensorArg(what, "b", b);
  checkAlgorithm(what, algorithm ?? "auto", CPU_FUSED_MATMUL_ALGORITHMS);
}

export function allGatherMatmul(
  g: CpuGroup,
  aShard: HostTensor,
  b: HostTensor,
  options: AllGatherMatmulOptions<HostTensor> & { algorithm?: CpuFusedMatmulAlgorithm },
): { out: HostTensor; gathered: HostTensor } {
  const what = "allGatherMatmul";
  checkOperands(what, "aShard", aShard, b, options.algorithm);
  const p = checkAllGatherMatmul(what, g.sync.world, aShard, b, options);
  const gathered = options.gathered ?? HostTensor.empty([p.m, p.k], p.elem);
  const out = options.out ?? HostTensor.empty([p.m, p.n], "bf16");
  // The GPUs' refusals (they gather into `gathered` while the GEMM reads it, and write out as it runs).
  for (const [name, t] of [
    ["aShard", aShard],
    ["b", b],
  ] as const)
    if (hostOverlaps(gathered, t)) throw new InvalidArgumentError(`${what}: gathered overlaps ${name}`);
  if (hostOverlaps(out, aShard)) throw new InvalidArgumentError(`${what}: out overlaps aShard`);
  allGather(g, aShard, gathered, "auto", { kind: "all-gather-matmul/sequential", dims: [p.k] });
  hostMatmul(p, gathered, b, out, options);
  return { out, gathered };
}

export function matmulReduceScatter(
  g: CpuGroup,
  a: HostTensor,
  b: HostTensor,
  options: FusedMatmulOptions<HostTensor> & { algorithm?: CpuFusedMatmulAlgorithm },
): HostTensor {
  const what = "matmulReduceScatter";
  checkOperands(what, "a", a, b, options.algorithm);
  const p = checkMatmulReduceScatter(what, g.sync.world, a, b, options);
  checkCapacity(what, p.m * p.n * 2, g.capacityBytes);
  const out = options.out ?? HostTensor.empty([p.shardRows, p.n], "bf16");
  if (hostOverlaps(out, a) || hostOverlaps(out, b))
    throw new InvalidArgumentError(`${what}: out overlaps an input`);
  const partial = hostMatmul(p, a, b, HostTensor.empty([p.m, p.n], "bf16"), options);
  reduceScatter(g, partial, out, "sum", "auto", {
    kind: "matmul-reduce-scatter/sequential",
    dims: [p.n, p.k],
  });
  return out;
}

export function matmulAllReduce(
  g: CpuGroup,
  a: HostTensor,
  b: HostTensor,
  options: MatmulAllReduceOptions<HostTensor> & { algorithm?: CpuFusedMatmulAlgorithm },
): HostTensor {
  const what = "matmulAllReduce";
  checkOperands(what, "a", a, b, options.algorithm);
  const { p } = checkMatmulAllReduce(what, a, b, options);
  const out =
    options.out ??
    HostTensor.empty([p.m, p.n], options.rmsNorm?.outputScale !== undefined ? "fp8e4m3" : "bf16");
  const r = options.rmsNorm?.residualOut;
  if (hostOverlaps(out, a) || hostOverlaps(out, b) || (r && (hostOverlaps(r, a) || hostOverlaps(r, b))))
    throw new InvalidArgumentError(`${what}: out or rmsNorm.residualOut overlaps an input`);
  const partial = hostMatmul(p, a, b, HostTensor.empty([p.m, p.n], "bf16"), options);
  if (options.rmsNorm === undefined)
    return runAllReduce(g, partial, out, "sum", "auto", {
      kind: "matmul-all-reduce/sequential",
      dims: [p.n, p.k],
    });
  allReduceRmsNorm(g, partial, { ...options.rmsNorm, output: out });
  return out;
}
