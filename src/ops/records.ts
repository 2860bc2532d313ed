// The one shape of every operation's algorithm records: what the algorithm does, the backends that run
// it, whether it gives the rank-order reference's bits (auto and tune tables pick only those), what it
// needs of the group beyond its arguments, the fingerprint kinds its calls carry, its programs, and when
// auto picks it (autoWhen, over what the op's auto knows of the call). Each family keeps its records
// beside its checks (coll/registry.ts adds the collectives' needs and launches; fused, norm, exchange,
// moe: records.ts; hosts-collectives.ts); the algorithm lists and their types, auto, the tune candidates,
// the catalog's programs and the docs' table (algorithm-table.ts) derive from them.
import type { CallKind } from "../distributed/fingerprint.js";
import type { ProgramSpec } from "../runtime/module.js";

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
  /** The programs it runs beyond the GEMMs and the barrier kernels (the catalog compiles them); none: it
   * compiles nothing of its own. A function, so that records need not load their kernels' sources. */
  readonly programs?: () => readonly ProgramSpec[];
  /** When auto picks it, over what the op's auto knows of the call (its situation, the same for every
   * record of the op); none: never. */
  readonly autoWhen?: (situation: never) => boolean;
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

/** The situation an op's records' auto rules read (their autoWhen's parameter). */
export type SituationOf<R extends OpRecords> = Parameters<
  NonNullable<Extract<R[keyof R], { readonly autoWhen: unknown }>["autoWhen"]>
>[0];

/** What auto may run on `backend`, in record order (the order of preference), made once per op. */
export function autoOrder<R extends OpRecords, B extends Backend>(
  records: R,
  backend: B,
): readonly (readonly [RunsOn<R, B>, (situation: SituationOf<R>) => boolean])[] {
  return Object.entries(records).flatMap(([name, r]) =>
    r.backends.includes(backend) && r.autoWhen
      ? [[name as RunsOn<R, B>, r.autoWhen as (situation: SituationOf<R>) => boolean] as const]
      : [],
  );
}

/** The first algorithm of `order` (autoOrder) whose rule holds in `situation`. Every op's rules cover
 * every situation (test/algorithms.test.ts): none holding is a fault of the records. */
export function autoPick<S, A extends string>(
  order: readonly (readonly [A, (situation: S) => boolean])[],
  situation: S,
): A {
  for (const [name, when] of order) if (when(situation)) return name;
  throw new Error(`no algorithm's auto rule holds for ${JSON.stringify(situation)}: the records miss a case`);
}
