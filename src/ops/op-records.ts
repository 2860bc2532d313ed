// Every operation's records beside the collectives' registry, by the name the docs give the op: what the
// docs' table (algorithm-table.ts) and the catalog of programs (src/catalog.ts) walk.
import type { ProgramSpec } from "../runtime/module.js";
import { ALL_TO_ALL, ALL_TO_ALL_V, SEND_RECV } from "./exchange/records.js";
import { FUSED_RECORDS } from "./fused/checks.js";
import { HOSTS } from "./hosts-records.js";
import { MOE, MOE_COMBINE } from "./moe/records.js";
import { AR_NORM } from "./norm/records.js";
import type { OpRecords } from "./records.js";

export const OP_RECORDS: readonly (readonly [string, OpRecords])[] = [
  ...Object.entries(FUSED_RECORDS),
  ["all-reduce-rms-norm", AR_NORM],
  ["send / recv / sendRecv", SEND_RECV],
  ["all-to-all", ALL_TO_ALL],
  ["all-to-all-v", ALL_TO_ALL_V],
  ["dispatch", MOE],
  ["combine", MOE_COMBINE],
  ["across hosts: all-reduce, all-gather, reduce-scatter", HOSTS],
];

/** Every program the records name, each once (by name), in record order. */
export function opPrograms(): ProgramSpec[] {
  const byName = new Map<string, ProgramSpec>();
  for (const [, records] of OP_RECORDS)
    for (const r of Object.values(records)) for (const p of r.programs?.() ?? []) byName.set(p.name, p);
  return [...byName.values()];
}
