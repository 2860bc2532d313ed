// `npm test`'s reporter (node --test --test-reporter=./dist/test/support/reporter.js): one character per
// test while the suite runs, then every skipped test with its whole reason, what the test files printed,
// every failure with its whole error, and one line of totals. Node's own reporters either print
// everything (spec, tap) or drop the skip reasons and failures' details (dot).
import path from "node:path";
import type { TestEvent } from "node:test/reporters";
import { inspect } from "node:util";

type Fail = Extract<TestEvent, { type: "test:fail" }>["data"];

interface Failure {
  readonly where: string;
  readonly title: string;
  readonly ms: number;
  readonly error: unknown;
}

const WIDTH = 80;
/** The totals node itself reports as diagnostics at the end; this reporter prints its own. */
const TOTALS = /^(tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) [\d.]+$/;

const rel = (file: string | undefined): string => (file ? path.relative(process.cwd(), file) : "(no file)");
const indent = (text: string): string =>
  text
    .replace(/\n+$/, "")
    .split("\n")
    .map((l) => `    ${l}`)
    .join("\n");

/** The error the test threw: node wraps it in ERR_TEST_FAILURE, with the original as the cause (a file
 * that failed outside its tests has only a message there, and its exit code on the wrapper). */
function thrown(error: Error): unknown {
  const e = error as Error & { code?: string; cause?: unknown };
  return e.code === "ERR_TEST_FAILURE" && e.cause instanceof Error ? e.cause : e;
}

export default async function* reporter(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  const started = performance.now();
  const names = new Map<string, string[]>(); // per file: the names of the tests open at each nesting
  const output = new Map<string, string>(); // per file: what it printed
  const skipped: string[] = [];
  const failures: Failure[] = [];
  const count = { tests: 0, passed: 0, skipped: 0, todo: 0, failed: 0, cancelled: 0 };
  let column = 0;
  const mark = (c: string): string => {
    column = (column + 1) % WIDTH;
    return column === 0 ? `${c}\n` : c;
  };
  const title = (d: { file?: string; nesting: number; name: string }): string =>
    [...(names.get(d.file ?? "") ?? []).slice(0, d.nesting), d.name].join(" > ");
  const print = (file: string | undefined, text: string): void => {
    const key = rel(file);
    output.set(key, (output.get(key) ?? "") + text);
  };

  for await (const event of source) {
    switch (event.type) {
      case "test:start": {
        const stack = names.get(event.data.file ?? "") ?? [];
        stack.length = event.data.nesting;
        stack.push(event.data.name);
        names.set(event.data.file ?? "", stack);
        break;
      }
      case "test:pass": {
        const d = event.data;
        if (d.details.type === "suite") break;
        count.tests++;
        if (d.skip !== undefined) {
          count.skipped++;
          const why = typeof d.skip === "string" ? d.skip : "(no reason given)";
          skipped.push(`  ${rel(d.file)}: ${title(d)}\n${indent(why)}`);
          yield mark("s");
        } else if (d.todo !== undefined) {
          count.todo++;
          yield mark("t");
        } else {
          count.passed++;
          yield mark(".");
        }
        break;
      }
      case "test:fail": {
        const d: Fail = event.data;
        const kind = (d.details.error as Error & { failureType?: string }).failureType;
        // A parent whose subtests failed says only that: the subtests' own failures say what.
        if (d.todo === undefined && kind !== "subtestsFailed" && kind !== "cancelledByParent")
          failures.push({
            where: `${rel(d.file)}${d.line === undefined ? "" : `:${d.line}`}`,
            // A file that failed outside its tests is reported under its own path.
            title: d.name === d.file ? "the file itself (what it printed is above)" : title(d),
            ms: d.details.duration_ms,
            error: thrown(d.details.error),
          });
        if (d.details.type === "suite") break; // its tests are counted (a failed hook is listed above)
        count.tests++;
        if (d.todo !== undefined) {
          count.todo++; // a todo test may fail: node does not count it as a failure
          yield mark("t");
        } else if (kind === "cancelledByParent") {
          count.cancelled++;
          yield mark("c");
        } else {
          count.failed++;
          yield mark("F");
        }
        break;
      }
      case "test:stdout":
      case "test:stderr":
        print(event.data.file, event.data.message);
        break;
      case "test:diagnostic":
        if (event.data.file !== undefined) print(event.data.file, `# ${event.data.message}\n`);
        else if (!TOTALS.test(event.data.message)) yield `\n# ${event.data.message}\n`;
        break;
      default:
        break;
    }
  }

  if (column !== 0) yield "\n";
  if (skipped.length) yield `\nskipped (${skipped.length}):\n${skipped.join("\n")}\n`;
  if (output.size) {
    yield "\nprinted by the test files:\n";
    for (const [file, text] of output) yield `  ${file}:\n${indent(text)}\n`;
  }
  if (failures.length) {
    yield "\nfailures:\n";
    for (const f of failures)
      yield `  ${f.where}: ${f.title} (${f.ms.toFixed(0)} ms)\n${indent(inspect(f.error, { depth: 8 }))}\n\n`;
  }
  const s = ((performance.now() - started) / 1000).toFixed(1);
  yield (
    `\n${count.tests} tests: ${count.passed} passed, ${count.failed} failed, ${count.cancelled} cancelled, ` +
    `${count.skipped} skipped, ${count.todo} todo (${s} s)\n`
  );
}
