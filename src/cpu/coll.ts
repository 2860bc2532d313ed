// All-reduce, all-gather, reduce-scatter and broadcast on the CPU backend: the GPU algorithms, step by
// step, written to be read as the reference for the GPU kernels. Reductions follow src/ops/coll/reduce.ts,
// so every rank gets bitwise the same result.
import { reduceInto } from "../ops/coll/reduce.js";
import {
  CPU_ALL_GATHER_ALGORITHMS,
  CPU_ALL_REDUCE_ALGORITHMS,
  CPU_REDUCE_SCATTER_ALGORITHMS,
  type CpuAllReduceAlgorithm,
} from "../ops/coll/registry.js";
import {
  checkAlgorithm,
  checkCapacity,
  checkDivisible,
  checkNumel,
  checkPeer,
  checkReduction,
  checkSameDtype,
  checkTensorArg,
  type ReduceOp,
} from "../ops/validate.js";
import type { CallAs } from "../distributed/fingerprint.js";
import { HostTensor } from "./host-tensor.js";
import type { CpuGroup } from "./group.js";

/** Below this many bytes, "auto" picks one-shot (one barrier round less); above, two-shot (less reading). */
export const ONE_SHOT_MAX_BYTES = 64 * 1024;

export function allReduce(
  g: CpuGroup,
  input: HostTensor,
  options: { op?: ReduceOp; algorithm?: CpuAllReduceAlgorithm; output?: HostTensor },
): HostTensor {
  const what = "allReduce";
  checkTensorArg(what, "input", input);
  if (options.output !== undefined) checkTensorArg(what, "output", options.output);
  const op = options.op ?? "sum";
  const algorithm = options.algorithm ?? "auto";
  const output = options.output ?? HostTensor.empty(input.shape, input.dtype);
  checkReduction(what, op, input.dtype);
  checkAlgorithm(what, algorithm, CPU_ALL_REDUCE_ALGORITHMS);
  checkSameDtype(what, input, output);
  checkNumel(what, "output", output, input.numel);
  return runAllReduce(g, input, output, op, algorithm);
}

/** The all-reduce of checked arguments; `as` fingerprints it as part of another call. */
export function runAllReduce(
  g: CpuGroup,
  input: HostTensor,
  output: HostTensor,
  op: ReduceOp,
  algorithm: CpuAllReduceAlgorithm,
  as?: CallAs,
): HostTensor {
  checkCapacity("allReduce", input.nbytes, g.capacityBytes);
  const twoShot = algorithm === "two_shot" || (algorithm === "auto" && input.nbytes > ONE_SHOT_MAX_BYTES);
  const kind = as?.kind ?? (twoShot ? "all-reduce/two_shot" : "all-reduce/one_shot");
  g.begin({ kind, dtype: input.dtype, op, count: input.numel, dims: as?.dims });
  return twoShot ? twoShotAllReduce(g, input, output, op) : oneShotAllReduce(g, input, output, op);
}

/** Each rank reads every peer's whole buffer and reduces all of it. */
function oneShotAllReduce(g: CpuGroup, input: HostTensor, output: HostTensor, op: ReduceOp): HostTensor {
  const { world } = g.sync;
  const n = input.numel;
  g.stage(input, "allReduce");
  g.meet();
  const all = Array.from({ length: world }, (_, r) => g.staged(r, input, n));
  reduceInto(input.dtype, op, all, 0, output.raw, 0, n);
  g.meet();
  return output;
}

/**
 * Reduce-scatter by loads (rank r reduces chunk r of every buffer into its own), then all-gather by
 * copies (every rank reads chunk r from rank r).
 */
function twoShotAllReduce(g: CpuGroup, input: HostTensor, output: HostTensor, op: ReduceOp): HostTensor {
  const { rank, world } = g.sync;
  const n = input.numel;
  const chunk = Math.ceil(n / world);
  const range = (r: number): [number, number] => [Math.min(n, r * chunk), Math.min(n, (r + 1) * chunk)];
  g.stage(input, "allReduce");
  g.meet();
  const all = Array.from({ length: world }, (_, r) => g.staged(r, input, n));
  const [s, e] = range(rank);
  reduceInto(input.dtype, op, all, s, all[rank]!, s, e - s);
  g.meet();
  for (let r = 0; r < world; r++) {
    const [rs, re] = range(r);
    (output.raw as Uint8Array).set(all[r]!.subarray(rs, re) as Uint8Array, rs);
  }
  g.meet();
  return output;
}

/** `as` fingerprints it as part of another call (default: the all-gather itself). */
export function allGather(
  g: CpuGroup,
  input: HostTensor,
  output: HostTensor,
  algorithm: string,
  as: CallAs = { kind: "all-gather/pull" },
): HostTensor {
  const what = "allGather";
  const { world } = g.sync;
  checkTensorArg(what, "input", input);
  checkTensorArg(what, "output", output);
  checkAlgorithm(what, algorithm, CPU_ALL_GATHER_ALGORITHMS);
  checkSameDtype(what, input, output);
  checkNumel(what, "output", output, input.numel * world);
  const n = input.numel;
  g.begin({ ...as, dtype: input.dtype, count: n });
  g.stage(input, what);
  g.meet();
  for (let r = 0; r < world; r++) (output.raw as Uint8Array).set(g.staged(r, input, n) as Uint8Array, r * n);
  g.meet();
  return output;
}

/** `as` fingerprints it as part of another call (default: the reduce-scatter itself). */
export function reduceScatter(
  g: CpuGroup,
  input: HostTensor,
  output: HostTensor,
  op: ReduceOp,
  algorithm: string,
  as: CallAs = { kind: "reduce-scatter/pull" },
): HostTensor {
  const what = "reduceScatter";
  checkTensorArg(what, "input", input);
  checkTensorArg(what, "output", output);
  checkAlgorithm(what, algorithm, CPU_REDUCE_SCATTER_ALGORITHMS);
  const { rank, world } = g.sync;
  checkReduction(what, op, input.dtype);
  checkSameDtype(what, input, output);
  checkDivisible(what, input, world);
  checkNumel(what, "output", output, input.numel / world);
  const n = output.numel;
  g.begin({ ...as, dtype: input.dtype, op, count: input.numel });
  g.stage(input, what);
  g.meet();
  const all = Array.from({ length: world }, (_, r) => g.staged(r, input, input.numel));
  reduceInto(input.dtype, op, all, rank * n, output.raw, 0, n);
  g.meet();
  return output;
}

export function broadcast(g: CpuGroup, tensor: HostTensor, root: number): HostTensor {
  const what = "broadcast";
  checkTensorArg(what, "tensor", tensor);
  const { rank, world } = g.sync;
  if (root !== rank) checkPeer(what, root, world, rank);
  checkCapacity(what, tensor.nbytes, g.capacityBytes);
  g.begin({ kind: "broadcast", dtype: tensor.dtype, count: tensor.numel, dims: [root] });
  if (rank === root) g.stage(tensor, what);
  g.meet();
  if (rank !== root) (tensor.raw as Uint8Array).set(g.staged(root, tensor, tensor.numel) as Uint8Array);
  g.meet();
  return tensor;
}
