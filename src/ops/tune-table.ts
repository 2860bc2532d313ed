// The tables `algorithm: "auto"` picks from: per collective, the fastest algorithm measured at each size
// on one kind of GPU and world size (`symmkit tune` writes them, src/bench/tune.ts). A table is looked up
// by (device name, world size): first the user's (SYMMKIT_TUNE_DIR, default ~/.cache/symmkit/tune), then
// the ones shipped in tune/ (measured for this package). Without a table, auto follows the built-in
// rules in src/ops/coll/registry.ts. A table names only what auto may pick: for an op that sums over
// ranks, an algorithm that gives the rank-order bits; one naming a baseline (NCCL's sum) is refused, so
// that auto's bits never depend on the size.
import fs from "node:fs";
import path from "node:path";
import { InvalidArgumentError } from "../errors.js";
import { PACKAGE_ROOT } from "../paths.js";
import { readEnvVar, type Env } from "../settings.js";

export const TUNED_COLLECTIVES = ["all-reduce", "all-gather", "reduce-scatter"] as const;
export type TunedCollective = (typeof TUNED_COLLECTIVES)[number];
/** The fused matmuls auto picks for by the problem's rows (src/ops/fused/fused-matmul.ts). */
export const TUNED_FUSED = ["all-gather-matmul", "matmul-reduce-scatter", "matmul-all-reduce"] as const;
export type TunedFused = (typeof TUNED_FUSED)[number];

/** Sizes up to maxBytes (per rank: all-reduce and all-gather input, reduce-scatter output) take algorithm. */
export interface TuneRule {
  readonly maxBytes: number;
  readonly algorithm: string;
}

/** Problems of up to maxRows rows (the gathered A's, the reduced product's, or the summed product's m)
 * take algorithm. */
export interface FusedRule {
  readonly maxRows: number;
  readonly algorithm: string;
}

/** The fused matmuls' rules and the run they come from (`symmkit tune`, or `bench ag-gemm|gemm-rs`). */
export type FusedRules = { readonly gitRevision: string; readonly date: string } & Readonly<
  Partial<Record<TunedFused, readonly FusedRule[]>>
>;

/** Every op a table has rules for. */
export type TunedOp = TunedCollective | TunedFused | "arNorm";

/**
 * The algorithms a table may name (auto's candidates), by collective, fused matmul and allReduceRmsNorm,
 * and `baselines`: the ones callers may name but auto never picks (an op's NCCL construction where NCCL
 * sums in its own order), which a table is refused for naming, with that reason.
 */
export type TuneKnown = Readonly<Record<TunedCollective, readonly string[]>> &
  Readonly<Partial<Record<TunedFused | "arNorm", readonly string[]>>> & {
    readonly baselines?: Readonly<Partial<Record<TunedOp, readonly string[]>>>;
  };

/** allReduceRmsNorm's rules (by bytes of x per rank) and the run they come from (`bench ar-norm`). */
export interface NormRules {
  readonly gitRevision: string;
  readonly date: string;
  readonly rules: readonly TuneRule[];
}

export interface TuneTable {
  readonly device: string;
  readonly worldSize: number;
  readonly dtype: string;
  readonly gitRevision: string;
  readonly date: string;
  /** What was changed by hand since the run that gitRevision and date name, and from which figures. */
  readonly note?: string;
  /** Ascending maxBytes; sizes above the last rule take the last rule's algorithm. */
  readonly rules: Readonly<Record<TunedCollective, readonly TuneRule[]>>;
  /** Ascending maxRows, likewise; absent: auto follows fused-matmul.ts's built-in rules. */
  readonly fused?: FusedRules;
  /** Absent: auto follows src/ops/norm/ar-norm.ts's built-in rule. */
  readonly arNorm?: NormRules;
}

/** A table as loaded, with the file it came from. */
export type LoadedTuneTable = TuneTable & { readonly file: string };

/** The file name of the table for (device, world size): "nvidia-h200-w4.json". */
export function tuneFileName(device: string, worldSize: number): string {
  const slug = device
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-|-$/g, "");
  return `${slug}-w${worldSize}.json`;
}

/** The user's tune tables: SYMMKIT_TUNE_DIR (src/settings.ts). */
export function userTuneDir(env: Env = process.env): string {
  return readEnvVar("SYMMKIT_TUNE_DIR", env);
}

export const SHIPPED_TUNE_DIR = path.join(PACKAGE_ROOT, "tune");

/** The algorithm `rules` give `bytes`. */
export function pickRule(rules: readonly TuneRule[], bytes: number): string | undefined {
  return (rules.find((r) => bytes <= r.maxBytes) ?? rules.at(-1))?.algorithm;
}

/** The algorithm fused `rules` give a problem of `rows` rows. */
export function pickFusedRule(rules: readonly FusedRule[], rows: number): string | undefined {
  return (rules.find((r) => rows <= r.maxRows) ?? rules.at(-1))?.algorithm;
}

/** Checks a parsed table: every collective's rules ascending, with algorithms from `known` (a baseline of
 * known.baselines, or a name nobody knows, is an InvalidArgumentError: no rule is skipped). */
export function checkTuneTable(value: unknown, known: TuneKnown, file: string): TuneTable {
  const bad = (why: string): never => {
    throw new InvalidArgumentError(`tune table ${file}: ${why}; run symmkit tune again or delete the file`);
  };
  const t = value as Partial<TuneTable> | null;
  if (typeof t !== "object" || t === null) return bad("not a JSON object");
  if (typeof t.device !== "string" || !Number.isInteger(t.worldSize)) bad("no device or worldSize");
  if (typeof t.rules !== "object" || t.rules === null) return bad("no rules");
  /** Rules: a non-empty array, `bound` ascending, algorithms from `allowed`. */
  if (t.note !== undefined && typeof t.note !== "string") bad("note is not a string");
  /** Rules: a non-empty array, `bound` ascending, algorithms from `known[op]`. */
  const checkRules = (op: TunedOp, rules: unknown, bound: "maxBytes" | "maxRows") => {
    if (!Array.isArray(rules) || rules.length === 0) bad(`no rules for ${op}`);
    let last = 0;
    for (const r of rules as Record<string, unknown>[]) {
      const x = r[bound];
      if (typeof x !== "number" || !Number.isSafeInteger(x) || x <= last)
        bad(`${op}: ${bound} must be ascending positive integers`);
      const a = String(r.algorithm);
      if (known.baselines?.[op]?.includes(a))
        bad(
          `${op}: ${a} is a baseline that sums in its own order, and auto picks only algorithms that give the rank-order bits at every size`,
        );
      if (!(known[op] ?? []).includes(a)) bad(`${op}: unknown algorithm ${a}`);
      last = x as number;
    }
  };
  for (const c of TUNED_COLLECTIVES) checkRules(c, t.rules[c], "maxBytes");
  if (t.fused !== undefined) {
    if (typeof t.fused !== "object" || t.fused === null) bad("fused is not an object");
    for (const f of TUNED_FUSED) {
      const rules = t.fused?.[f];
      if (rules !== undefined) checkRules(f, rules, "maxRows");
    }
  }
  if (t.arNorm !== undefined) {
    if (typeof t.arNorm !== "object" || t.arNorm === null) bad("arNorm is not an object");
    checkRules("arNorm", t.arNorm?.rules, "maxBytes");
  }
  return t as TuneTable;
}

/** The table for (device, world size): the user's, else the shipped one, else undefined. */
export function loadTuneTable(
  device: string,
  worldSize: number,
  known: TuneKnown,
  dirs: readonly string[] = [userTuneDir(), SHIPPED_TUNE_DIR],
): LoadedTuneTable | undefined {
  for (const dir of dirs) {
    const file = path.join(dir, tuneFileName(device, worldSize));
    if (!fs.existsSync(file)) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(fs.readFileSync(file, "utf8"));
    } catch (e) {
      throw new InvalidArgumentError(
        `tune table ${file}: not valid JSON (${(e as Error).message}); run symmkit tune again or delete the file`,
      );
    }
    const t = checkTuneTable(parsed, known, file);
    if (t.device !== device || t.worldSize !== worldSize)
      throw new InvalidArgumentError(
        `tune table ${file} is for ${t.worldSize} x ${t.device}, not ${worldSize} x ${device}; delete it`,
      );
    return { ...t, file };
  }
  return undefined;
}
