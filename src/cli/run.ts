// `symmkit run`: the launcher's own options (declareRunOptions), declared once run is about to parse.
import { InvalidArgumentError } from "../errors.js";
import type { CliCommand } from "./command.js";

export function addRunCommand(program: CliCommand): void {
  program
    .command("run")
    .summary("start N ranks of a script or command, torchrun-style")
    .description(
      "Starts N ranks on this node with the torchrun-style environment, serves the rendezvous store " +
        "(node 0), prefixes every output line with its rank; one failure stops the job.",
    )
    .lazyOptions(async (cmd) => {
      const { declareRunOptions } = await import("../distributed/launcher.js");
      declareRunOptions(cmd);
    })
    .does(async (cmd) => {
      const { launch, launchOptionsOf } = await import("../distributed/launcher.js");
      let options;
      try {
        options = launchOptionsOf(cmd);
      } catch (e) {
        // Options that do not go together (--node-rank beyond --nnodes, ...): the command line is wrong.
        if (e instanceof InvalidArgumentError) cmd.error(e.message);
        throw e;
      }
      return launch(options);
    });
}
