// SYMMKIT_CHECK_CALLS: the checks that cost something on every call. With it, a group across hosts
// gathers every rank's call tag before each NCCL call between hosts (HostsCollectives), and a GPU group
// reads allReduceRmsNorm's weight and bias on the host at each call, so that their digest joins the call's
// fingerprint (ArNorm; the CPU backend always does). A rank that checks makes NCCL calls, or carries
// digests, that the others do not: every rank of a group must set it alike, which creating the group's
// collectives checks on every rank.
import { InvalidArgumentError } from "../errors.js";
import { gatherValues, type StoreGroup } from "../distributed/agree.js";
import { readEnvVar } from "../settings.js";

/** Collective over `group`: SYMMKIT_CHECK_CALLS, refused (InvalidArgumentError, every rank) where the
 * ranks do not set it alike. */
export async function agreedCheckCalls(group: StoreGroup): Promise<boolean> {
  const mine = readEnvVar("SYMMKIT_CHECK_CALLS");
  const checks = await gatherValues(group, "check-calls", String(mine));
  const other = checks.findIndex((c) => c !== checks[group.rank]);
  if (other >= 0)
    throw new InvalidArgumentError(
      `SYMMKIT_CHECK_CALLS is ${mine ? "set" : "unset"} on rank ${group.rank} and ` +
        `${checks[other] === "true" ? "set" : "unset"} on rank ${other}: set it alike on every rank`,
    );
  return mine;
}
