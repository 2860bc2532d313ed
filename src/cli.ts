#!/usr/bin/env node
// The symmkit command.
import { exitFlushed } from "./exit.js";
import { parseArgs } from "node:util";
import { SymmkitError } from "./errors.js";
import { VERSION } from "./paths.js";

const HELP = `symmkit ${VERSION}: multi-GPU communication inside GPU kernels over NVLink symmetric memory

usage: symmkit <command> [options]

commands:
  demo                     the main job: checks symmkit end to end on this machine
  run [-n N] [--nnodes M --node-rank R --master-addr A --master-port P] [--grace-ms T]
      script.js [args] | -- command [args]
                           start N ranks (torchrun-style environment, rendezvous store,
                           output prefixed by rank; one failure stops the job)
  doctor [--json]          driver, GPUs, peer links, NVRTC/NCCL/cuBLASLt versions and paths
  kernels [--arch sm_90a] [--out DIR]
                           compile every kernel symmkit ships (no GPU needed); --out writes
                           the cubins (for cuobjdump)
  bench launch [--json F]  kernel launch cost: host time per launch, GPU time in a graph; under
                           symmkit run -n N also host and wall time per eager collective call
  bench barrier [--json F] under symmkit run: cross-GPU barrier and put/wait round-trip latency
  bench link [--bytes 256M] [--json F]
                           under symmkit run: NVLink GB/s per rank, every rank pushing to (or pulling
                           from) every peer at once, by SM stores/loads and by the copy engines
  bench all-reduce|all-gather|reduce-scatter [--sizes 4K:64M] [--dtype bf16]
        [--algorithms a,b] [--json F]
                           under symmkit run: symmkit's algorithms (all, or those named)
                           against NCCL, validated, graph-timed; sizes per rank (all-gather:
                           input, reduce-scatter: output)
  tune [--sizes 4K:64M] [--dtype bf16] [--dir D] [--json F]
                           under symmkit run: measure every collective algorithm and the fused
                           matmuls' crossovers, and write the table auto picks from into D
                           (default ~/.cache/symmkit/tune)
  bench gemm [--shapes MxNxK,...] [--dtype bf16|fp8e4m3] [--layout-b nk|kn] [--json F]
                           one GPU: symmkit's Hopper GEMM against cuBLASLt, TFLOP/s
  bench ag-gemm|gemm-rs [--shapes MxNxK,...] [--dtype bf16|fp8e4m3] [--algorithms a,b] [--json F]
                           under symmkit run: all-gather + GEMM, GEMM + reduce-scatter (full
                           problem m x n x k): fused, sequential, NCCL + cuBLASLt, GEMM alone
  help                     this text
`;

type Command = (args: string[]) => Promise<number> | number;

const commands: Record<string, Command> = {
  help: () => {
    process.stdout.write(HELP);
    return 0;
  },
  run: async (args) => {
    const { launch, parseRunArgs } = await import("./distributed/launcher.js");
    return launch(parseRunArgs(args));
  },
  demo: async () => {
    const { demo } = await import("./demo.js");
    return demo();
  },
  doctor: async (args) => {
    const { values } = parseArgs({ args, options: { json: { type: "boolean" } } });
    const { gatherDoctorReport, formatDoctorReport } = await import("./doctor.js");
    const report = gatherDoctorReport();
    const { text, ok } = formatDoctorReport(report);
    process.stdout.write(values.json ? JSON.stringify(report, null, 2) + "\n" : text + "\n");
    return ok ? 0 : 1;
  },
  kernels: async (args) => {
    const { values } = parseArgs({
      args,
      options: { arch: { type: "string", default: "sm_90a" }, out: { type: "string" } },
    });
    const { compileCatalog } = await import("./catalog.js");
    const { table } = await import("./bench/report.js");
    const results = compileCatalog(values.arch);
    const rows = results.map((r) => [
      r.program,
      String(r.kernels),
      String(r.cubinBytes),
      r.cacheHit ? "cache" : `${r.ms.toFixed(0)} ms`,
    ]);
    console.log(table(["program", "kernels", "cubin bytes", "compiled"], rows));
    console.log(`all ${results.reduce((a, r) => a + r.kernels, 0)} kernels compile for ${values.arch}`);
    if (values.out) {
      const { default: fs } = await import("node:fs");
      const { default: path } = await import("node:path");
      fs.mkdirSync(values.out, { recursive: true });
      for (const r of results) {
        fs.writeFileSync(
          path.join(values.out, `${r.program.replaceAll("/", "_")}.${values.arch}.cubin`),
          r.cubin,
        );
      }
    }
    return 0;
  },
  tune: async (args) => {
    const { values } = parseArgs({
      args,
      options: {
        sizes: { type: "string", default: "4K:64M" },
        dtype: { type: "string", default: "bf16" },
        dir: { type: "string" },
        json: { type: "string" },
      },
    });
    const { tune, formatTune } = await import("./bench/tune.js");
    const { parseSizes, formatCollectives } = await import("./bench/collectives.js");
    const { dtypeInfo } = await import("./runtime/dtype.js");
    const { writeJson } = await import("./bench/report.js");
    const r = await tune({
      sizes: parseSizes(values.sizes),
      dtype: dtypeInfo(values.dtype as "bf16").name,
      dir: values.dir,
    });
    if (r) {
      const { formatFused } = await import("./bench/fused.js");
      for (const x of r.results) console.log(formatCollectives(x));
      for (const x of r.fused) console.log(formatFused(x));
      console.log(formatTune(r));
      if (values.json) writeJson(values.json, { collectives: r.results, fused: r.fused });
    }
    return 0;
  },
  bench: async (args) => {
    const [what, ...rest] = args;
    const { values } = parseArgs({
      args: rest,
      options: {
        json: { type: "string" },
        sizes: { type: "string", default: "4K:64M" },
        algorithms: { type: "string" },
        dtype: { type: "string", default: "bf16" },
        shapes: { type: "string" },
        "layout-b": { type: "string", default: "nk" },
        bytes: { type: "string", default: "256M" },
      },
    });
    const { writeJson } = await import("./bench/report.js");
    // Multi-rank benchmarks return their result on rank 0 only: the others print nothing.
    const report = <R>(r: R | undefined, format: (r: R) => string): number => {
      if (r) {
        console.log(format(r));
        if (values.json) writeJson(values.json, r);
      }
      return 0;
    };
    if (what === "launch") {
      // Under `symmkit run -n N` (N > 1) it also times eager collective calls.
      if (Number(process.env.WORLD_SIZE ?? 1) > 1) {
        const { benchEager, formatEager } = await import("./bench/eager.js");
        return report(await benchEager(), formatEager);
      }
      const { benchLaunch, formatLaunch } = await import("./bench/launch.js");
      return report(benchLaunch(), formatLaunch);
    }
    if (what === "barrier") {
      const { benchBarrier, formatBarrier } = await import("./bench/barrier.js");
      return report(await benchBarrier(), formatBarrier);
    }
    if (what === "link") {
      const { benchLink, formatLink } = await import("./bench/link.js");
      const { parseSizes } = await import("./bench/collectives.js");
      return report(await benchLink(parseSizes(values.bytes)[0]!), formatLink);
    }
    if (what === "all-reduce" || what === "all-gather" || what === "reduce-scatter") {
      const bench = await import("./bench/collectives.js");
      const { dtypeInfo } = await import("./runtime/dtype.js");
      const options = {
        sizes: bench.parseSizes(values.sizes),
        dtype: dtypeInfo(values.dtype as "bf16").name,
        implementations: values.algorithms?.split(","),
      };
      const run = {
        "all-reduce": bench.benchAllReduce,
        "all-gather": bench.benchAllGather,
        "reduce-scatter": bench.benchReduceScatter,
      }[what];
      return report(await run(options), bench.formatCollectives);
    }
    if (what === "gemm") {
      const { benchGemm, formatGemm, parseShapes, DEFAULT_GEMM_SHAPES } = await import("./bench/gemm.js");
      const elem = values.dtype;
      if (elem !== "bf16" && elem !== "fp8e4m3")
        throw new SymmkitError(
          "SYMMKIT_INVALID_ARGUMENT",
          `bench gemm: --dtype bf16 or fp8e4m3, not ${elem}`,
        );
      const layoutB = values["layout-b"];
      if (layoutB !== "nk" && layoutB !== "kn")
        throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", `bench gemm: --layout-b nk or kn, not ${layoutB}`);
      return report(
        await benchGemm({ shapes: parseShapes(values.shapes ?? DEFAULT_GEMM_SHAPES), elem, layoutB }),
        formatGemm,
      );
    }
    if (what === "ag-gemm" || what === "gemm-rs") {
      const { benchFused, formatFused, DEFAULT_FUSED_SHAPES } = await import("./bench/fused.js");
      const { parseShapes } = await import("./bench/gemm.js");
      const elem = values.dtype;
      if (elem !== "bf16" && elem !== "fp8e4m3")
        throw new SymmkitError(
          "SYMMKIT_INVALID_ARGUMENT",
          `bench ${what}: --dtype bf16 or fp8e4m3, not ${elem}`,
        );
      return report(
        await benchFused({
          bench: what,
          shapes: parseShapes(values.shapes ?? DEFAULT_FUSED_SHAPES[what]),
          elem,
          implementations: values.algorithms?.split(","),
        }),
        formatFused,
      );
    }
    throw new SymmkitError(
      "SYMMKIT_INVALID_ARGUMENT",
      `unknown benchmark ${String(what)}; available: launch, barrier, link, all-reduce, all-gather, reduce-scatter, gemm, ag-gemm, gemm-rs`,
    );
  },
};

async function main(argv: string[]): Promise<number> {
  const [name = "help", ...args] = argv;
  if (name === "--version" || name === "-v") {
    console.log(VERSION);
    return 0;
  }
  const cmd = commands[name === "--help" || name === "-h" ? "help" : name];
  if (!cmd) {
    process.stderr.write(`symmkit: unknown command ${name}\n\n${HELP}`);
    return 2;
  }
  return cmd(args);
}

// Exit explicitly: a command that failed may leave connections open (the store, sockets), and a rank
// that keeps running after its error would hold the whole job. Output is flushed first (src/exit.ts).
main(process.argv.slice(2)).then(
  (code) => exitFlushed(code),
  (e: unknown) => {
    if (e instanceof SymmkitError) process.stderr.write(`symmkit: ${e.code}: ${e.message}\n`);
    else process.stderr.write(`symmkit: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    return exitFlushed(1);
  },
);
