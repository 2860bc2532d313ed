#!/usr/bin/env bash
# The fused matmuls on a multi-GPU machine, in one call: the fused rank tests and the timeout checks at
# world 2 (and 3, 4 where the GPUs are there), the GEMM tests (the kernel the fused ops are built on),
# then `symmkit bench ag-gemm`, `gemm-rs` and `gemm-ar` on all GPUs, and PyTorch's fused and sequential
# constructions beside them (bf16). Run from the repo root as
#   SYMMKIT_GIT_REVISION=<rev> .gpustage/boot.sh bash bench/gpu-fused.sh
# STEPS picks steps (default "tests gemm-tests bench torch"); AG_SHAPES, RS_SHAPES, AR_SHAPES, FUSED_DTYPE the
# benchmark.
# Writes its logs and JSON under $OUT (default ./out); exits non-zero if any step failed.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
export NCCL_NVLS_ENABLE=0
world=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
steps=${STEPS:-tests gemm-tests bench torch}
run() { node dist/src/cli.js run -n "$@"; }
step gpu nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
if [[ $steps == *" tests"* || $steps == tests* ]]; then
  for n in 2 3 4; do
    if ((n <= world)); then
      step fused-w$n bash -c "node dist/src/cli.js run -n $n dist/test/programs/fused.js cuda 2>&1 | tee '$out/fused-tests-w$n.txt'; exit \${PIPESTATUS[0]}"
      step gemm-ar-w$n bash -c "node dist/src/cli.js run -n $n dist/test/programs/gemm-ar.js cuda 2>&1 | tee '$out/gemm-ar-tests-w$n.txt'; exit \${PIPESTATUS[0]}"
    fi
  done
  for op in rs ar ar-staging ag; do
    step timeout-$op bash -c "SYMMKIT_SYNC_TIMEOUT_MS=3000 FUSED_OP=$op node dist/src/cli.js run -n $world dist/test/gpu/ranks/fused-timeout.js 2>&1 | tee -a '$out/fused-tests-timeout.txt'; exit \${PIPESTATUS[0]}"
  done
fi
if [[ $steps == *gemm-tests* ]]; then
  step gemm-tests bash -c "node --test --test-concurrency=1 --test-reporter=spec dist/test/gpu/gemm.test.js 2>&1 | tee '$out/gemm-tests.txt'; exit \${PIPESTATUS[0]}"
fi
if [[ $steps == *bench* ]]; then
  dtype=${FUSED_DTYPE:-bf16}
  step ag-gemm run "$world" dist/src/cli.js bench ag-gemm --dtype "$dtype" ${AG_SHAPES:+--shapes "$AG_SHAPES"} --json "$out/ag-gemm-$dtype.json"
  step gemm-rs run "$world" dist/src/cli.js bench gemm-rs --dtype "$dtype" ${RS_SHAPES:+--shapes "$RS_SHAPES"} --json "$out/gemm-rs-$dtype.json"
  step gemm-ar run "$world" dist/src/cli.js bench gemm-ar --dtype "$dtype" ${AR_SHAPES:+--shapes "$AR_SHAPES"} --json "$out/gemm-ar-$dtype.json"
fi
[[ $steps == *torch* ]] && torch_step torch-fused ag-gemm,gemm-rs,gemm-ar
exit $status
