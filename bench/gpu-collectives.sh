#!/usr/bin/env bash
# The collectives area on a multi-GPU machine, in one call: the benchmarks (every implementation
# validated, then graph-timed against NCCL) on all GPUs, tune tables, the demo, then the distributed
# tests at world sizes 2, 3 and 4. Run from the repo root as
#   .gpustage/boot.sh bash bench/gpu-collectives.sh
# STEPS picks steps (default "bench tests"; also "tune": tables for world sizes 4, 3 and 2, "link": the
# NVLink bandwidth probe at world sizes 4 and 2, "demo");
# AR_SIZES, AG_SIZES, RS_SIZES, TUNE_SIZES the sizes.
# Set SYMMKIT_GIT_REVISION to the revision computed on the development machine: the GPU machine's copy
# of the tree carries a stale git history, so git there names an older commit.
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
if [[ $steps == *link* ]]; then
  for n in 4 2; do
    if ((n <= world)); then
      step link-w$n node dist/src/cli.js run -n $n dist/src/cli.js bench link --json "$out/link-w$n.json"
    fi
  done
fi
if [[ $steps == *tune* ]]; then
  for n in 4 3 2; do
    if ((n <= world)); then
      step tune-w$n node dist/src/cli.js run -n $n dist/src/cli.js tune --sizes "${TUNE_SIZES:-4K:64M}" --dir "$out/tune" --json "$out/tune-w$n.json"
    fi
  done
fi
if [[ $steps == *demo* ]]; then
  step demo bash -c "node dist/src/cli.js demo 2>&1 | tee '$out/demo.txt'; exit \${PIPESTATUS[0]}"
fi
if [[ $steps == *tests* ]]; then
  step distributed-tests bash -c "node --test --test-reporter=spec dist/test/gpu/distributed.test.js 2>&1 | tee '$out/distributed-tests.txt'; exit \${PIPESTATUS[0]}"
fi
exit $status
