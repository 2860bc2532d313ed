// The probe programs behind the cross-GPU primitive tests and benchmarks (device/include/symmkit/probes/:
// sync_kernels.cuh, link_probe.cuh), and the NCCL watchdog's fail_context (sync/fail_context.cuh).
import type { ProgramSpec } from "../runtime/module.js";

export const barrierLoopExpr = (prev: boolean, next: boolean): string =>
  `symmkit::barrier_loop<${prev}, ${next}>`;

export const SYNC_KERNELS: ProgramSpec = {
  name: "symmkit/probes/sync_kernels",
  source: '#include "symmkit/probes/sync_kernels.cuh"\n',
  nameExpressions: [
    "symmkit::exchange_pattern",
    "symmkit::barrier_unless",
    "symmkit::ping_pong",
    ...[false, true].flatMap((p) => [false, true].map((n) => barrierLoopExpr(p, n))),
  ],
};

/** The word exchange_pattern makes rank `src` write at index i of its region in rank `dst`'s buffer. */
export function exchangeWord(src: number, dst: number, i: number, salt: number): number {
  return (Math.imul(src, 0x9e3779b1) ^ Math.imul(dst, 0x85ebca77) ^ Math.imul(i, 0xc2b2ae3d) ^ salt) >>> 0;
}

/** link_copy: the NVLink bandwidth probe of `symmkit bench link`, by world size, direction and vectors
 * in flight per thread. */
export const linkExpr = (world: number, push: boolean, unroll: number): string =>
  `symmkit::link_copy<${world}, ${push}, ${unroll}>`;

export const LINK_PROBE: ProgramSpec = {
  name: "symmkit/probes/link_probe",
  source: '#include "symmkit/probes/link_probe.cuh"\n',
  nameExpressions: [2, 3, 4, 5, 6, 7, 8].flatMap((w) =>
    [true, false].flatMap((push) => [1, 4].map((u) => linkExpr(w, push, u))),
  ),
};

/** fail_context(): the NCCL watchdog's way to end a context whose work can never finish. */
export const FAIL_CONTEXT: ProgramSpec = {
  name: "symmkit/sync/fail_context",
  source: '#include "symmkit/sync/fail_context.cuh"\n',
  nameExpressions: ["symmkit::fail_context"],
};
