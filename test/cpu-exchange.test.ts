// sendRecv, send/recv, allToAll and allToAllV on the CPU backend, under the real launcher at world sizes 2
// to 5 (even and odd, and past 3, where shapes sized for small worlds stop splitting): the exchange
// program GPUs run too (test/programs/exchange.ts), here with its backend cpu: every dtype, uneven sizes,
// count matrices with zeros, poisoned outputs checked byte for byte, group-judged errors thrown by every
// rank alike, local bad inputs.
import { test } from "node:test";
import { assertProgramPasses } from "./support/cpu-job.js";

for (const n of [2, 3, 4, 5])
  test(`CPU sendRecv, allToAll, allToAllV at world size ${n}: exact data, group-judged and local errors`, () =>
    assertProgramPasses("exchange", n));
