// The commands that check this machine: demo (end to end), doctor (what is installed), kernels (that
// every kernel compiles).
import fs from "node:fs";
import path from "node:path";
import { InvalidArgumentError as CommanderInvalidArgument } from "commander";
import type { CliCommand } from "./command.js";

/** The architectures NVRTC is asked for (compileOptions in src/runtime/jit/compiler.ts checks the same). */
const ARCH = /^sm_\d{2,3}[af]?$/;

function arch(value: string): string {
  if (!ARCH.test(value))
    throw new CommanderInvalidArgument("Expected sm_ and the compute capability, e.g. sm_90a.");
  return value;
}

export function addCheckCommands(program: CliCommand): void {
  program
    .command("demo")
    .summary("the main job: checks symmkit end to end on this machine")
    .description(
      "Checks symmkit end to end on this machine: starts one rank per GPU (4 CPU ranks without a GPU), " +
        "checks every collective against a reference on fresh random data, times them, then runs a " +
        "tensor-parallel MLP block on the fused matmuls. Exits non-zero on any wrong result.",
    )
    .does(async () => {
      const { demo } = await import("../demo.js");
      return demo();
    });

  program
    .command("doctor")
    .summary("driver, GPUs, peer links, NVRTC/NCCL/cuBLASLt versions and paths")
    .description(
      "Says what runs here (first line: the backends that run, what the GPU path lacks), then what symmkit " +
        "finds: the driver, GPUs, peer links, NVRTC, NCCL and cuBLASLt (versions and paths), the CPU " +
        "backend, the SYMMKIT_* variables set. Exits 0 when a backend runs here, 1 when none does.",
    )
    .option("--json", "print the report as JSON (every place searched included)")
    .option("--verbose", "also list every place each missing library was searched")
    .does(async (cmd) => {
      const { json, verbose } = cmd.opts<{ json?: true; verbose?: true }>();
      const { gatherDoctorReport, formatDoctorReport } = await import("../doctor.js");
      const report = gatherDoctorReport();
      const { text, ok } = formatDoctorReport(report, { verbose: verbose === true });
      process.stdout.write(json ? JSON.stringify(report, null, 2) + "\n" : text + "\n");
      return ok ? 0 : 1;
    });

  program
    .command("kernels")
    .summary("compile every kernel symmkit ships (no GPU needed)")
    .description("Compiles every kernel symmkit ships with NVRTC, for one architecture; no GPU needed.")
    .option("--arch <sm_XX>", "the GPU architecture", arch, "sm_90a")
    .option("--out <dir>", "also write the cubins there (for cuobjdump)")
    .does(async (cmd) => {
      const o = cmd.opts<{ arch: string; out?: string }>();
      const { compileCatalog } = await import("../catalog.js");
      const { table } = await import("../bench/report.js");
      const results = compileCatalog(o.arch);
      const rows = results.map((r) => [
        r.program,
        String(r.kernels),
        String(r.cubinBytes),
        r.cacheHit ? "cache" : `${r.ms.toFixed(0)} ms`,
      ]);
      console.log(table(["program", "kernels", "cubin bytes", "compiled"], rows));
      console.log(`all ${results.reduce((a, r) => a + r.kernels, 0)} kernels compile for ${o.arch}`);
      if (o.out) {
        fs.mkdirSync(o.out, { recursive: true });
        for (const r of results) {
          fs.writeFileSync(path.join(o.out, `${r.program.replaceAll("/", "_")}.${o.arch}.cubin`), r.cubin);
        }
      }
      return 0;
    });
}
