// One decode step's attention output, tensor-parallel: each rank has computed its heads' attention for
// the batch's tokens; the output projection is row-parallel (each rank holds the columns of Wo for its
// heads), so every rank's partial product is summed over ranks, then the residual is added and the sum
// normalised (RMSNorm) for the next layer. matmulAllReduce does all of it in one call (on GPUs the GEMM's
// epilogue pushes its tiles straight into the peers' memory); the check does it as GEMM then
// allReduceRmsNorm, which must give the same bits. Run: symmkit run -n 2 examples/decode.ts
import { init, matmul, type AnyTensor } from "symmkit";

const group = await init();
const { rank, worldSize: world } = group;
const [batch, hidden, headsDim] = [8, 512, 128]; // tokens in the batch; headsDim: this rank's heads x dim
const t = group.tensors;
const attn = t.randn([batch, headsDim], "bf16", { seed: 1n, offset: rank }); // this rank's heads' output
const wo = t.randn([hidden, headsDim], "bf16", { seed: 2n, offset: rank, std: 0.05 }); // its columns of Wo
// The same on every rank: the norm's weight and the residual stream (the layer's input).
const weight = t.rand([hidden], "bf16", { seed: 3n, low: 0.5, high: 1.5 });
const residual = () => t.randn([batch, hidden], "bf16", { seed: 4n });

const c = group.collectives;
const r = residual();
// out = RMSNorm(sum over ranks of attn x Wo + r) x weight; r becomes that sum (the next residual).
const out = c.matmulAllReduce(attn, wo, { rmsNorm: { weight, eps: 1e-5, residual: r, residualOut: r } });

// The check, unfused: this rank's partial product, then all-reduce + residual + RMSNorm in one call.
const r2 = residual();
const partial = matmul(attn, wo);
const { output } = c.allReduceRmsNorm(partial, { weight, eps: 1e-5, residual: r2, residualOut: r2 });
const bits = (x: AnyTensor) => x.toHost({ dtype: "bf16" }).join();
const same = bits(out) === bits(output) && bits(r) === bits(r2);
console.log(
  `rank ${rank}: decode step (GEMM + all-reduce + residual + RMSNorm) of ${batch} tokens, hidden ${hidden}, ` +
    `on ${world} ${group.backend} ranks: ${same ? "the same bits as" : "DIFFERS FROM"} GEMM, then allReduceRmsNorm`,
);
await group.destroy();
if (!same) process.exit(1);
