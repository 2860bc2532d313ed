// An expert-parallel MoE layer: a router picks each token's top-2 experts; dispatch sends every (token,
// expert) pair to the rank that holds the expert (experts are spread evenly over the ranks); each rank
// runs its experts' GEMMs on the rows that arrived; combine brings the results back to their tokens,
// weighted by the router. Run: symmkit run -n 2 examples/moe.ts
import { init, matmul } from "symmkit";

const group = await init();
const { rank, worldSize: world } = group;
const [tokens, hidden, local, topk] = [32, 128, 8, 2]; // tokens and experts per rank
const numExperts = local * world;
const t = group.tensors;
const x = t.randn([tokens, hidden], "bf16", { seed: 1n, offset: rank }); // this rank's tokens
const gate = t.randn([numExperts, hidden], "bf16", { seed: 2n, std: 0.1 }); // the router, on every rank
// Every expert's weight from its own seed; this rank holds experts rank * local .. (rank + 1) * local - 1.
const expert = (e: number) => t.randn([hidden, hidden], "bf16", { seed: 3n, offset: e, std: 0.1 });
const mine = Array.from({ length: local }, (_, j) => expert(rank * local + j));

// The router, on the host: each token's two highest scores, weighted by their softmax.
const scores = matmul(x, gate).toHost({ decode: true }); // [tokens, numExperts]
const ids: number[] = [];
const weights: number[] = [];
for (let i = 0; i < tokens; i++) {
  const s = scores.subarray(i * numExperts, (i + 1) * numExperts);
  const [e1 = 0, e2 = 0] = [...s.keys()].sort((p, q) => s[q]! - s[p]!);
  const w2 = 1 / (1 + Math.exp(s[e1]! - s[e2]!)); // the softmax of the two scores
  ids.push(e1, e2);
  weights.push(1 - w2, w2);
}

const c = group.collectives;
const topkIdx = t.fromHost(ids, "i32", { shape: [tokens, topk] });
const topkWeights = t.fromHost(weights, "f32", { shape: [tokens, topk] });
const d = c.dispatch(x, topkIdx, topkWeights, { numExperts });
// d.tokens: the rows that arrived here, expert by expert (d.counts rows for each of this rank's experts).
const counts = d.counts.toHost({ dtype: "i32" });
const out = t.empty(d.tokens.shape, "bf16");
let row = 0;
for (let j = 0; j < local; j++) {
  const n = counts[j]!;
  if (n > 0) matmul(d.tokens.slice(row, row + n), mine[j]!, { out: out.slice(row, row + n) }); // expert j
  row += n;
}
const y = c.combine(out, d.handle); // [tokens, hidden]: each token's experts' outputs, weighted

// The check: the layer on this rank alone (every expert on every token, weighted on the host).
const all = Array.from({ length: numExperts }, (_, e) => matmul(x, expert(e)).toHost({ decode: true }));
const got = y.toHost({ decode: true });
let err = 0;
got.forEach((v, i) => {
  const k = Math.floor(i / hidden) * topk; // the token's first slot
  const want = weights[k]! * all[ids[k]!]![i]! + weights[k + 1]! * all[ids[k + 1]!]![i]!;
  err = Math.max(err, Math.abs(v - want) / (Math.abs(want) + 0.1));
});
console.log(
  `rank ${rank}: MoE layer (dispatch, ${local} expert GEMMs per rank, combine) of ${tokens} tokens per rank, ` +
    `top-${topk} of ${numExperts} experts on ${world} ${group.backend} ranks: ` +
    `${err < 0.02 ? "matches" : "DIFFERS FROM"} the layer computed on one rank (largest difference ${err.toExponential(1)})`,
);
await group.destroy();
if (!(err < 0.02)) process.exit(1);
