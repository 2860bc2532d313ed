// The collectives on whichever backend init() finds: symmetric GPU memory when a GPU is visible, rank
// processes sharing memory (the CPU backend) otherwise. Same calls, same results bit for bit. Run:
//   symmkit run -n 4 examples/collectives.ts
import { encode, HostTensor, init } from "symmkit";

const group = await init(); // init({ backend: "cpu" }) asks for the CPU backend on a GPU machine too
const { rank, worldSize } = group;
const n = 4096;
const x = group.tensors.rand([n], "bf16", { seed: 1n, offset: rank }); // offset: each rank its own stream
group.collectives.allReduce(x, { algorithm: "two_shot", output: x }); // in place; f32 in rank order
const all = group.tensors.empty([n * worldSize], "bf16");
group.collectives.allGather(x, all);

// The reference: every rank's input regenerated here, summed in f32 in rank order, rounded to bf16 once.
const sum = new Float32Array(n);
for (let r = 0; r < worldSize; r++) {
  const xr = HostTensor.rand([n], "bf16", { seed: 1n, offset: r }).toHost({ decode: true });
  for (let i = 0; i < n; i++) sum[i] = Math.fround(sum[i]! + xr[i]!);
}
const want = encode("bf16", sum);
const got = all.toHost(); // Uint16Array: bf16's bits
const wrong = got.findIndex((v, i) => v !== want[i % n]);
console.log(
  wrong < 0
    ? `rank ${rank}: all-reduce (two_shot) and all-gather of ${n} bf16 values on ${worldSize} ${group.backend} ranks match the reference`
    : `rank ${rank}: element ${wrong} of the gathered sum is ${got[wrong]}, expected ${want[wrong % n]}`,
);
for (const t of [x, all]) t.dispose();
await group.destroy();
if (wrong >= 0) process.exit(1);
