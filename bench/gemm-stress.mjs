// Stress for HopperGemm's split-K kernels at a decode shape (1 x 8192 x 1024): each step launches one
// variant many times (eagerly, or as replays of a graph of 20 launches) and synchronizes, so a kernel
// that faults now and then is caught, named, and the split counters checked back at zero. Steps are
// w<slices> (the wide ring) or n<slices> (the narrow ring). Run from the repo root on a Hopper GPU, a few
// times over (an intermittent fault needs several processes):
//   node bench/gemm-stress.mjs [w1,w2,w4,n1,n2,n4] [graph]
// It caught the idle consumer's lost mbarrier phase (docs/perf-notes.md, session 13): before the fix, "n2
// graph" timed out (CUDA_ERROR_LAUNCH_FAILED after 10 s) in about one process in three on one H100; after
// it, none in 30.
import { Device } from "../dist/src/runtime/device.js";
import { Stream } from "../dist/src/runtime/stream.js";
import { Tensor } from "../dist/src/runtime/tensor.js";
import { Graph } from "../dist/src/runtime/graph.js";
import { copyDeviceToDevice } from "../dist/src/runtime/memory.js";
import { HopperGemm } from "../dist/src/ops/hopper-gemm.js";
import { SplitScratch } from "../dist/src/ops/split-scratch.js";

const steps = (process.argv[2] ?? "w1,w2,w4,n1,n2,n4").split(",");
const graphs = process.argv[3] === "graph";
const device = Device.get(0);
const stream = Stream.create(device);
const variant = (narrow) =>
  new HopperGemm(device, {
    elem: "bf16",
    layoutB: "nk",
    order: "grouped",
    ready: "none",
    epilogue: "store",
    splitK: true,
    narrow,
  });
const kernels = { w: variant(false), n: variant(true) };
const [m, n, k] = [1, 8192, 1024];
const a = Tensor.rand([m, k], "bf16", { device, seed: 1n, offset: 0 });
const b = Tensor.rand([n, k], "bf16", { device, seed: 1n, offset: 1n << 40n });
const d = Tensor.empty([m, n], "bf16", { device });
const c = { a: a.ptr, b: b.ptr, d: d.ptr, m, n, k, stream };
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
