// The symmkit command's commands, on commander: a command line it refuses is a UsageError (one line, exit
// code 2) naming the command; options that need a module of symmkit are declared only once their command is
// about to parse or show its help, so that the CLI starts without loading the benchmarks.
import { Command, InvalidArgumentError as CommanderInvalidArgument, type HelpContext } from "commander";
import { SymmkitError } from "../errors.js";

/**
 * A command line symmkit refuses: unknown command or option, an extra argument, a bad value. The CLI's
 * own, not a SymmkitError: those are the library's, each public with its code.
 */
export class UsageError extends Error {
  constructor(
    /** "symmkit bench all-reduce": the command whose arguments were refused. */
    readonly command: string,
    message: string,
  ) {
    super(message);
    this.name = "UsageError";
  }
}

/** What the action returned: the command that ran and its exit code. */
export interface Ran {
  readonly command: CliCommand;
  exitCode?: number;
}

export class CliCommand extends Command {
  /** On the root, once an action starts. */
  ran: Ran | undefined;
  #declareOptions: ((cmd: this) => Promise<void>) | undefined;

  constructor(name?: string) {
    super(name);
    // Commander calls this hook on the parent only, just before the subcommand parses.
    this.hook("preSubcommand", (_, sub) => (sub as CliCommand).prepare());
  }

  override createCommand(name?: string): CliCommand {
    return new CliCommand(name);
  }

  /** "symmkit bench all-reduce". */
  path(): string {
    const names = [this.name()];
    for (let c = this.parent; c; c = c.parent) names.unshift(c.name());
    return names.join(" ");
  }

  root(): CliCommand {
    return this.parent ? (this.parent as CliCommand).root() : this;
  }

  /** Every usage error, commander's and symmkit's, ends here. */
  override error(message: string): never {
    throw new UsageError(
      this.path(),
      // Commander's own start with "error: ", and put a suggestion ("Did you mean ...?") on a line of its own.
      message.replace(/^error: /, "").replaceAll("\n", " "),
    );
  }

  /**
   * Commander asks for the help as an error when a command that needs a subcommand got none: a usage
   * error, but for symmkit alone, which shows the help.
   */
  override help(context?: HelpContext | ((help: string) => string)): never {
    if (typeof context === "object" && context.error && this.parent) {
      this.error(`missing command: one of ${this.commands.map((c) => c.name()).join(", ")}`);
    }
    return super.help();
  }

  /** Declares options through `declare`, which loads the module that knows their values, just in time. */
  lazyOptions(declare: (cmd: this) => Promise<void>): this {
    this.#declareOptions = declare;
    return this;
  }

  /** Declares the lazy options, once: before the command parses, or shows its help. */
  async prepare(): Promise<void> {
    const declare = this.#declareOptions;
    this.#declareOptions = undefined;
    await declare?.(this);
  }

  /** The command's action: what `run` resolves with is the process's exit code. */
  does(run: (cmd: this) => Promise<number> | number): this {
    return this.action(async () => {
      const ran: Ran = { command: this };
      this.root().ran = ran;
      ran.exitCode = await run(this);
    });
  }
}

/** A commander parser made of one of symmkit's: a value it refuses (SYMMKIT_INVALID_ARGUMENT) is a usage error. */
export function valueParser<T>(parse: (value: string) => T): (value: string) => T {
  return (value) => {
    try {
      return parse(value);
    } catch (e) {
      if (e instanceof SymmkitError && e.code === "SYMMKIT_INVALID_ARGUMENT")
        throw new CommanderInvalidArgument(e.message);
      throw e;
    }
  };
}
