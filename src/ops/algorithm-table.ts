// The docs' table of every operation's algorithms (README.md carries it; test/algorithms.test.ts checks
// it), from the records: the collectives' registry and each family's records (src/ops/records.ts).
import { COLLECTIVE_ALGORITHMS, type CollectiveAlgorithm } from "./coll/registry.js";
import { ALL_TO_ALL, ALL_TO_ALL_V, SEND_RECV } from "./exchange/records.js";
import { FUSED_RECORDS } from "./fused/checks.js";
import { HOSTS } from "./hosts-collectives.js";
import { MOE } from "./moe/records.js";
import { AR_NORM } from "./norm/records.js";
import type { OpRecords } from "./records.js";

/** The ops beside the collectives, by the name the table gives them. */
const OPS: readonly (readonly [string, OpRecords])[] = [
  ...Object.entries(FUSED_RECORDS),
  ["all-reduce-rms-norm", AR_NORM],
  ["send / recv / sendRecv", SEND_RECV],
  ["all-to-all", ALL_TO_ALL],
  ["all-to-all-v", ALL_TO_ALL_V],
  ["dispatch / combine", MOE],
  ["across hosts: all-reduce, all-gather, reduce-scatter", HOSTS],
];

const row = (
  op: string,
  name: string,
  backends: string,
  rankOrder: boolean,
  needs: readonly string[],
  what: string,
) =>
  `| ${op} | \`${name}\` | ${backends} | ${rankOrder ? "yes" : "-"} | ${needs.join(", ") || "-"} | ${what} |`;

/** Every algorithm of every op as a Markdown table: op, algorithm, backends, whether it gives the
 * rank-order reference's bits (auto picks only those, but across hosts), what it needs of the group, what
 * it does. */
export function algorithmTable(): string {
  const collectives = Object.values(COLLECTIVE_ALGORITHMS).flatMap((byName) =>
    Object.entries(byName).map(([name, r]: [string, CollectiveAlgorithm]) => {
      const needs = [
        r.mailboxThreadBytes !== undefined ? "mailbox" : "",
        r.stagingBytes !== undefined ? "staging buffer" : "",
      ].filter(Boolean);
      return row(r.collective, name, r.cpu ? "cuda, cpu" : "cuda", r.rankOrder, needs, r.summary);
    }),
  );
  const ops = OPS.flatMap(([op, records]) =>
    Object.entries(records).map(([name, r]) =>
      row(op, name, r.backends.join(", "), r.rankOrder, r.needs, r.summary),
    ),
  );
  return [
    "| op | algorithm | backends | rank order | needs | what it does |",
    "| --- | --- | --- | --- | --- | --- |",
    ...collectives,
    ...ops,
  ].join("\n");
}
