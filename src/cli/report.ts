// `symmkit report`: benchmark results (the JSON files of --json) as one HTML page of charts.
import fs from "node:fs";
import path from "node:path";
import { Argument } from "commander";
import { PACKAGE_ROOT } from "../paths.js";
import type { CliCommand } from "./command.js";

export function addReportCommand(program: CliCommand): void {
  const results = path.join(PACKAGE_ROOT, "bench", "results");
  program
    .command("report")
    .summary("an HTML report of benchmark results, with charts")
    .description(
      "Writes an HTML page of benchmark results (the JSON files symmkit bench and symmkit tune write with " +
        "--json) into --out: charts of every kind of result, each also an SVG file, and the list of " +
        "inputs with their digests. Prints the page's path.",
    )
    .addArgument(
      new Argument("[results...]", "result files, or directories searched for .json files").default(
        [results],
        "the package's bench/results",
      ),
    )
    .option("--out <dir>", "where the report goes", "./symmkit-report")
    .option("--png", "also render every chart as a PNG", false)
    .does(async (cmd) => {
      const [inputs] = cmd.processedArgs as [string[]];
      const { out, png } = cmd.opts<{ out: string; png: boolean }>();
      // Checked before the report's module (the chart renderer) loads.
      const missing = inputs.find((input) => !fs.existsSync(input));
      if (missing === results)
        cmd.error(
          "no results given, and this installation has none of its own: pass the JSON files that " +
            "symmkit bench ... --json FILE wrote, or folders of them, e.g. symmkit report results/ --out report",
        );
      if (missing !== undefined) cmd.error(`no such file or directory: ${missing}`);
      const { writeReport } = await import("../report/report.js");
      const { html } = await writeReport(inputs, { out, png });
      console.log(html);
      return 0;
    });
}
