// Stress for HopperGemm's split-K kernels at a decode shape (1 x 8192 x 1024): each step launches one
// variant many times (eagerly, or as replays of a graph of 20 launches) and synchronizes, so a kernel
// that faults now and then is caught, named, and the split counters checked back at zero. Steps are
// w<slices> (the wide ring) or n<slices> (the narrow ring). Run from the repo root on a Hopper GPU, a few
// times over (an intermittent fault needs several processes):
//   node bench/gemm-stress.mjs [w1,w2,w4,n1,n2,n4] [graph]
// It caught the idle consumer's lost mbarrier phase (docs/perf-notes.md, Split-K): before the fix, "n2
// graph" timed out (CUDA_ERROR_LAUNCH_FAILED after 10 s) in about one process in three on one H100; after
// it, none in 30.
import { Tensor } from "../dist/src/runtime/tensor.js";
import { Graph } from "../dist/src/runtime/graph.js";
import { copyDeviceToDevice } from "../dist/src/runtime/memory.js";
import { SplitScratch } from "../dist/src/ops/gemm/split-scratch.js";
import { device, operands, splitStoreGemm, stream } from "./gemm-kit.mjs";

const steps = (process.argv[2] ?? "w1,w2,w4,n1,n2,n4").split(",");
const graphs = process.argv[3] === "graph";
const kernels = { w: splitStoreGemm(false), n: splitStoreGemm(true) };
const [m, n, k] = [1, 8192, 1024];
const c = operands(m, n, k).launch;
const sms = device.props.smCount;
const counters = Tensor.empty([sms], "u32", { device });
for (const step of steps) {
  const g = kernels[step[0]];
  const splits = Number(step.slice(1));
  try {
    if (graphs) {
      g.launch({ ...c, splits }); // the split scratch is allocated outside the capture
      const graph = Graph.capture(stream, () => {
        for (let i = 0; i < 20; i++) g.launch({ ...c, splits });
      });
      for (let r = 0; r < 13; r++) graph.launch(stream);
      stream.synchronize();
      graph.dispose();
    } else {
      for (let i = 0; i < 300; i++) g.launch({ ...c, splits });
      stream.synchronize();
    }
    copyDeviceToDevice(counters.ptr, SplitScratch.of(device).on(stream).counters, sms * 4, stream);
    stream.synchronize();
    const left = [...counters.toHost()].filter((v) => v !== 0).length;
    console.log(`ok ${step}${left ? `: ${left} split counters not back at zero` : ""}`);
  } catch (e) {
    console.log(`FAIL ${step}: ${e.message.split("\n")[0]}`);
    process.exit(1);
  }
}
