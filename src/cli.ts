#!/usr/bin/env node
// The symmkit command (its commands are in src/cli/). A command line it refuses is one line on stderr and
// exit code 2; an error a command throws is one line, `symmkit <command>: <message> [<code>]`, and exit code
// 1. SYMMKIT_DEBUG adds the error's stack.
import { inspect } from "node:util";
import { CommanderError } from "commander";
import { addBenchCommands } from "./cli/bench.js";
import { addCheckCommands } from "./cli/checks.js";
import { CliCommand, UsageError } from "./cli/command.js";
import { addReportCommand } from "./cli/report.js";
import { addRunCommand } from "./cli/run.js";
import { CudaError, SymmkitError } from "./errors.js";
import { exitFlushed } from "./exit.js";
import { VERSION } from "./paths.js";

function program(): CliCommand {
  const symmkit = new CliCommand("symmkit")
    .description(
      `symmkit ${VERSION}: multi-GPU communication inside GPU kernels over NVLink symmetric memory`,
    )
    .version(VERSION, "-v, --version", "print the version")
    // The settings below are inherited by the commands made after them.
    .exitOverride()
    // Options after a command's name are the command's: run passes its command's through.
    .enablePositionalOptions()
    // Commands list by name: the options of some are only declared when they run (CliCommand.lazyOptions).
    .configureHelp({ subcommandTerm: (cmd) => cmd.name() })
    .addHelpText(
      "after",
      "\nsymmkit <command> --help shows a command's options; SYMMKIT_DEBUG=1 adds the stack to errors.",
    );
  addCheckCommands(symmkit);
  addRunCommand(symmkit);
  addBenchCommands(symmkit);
  addReportCommand(symmkit);
  symmkit
    .command("help")
    .summary("show the help of symmkit, or of a command")
    .description("Shows the help of symmkit, or of the command named (the same as its --help).")
    .argument("[command...]", "a command, e.g. bench all-reduce")
    .does(async (cmd) => {
      let target = symmkit;
      cmd.args.forEach((name, i) => {
        const sub = target.commands.find((c) => c.name() === name);
        if (!sub) cmd.error(`unknown command '${cmd.args.slice(0, i + 1).join(" ")}'`);
        target = sub as CliCommand;
      });
      await target.prepare();
      target.outputHelp();
      return 0;
    });
  return symmkit;
}

/** Whether SYMMKIT_DEBUG asks for stacks; a bad value is said, and counts as off. */
async function debugging(): Promise<boolean> {
  const { readEnvVar } = await import("./settings.js");
  try {
    return readEnvVar("SYMMKIT_DEBUG");
  } catch (e) {
    process.stderr.write(describe(e, "symmkit", false) + "\n");
    return false;
  }
}

/** What is said of an error that the command `where` ("symmkit run") threw: a line, then any more lines of its message. */
function describe(e: unknown, where: string, debug: boolean): string {
  if (!(e instanceof Error)) return `${where}: ${String(e)}`;
  // Messages of the launcher and the benchmarks may name their command already: once is enough.
  const named = [`${where}: `, `${where.replace(/^symmkit /, "")}: `].find((p) => e.message.startsWith(p));
  const [first, ...more] = e.message.slice(named?.length ?? 0).split("\n");
  const said =
    e instanceof SymmkitError
      ? `${first} [${e.code}]`
      : `${e.name === "Error" ? "" : `${e.name}: `}${first}${debug ? "" : " (SYMMKIT_DEBUG=1 shows the stack)"}`;
  return [`${where}: ${said}`, ...more].join("\n");
}

async function main(argv: string[]): Promise<number> {
  const symmkit = program();
  try {
    await symmkit.parseAsync(argv, { from: "user" });
    return symmkit.ran?.exitCode ?? 0;
  } catch (thrown) {
    // The help or the version, written already.
    if (thrown instanceof CommanderError) return thrown.exitCode;
    const debug = await debugging();
    // A CUDA call that saw a kernel's failure: the record the kernel left says which peer and call.
    const e =
      thrown instanceof CudaError
        ? (await import("./distributed/sync-watch.js")).explainCudaFailure(thrown)
        : thrown;
    if (e instanceof UsageError) {
      process.stderr.write(`${e.command}: ${e.message} (see ${e.command} --help)\n`);
    } else {
      process.stderr.write(describe(e, symmkit.ran?.command.path() ?? "symmkit", debug) + "\n");
    }
    if (debug) process.stderr.write(inspect(e) + "\n");
    return e instanceof UsageError ? 2 : 1;
  }
}

/**
 * Our output's reader went away (symmkit --help | head -1): nothing more can be said, so stop at once and
 * quietly, with the status of a process killed by SIGPIPE (which Node ignores). `symmkit run` stops its
 * ranks as it exits.
 */
function onOutputError(e: NodeJS.ErrnoException): void {
  process.exit(e.code === "EPIPE" ? 128 + 13 : 1);
}
process.stdout.on("error", onOutputError);
process.stderr.on("error", onOutputError);

// Exit explicitly: a command that failed may leave connections open (the store, sockets), and a rank
// that keeps running after its error would hold the whole job. Output is flushed first (src/exit.ts).
void main(process.argv.slice(2)).then(exitFlushed);
