// Every kind of call a fingerprint names (src/distributed/fingerprint.ts), by code: the group's own
// (barrier, broadcast), then the kinds the algorithm records name, in record order: the collectives'
// ("collective/algorithm"), then every other op's (OP_RECORDS). Defined as this module loads; the group
// contexts that make fingerprints (gpu-group.ts, cpu/group.ts, hosts-collectives.ts) import it for that.
import { defineCallKinds } from "../distributed/fingerprint.js";
import { COLLECTIVE_KINDS } from "./coll/registry.js";
import { OP_RECORDS } from "./op-records.js";

export const CALL_KINDS: readonly string[] = defineCallKinds([
  ...COLLECTIVE_KINDS,
  ...OP_RECORDS.flatMap(([, records]) => Object.values(records).flatMap((r) => r.kinds)),
]);
