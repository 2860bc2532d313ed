// A tensor-parallel MLP block, as in a transformer layer: the activations are split over the ranks by
// tokens; the up projection is column-parallel (each rank holds ffn / world rows of W1) and runs as
// all-gather + GEMM; the down projection is row-parallel (each rank holds ffn / world rows of W2ᵀ) and runs
// as GEMM + reduce-scatter, which sums the ranks' partial products and leaves each rank its own tokens.
// On GPUs each is one fused kernel over symmetric memory; without a GPU the CPU backend runs the same
// calls. Run: symmkit run -n 2 examples/mlp.ts
import { init, matmul, type AnyTensor } from "symmkit";

const group = await init(); // cuda where a GPU is visible, else the CPU backend
const { rank, worldSize: world } = group;
const [tokens, hidden, ffn] = [32 * world, 256, 128 * world];
const t = group.tensors; // Tensor on GPUs, HostTensor on the CPU backend
// Every rank makes the whole input and weights from the same seeds and keeps its part (a real model
// loads only its part); the whole ones give the check below.
const X = t.randn([tokens, hidden], "bf16", { seed: 1n });
const W1 = t.randn([ffn, hidden], "bf16", { seed: 2n, std: 0.06 });
const W2t = t.randn([ffn, hidden], "bf16", { seed: 3n, std: 0.06 }); // W2ᵀ: B as [k, n]
const part = (w: AnyTensor<"bf16">, n: number) => w.slice(rank * (n / world), (rank + 1) * (n / world));
const [x, w1, w2t] = [part(X, tokens), part(W1, ffn), part(W2t, ffn)];

// GELU on the host, to keep this short (on GPUs a kernel of your own would do it: examples/quickstart.ts).
function gelu(a: AnyTensor): AnyTensor {
  const v = a
    .toHost({ decode: true })
    .map((u) => 0.5 * u * (1 + Math.tanh(0.7978845608 * (u + 0.044715 * u ** 3))));
  return t.fromHost(v, "bf16", { shape: a.shape });
}

const c = group.collectives;
const { out: h } = c.allGatherMatmul(x, w1); // [tokens, ffn / world]: every token, this rank's features
const y = c.matmulReduceScatter(gelu(h), w2t, { layoutB: "kn" }); // [tokens / world, hidden]: ours, summed

// The check: the unsplit block on this rank alone, within bf16 rounding of the tensor-parallel one.
const want = part(matmul(gelu(matmul(X, W1)), W2t, { layoutB: "kn" }), tokens).toHost({ decode: true });
const got = y.toHost({ decode: true });
const scale = want.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
const err = got.reduce((m, v, i) => Math.max(m, Math.abs(v - want[i]!)), 0) / scale;
console.log(
  `rank ${rank}: MLP block (all-gather + GEMM, GELU, GEMM + reduce-scatter) of ${tokens} tokens, hidden ` +
    `${hidden}, ffn ${ffn} on ${world} ${group.backend} ranks: ${err < 0.02 ? "matches" : "DIFFERS FROM"} ` +
    `the unsplit block (largest difference ${err.toExponential(1)} of its largest value)`,
);
await group.destroy();
if (!(err < 0.02)) process.exit(1);
