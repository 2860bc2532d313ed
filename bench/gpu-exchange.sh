#!/usr/bin/env bash
# Send/recv, all-to-all and MoE on a multi-GPU machine, in one call: the kernel cache warmed in
# parallel, the tests (test/programs/exchange.ts and moe.ts on cuda: every algorithm bit for bit), then
# the benchmarks against NCCL, and PyTorch's (NCCL through torch.distributed) beside them. Run from the
# repo root as
#   .gpustage/boot.sh bash bench/gpu-exchange.sh
# STEPS picks steps (default "tests bench torch"); SIZES the send-recv and all-to-all sizes, TOKENS the MoE
# tokens per rank. Set SYMMKIT_GIT_REVISION to the development machine's revision (see
# gpu-collectives.sh). Writes its logs and JSON under $OUT (default ./out); exits non-zero if any step
# failed.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
export NCCL_NVLS_ENABLE=0
world=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
steps=${STEPS:-tests bench torch}
step gpu nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
step warm node bench/warm-kernels.mjs
if [[ $steps == *tests* ]]; then
  step exchange-tests node dist/src/cli.js run -n "$world" dist/test/programs/exchange.js cuda
  step moe-tests node dist/src/cli.js run -n "$world" dist/test/programs/moe.js cuda
fi
if [[ $steps == *bench* ]]; then
  step send-recv node dist/src/cli.js run -n "$world" dist/src/cli.js bench send-recv \
    --sizes "${SIZES:-4K:256M}" --json "$out/send-recv.json"
  step all-to-all node dist/src/cli.js run -n "$world" dist/src/cli.js bench all-to-all \
    --sizes "${SIZES:-4K:256M}" --json "$out/all-to-all.json"
  step moe node dist/src/cli.js run -n "$world" dist/src/cli.js bench moe \
    --tokens "${TOKENS:-128,512,4096}" --json "$out/moe.json"
fi
[[ $steps == *torch* ]] && torch_step torch-exchange send-recv,all-to-all
exit $status
