// Symmetric memory: every rank writes a stamp into its slot of every peer's buffer, meets the others,
// then reads what the peers wrote into its own. On GPUs a kernel of your own does it over NVLink; on
// the CPU backend (no GPU) the peers' buffers are mapped into this process and plain stores do it.
// Run on one host:
//   symmkit run -n 4 examples/symmetric.ts
import { init, Module, SYMM_VIEW_PARAM } from "symmkit";

const group = await init(); // cuda when a GPU is visible, cpu otherwise
const { rank, worldSize } = group;
let received: Uint32Array;
if (group.backend === "cuda") {
  const buf = await group.symmetric.empty([worldSize], "u32");
  const program = Module.compile({
    name: "example/stamp",
    source: `
      #include "symmkit/sync/barrier.cuh"
      using namespace symmkit;
      __global__ void stamp(const __grid_constant__ SymmView v) {
        if (threadIdx.x < v.world)  // thread p writes this rank's stamp into rank p's buffer
          static_cast<u32*>(v.buffers[threadIdx.x])[v.rank] = 1000 * (v.rank + 1) + threadIdx.x;
        symm_sync<true, true>(v, flat_block(), 0);  // publish our writes, see everyone else's
      }`,
    nameExpressions: ["stamp"],
  });
  program.kernel("stamp", [SYMM_VIEW_PARAM]).launch({ grid: 1, block: 32 }, buf.deviceView());
  group.synchronize(); // a peer that never arrives becomes SymmTimeoutError naming it
  program.dispose();
  received = buf.tensor.toHost({ dtype: "u32" });
  await buf.dispose();
} else {
  const buf = await group.symmetric.empty([worldSize], "u32");
  for (let p = 0; p < worldSize; p++)
    buf
      .peer(p)
      .slice(rank, rank + 1)
      .fill(1000 * (rank + 1) + p);
  await group.barrier(); // every rank's stores are done before anyone reads
  received = buf.tensor.toHost({ dtype: "u32" });
  await buf.dispose();
}
console.log(`rank ${rank} received [${[...received].join(", ")}]`);
await group.destroy();
