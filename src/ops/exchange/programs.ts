// The exchange ops' kernels (their records name them; the catalog compiles them): send/recv's put and
// copy-engine signal kernels, allToAll's pull (a moving collective kernel: coll/collectives.cuh),
// allToAllV's pull with the counts on the device.
import type { ProgramSpec } from "../../runtime/module.js";
import { COLL_PARAMS, movingKernel, movingProgram, WORLD_SIZES } from "../coll/programs.js";

/** allToAll's pull: the count it takes is the chunk's bytes (what each rank sends each rank). */
export const ALL_TO_ALL_PULL = movingKernel("all_to_all_pull", COLL_PARAMS);
export const ALL_TO_ALL_PROGRAM: ProgramSpec = movingProgram(ALL_TO_ALL_PULL);

/** The put pipeline's chunk (coll/p2p.cuh): every rank's inbox holds two per sender. */
export const P2P_CHUNK_BYTES = 1 << 20;

/** ll's payload bytes per chunk (coll/p2p.cuh kLlChunk), and one of its buffers: the chunk's 16-byte
 * lines of 8 payload bytes, then the header line (kLlBuffer). Every rank's inbox holds two per sender,
 * after put's chunks. */
export const P2P_LL_CHUNK_BYTES = 256 << 10;
export const P2P_LL_BUFFER_BYTES = 2 * P2P_LL_CHUNK_BYTES + 16;
/** ll's counters of receiving blocks done with a chunk, per sender (coll/p2p.cuh kLlRounds): chunk j is
 * counted in j mod P2P_LL_ROUNDS. */
export const P2P_LL_ROUNDS = 4;
/** The inbox's pad: put's ready and ack slots, then ll's counts (coll/p2p.cuh kPadSlots x 8). */
export const P2P_PAD_BYTES = 576 * 8;
/** The inbox's bytes at `world` ranks: per sender, put's two chunks and ll's two buffers. */
export const p2pInboxBytes = (world: number): number => world * 2 * (P2P_CHUNK_BYTES + P2P_LL_BUFFER_BYTES);

/** send/recv (coll/p2p.cuh): put's pipeline, ll's lines (allToAll's ll too), the two mixed (a side by each),
 * and copy_engine's signals (send/recv's, allToAll's). */
export const P2P_PROGRAM: ProgramSpec = {
  name: "symmkit/coll/p2p",
  source: '#include "symmkit/coll/p2p.cuh"\n',
  nameExpressions: [
    "symmkit::p2p::p2p_put",
    "symmkit::p2p::p2p_ll",
    "symmkit::p2p::p2p_ll_put",
    "symmkit::p2p::p2p_put_ll",
    "symmkit::p2p::p2p_ll_all_to_all",
    "symmkit::p2p::p2p_ce_signal",
    "symmkit::p2p::p2p_ce_signal_all",
  ],
};

/** allToAllV with the counts on the device (coll/all_to_all_v.cuh), one kernel per world size. */
export const A2AV_PROGRAM: ProgramSpec = {
  name: "symmkit/coll/all_to_all_v",
  source: '#include "symmkit/coll/all_to_all_v.cuh"\n',
  nameExpressions: [1, ...WORLD_SIZES].map((w) => `symmkit::a2av::all_to_all_v_pull<${w}>`),
};
