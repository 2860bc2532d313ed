#!/usr/bin/env bash
# The GEMM area on one GPU, in one call: the GEMM tests, the SASS facts of the symmkit kernels (HGMMA /
# QGMMA present, registers, no local memory), and `symmkit bench gemm` for bf16 and fp8 against
# cuBLASLt, and the split-K sweep at decode sizes (bench/gemm-split-sweep.mjs). Run from the repo root as
#   .gpustage/boot.sh bash bench/gpu-gemm.sh [extra bench arguments, e.g. --shapes 8192x8192x8192]
# Writes its logs and JSON under $OUT (default ./out); exits non-zero if any step failed.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
step gemm-tests bash -c "node --test --test-concurrency=1 --test-reporter=spec dist/test/gpu/gemm.test.js 2>&1 | tee '$out/gemm-tests.txt'; exit \${PIPESTATUS[0]}"
step sass bash -c "node dist/src/cli.js kernels --out /tmp/cubins > /dev/null && for f in /tmp/cubins/symmkit_gemm_hopper_*_grouped-none-store*.cubin; do echo \"\$f\"; cuobjdump -res-usage \"\$f\" | grep REG; cuobjdump -sass \"\$f\" > /tmp/sass.txt; echo \"HGMMA \$(grep -c HGMMA /tmp/sass.txt) QGMMA \$(grep -c QGMMA /tmp/sass.txt) LDL/STL \$(grep -c 'LDL\|STL' /tmp/sass.txt)\"; done | tee '$out/gemm-sass.txt'"
step bench-bf16 node dist/src/cli.js bench gemm --dtype bf16 --json "$out/gemm-bf16.json" "$@"
step bench-bf16-kn node dist/src/cli.js bench gemm --dtype bf16 --layout-b kn --json "$out/gemm-bf16-kn.json" "$@"
step bench-fp8 node dist/src/cli.js bench gemm --dtype fp8e4m3 --json "$out/gemm-fp8.json" "$@"
step split-sweep bash -c "node bench/gemm-split-sweep.mjs | tee '$out/gemm-split-sweep.txt'"
exit $status
