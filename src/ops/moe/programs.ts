// MoE dispatch and combine's kernels (device/include/symmkit/moe/moe.cuh), named by their records and
// compiled by the catalog.
import type { ProgramSpec } from "../../runtime/module.js";
import { WORLD_SIZES } from "../coll/programs.js";

export const MOE_PROGRAM: ProgramSpec = {
  name: "symmkit/moe/moe",
  source: '#include "symmkit/moe/moe.cuh"\n',
  nameExpressions: [
    "symmkit::moe::moe_positions",
    "symmkit::moe::moe_combine",
    "symmkit::moe::moe_partials",
    // World 1 too: a lone rank's experts are all local, and the gather is its layout.
    ...[1, ...WORLD_SIZES].flatMap((w) => [
      `symmkit::moe::moe_gather<${w}>`,
      `symmkit::moe::moe_route<${w}>`,
      `symmkit::moe::moe_sum_partials<${w}>`,
    ]),
  ],
};
