// Batches of calls for rank programs that run on either backend, in the GPU's discipline: every input and
// poisoned output made first, the ranks met at a store barrier, every call made back to back, one wait,
// and only then the checks. No rank does host work while a peer's kernel waits for it, so a GPU run also
// passes under a short SYMMKIT_SYNC_TIMEOUT_MS. And each section's seconds, printed by rank 0.
import { setTimeout as sleep } from "node:timers/promises";

export interface Case {
  /** Makes the case's calls (no host work that a peer could wait on). */
  run(): void;
  /** Once the calls are done: what the outputs and inputs must hold. */
  check(): void;
  readonly tensors: { dispose(): void }[];
}

/** batch(cases, late): runs `cases` (undefined: a case this rank takes no part in) as above, rank `late`
 * 50 ms late, then disposes their tensors. `wait` waits for the calls made (a CPU call is done when it
 * returns). */
export function batches(
  group: { readonly rank: number; barrier(): Promise<void> },
  wait: () => void,
): (cases: readonly (Case | undefined)[], late?: number) => Promise<void> {
  return async (cases, late) => {
    const made = cases.filter((k) => k !== undefined);
    await group.barrier();
    if (group.rank === late) await sleep(50);
    for (const k of made) k.run();
    wait();
    for (const k of made) k.check();
    for (const k of made) for (const t of k.tensors) t.dispose();
  };
}

/** done(what): rank 0 prints a section's result with its seconds (store barriers included: the group's
 * time); total(): rank 0 prints the seconds of every section at `world`. */
export function sections(rank: number): {
  done: (what: string) => void;
  total: (world: number) => void;
} {
  const started = performance.now();
  let sectionStarted = started;
  const seconds = (since: number): string => ((performance.now() - since) / 1000).toFixed(1);
  return {
    done: (what) => {
      if (rank === 0) console.log(`${what} (${seconds(sectionStarted)} s)`);
      sectionStarted = performance.now();
    },
    total: (world) => {
      if (rank === 0) console.log(`total ${seconds(started)} s at world ${world}`);
    },
  };
}
