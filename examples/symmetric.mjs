// A kernel of your own on symmetric memory: every rank writes a stamp into its slot of every peer's
// buffer, meets the others, then reads what the peers wrote into its own. Run on one host:
//   symmkit run -n 4 examples/symmetric.mjs
import { init, Module, SYMM_VIEW_PARAM } from "symmkit";

const group = await init();
const buf = await group.symmetric.empty([group.worldSize], "u32");
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
group.synchronize();
console.log(`rank ${group.rank} received [${[...buf.tensor.toHost()].join(", ")}]`);
await buf.dispose();
program.dispose();
await group.destroy();
