// What an eager call's fresh output costs: a plain allocation (cuMemAlloc, and cuMemFree on dispose) against
// one from the device's stream-ordered pool (a tensor made on a stream), alone and around an eager GEMM whose
// output is made and disposed on every call (host µs per call, then wall µs per call of a burst until the
// stream drained). Run from the repo root on a GPU:
//   node bench/eager-alloc.mjs
import { Device } from "../dist/src/runtime/device.js";
import { Stream } from "../dist/src/runtime/stream.js";
import { Tensor } from "../dist/src/runtime/tensor.js";
import { matmul } from "../dist/src/ops/gemm/matmul.js";

const device = Device.get(0);
const stream = Stream.create(device);
const ways = {
  plain: (shape, dtype) => Tensor.empty(shape, dtype, { device }),
  pooled: (shape, dtype) => Tensor.empty(shape, dtype, { device, stream }),
};
const perCall = (calls, f) => {
  stream.synchronize();
  const t = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) f();
  const host = Number(process.hrtime.bigint() - t) / 1e3 / calls;
  stream.synchronize();
  return { host, wall: Number(process.hrtime.bigint() - t) / 1e3 / calls };
};
const fmt = ({ host, wall }) => `host ${host.toFixed(1)} wall ${wall.toFixed(1)}`;
for (const bytes of [4096, 1 << 20, 16 << 20, 64 << 20]) {
  const row = [`alloc+dispose ${bytes} B:`];
  for (const [name, make] of Object.entries(ways)) {
    make([bytes], "u8").dispose(); // the pool's first mapping, and the kernels' first load
    row.push(`${name} ${fmt(perCall(200, () => make([bytes], "u8").dispose()))}`);
  }
  console.log(row.join("  "));
}
for (const [m, n, k] of [
  [1, 8192, 8192],
  [128, 8192, 8192],
]) {
  const a = Tensor.rand([m, k], "bf16", { device, seed: 1n, offset: 0 });
  const b = Tensor.rand([n, k], "bf16", { device, seed: 1n, offset: 1n << 40n });
  const row = [`matmul ${m}x${n}x${k}, output made and disposed per call:`];
  for (const [name, make] of Object.entries(ways)) {
    const call = () => matmul(a, b, { out: make([m, n], "bf16"), stream }).dispose();
    call();
    row.push(`${name} ${fmt(perCall(500, call))}`);
  }
  const out = Tensor.empty([m, n], "bf16", { device });
  row.push(`given ${fmt(perCall(500, () => matmul(a, b, { out, stream })))}`);
  console.log(row.join("  "));
  for (const x of [a, b, out]) x.dispose();
}
