#!/usr/bin/env bash
# The multi-rank tests on a machine with one GPU, in one call: the kernel cache warmed in parallel, then
# the cross-rank rank programs with the ranks sharing the GPU (test/gpu/shared-gpu.test.ts: GEMM +
# all-reduce, fused matmuls, all-reduce + RMSNorm, send/recv, all-to-all, MoE at world 2 and 3; the
# timeouts; benchmarks refusing), two simulated hosts (test/gpu/hosts.test.ts: HostsCollectives, a
# killed rank, symmkit demo), symmkit demo with 2 ranks sharing the GPU, and the GEMM tests. Correctness
# only: ranks sharing a GPU take turns on it.
# Run from the repo root as
#   .gpustage/boot.sh bash bench/gpu-shared.sh
# STEPS picks steps (default "shared hosts demo gemm"). Writes its logs under $OUT (default ./out); exits
# non-zero if any step failed.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
export NCCL_NVLS_ENABLE=0
steps=${STEPS:-shared hosts demo gemm}
test_step() {
  local name=$1 file=$2
  step "$name" bash -c "node --test --test-concurrency=1 --test-reporter=spec '$file' 2>&1 | tee '$out/$name.txt'; exit \${PIPESTATUS[0]}"
}
step gpu nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
step warm node bench/warm-kernels.mjs
[[ $steps == *shared* ]] && test_step shared-gpu-tests dist/test/gpu/shared-gpu.test.js
[[ $steps == *hosts* ]] && test_step hosts-tests dist/test/gpu/hosts.test.js
[[ $steps == *demo* ]] &&
  step demo bash -c "node dist/src/cli.js run -n 2 --share-gpus -- node dist/src/cli.js demo 2>&1 | tee '$out/demo-shared.txt'; exit \${PIPESTATUS[0]}"
[[ $steps == *gemm* ]] && test_step gemm-tests dist/test/gpu/gemm.test.js
exit $status
