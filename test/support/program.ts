// How a rank program that both backends run (test/programs) starts: the backend its argument names
// (symmkit run -n N NAME.js cpu|cuda), the group on it, the run's seed, and its batches and sections
// (./batch.ts); and how it judges refusals.
import assert from "node:assert/strict";
import { agreement, sharedSeed } from "./agree.js";
import { batches, sections } from "./batch.js";
import { InvalidArgumentError } from "../../src/errors.js";
import { init } from "../../src/init.js";
import type { AlgorithmNames, Collectives } from "../../src/ops/collectives.js";
import type { AnyTensor } from "../../src/runtime/tensor.js";

/** Starts program `name` (its checks: "the `name` check") on its argument's backend, whose staging buffer
 * is `stagingBytes[backend]`, in a group of `minRanks` or more. */
export async function startProgram(
  name: string,
  stagingBytes: { readonly cuda: number; readonly cpu: number },
  minRanks = 1,
) {
  const backend = process.argv[2];
  if (backend !== "cpu" && backend !== "cuda")
    throw new Error(`${name}.js takes the backend to check: cpu or cuda, got ${String(backend)}`);
  const group = await init({ backend, stagingBytes: stagingBytes[backend] });
  const { rank, worldSize: world } = group;
  assert.ok(world >= minRanks, `the ${name} check needs ${minRanks} or more ranks, got ${world}`);
  /** The group when on GPUs: the sections only GPUs have. */
  const gpu = group.backend === "cuda" ? group : undefined;
  // Any algorithm name goes through the types: each call passes its backend's, or for a bad input a name
  // the backend does not have.
  const c = group.collectives as Collectives<AnyTensor, AnyTensor, AlgorithmNames>;
  /** Waits for the calls made: a CPU call is done when it returns. */
  const wait = (): void => gpu?.synchronize();
  return {
    backend,
    cuda: backend === "cuda",
    group,
    gpu,
    c,
    make: group.tensors,
    rank,
    world,
    capacity: c.capacityBytes,
    seed: await sharedSeed(group.store, rank),
    agree: agreement(group.store, rank, world),
    ranks: Array.from({ length: world }, (_, r) => r),
    wait,
    batch: batches(group, wait),
    ...sections(rank),
  };
}

/** A refusal as the calls make it: InvalidArgumentError with its stable code. */
export const typed = (e: unknown): e is InvalidArgumentError =>
  e instanceof InvalidArgumentError && e.code === "SYMMKIT_INVALID_ARGUMENT";

/** Makes each call of `cases` (what, call): those that did not refuse with a typed error, and what each
 * did instead. */
export function untyped(cases: readonly (readonly [string, () => unknown])[]): string[] {
  const wrong: string[] = [];
  for (const [what, call] of cases) {
    try {
      call();
      wrong.push(`${what}: no error`);
    } catch (e) {
      if (!typed(e)) wrong.push(`${what}: ${String(e)}`);
    }
  }
  return wrong;
}
