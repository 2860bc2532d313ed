// Eager MoE dispatch as a loop calls it: wall µs per call of 500 calls back to back (fresh outputs, disposed
// each call), five rounds after 300 warm-up calls, for pull (the outputs sized to the rows received: one
// small copy to the host and a wait) and pull_device (maxRows given: no wait); beside them, what one small
// device-to-host copy and its wait cost on an idle stream (pull's floor above pull_device). 128 tokens of
// 7168 bf16, top-8 of 256 experts. Run from the repo root on a GPU:
//   symmkit run -n 1 -- node bench/moe-eager.mjs
// (BASE=<another build's dist> times that build instead, for a before and after on one machine.)
const B = process.env.BASE ?? "../dist";
const { ProcessGroup } = await import(`${B}/src/distributed/process-group.js`);
const { GpuCollectives } = await import(`${B}/src/ops/gpu-collectives.js`);
const { dispatchTensors } = await import(`${B}/src/ops/moe/checks.js`);
const { Stream } = await import(`${B}/src/runtime/stream.js`);
const { Tensor } = await import(`${B}/src/runtime/tensor.js`);
const { copyDeviceToHost } = await import(`${B}/src/runtime/memory.js`);

const group = await ProcessGroup.world({}, (g) => GpuCollectives.create(g, 256 << 20));
const { device } = group;
const c = group.collectives;
const stream = Stream.create(device);
const [T, H, K, E] = [128, 7168, 8, 256];
const ids = new Int32Array(T * K).map((_, i) => (Math.floor(i / K) * 37 + (i % K) * 31) % E);
const x = Tensor.zeros([T, H], "bf16", { device });
const idx = Tensor.fromHost(ids, "i32", { device, shape: [T, K] });
const w = Tensor.fromHost(new Float32Array(T * K).fill(0.125), "f32", { device, shape: [T, K] });
const rows = T * K;
const ways = {
  pull: () => c.dispatch(x, idx, w, { numExperts: E, stream, algorithm: "pull" }),
  pull_device: () =>
    c.dispatch(x, idx, w, { numExperts: E, stream, maxRows: rows, algorithm: "pull_device" }),
};
const now = () => Number(process.hrtime.bigint());
console.log(`eager dispatch, ${T} tokens x ${H}, top-${K} of ${E}, world ${group.worldSize}, build ${B}`);
for (const [name, call] of Object.entries(ways)) {
  for (let i = 0; i < 300; i++) for (const t of dispatchTensors(call())) t.dispose();
  stream.synchronize();
  const per = [];
  for (let r = 0; r < 5; r++) {
    const t0 = now();
    for (let i = 0; i < 500; i++) for (const t of dispatchTensors(call())) t.dispose();
    stream.synchronize();
    per.push((now() - t0) / 500 / 1000);
  }
  console.log(`${name}: wall us per call, rounds of 500: ${per.map((v) => v.toFixed(1)).join(" ")}`);
}
const small = new Int32Array(8);
const mem = Tensor.zeros([8], "i32", { device });
const waits = [];
for (let i = 0; i < 2000; i++) {
  const t0 = now();
  copyDeviceToHost(small, mem.ptr, stream);
  waits.push(now() - t0);
}
waits.sort((a, b) => a - b);
console.log(
  `a 32-byte copy to the host and its wait, idle stream: median ${(waits[1000] / 1000).toFixed(1)} us`,
);
for (const t of [x, idx, w, mem]) t.dispose();
await group.destroy();
