// The demo's tensor-parallel MLP block: all-gather + GEMM (the column-parallel up projection on
// sequence-sharded activations), GELU, GEMM + reduce-scatter (the row-parallel down projection back to
// sequence-sharded activations). On GPUs at Llama-3-70B's sizes (hidden 8192, ffn 28672 split over the
// ranks), fused against symmkit's unfused path (bit for bit) and against NCCL + cuBLASLt, graph-timed; on
// the CPU backend the reference at small sizes, checked against a float64 product.
import { SymmkitError } from "./errors.js";
import type { CpuProcessGroup } from "./cpu/process-group.js";
import { HostTensor } from "./cpu/host-tensor.js";
import type { CudaProcessGroup } from "./init.js";
import type { AllGatherMatmulAlgorithm, MatmulReduceScatterAlgorithm } from "./ops/fused/checks.js";
import { decodeToF32 } from "./runtime/dtype.js";
import { Module } from "./runtime/module.js";
import { Stream } from "./runtime/stream.js";
import { Tensor } from "./runtime/tensor.js";
import { startTogether } from "./bench/collectives.js";
import { relFrobenius } from "./bench/gemm.js";
import { graphTimeManyUs, table } from "./bench/report.js";

const HIDDEN = 8192;
const FFN = 28672;
const TOKENS = 4096;
/** GELU, tanh form: the same formula on both backends. */
const GELU_C = 0.7978845608;

const GELU_SOURCE = `
#include "symmkit/core/types.cuh"
__global__ void gelu(__nv_bfloat16* out, const __nv_bfloat16* x, unsigned long long n) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    const float v = symmkit::to_float(x[i]);
    out[i] = symmkit::from_float<__nv_bfloat16>(0.5f * v * (1.0f + tanhf(${GELU_C}f * (v + 0.044715f * v * v * v))));
  }
}`;

const fail = (what: string): never => {
  throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", `demo: ${what} is wrong`);
};

interface Path {
  readonly name: string;
  readonly ag: AllGatherMatmulAlgorithm;
  readonly rs: MatmulReduceScatterAlgorithm;
}
const PATHS: readonly Path[] = [
  { name: "fused", ag: "fused", rs: "fused" },
  { name: "symmkit unfused", ag: "sequential", rs: "sequential" },
  { name: "NCCL + cuBLASLt", ag: "nccl_cublaslt", rs: "nccl_cublaslt" },
];

/** On GPUs: the block on every path, checked, then graph-timed. */
export async function gpuMlpDemo(
  group: CudaProcessGroup,
  seed: bigint,
  say: (s: string) => void,
): Promise<void> {
  const { rank, worldSize: world, device } = group;
  const c = group.collectives;
  const ffn = Math.floor(FFN / world / 16) * 16;
  const m = Math.floor(TOKENS / world) * world;
  say(
    `tensor-parallel MLP block on ${world} GPU(s): ${m} tokens, hidden ${HIDDEN}, ffn ${ffn} per rank; ` +
      "all-gather + GEMM, GELU, GEMM + reduce-scatter ...",
  );
  const stream = Stream.create(device);
  const gelu = Module.compile(
    { name: "demo/gelu", source: GELU_SOURCE, nameExpressions: ["gelu"] },
    device,
  ).kernel("gelu", ["ptr", "ptr", "u64"]);
  const gen = (shape: [number, number], salt: number, scale: number): Tensor =>
    Tensor.rand(shape, "bf16", {
      seed,
      offset: (BigInt(salt) << 40n) + (BigInt(rank) << 32n),
      low: -scale,
      high: scale,
      device,
      stream,
    });
  const x = gen([m / world, HIDDEN], 1, 1);
  const w1 = gen([ffn, HIDDEN], 2, 0.02);
  const w2 = gen([HIDDEN, ffn], 3, 0.02);
  const gathered = Tensor.empty([m, HIDDEN], "bf16", { device });
  const y = Tensor.empty([m, ffn], "bf16", { device });
  const z = Tensor.empty([m, ffn], "bf16", { device });
  const outs = PATHS.map(() => Tensor.empty([m / world, HIDDEN], "bf16", { device }));
  const block = (i: number): void => {
    const p = PATHS[i]!;
    c.allGatherMatmul(x, w1, { algorithm: p.ag, out: y, gathered, stream });
    gelu.launch({ grid: device.props.smCount * 4, block: 256, stream }, z, y, m * ffn);
    c.matmulReduceScatter(z, w2, { algorithm: p.rs, out: outs[i]!, stream });
  };
  PATHS.forEach((_, i) => block(i));
  group.synchronize(stream);
  (await group.nccl()).synchronize(stream);
  const [fused, unfused, nccl] = outs.map((t) => t.toHost({ stream }));
  for (let i = 0; i < fused!.length; i++)
    if (fused![i] !== unfused![i])
      fail(`the fused MLP block (element ${i} differs from symmkit's unfused path)`);
  const rel = relFrobenius(decodeToF32("bf16", nccl!), decodeToF32("bf16", fused!));
  if (!(rel < 2e-2)) fail(`the MLP block on NCCL + cuBLASLt (relative difference ${rel})`);
  const us = await graphTimeManyUs(
    stream,
    PATHS.map((_, i) => () => block(i)),
    {
      perGraph: 3,
      replays: 10,
      beforeReplay: () => startTogether(group, stream),
      sync: () => group.synchronize(stream),
    },
  );
  const flops = 2 * 2 * m * ffn * HIDDEN;
  say(
    table(
      ["MLP block path", "us", "TFLOP/s per GPU", "vs NCCL + cuBLASLt"],
      PATHS.map((p, i) => [
        p.name,
        us[i]!.toFixed(1),
        (flops / us[i]! / 1e6).toFixed(0),
        (us[2]! / us[i]!).toFixed(2),
      ]),
    ),
  );
  say("the fused MLP block matched symmkit's unfused path bit for bit; NCCL + cuBLASLt within bf16 rounding");
  if (group.sharesGpus)
    say(
      "(these ranks share GPUs, symmkit run --share-gpus: the kernels took turns, so the times say nothing of speed)",
    );
  for (const t of [x, w1, w2, gathered, y, z, ...outs]) t.dispose();
  stream.dispose();
}

const geluHost = (v: number): number => 0.5 * v * (1 + Math.tanh(GELU_C * (v + 0.044715 * v * v * v)));

/** On the CPU backend: the reference block at small sizes, against float64 products of every rank's data. */
export function cpuMlpDemo(group: CpuProcessGroup, seed: bigint, say: (s: string) => void): void {
  const { rank, worldSize: world } = group;
  const c = group.collectives;
  const [rows, hidden, ffn] = [16, 128, 64];
  const m = rows * world;
  say(
    `tensor-parallel MLP block on ${world} CPU ranks: ${m} tokens, hidden ${hidden}, ffn ${ffn} per rank (the reference) ...`,
  );
  const gen = (shape: [number, number], salt: number, r: number, scale: number): HostTensor =>
    HostTensor.rand(shape, "bf16", {
      seed,
      offset: (BigInt(salt) << 40n) + (BigInt(r) << 32n),
      low: -scale,
      high: scale,
    });
  const t0 = performance.now();
  const { out: y } = c.allGatherMatmul(gen([rows, hidden], 1, rank, 1), gen([ffn, hidden], 2, rank, 0.1));
  const z = HostTensor.fromHost(Array.from(y.toHost({ decode: true }), geluHost), "bf16", {
    shape: [m, ffn],
  });
  const out = c.matmulReduceScatter(z, gen([hidden, ffn], 3, rank, 0.1));
  const ms = performance.now() - t0;
  // float64: every rank's shards and weights regenerated here from the seed.
  const xs = Array.from({ length: world }, (_, r) => gen([rows, hidden], 1, r, 1).toHost({ decode: true }));
  const want = new Float64Array(rows * hidden);
  for (let r = 0; r < world; r++) {
    const w1 = gen([ffn, hidden], 2, r, 0.1).toHost({ decode: true });
    const w2 = gen([hidden, ffn], 3, r, 0.1).toHost({ decode: true });
    for (let i = 0; i < rows; i++) {
      const token = rank * rows + i;
      const x = xs[Math.floor(token / rows)]!.subarray(
        (token % rows) * hidden,
        ((token % rows) + 1) * hidden,
      );
      const act = Array.from({ length: ffn }, (_, f) => {
        let s = 0;
        for (let k = 0; k < hidden; k++) s += x[k]! * w1[f * hidden + k]!;
        return geluHost(s);
      });
      for (let j = 0; j < hidden; j++) {
        let s = 0;
        for (let f = 0; f < ffn; f++) s += act[f]! * w2[j * ffn + f]!;
        want[i * hidden + j]! += s;
      }
    }
  }
  const got = out.toHost({ decode: true });
  const rel = relFrobenius(got, Float32Array.from(want));
  if (!(rel < 2e-2)) fail(`the CPU MLP block (relative difference ${rel} from float64)`);
  say(`MLP block on the CPU reference: ${ms.toFixed(1)} ms, within ${rel.toExponential(1)} of float64`);
}
