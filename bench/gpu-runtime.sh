#!/usr/bin/env bash
# The runtime area on a GPU machine, in one call: doctor, the GPU tests, the README's example, the launch
# benchmark with its C floor, and the resource usage of every shipped kernel. Run from the repo root as
#   .gpustage/boot.sh bash bench/gpu-runtime.sh
# Writes its logs and JSON under $OUT (default ./out); exits non-zero if any step failed.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
step gpu nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
step doctor node dist/src/cli.js doctor
step gpu-tests bash -c "node --test --test-concurrency=1 --test-reporter=spec dist/test/gpu/*.test.js 2>&1 | tee '$out/gpu-tests.txt'; exit \${PIPESTATUS[0]}"
step quickstart node dist/examples/quickstart.js
step launch-floor bash -c "nvcc -O2 -o /tmp/launch_floor bench/native/launch_floor.c -lcuda && /tmp/launch_floor | tee '$out/launch-floor.jsonl'"
step bench-launch node dist/src/cli.js bench launch --json "$out/launch.json"
step kernels bash -c "node dist/src/cli.js kernels --out /tmp/cubins && for f in /tmp/cubins/*.cubin; do cuobjdump --dump-resource-usage \"\$f\"; done > '$out/resource-usage.txt' && grep -c 'REG' '$out/resource-usage.txt'"
exit $status
