// Every program symmkit ships, so that one command (and CI) can compile all of them for an architecture
// without a GPU: NVRTC needs none. The operations' programs come from their records (the collectives'
// registry, src/ops/op-records.ts); the runtime's, the barriers' and the GEMMs' are named here.
import { compileProgram, type CompiledProgram } from "./runtime/jit/compiler.js";
import type { KernelCache } from "./runtime/jit/cache.js";
import { compileRequest, type ProgramSpec } from "./runtime/module.js";
import { TENSOR_KERNELS } from "./runtime/tensor-kernels.js";
import { LINK_PROBE, FAIL_CONTEXT, SYNC_KERNELS } from "./distributed/sync-kernels.js";
import { BARRIER_KERNELS } from "./ops/coll/programs.js";
import { collectivePrograms } from "./ops/coll/registry.js";
import { GEMM_PROGRAMS } from "./ops/gemm/programs.js";
import { DECODE_PROGRAMS } from "./ops/gemm/decode-gemm.js";
import { opPrograms } from "./ops/op-records.js";

export const PROGRAMS: readonly ProgramSpec[] = [
  TENSOR_KERNELS,
  SYNC_KERNELS,
  LINK_PROBE,
  BARRIER_KERNELS,
  FAIL_CONTEXT,
  ...collectivePrograms(),
  ...GEMM_PROGRAMS,
  ...DECODE_PROGRAMS,
  ...opPrograms(),
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
