// The fused matmuls' algorithms, one record each (the shape: src/ops/records.ts), with auto's built-in
// rule. all-gather + GEMM moves bits through its all-gather, so every construction is auto's; GEMM +
// reduce-scatter and GEMM + all-reduce sum partials, and NCCL's order is a baseline auto never picks.
//
// auto's built-in rule, where no tune table has fused rules, by rows of the gathered (all-gather + GEMM)
// or reduced (GEMM + reduce-scatter) problem: measured on 2 H200s at n = k = 8192, bf16 and fp8
// (bench/results/h200x2/ag-gemm-*.json, gemm-rs-*.json). Below the fused crossovers the fixed costs
// (barrier kernel, copies, flags, the reduce tail) outweigh what the fusion hides; at 256 rows of
// all-gather + GEMM cuBLASLt's small-m GEMM beats symmkit's 128 x 256 tiles, so NCCL + cuBLASLt runs
// there. GEMM + all-reduce: sequential until a tune table says otherwise (docs/perf-notes.md).
import type { OpAlgorithm } from "../records.js";
import { FUSED_PROGRAMS } from "./programs.js";

export interface FusedRecord extends OpAlgorithm {
  /** auto's built-in rule: picked for rows up to this bound, the smallest bound that holds the rows. */
  readonly autoMaxRows?: number;
}

/** No bound: every row count above the others'. */
const ANY_ROWS = 2 ** 31;

export const ALL_GATHER_MATMUL = {
  fused: {
    summary: "the fused kernel with the producer auto picks (copy engines or SMs)",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["all-gather-matmul/fused"],
    programs: () => FUSED_PROGRAMS,
  },
  fused_copy_engine: {
    summary: "the copy engines pull the peers' shards while the GEMM walks them in arrival order",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["all-gather-matmul/fused_copy_engine"],
    programs: () => FUSED_PROGRAMS,
    autoMaxRows: ANY_ROWS,
  },
  fused_pull: {
    summary: "a few SMs pull the peers' shards while the GEMM runs on the rest",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["all-gather-matmul/fused_pull"],
    programs: () => FUSED_PROGRAMS,
  },
  sequential: {
    summary: "symmkit's all-gather, then symmkit's GEMM",
    backends: ["cuda", "cpu"],
    rankOrder: true,
    needs: [],
    kinds: ["all-gather-matmul/sequential"],
    autoMaxRows: 1024,
  },
  nccl_cublaslt: {
    summary:
      "NCCL's all-gather, then cuBLASLt (no sum over ranks; auto takes it where cuBLASLt's small-m GEMM wins)",
    backends: ["cuda"],
    rankOrder: true,
    needs: [],
    kinds: ["all-gather-matmul/nccl_cublaslt"],
    autoMaxRows: 256,
  },
} as const satisfies Readonly<Record<string, FusedRecord>>;

export const MATMUL_REDUCE_SCATTER = {
  fused: {
    summary:
      "one GEMM that stores every tile as a flagged partial in its owner's slot; each owner reduces its rows in rank order while the GEMM runs",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["staging buffer"],
    kinds: ["matmul-reduce-scatter/fused"],
    autoMaxRows: ANY_ROWS,
  },
  sequential: {
    summary: "symmkit's GEMM, then symmkit's reduce-scatter",
    backends: ["cuda", "cpu"],
    rankOrder: true,
    needs: [],
    kinds: ["matmul-reduce-scatter/sequential"],
    autoMaxRows: 512,
  },
  nccl_cublaslt: {
    summary: "cuBLASLt, then NCCL's reduce-scatter (NCCL's order of summation)",
    backends: ["cuda"],
    rankOrder: false,
    needs: [],
    kinds: ["matmul-reduce-scatter/nccl_cublaslt"],
  },
} as const satisfies Readonly<Record<string, FusedRecord>>;

export const MATMUL_ALL_REDUCE = {
  fused: {
    summary:
      "one GEMM whose epilogue pushes every tile's partial to every rank and sums the ranks' partials in rank order as they land: at decode sizes through the Lamport mailbox, with no barrier; else through the staging buffer, flagged, behind a barrier",
    backends: ["cuda"],
    rankOrder: true,
    needs: ["mailbox", "staging buffer"],
    kinds: ["matmul-all-reduce/fused"],
  },
  sequential: {
    summary: "symmkit's GEMM, then symmkit's all-reduce (or allReduceRmsNorm with rmsNorm)",
    backends: ["cuda", "cpu"],
    rankOrder: true,
    needs: [],
    kinds: ["matmul-all-reduce/sequential"],
    autoMaxRows: ANY_ROWS,
  },
  nccl_cublaslt: {
    summary: "cuBLASLt, then NCCL's all-reduce (NCCL's order of summation)",
    backends: ["cuda"],
    rankOrder: false,
    needs: [],
    kinds: ["matmul-all-reduce/nccl_cublaslt"],
  },
} as const satisfies Readonly<Record<string, FusedRecord>>;
