// A kernel of your own on symmkit's runtime: compile CUDA C++ at run time, launch it on tensors, check
// the result on the host. Run: node examples/quickstart.ts (needs an NVIDIA GPU; without one it says so
// and exits 0).
import { detectBackend, Device, Module, Tensor } from "symmkit";

const { backend, reason } = detectBackend();
if (backend !== "cuda") {
  // One line, not a stack trace: the other examples run on the CPU backend too.
  console.log(`quickstart: needs an NVIDIA GPU (${reason}); skipped`);
  process.exit(0);
}

const device = Device.get(0);
const program = Module.compile(
  {
    name: "quickstart",
    source: `
      #include "symmkit/core/types.cuh"
      template <typename T>
      __global__ void scale_add(T* out, const T* x, float a, float b, unsigned long long n) {
        for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
             i += (unsigned long long)gridDim.x * blockDim.x)
          out[i] = symmkit::from_float<T>(a * symmkit::to_float(x[i]) + b);
      }`,
    nameExpressions: ["scale_add<__nv_bfloat16>"],
  },
  device,
);
const scaleAdd = program.kernel("scale_add<__nv_bfloat16>", ["ptr", "ptr", "f32", "f32", "u64"]);

const n = 1 << 20;
const x = Tensor.rand([n], "bf16", { seed: 42n });
const out = Tensor.empty([n], "bf16");
scaleAdd.launch({ grid: 264, block: 256 }, out, x, 2, 1, n);

const xs = x.toHost({ decode: true });
const ys = out.toHost({ decode: true });
const worst = ys.reduce((m, y, i) => Math.max(m, Math.abs(y - (2 * xs[i]! + 1))), 0);
console.log(
  `${device.props.name}: out = 2x + 1 on ${n} bf16 values, max error ${worst} (bf16 spacing near 3 is 2^-6)`,
);
for (const r of [x, out, program]) r.dispose();
if (worst > 2 ** -6) process.exit(1);
