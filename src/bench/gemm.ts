// `symmkit bench gemm`: symmkit's Hopper GEMM against cuBLASLt in the same run, on one GPU. Each shape
// is validated first (relative Frobenius error of symmkit against cuBLASLt on the same random inputs),
// then timed as GPU time from CUDA-graph replays of back-to-back GEMMs (median of the replays). With hot
// weights every GEMM reads the same B, so where B is near L2's size part of it stays there from the last
// call; with cold weights the GEMMs of a graph cycle through copies of B that together exceed L2 several
// times over, as a model's layers read weights L2 does not hold (A, the activations, stays hot).
import { SymmkitError } from "../errors.js";
import type { Ptr } from "../cuda/native.js";
import { Device } from "../runtime/device.js";
import { dtypeInfo } from "../runtime/dtype.js";
import { Stream } from "../runtime/stream.js";
import { freshSeed, Tensor } from "../runtime/tensor.js";
import { CublasLtMatmul, type BLayout, type LtElem } from "../ops/gemm/cublaslt-matmul.js";
import { HopperGemm } from "../ops/gemm/hopper-gemm.js";
import { describePlan, launchSymmkitGemm, symmkitGemmPlan } from "../ops/gemm/matmul.js";
import { startProgress } from "./progress.js";
import { benchEnvironment, graphTimeManyUs, table, type BenchEnvironment } from "./report.js";

export type GemmShape = readonly [number, number, number];

/** Whether each timed GEMM reads the B the last one read (hot) or one L2 does not hold (cold). */
export type GemmWeights = "hot" | "cold";

/** Copies of B the GEMMs cycle through with cold weights: together at least 3x L2, so that a copy's
 * bytes have left L2 before the cycle comes back to it. */
export function coldCopies(bBytes: number, l2Bytes: number): number {
  return Math.min(64, Math.max(2, Math.ceil((3 * l2Bytes) / bBytes)));
}

/** `copies` equal tensors of B from `make` (the same seed and offset: every GEMM computes the same product);
 * each `cycle()` gives its own counter, a function whose calls go through their addresses in turn. */
export function cycledCopies(make: () => Tensor, copies: number): { all: Tensor[]; cycle(): () => Ptr } {
  const all = Array.from({ length: copies }, make);
  return {
    all,
    cycle: () => {
      let i = 0;
      return () => all[i++ % copies]!.ptr;
    },
  };
}

export interface GemmRow {
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly elem: LtElem;
  readonly layoutB: BLayout;
  readonly weights: GemmWeights;
  /** Relative Frobenius difference of symmkit's output from cuBLASLt's. */
  readonly relDiff: number;
  /** What matmul() runs (symmkitGemmPlan, in words) and in how many split-K slices; unless that is the
   * plain Hopper kernel unsplit, `us.unsplit` is the plain kernel unsplit, for what the choice gains. */
  readonly plan: string;
  readonly splits: number;
  readonly us: { readonly symmkit: number; readonly cublaslt: number; readonly unsplit?: number };
  readonly tflops: { readonly symmkit: number; readonly cublaslt: number };
}

export interface GemmBenchResult {
  readonly environment: BenchEnvironment;
  readonly seed: string;
  readonly kernel: { readonly registers: number; readonly localBytes: number };
  readonly rows: readonly GemmRow[];
}

export const DEFAULT_GEMM_SHAPES =
  "8192x8192x8192,4096x16384x6656,2048x16384x8192,16384x6656x4096,8192x16384x16384";

/** "8192x8192x8192,4096x16384x6656" -> [[8192, 8192, 8192], [4096, 16384, 6656]] (m x n x k). */
export function parseShapes(spec: string): GemmShape[] {
  return spec.split(",").map((s) => {
    const parts = s.trim().split("x").map(Number);
    if (parts.length !== 3 || parts.some((x) => !Number.isSafeInteger(x) || x < 1)) {
      throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", `shape ${s}: expected MxNxK, e.g. 8192x8192x8192`);
    }
    return parts as unknown as GemmShape;
  });
}

/** ||x - y|| / ||y|| over two decoded outputs. */
export function relFrobenius(x: Float32Array, y: Float32Array): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < x.length; i++) {
    const d = x[i]! - y[i]!;
    num += d * d;
    den += y[i]! * y[i]!;
  }
  return Math.sqrt(num / den);
}

export async function benchGemm(options: {
  shapes: readonly GemmShape[];
  elem: LtElem;
  /** How B is stored (default "nk"). */
  layoutB?: BLayout;
  /** Default "hot". */
  weights?: GemmWeights;
  log?: (line: string) => void;
}): Promise<GemmBenchResult> {
  const layoutB = options.layoutB ?? "nk";
  const weights = options.weights ?? "hot";
  const device = Device.get();
  const stream = Stream.create(device);
  // One process on one GPU, so rank 0. Its line per shape comes once the shape is timed, on stderr as
  // always: the bar goes there too, on a terminal.
  using progress = startProgress({
    title: "gemm",
    total: options.shapes.length,
    rank: 0,
    stream: process.stderr,
    echoSteps: false,
  });
  const log = options.log ?? ((l: string) => progress.log(l));
  const seed = freshSeed();
  const gemm = new HopperGemm(device, {
    elem: options.elem,
    layoutB,
    order: "grouped",
    ready: "none",
    epilogue: "store",
  });
  const lt = CublasLtMatmul.for(device);
  const rows: GemmRow[] = [];
  for (const [m, n, k] of options.shapes) {
    progress.step(`${m}x${n}x${k} ${options.elem} B ${layoutB}, ${weights} weights`);
    const gen = { device, stream, seed, low: -1, high: 1 };
    const a = Tensor.rand([m, k], options.elem, { ...gen, offset: 0 });
    const bShape = layoutB === "nk" ? [n, k] : [k, n];
    const bBytes = n * k * dtypeInfo(options.elem).bytes;
    const copies = weights === "cold" ? coldCopies(bBytes, device.props.l2Bytes) : 1;
    const bs = cycledCopies(() => Tensor.rand(bShape, options.elem, { ...gen, offset: 1n << 40n }), copies);
    const dS = Tensor.full([m, n], NaN, "bf16", { device, stream });
    const dL = Tensor.full([m, n], NaN, "bf16", { device, stream });
    try {
      const problem = { elem: options.elem, m, n, k, layoutB };
      const plan = symmkitGemmPlan(device, problem);
      const splits = plan.splits;
      const plain = plan.kernel === "hopper" && splits === 1;
      // Each implementation cycles through the copies of B from its own counter.
      const [forS, forUnsplit, forL] = [bs.cycle(), bs.cycle(), bs.cycle()];
      const common = { a: a.ptr, m, n, k, stream };
      const runS = (): void =>
        launchSymmkitGemm(device, problem, { ...common, b: forS(), d: dS.ptr }, stream);
      const runUnsplit = (): void => gemm.launch({ ...common, b: forUnsplit(), d: dS.ptr });
      const runL = (): void => lt.run({ ...common, b: forL(), d: dL.ptr, elem: options.elem, layoutB });
      runS();
      runL();
      stream.synchronize();
      const relDiff = relFrobenius(dS.toHost({ decode: true }), dL.toHost({ decode: true }));
      if (!(relDiff < (options.elem === "bf16" ? 1e-2 : 3e-2))) {
        throw new SymmkitError(
          "SYMMKIT_INVALID_ARGUMENT",
          `gemm ${m}x${n}x${k} ${options.elem} B ${layoutB}, ${weights} weights: symmkit differs from cuBLASLt by ${relDiff} (relative Frobenius); not timing a wrong kernel`,
        );
      }
      const flops = 2 * m * n * k;
      // A graph goes through every copy of B at least once, so that its cycle repeats within a replay.
      const perGraph = Math.max(3, copies, Math.min(200, Math.ceil(20e-3 / (flops / 600e12))));
      // Side by side: under a power cap the clock swings within a run, and the kernels do not follow it
      // alike (docs/perf-notes.md: the decode GEMM's ring).
      const us = await graphTimeManyUs(stream, plain ? [runS, runL] : [runS, runL, runUnsplit], {
        perGraph,
        replays: 20,
      });
      const [usS, usL, unsplit] = [us[0]!, us[1]!, us[2]];
      const row: GemmRow = {
        m,
        n,
        k,
        elem: options.elem,
        layoutB,
        weights,
        relDiff,
        plan: describePlan(plan),
        splits,
        us: { symmkit: usS, cublaslt: usL, ...(unsplit === undefined ? {} : { unsplit }) },
        tflops: { symmkit: flops / usS / 1e6, cublaslt: flops / usL / 1e6 },
      };
      rows.push(row);
      log(
        `gemm ${m}x${n}x${k} ${options.elem} B ${layoutB}, ${weights} weights: symmkit ${row.tflops.symmkit.toFixed(0)} TFLOP/s${plain ? "" : ` (${row.plan}; plain unsplit ${(flops / unsplit! / 1e6).toFixed(0)})`}, cuBLASLt ${row.tflops.cublaslt.toFixed(0)} (rel diff ${relDiff.toExponential(2)})`,
      );
    } finally {
      for (const t of [a, ...bs.all, dS, dL]) t.dispose();
    }
  }
  const attrs = gemm.kernel.attributes();
  stream.dispose();
  return {
    environment: benchEnvironment(device, 1, 1),
    seed: seed.toString(),
    kernel: { registers: attrs.registers, localBytes: attrs.localBytes },
    rows,
  };
}

export function formatGemm(r: GemmBenchResult): string {
  const head = `${r.environment.device}, symmkit GEMM: ${r.kernel.registers} registers/thread, ${r.kernel.localBytes} B local`;
  return `${head}\n${table(
    [
      "m",
      "n",
      "k",
      "dtype",
      "B",
      "weights",
      "symmkit us",
      "cuBLASLt us",
      "symmkit TFLOP/s",
      "cuBLASLt TFLOP/s",
      "ratio",
      "rel diff",
      "symmkit kernel",
    ],
    r.rows.map((x) => [
      String(x.m),
      String(x.n),
      String(x.k),
      x.elem,
      x.layoutB,
      x.weights,
      x.us.symmkit.toFixed(1),
      x.us.cublaslt.toFixed(1),
      x.tflops.symmkit.toFixed(0),
      x.tflops.cublaslt.toFixed(0),
      (x.tflops.symmkit / x.tflops.cublaslt).toFixed(3),
      x.relDiff.toExponential(2),
      x.plan,
    ]),
  )}`;
}
