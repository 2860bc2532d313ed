// The docs' table of every operation's algorithms (README.md carries it; test/algorithms.test.ts checks
// it), from the records: the collectives' registry and each family's records (src/ops/records.ts).
import { COLLECTIVE_ALGORITHMS, type CollectiveAlgorithm } from "./coll/registry.js";
import { OP_RECORDS } from "./op-records.js";

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
  const ops = OP_RECORDS.flatMap(([op, records]) =>
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
