// An expert-parallel MoE layer: each rank routes its tokens to the experts (spread evenly over ranks),
// each rank runs its experts on what arrived, and combine brings the results back, weighted. Here expert
// e multiplies its tokens by e + 1, so the answer is known exactly. Run:
//   symmkit run -n 2 examples/moe.mjs
import { encode, HostTensor, init, Tensor } from "symmkit";

const group = await init();
const { rank, worldSize } = group;
const Tensors = group.backend === "cpu" ? HostTensor : Tensor;
const tokens = 8;
const hidden = 16;
const topk = 2;
const numExperts = 4 * worldSize;
const local = numExperts / worldSize;

// Token t of this rank: small integers; its experts: two distinct ones; weights in eighths (all exact).
const x = Array.from({ length: tokens * hidden }, (_, i) => ((i * 7 + rank * 3) % 9) - 4);
const ids = Array.from({ length: tokens * topk }, (_, i) => (i * 5 + rank + (i % topk)) % numExperts);
const weights = Array.from({ length: tokens * topk }, (_, i) => (1 + ((i + rank) % 3)) / 8);

const c = group.collectives;
const d = c.dispatch(
  Tensors.fromHost(x, "bf16", { shape: [tokens, hidden] }),
  Tensors.fromHost(ids, "i32", { shape: [tokens, topk] }),
  Tensors.fromHost(weights, "f32", { shape: [tokens, topk] }),
  { numExperts },
);

// This rank's experts on their rows (expert-major: d.counts rows each), on the host for brevity.
const counts = d.counts.toHost();
const rows = d.tokens.toHost({ decode: true });
const y = new Float32Array(rows.length);
let row = 0;
for (let j = 0; j < local; j++)
  for (let n = 0; n < counts[j]; n++, row++)
    for (let i = 0; i < hidden; i++) y[row * hidden + i] = rows[row * hidden + i] * (rank * local + j + 1);
const out = c.combine(Tensors.fromHost(y, "bf16", { shape: [row, hidden] }), d.handle);

// The reference: sum over slots of weight x (expert + 1) x token.
const want = new Float32Array(tokens * hidden);
for (let t = 0; t < tokens; t++)
  for (let k = 0; k < topk; k++)
    for (let i = 0; i < hidden; i++)
      want[t * hidden + i] += weights[t * topk + k] * (ids[t * topk + k] + 1) * x[t * hidden + i];
const got = out.toHost();
const ref = encode("bf16", want);
const wrong = got.findIndex((v, i) => v !== ref[i]);
console.log(
  wrong < 0
    ? `rank ${rank}: MoE dispatch -> ${local} experts per rank -> combine of ${tokens} tokens (top-${topk} of ${numExperts}) on ${worldSize} ${group.backend} ranks matches the reference`
    : `rank ${rank}: element ${wrong} of the combined tokens is ${got[wrong]}, expected ${ref[wrong]}`,
);
await group.destroy();
if (wrong >= 0) process.exit(1);
