// Every rank of a group that runs symmkit's kernels must run the same GPU model: the kernels pair blocks
// across ranks by the local SM count (all-to-all pull, the pull all-reduce + RMSNorm), and the host picks
// kernels, tiles and split-K slices from it (GEMM + all-reduce's flags are laid out by that choice). Ranks
// that chose differently would wait for each other until a timeout, so a group of mixed GPUs is refused
// when its collectives are made, on every rank alike.
import { UnsupportedError } from "../errors.js";
import { gatherValues, type StoreGroup } from "../distributed/agree.js";

/** What checkSameGpus needs of a group (ProcessGroup's members of those names). */
export interface GpuModelGroup extends StoreGroup {
  readonly device: { readonly props: { readonly name: string; readonly smCount: number } };
}

/** Collective over `group`: throws UnsupportedError on every rank if any two ranks' GPUs differ in model
 * or SM count. */
export async function checkSameGpus(group: GpuModelGroup): Promise<void> {
  const { name, smCount } = group.device.props;
  const models = await gatherValues(group, "gpu-model", `${name} (${smCount} SMs)`);
  const other = models.findIndex((m) => m !== models[0]);
  if (other >= 0)
    throw new UnsupportedError(
      `the group's GPUs differ: rank 0 has ${models[0]}, rank ${other} has ${models[other]}. symmkit's ` +
        "kernels pair work across ranks by SM count and would wait for each other; run each group on one " +
        "GPU model (CUDA_VISIBLE_DEVICES), or use NCCL alone (ProcessGroup.world({}) makes a group without " +
        "symmkit's collectives; its nccl() is NCCL's communicator)",
    );
}
