// The one shape of every operation's algorithm records: what the algorithm does, the backends that run
// it, whether it gives the rank-order reference's bits (auto and tune tables pick only those), what it
// needs of the group beyond its arguments, and the fingerprint kinds its calls carry. Each family keeps
// its records beside its checks (coll/registry.ts adds the collectives' needs and launches; fused, norm,
// exchange, moe: records.ts; hosts-collectives.ts); the algorithm lists and their types, the tune
// candidates and the docs' table (algorithm-table.ts) derive from them.
import type { CallKind } from "../distributed/fingerprint.js";

/** `cuda`: GpuCollectives; `cpu`: CpuCollectives (the reference); `hosts`: HostsCollectives. */
export type Backend = "cuda" | "cpu" | "hosts";
/** What an algorithm takes from the group: its symmetric staging buffer, its Lamport/LL mailbox, send's
 * inbox, or a wait for the host (which keeps a call out of CUDA graphs). */
export type Need = "staging buffer" | "mailbox" | "inbox" | "host wait";

export interface OpAlgorithm {
  /** One line for the docs' table. */
  readonly summary: string;
  readonly backends: readonly Backend[];
  readonly rankOrder: boolean;
  readonly needs: readonly Need[];
  readonly kinds: readonly CallKind[];
}

export type OpRecords = Readonly<Record<string, OpAlgorithm>>;

/** The algorithms of `R` that backend `B` runs. */
export type RunsOn<R extends OpRecords, B extends Backend> = {
  [K in keyof R]: B extends R[K]["backends"][number] ? K : never;
}[keyof R] &
  string;

/** The names backend `backend` accepts for an op: "auto", then its records' in record order. */
export function algorithmList<R extends OpRecords, B extends Backend>(
  records: R,
  backend: B,
): readonly ("auto" | RunsOn<R, B>)[] {
  const names = Object.keys(records).filter((a) => records[a]!.backends.includes(backend));
  return ["auto", ...(names as RunsOn<R, B>[])];
}

/** Every algorithm but auto that GPUs run and auto may pick (the rank-order ones). */
export function autoCandidates<R extends OpRecords>(records: R): RunsOn<R, "cuda">[] {
  return Object.keys(records).filter(
    (a) => records[a]!.rankOrder && records[a]!.backends.includes("cuda"),
  ) as RunsOn<R, "cuda">[];
}
