// The GEMM's by-value parameter structs are laid out twice: in hopper_gemm.cuh (C++) and in
// src/ops/gemm/programs.ts (the byte offsets the host writes). NVRTC has no offsetof, so this test reads the
// structs' members from the headers and lays them out by the C rules (test/support/c-layout.ts) to
// check every offset the host uses, and the sizes the headers' static_asserts fix.
import { test } from "node:test";
import { FUSION_PARAMS_LAYOUT, GEMM_ARGS_LAYOUT } from "../src/ops/gemm/programs.js";
import { DECODE_ARGS_LAYOUT } from "../src/ops/gemm/decode-gemm.js";
import { checkLayout, headers } from "./support/c-layout.js";

const sources = headers(
  "gemm/hopper_gemm.cuh",
  "gemm/decode_gemm.cuh",
  "gemm/tma.cuh",
  "sync/wait.cuh",
  "sync/barrier.cuh",
);

test("GemmArgs: every offset the host writes is where hopper_gemm.cuh has the field", () => {
  checkLayout(sources, "GemmArgs", GEMM_ARGS_LAYOUT);
});

test("FusionParams: every offset the host writes is where hopper_gemm.cuh has the field", () => {
  checkLayout(sources, "FusionParams", FUSION_PARAMS_LAYOUT);
});

test("DecodeArgs: every offset the host writes is where decode_gemm.cuh has the field", () => {
  checkLayout(sources, "DecodeArgs", DECODE_ARGS_LAYOUT);
});
