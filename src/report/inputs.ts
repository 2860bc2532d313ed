// The report's inputs: result files found from the paths given, each read, digested and recognised as
// one or more of the kinds of result the report charts (results.ts). What is not recognised is kept with
// the reason, for the report to list.
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { SymmkitError } from "../errors.js";
import { recognise, type Recognised, type Source } from "./results.js";

/** A file read but not charted, or not read: `reason` says why. */
export interface Unused {
  readonly kind: "unused";
  readonly source: Source;
  readonly reason: string;
}

export type Input = Recognised | Unused;

/** One input file: its label, its content's sha256 (hex; empty when unreadable), what it gave. */
export interface InputFile {
  readonly source: Source;
  readonly sha256: string;
  readonly items: readonly Input[];
}

/** The result files `inputs` name: files as given, folders searched for *.json; sorted, each once. */
export function findFiles(inputs: readonly string[]): string[] {
  if (inputs.length === 0) throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", "report: no inputs given");
  const files = new Set<string>();
  const walk = (dir: string): void => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch (cause) {
      throw new SymmkitError("SYMMKIT_OS_ERROR", `report: cannot list ${dir}: ${(cause as Error).message}`, {
        cause,
      });
    }
    for (const e of entries) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && e.name.endsWith(".json")) files.add(p);
    }
  };
  for (const input of inputs) {
    const p = path.resolve(input);
    let stat: fs.Stats;
    try {
      stat = fs.statSync(p);
    } catch (cause) {
      throw new SymmkitError(
        "SYMMKIT_INVALID_ARGUMENT",
        `report: cannot read ${input}: no such file or folder`,
        {
          cause,
        },
      );
    }
    if (stat.isDirectory()) walk(p);
    else files.add(p);
  }
  return [...files].sort();
}

/** Labels and slugs for `files`: labels relative to `base` when inside it, slugs from the paths under
 * the files' common folder, unique. */
export function sourcesOf(files: readonly string[], base = process.cwd()): Source[] {
  const dirs = files.map((f) => path.dirname(f).split(path.sep));
  let common = dirs[0] ?? [];
  for (const d of dirs) {
    let i = 0;
    while (i < common.length && d[i] === common[i]) i++;
    common = common.slice(0, i);
  }
  const taken = new Set<string>();
  return files.map((f) => {
    const rel = path.relative(base, f);
    const under = path.relative(common.join(path.sep), f).replace(/\.[^.]*$/, "");
    const slugBase =
      under
        .toLowerCase()
        .replace(/[^a-z0-9.]+/g, "-")
        .replace(/^-|-$/g, "") || "result";
    let slug = slugBase;
    for (let i = 2; taken.has(slug); i++) slug = `${slugBase}-${i}`;
    taken.add(slug);
    // Forward slashes in labels, so that a report names its inputs alike on every system.
    return { label: rel.startsWith("..") || path.isAbsolute(rel) ? f : rel.split(path.sep).join("/"), slug };
  });
}

/** Every input file read, digested and recognised, in order; labels relative to `base`. */
export function readInputFiles(inputs: readonly string[], base = process.cwd()): InputFile[] {
  const files = findFiles(inputs);
  const sources = sourcesOf(files, base);
  return files.map((file, i): InputFile => {
    const source = sources[i]!;
    const unused = (reason: string, sha256 = ""): InputFile => ({
      source,
      sha256,
      items: [{ kind: "unused", source, reason }],
    });
    let bytes: Buffer;
    try {
      bytes = fs.readFileSync(file);
    } catch (e) {
      return unused(`cannot be read: ${(e as Error).message}`);
    }
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    let value: unknown;
    try {
      value = JSON.parse(bytes.toString("utf8"));
    } catch (e) {
      return unused(`not JSON: ${(e as Error).message}`, sha256);
    }
    return {
      source,
      sha256,
      items: recognise(value, source).map((r) =>
        typeof r === "string" ? { kind: "unused", source, reason: r } : r,
      ),
    };
  });
}

/** Every input file's results (and reasons), in order. */
export const readInputs = (inputs: readonly string[], base?: string): Input[] =>
  readInputFiles(inputs, base).flatMap((f) => f.items);
