#!/usr/bin/env bash
# The fused norm area on a multi-GPU machine, in one call: the kernel cache warmed in parallel, the
# allReduceRmsNorm tests (test/programs/ar-norm.ts on cuda: every algorithm against the host reference),
# the benchmark against plain all-reduce and NCCL + norm, PyTorch's NCCL + F.rms_norm beside it, and the
# demo. Run from the repo root as
#   .gpustage/boot.sh bash bench/gpu-ar-norm.sh
# STEPS picks steps (default "tests bench torch demo"); TOKENS and HIDDEN the benchmark's shapes.
# Set SYMMKIT_GIT_REVISION to the development machine's revision (see gpu-collectives.sh).
# Writes its logs and JSON under $OUT (default ./out); exits non-zero if any step failed.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
export NCCL_NVLS_ENABLE=0
world=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
steps=${STEPS:-tests bench torch demo}
step gpu nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
step warm node bench/warm-kernels.mjs
if [[ $steps == *tests* ]]; then
  step ar-norm-tests node dist/src/cli.js run -n "$world" dist/test/programs/ar-norm.js cuda
fi
if [[ $steps == *bench* ]]; then
  step ar-norm node dist/src/cli.js run -n "$world" dist/src/cli.js bench ar-norm \
    --tokens "${TOKENS:-1,2,4,8,16,32,64,128,256,512,1024,2048,4096}" --hidden "${HIDDEN:-4096,8192}" \
    --json "$out/ar-norm.json"
fi
[[ $steps == *torch* ]] && torch_step torch-ar-norm ar-norm
if [[ $steps == *demo* ]]; then
  step demo node dist/src/cli.js demo
fi
exit $status
