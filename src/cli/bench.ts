// `symmkit bench ...` and `symmkit tune`. Options whose values a benchmark module parses (sizes, shapes,
// algorithm names) are declared once that module is loaded, just before the command parses or shows help.
import { InvalidArgumentError as CommanderInvalidArgument, Option } from "commander";
import { InvalidArgumentError, UnsupportedError } from "../errors.js";
import type { GemmShape, GemmWeights } from "../bench/gemm.js";
import type { BLayout, LtElem } from "../ops/gemm/cublaslt-matmul.js";
import { DTYPES, type DType } from "../runtime/dtype.js";
import { valueParser, type CliCommand } from "./command.js";

const COLLECTIVES = {
  "all-reduce": "sizes are each rank's input",
  "all-gather": "sizes are each rank's input",
  "reduce-scatter": "sizes are each rank's output",
} as const;
type CollectiveBench = keyof typeof COLLECTIVES;

const FUSED = {
  "ag-gemm": "all-gather + GEMM",
  "gemm-rs": "GEMM + reduce-scatter",
  "gemm-ar": "GEMM + all-reduce",
} as const;

const RUN_UNDER = "Run it under symmkit run -n N, e.g. symmkit run -n 2 -- symmkit bench";

/**
 * --sizes lo:hi through parseSizes (the benchmarks' parser: lo to hi by powers of 4), refusing also what
 * it would not step through: a zero (it would never reach hi), a range ending below its start, a third end.
 */
function sizeRange(parseSizes: (spec: string) => number[]): (spec: string) => number[] {
  return valueParser((spec) => {
    const ends = spec.split(":");
    if (ends.length > 2 || ends.some((end) => /^0+[kmg]?$/i.test(end)))
      throw new InvalidArgumentError(`sizes ${spec}: expected a size or lo:hi of sizes >= 1, e.g. 4K:64M`);
    const sizes = parseSizes(spec);
    if (sizes.length === 0) throw new InvalidArgumentError(`sizes ${spec}: the range ends below its start`);
    return sizes;
  });
}

function sizesOption(parseSizes: (spec: string) => number[]): Option {
  const spec = "4K:64M";
  return new Option("--sizes <lo:hi>", "bytes per rank, lo to hi by powers of 4 (K, M, G: binary)")
    .argParser(sizeRange(parseSizes))
    .default(parseSizes(spec), spec);
}

/** One size, as --sizes takes its ends. */
function oneSizeParser(parseSizes: (spec: string) => number[]): (value: string) => number {
  return (value) => {
    if (value.includes(":"))
      throw new CommanderInvalidArgument("Expected one size, e.g. 256M (K, M, G: binary).");
    return sizeRange(parseSizes)(value)[0]!;
  };
}

/** --staging: each rank's staging buffer, one size. */
function stagingOption(parseSizes: (spec: string) => number[], description: string): Option {
  return new Option("--staging <size>", description).argParser(oneSizeParser(parseSizes));
}

/** `flag` a,b: what to time among `known`, comma-separated (default: all). */
function namesOption(flag: string, known: readonly string[]): Option {
  return new Option(
    `${flag} <names>`,
    `what to time, comma-separated: ${known.join(", ")} (default: all)`,
  ).argParser(algorithmList(known));
}

/** --algorithms a,b: names among `known` (when the module says which it knows). */
function algorithmList(known?: readonly string[]): (spec: string) => string[] {
  return (spec) => {
    const names = spec.split(",");
    if (names.some((n) => !/^[a-z0-9_-]+$/.test(n)))
      throw new CommanderInvalidArgument("Expected names separated by commas, e.g. one_shot,two_shot.");
    const unknown = known ? names.filter((n) => !known.includes(n)) : [];
    if (unknown.length)
      throw new CommanderInvalidArgument(
        `No algorithm ${unknown.join(", ")}; there are ${known?.join(", ")}.`,
      );
    return names;
  };
}

const jsonOption = (): Option => new Option("--json <file>", "also write the result to this JSON file");

/** --shapes MxNxK,... through the benchmarks' parser, `spec` by default. */
function shapesOption(parseShapes: (spec: string) => GemmShape[], spec: string): Option {
  return new Option("--shapes <MxNxK,...>", "problems to time: m x n x k, comma-separated")
    .argParser(valueParser(parseShapes))
    .default(parseShapes(spec), spec);
}

const gemmDtypeOption = (): Option =>
  new Option("--dtype <name>", "element type")
    .choices(["bf16", "fp8e4m3"] satisfies LtElem[])
    .default("bf16");

const dtypeOption = (): Option =>
  new Option("--dtype <name>", "element type").choices(Object.keys(DTYPES)).default("bf16");

/**
 * Prints a benchmark's result and writes it to --json. A benchmark of several ranks returns its result on
 * rank 0 only: the others print nothing.
 */
async function show<R>(cmd: CliCommand, result: R | undefined, format: (r: R) => string): Promise<number> {
  if (result) {
    console.log(format(result));
    const { json } = cmd.opts<{ json?: string }>();
    if (json) {
      const { writeJson } = await import("../bench/report.js");
      writeJson(json, result);
    }
  }
  return 0;
}

/** Benchmarks time the GPU and NCCL: ranks started with --share-gpus may take turns on a GPU, and NCCL
 * connects them through sockets, so they would time nothing real. */
async function refuseSharedGpus(): Promise<void> {
  const { readDistEnv } = await import("../distributed/env.js");
  if (readDistEnv().shareGpus)
    throw new UnsupportedError(
      "these ranks were started with symmkit run --share-gpus: they may take turns on a GPU and NCCL " +
        "connects them through sockets, so timings would mean nothing; benchmark with one rank per GPU, " +
        "without --share-gpus",
    );
}

export function addBenchCommands(program: CliCommand): void {
  const bench = program
    .command("bench")
    .summary("benchmarks: launch, barrier, link, collectives, GEMM, fused matmuls, fused norm")
    .description(
      "Benchmarks, each validated before it is timed; the multi-GPU ones run under symmkit run -n N.",
    )
    // symmkit help bench <name> instead: commander's would show the help before the options are declared.
    .helpCommand(false)
    .hook("preAction", refuseSharedGpus);

  bench
    .command("launch")
    .summary("kernel launch cost; under symmkit run -n N also eager collective calls")
    .description(
      "Kernel launch cost: host time per launch, GPU time in a graph. Under symmkit run -n N (N > 1), " +
        "host and wall time per eager collective call, every algorithm.",
    )
    .addOption(jsonOption())
    .does(async (cmd) => {
      if (Number(process.env.WORLD_SIZE ?? 1) > 1) {
        const { benchEager, formatEager } = await import("../bench/eager.js");
        return show(cmd, await benchEager(), formatEager);
      }
      const { benchLaunch, formatLaunch } = await import("../bench/launch.js");
      return show(cmd, benchLaunch(), formatLaunch);
    });

  bench
    .command("barrier")
    .summary("cross-GPU barrier and put/wait round-trip latency (under symmkit run)")
    .description(`Cross-GPU barrier and put/wait round-trip latency. ${RUN_UNDER} barrier`)
    .addOption(jsonOption())
    .does(async (cmd) => {
      const { benchBarrier, formatBarrier } = await import("../bench/barrier.js");
      return show(cmd, await benchBarrier(), formatBarrier);
    });

  bench
    .command("link")
    .summary("NVLink GB/s per rank, every rank to every peer at once (under symmkit run)")
    .description(
      "NVLink GB/s per rank, every rank pushing to (or pulling from) every peer at once, by SM " +
        `stores/loads and by the copy engines. ${RUN_UNDER} link`,
    )
    .lazyOptions(async (cmd) => {
      const { parseSizes } = await import("../bench/collectives.js");
      const spec = "256M";
      const oneSize = oneSizeParser(parseSizes);
      cmd
        .addOption(
          new Option("--bytes <size>", "bytes each rank moves to each peer")
            .argParser(oneSize)
            .default(oneSize(spec), spec),
        )
        .addOption(jsonOption());
    })
    .does(async (cmd) => {
      const { bytes } = cmd.opts<{ bytes: number }>();
      const { benchLink, formatLink } = await import("../bench/link.js");
      return show(cmd, await benchLink(bytes), formatLink);
    });

  for (const name of Object.keys(COLLECTIVES) as CollectiveBench[]) {
    bench
      .command(name)
      .summary(`${name}: symmkit's algorithms against NCCL (under symmkit run)`)
      .description(
        `${name}: symmkit's algorithms (all, or those named) against NCCL, validated, graph-timed; ` +
          `${COLLECTIVES[name]}. ${RUN_UNDER} ${name}`,
      )
      .lazyOptions(async (cmd) => {
        const { parseSizes, BENCH_IMPLEMENTATIONS } = await import("../bench/collectives.js");
        const known = BENCH_IMPLEMENTATIONS[name].map((i) => i.name);
        cmd
          .addOption(sizesOption(parseSizes))
          .addOption(dtypeOption())
          .addOption(
            new Option(
              "--algorithms <names>",
              `the algorithms to time, comma-separated: ${known.join(", ")} (default: all; nccl always runs)`,
            ).argParser(algorithmList(known)),
          )
          .addOption(jsonOption());
      })
      .does(async (cmd) => {
        const o = cmd.opts<{ sizes: number[]; dtype: DType; algorithms?: string[] }>();
        const b = await import("../bench/collectives.js");
        const run = {
          "all-reduce": b.benchAllReduce,
          "all-gather": b.benchAllGather,
          "reduce-scatter": b.benchReduceScatter,
        }[name];
        const result = await run({ sizes: o.sizes, dtype: o.dtype, implementations: o.algorithms });
        return show(cmd, result, b.formatCollectives);
      });
  }

  bench
    .command("gemm")
    .summary("one GPU: symmkit's Hopper GEMM against cuBLASLt, TFLOP/s")
    .description("One GPU: symmkit's Hopper GEMM against cuBLASLt, validated, graph-timed, in TFLOP/s.")
    .lazyOptions(async (cmd) => {
      const { parseShapes, DEFAULT_GEMM_SHAPES } = await import("../bench/gemm.js");
      cmd
        .addOption(shapesOption(parseShapes, DEFAULT_GEMM_SHAPES))
        .addOption(gemmDtypeOption())
        .addOption(
          new Option("--layout-b <layout>", "how B is stored: nk is [n, k], kn is [k, n]")
            .choices(["nk", "kn"] satisfies BLayout[])
            .default("nk"),
        )
        .addOption(
          new Option(
            "--weights <where>",
            "hot: every GEMM reads the B the last one read; cold: they cycle through copies of B that L2 cannot hold, as a model's layers do",
          )
            .choices(["hot", "cold"] satisfies GemmWeights[])
            .default("hot"),
        )
        .addOption(jsonOption());
    })
    .does(async (cmd) => {
      const o = cmd.opts<{ shapes: GemmShape[]; dtype: LtElem; layoutB: BLayout; weights: GemmWeights }>();
      const { benchGemm, formatGemm } = await import("../bench/gemm.js");
      const options = { shapes: o.shapes, elem: o.dtype, layoutB: o.layoutB, weights: o.weights };
      return show(cmd, await benchGemm(options), formatGemm);
    });

  for (const name of Object.keys(FUSED) as (keyof typeof FUSED)[]) {
    bench
      .command(name)
      .summary(`${FUSED[name]}: symmkit's constructions against NCCL + cuBLASLt (under symmkit run)`)
      .description(
        `${FUSED[name]} on the full problem m x n x k: symmkit's constructions (fused where there is one, ` +
          `and sequential), NCCL + cuBLASLt, and the GEMM alone. ${RUN_UNDER} ${name}`,
      )
      .lazyOptions(async (cmd) => {
        const { parseShapes } = await import("../bench/gemm.js");
        const { DEFAULT_FUSED_SHAPES } = await import("../bench/fused.js");
        cmd
          .addOption(shapesOption(parseShapes, DEFAULT_FUSED_SHAPES[name]))
          .addOption(gemmDtypeOption())
          .addOption(
            new Option(
              "--algorithms <names>",
              "the implementations to time, comma-separated (default: all; nccl_cublaslt always runs)",
            ).argParser(algorithmList()),
          )
          .addOption(jsonOption());
      })
      .does(async (cmd) => {
        const o = cmd.opts<{ shapes: GemmShape[]; dtype: LtElem; algorithms?: string[] }>();
        const { benchFused, formatFused } = await import("../bench/fused.js");
        const result = await benchFused({
          bench: name,
          shapes: o.shapes,
          elem: o.dtype,
          implementations: o.algorithms,
        });
        return show(cmd, result, formatFused);
      });
  }

  /** --tokens/--hidden: positive integers, comma-separated. */
  const intList = (what: string, max: number) =>
    valueParser((spec: string): number[] => {
      const values = spec.split(",").map((v) => Number(v));
      if (values.some((v) => !Number.isSafeInteger(v) || v < 1 || v > max))
        throw new InvalidArgumentError(
          `${what} ${spec}: expected integers from 1 to ${max}, comma-separated`,
        );
      return values;
    });
  bench
    .command("ar-norm")
    .summary(
      "all-reduce + bias + residual + RMSNorm against plain all-reduce and NCCL + norm (under symmkit run)",
    )
    .description(
      "allReduceRmsNorm on tokens x hidden bf16 per rank: every algorithm, the plain all-reduce of the same " +
        `bytes (symmkit's and NCCL's), and NCCL's all-reduce then the norm kernel; validated, graph-timed. ${RUN_UNDER} ar-norm`,
    )
    .lazyOptions(async (cmd) => {
      const { DEFAULT_AR_NORM_TOKENS, DEFAULT_AR_NORM_HIDDEN } = await import("../bench/ar-norm.js");
      const { AR_NORM_TUNABLE } = await import("../ops/norm/checks.js");
      cmd
        .addOption(
          new Option("--tokens <n,...>", "rows per rank")
            .argParser(intList("tokens", 1 << 20))
            .default(DEFAULT_AR_NORM_TOKENS, DEFAULT_AR_NORM_TOKENS.join(",")),
        )
        .addOption(
          new Option("--hidden <n,...>", "hidden sizes (multiples of 8 up to 16384)")
            .argParser(intList("hidden", 16384))
            .default(DEFAULT_AR_NORM_HIDDEN, DEFAULT_AR_NORM_HIDDEN.join(",")),
        )
        .addOption(
          new Option(
            "--algorithms <names>",
            `allReduceRmsNorm's algorithms to time, comma-separated: ${AR_NORM_TUNABLE.join(", ")} (default: all)`,
          ).argParser(algorithmList(AR_NORM_TUNABLE)),
        )
        .addOption(jsonOption());
    })
    .does(async (cmd) => {
      const o = cmd.opts<{ tokens: number[]; hidden: number[]; algorithms?: string[] }>();
      const { benchArNorm, formatArNorm } = await import("../bench/ar-norm.js");
      return show(cmd, await benchArNorm(o), formatArNorm);
    });

  bench
    .command("all-to-all")
    .summary("allToAll's algorithms against NCCL's grouped send/recv (under symmkit run)")
    .description(
      "allToAll of each size per rank (u8): symmkit's algorithms and NCCL's grouped send/recv as a " +
        `framework calls it; validated, graph-timed. ${RUN_UNDER} all-to-all`,
    )
    .lazyOptions(async (cmd) => {
      const { parseSizes } = await import("../bench/collectives.js");
      const { ALL_TO_ALL_BENCH_NAMES } = await import("../bench/all-to-all.js");
      cmd
        .addOption(sizesOption(parseSizes))
        .addOption(namesOption("--algorithms", ALL_TO_ALL_BENCH_NAMES))
        .addOption(
          stagingOption(
            parseSizes,
            "each rank's staging buffer (default: the largest size, so that pull takes every size; pull is skipped where x exceeds it)",
          ),
        )
        .addOption(jsonOption());
    })
    .does(async (cmd) => {
      const o = cmd.opts<{ sizes: number[]; algorithms?: string[]; staging?: number }>();
      const { benchAllToAll, formatAllToAll } = await import("../bench/all-to-all.js");
      return show(cmd, await benchAllToAll(o), formatAllToAll);
    });

  bench
    .command("send-recv")
    .summary("send/recv one way and sendRecv both ways, every algorithm (under symmkit run, even ranks)")
    .description(
      "Point-to-point between rank pairs (2p, 2p + 1): the even rank sends and the odd one receives, then " +
        `both at once with sendRecv, each algorithm of send/recv; validated, graph-timed. ${RUN_UNDER} send-recv`,
    )
    .lazyOptions(async (cmd) => {
      const { parseSizes } = await import("../bench/collectives.js");
      const { SEND_RECV_BENCH_NAMES } = await import("../bench/send-recv.js");
      cmd
        .addOption(sizesOption(parseSizes))
        .addOption(namesOption("--algorithms", SEND_RECV_BENCH_NAMES))
        .addOption(
          stagingOption(
            parseSizes,
            "each rank's staging buffer (default: 64M, init()'s default; copy_engine moves half of it a chunk, at most 64 MiB)",
          ),
        )
        .addOption(jsonOption());
    })
    .does(async (cmd) => {
      const o = cmd.opts<{ sizes: number[]; algorithms?: string[]; staging?: number }>();
      const { benchSendRecv, formatSendRecv } = await import("../bench/send-recv.js");
      return show(cmd, await benchSendRecv(o), formatSendRecv);
    });

  bench
    .command("hosts")
    .summary("collectives across hosts: hierarchical against flat NCCL (under symmkit run --nnodes M)")
    .description(
      "The collectives of a group across hosts (init({ acrossHosts: true })): hierarchical (symmkit inside " +
        "each host, NCCL between hosts) against NCCL over the whole group; validated, graph-timed. Run it on " +
        "every host: SYMMKIT_JOB_TOKEN=<secret> symmkit run --nnodes M --node-rank R --master-addr <node 0> " +
        "--master-port P -n N -- symmkit bench hosts",
    )
    .lazyOptions(async (cmd) => {
      const { parseSizes } = await import("../bench/collectives.js");
      const { HOSTS_BENCH_COLLECTIVES } = await import("../bench/hosts.js");
      cmd
        .addOption(sizesOption(parseSizes))
        .addOption(namesOption("--collectives", HOSTS_BENCH_COLLECTIVES))
        .addOption(jsonOption());
    })
    .does(async (cmd) => {
      const o = cmd.opts<{ sizes: number[]; collectives?: string[] }>();
      const { benchHosts, formatHosts } = await import("../bench/hosts.js");
      return show(cmd, await benchHosts(o), formatHosts);
    });

  bench
    .command("moe")
    .summary("MoE dispatch and combine at the references' shapes (under symmkit run)")
    .description(
      "dispatch pull (eager: it waits on the host for the counts) and pull_device eager; dispatch pull_device bf16 and fp8 and combine pull, in place and per_rank (graph-timed) of tokens x hidden " +
        `per rank, top-k of E experts at random; validated through an identity expert; GB/s by rows and by DeepEP's count. ${RUN_UNDER} moe`,
    )
    .lazyOptions(async (cmd) => {
      const { DEFAULT_MOE_SHAPES } = await import("../bench/moe.js");
      const d = DEFAULT_MOE_SHAPES[0]!;
      cmd
        .addOption(
          new Option("--tokens <n,...>", "tokens per rank").argParser(intList("tokens", 1 << 20)).default(
            DEFAULT_MOE_SHAPES.map((s) => s.tokens),
            DEFAULT_MOE_SHAPES.map((s) => s.tokens).join(","),
          ),
        )
        .addOption(
          new Option("--hidden <n>", "hidden size")
            .argParser(intList("hidden", 1 << 16))
            .default([d.hidden], String(d.hidden)),
        )
        .addOption(
          new Option("--topk <k>", "experts per token")
            .argParser(intList("topk", 64))
            .default([d.topk], String(d.topk)),
        )
        .addOption(
          new Option("--experts <E>", "experts in all (a multiple of the world size)")
            .argParser(intList("experts", 1 << 16))
            .default([d.experts], String(d.experts)),
        )
        .addOption(jsonOption());
    })
    .does(async (cmd) => {
      const o = cmd.opts<{ tokens: number[]; hidden: number[]; topk: number[]; experts: number[] }>();
      const { benchMoe, formatMoe } = await import("../bench/moe.js");
      const shapes = o.tokens.map((tokens) => ({
        tokens,
        hidden: o.hidden[0]!,
        topk: o.topk[0]!,
        experts: o.experts[0]!,
      }));
      return show(cmd, await benchMoe({ shapes }), formatMoe);
    });

  program
    .command("tune")
    .summary("measure the collectives and fused matmuls, write the table auto picks from")
    .description(
      "Measures every collective algorithm and the fused matmuls' crossovers, and writes the table " +
        "algorithm auto picks from. Run it under symmkit run -n N, e.g. symmkit run -n 2 -- symmkit tune",
    )
    .lazyOptions(async (cmd) => {
      const { parseSizes } = await import("../bench/collectives.js");
      cmd
        .addOption(sizesOption(parseSizes))
        .addOption(dtypeOption())
        .option(
          "--dir <dir>",
          "where the table goes (default: $SYMMKIT_TUNE_DIR, else ~/.cache/symmkit/tune)",
        )
        .addOption(jsonOption());
    })
    .hook("preAction", refuseSharedGpus)
    .does(async (cmd) => {
      const o = cmd.opts<{ sizes: number[]; dtype: DType; dir?: string; json?: string }>();
      const { tune, formatTune } = await import("../bench/tune.js");
      const r = await tune({ sizes: o.sizes, dtype: o.dtype, dir: o.dir });
      if (r) {
        const { formatCollectives } = await import("../bench/collectives.js");
        const { formatFused } = await import("../bench/fused.js");
        const { writeJson } = await import("../bench/report.js");
        for (const x of r.results) console.log(formatCollectives(x));
        for (const x of r.fused) console.log(formatFused(x));
        console.log(formatTune(r));
        if (o.json) writeJson(o.json, { collectives: r.results, fused: r.fused });
      }
      return 0;
    });
}
