// Random schedules for the protocol models (test/ll-protocol.test.ts, ce-all-to-all-protocol.test.ts):
// a stream of uniform draws in [0, 1) from a seed, the project's Philox (src/runtime/random.ts) taken a
// block at a time.
import { hostUniform } from "../../src/runtime/random.js";

const BLOCK = 4096;

/** The draws of schedule `seed`, one a call. */
export function schedule(seed: number): () => number {
  let block: Float32Array = new Float32Array(0);
  let next = 0;
  let offset = 0;
  return () => {
    if (next === block.length) {
      block = hostUniform(BLOCK, seed, offset);
      offset += BLOCK;
      next = 0;
    }
    return block[next++]!;
  };
}
