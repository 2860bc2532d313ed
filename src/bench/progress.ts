// Progress through a benchmark's steps (its sizes or shapes). On a terminal: a bar with the elapsed time
// and an ETA, the current step beside it, the loop's own lines (seed, results) printed above it. Without
// one (logs, CI, tests): one plain line per step, exactly what the benchmarks printed before there was a
// bar. Only rank 0 of a job prints: every rank runs the same steps.
import cliProgress from "cli-progress";

/** Where progress goes; a stream whose isTTY is true gets the bar. */
export type ProgressStream = NodeJS.WritableStream & { readonly isTTY?: boolean; readonly columns?: number };

export interface ProgressOptions {
  /** What runs, before the bar (e.g. "all-reduce"). */
  readonly title: string;
  /** Steps in all. */
  readonly total: number;
  /** This process's rank in its job: every rank but 0 prints nothing. */
  readonly rank: number;
  /** Default process.stdout. */
  readonly stream?: ProgressStream;
  /** Without a TTY, print each step's line (default true). False for a loop that prints its own line
   * per step through log(). */
  readonly echoSteps?: boolean;
}

export interface Progress extends Disposable {
  /** The next step begins; `line` says which: printed without a TTY (see echoSteps), beside the bar on
   * one. */
  step(line: string): void;
  /** A line of output (the seed, a step's result): printed as is, above the bar on a TTY. */
  log(line: string): void;
}

const SILENT: Progress = { step: () => {}, log: () => {}, [Symbol.dispose]: () => {} };

class PlainProgress implements Progress {
  constructor(
    private readonly stream: ProgressStream,
    private readonly echoSteps: boolean,
  ) {}
  step(line: string): void {
    if (this.echoSteps) this.log(line);
  }
  log(line: string): void {
    this.stream.write(`${line}\n`);
  }
  [Symbol.dispose](): void {}
}

/** "1m05s", "42s". */
function seconds(s: number): string {
  const t = Math.round(s);
  return t >= 60 ? `${Math.floor(t / 60)}m${String(t % 60).padStart(2, "0")}s` : `${t}s`;
}

/** The bar on screen, if any: a benchmark run inside another (tune runs five) advances the outer bar
 * instead of drawing a second one over it. */
let onScreen: BarProgress | undefined;

class BarProgress implements Progress {
  // MultiBar, though there is one bar: its log() is how cli-progress prints lines above a bar.
  private readonly multi: cliProgress.MultiBar;
  private readonly bar: cliProgress.SingleBar;
  private begun = 0;

  constructor(stream: ProgressStream, title: string, total: number) {
    this.multi = new cliProgress.MultiBar({
      stream,
      // The time so far per step done, times the steps left ("?" until one is done). Sizes and shapes
      // grow along a run, so it tends to run short.
      format: (options, params, payload: { step?: string }) => {
        const elapsed = ((params.stopTime ?? Date.now()) - params.startTime) / 1000;
        const eta =
          params.value > 0 ? seconds((elapsed / params.value) * (params.total - params.value)) : "?";
        const bar = cliProgress.Format.BarFormat(params.progress, options);
        const line = `${title} [${bar}] ${params.value}/${params.total} | ${seconds(elapsed)} | ETA ${eta} | ${payload.step ?? ""}`;
        // One column short of the width: a full line would wrap the cursor onto the next.
        return line.slice(0, params.maxWidth - 1);
      },
      barsize: 30,
      // Lines are cut to the width above instead of line wrapping being switched off, which a Ctrl-C
      // would leave off in the user's terminal.
      linewrap: true,
    });
    this.bar = this.multi.create(total, 0, { step: "" });
  }

  step(line: string): void {
    this.bar.update(this.begun++, { step: line });
  }

  log(line: string): void {
    this.multi.log(`${line}\n`);
  }

  [Symbol.dispose](): void {
    this.bar.update(this.begun);
    this.multi.update(); // prints lines logged since the last redraw
    this.multi.stop();
    onScreen = undefined;
  }
}

/** Nested inside a bar on screen: steps and lines go to that bar, disposing leaves it running. */
function nestedIn(outer: BarProgress): Progress {
  return { step: (l) => outer.step(l), log: (l) => outer.log(l), [Symbol.dispose]: () => {} };
}

/** Progress for a loop of `total` steps; dispose it when the loop ends (`using`). */
export function startProgress(o: ProgressOptions): Progress {
  if (o.rank !== 0) return SILENT;
  if (onScreen) return nestedIn(onScreen);
  const stream = o.stream ?? process.stdout;
  if (!stream.isTTY) return new PlainProgress(stream, o.echoSteps ?? true);
  onScreen = new BarProgress(stream, o.title, o.total);
  return onScreen;
}
