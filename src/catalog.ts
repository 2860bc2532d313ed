// Every program symmkit ships, so that one command (and CI) can compile all of them for an architecture
// without a GPU: NVRTC needs none.
import { compileProgram, type CompiledProgram } from "./runtime/jit/compiler.js";
import type { KernelCache } from "./runtime/jit/cache.js";
import { compileRequest, type ProgramSpec } from "./runtime/module.js";
import { TENSOR_KERNELS } from "./runtime/tensor-kernels.js";
import { LINK_PROBE, FAIL_CONTEXT, SYNC_KERNELS } from "./distributed/sync-kernels.js";
import { ALL_TO_ALL_PROGRAM, BARRIER_KERNELS } from "./ops/coll/programs.js";
import { collectivePrograms } from "./ops/coll/registry.js";
import { GEMM_PROGRAMS } from "./ops/gemm/programs.js";
import { DECODE_PROGRAMS } from "./ops/gemm/decode-gemm.js";
import { FUSED_PROGRAMS } from "./ops/fused/programs.js";
import { arNormPrograms } from "./ops/norm/programs.js";
import { MOE_PROGRAM } from "./ops/moe/moe.js";
import { A2AV_PROGRAM } from "./ops/exchange/all-to-all.js";
import { P2P_PROGRAM } from "./ops/exchange/p2p.js";

export const PROGRAMS: readonly ProgramSpec[] = [
  TENSOR_KERNELS,
  SYNC_KERNELS,
  LINK_PROBE,
  BARRIER_KERNELS,
  FAIL_CONTEXT,
  ...collectivePrograms(),
  ALL_TO_ALL_PROGRAM,
  ...GEMM_PROGRAMS,
  ...DECODE_PROGRAMS,
  ...FUSED_PROGRAMS,
  ...arNormPrograms(),
  MOE_PROGRAM,
  P2P_PROGRAM,
  A2AV_PROGRAM,
];

export interface CatalogResult {
  readonly program: string;
  readonly cubin: Uint8Array;
  readonly kernels: number;
  readonly cubinBytes: number;
  readonly cacheHit: boolean;
  readonly ms: number;
}

/** Compiles every shipped program for `arch`; throws the first NvrtcError (with its log). */
export function compileCatalog(arch: string, cache?: KernelCache): CatalogResult[] {
  return PROGRAMS.map((spec) => {
    const p: CompiledProgram = compileProgram(compileRequest(spec, arch), cache);
    return {
      program: spec.name,
      cubin: p.cubin,
      kernels: spec.nameExpressions.length,
      cubinBytes: p.cubin.length,
      cacheHit: p.cacheHit,
      ms: p.ms,
    };
  });
}
