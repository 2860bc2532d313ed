#!/usr/bin/env bash
# The collectives area on a multi-GPU machine, in one call: the benchmarks (every implementation
# validated, then graph-timed against NCCL) on all GPUs, then the distributed tests at world sizes 2, 3
# and 4. Run from the repo root as
#   .gpustage/boot.sh bash bench/gpu-collectives.sh
# STEPS picks steps (default "bench tests"); AR_SIZES, AG_SIZES, RS_SIZES the benchmark sizes.
# Writes its logs and JSON under $OUT (default ./out); exits non-zero if any step failed.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
export NCCL_NVLS_ENABLE=0
world=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
steps=${STEPS:-bench tests}
bench() {
  node dist/src/cli.js run -n "$world" dist/src/cli.js bench "$@"
}
step gpu nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
if [[ $steps == *bench* ]]; then
  step all-reduce bench all-reduce --sizes "${AR_SIZES:-4K:4M}" --json "$out/all-reduce.json"
  step all-gather bench all-gather --sizes "${AG_SIZES:-1K:1M}" --json "$out/all-gather.json"
  step reduce-scatter bench reduce-scatter --sizes "${RS_SIZES:-1K:1M}" --json "$out/reduce-scatter.json"
fi
if [[ $steps == *tests* ]]; then
  step distributed-tests bash -c "node --test --test-reporter=spec dist/test/gpu/distributed.test.js 2>&1 | tee '$out/distributed-tests.txt'; exit \${PIPESTATUS[0]}"
fi
exit $status
