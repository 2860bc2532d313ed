#!/usr/bin/env bash
# Everything that needs a machine with two GPUs of one host (2 H200s so far), most important first, in
# three parts of under 10 minutes each. Run from the repo root, after building and staging, as
#   SYMMKIT_GIT_REVISION=<rev> PART=1 .gpustage/boot.sh bash bench/gpu-pair.sh
#   PART=1: GEMM + all-reduce and the fused ops: their rank tests at world 2 on distinct GPUs,
#           the timeouts, `bench gemm-ar`, `ag-gemm`, `gemm-rs` and PyTorch's beside them; the
#           all-reduce + RMSNorm tests.
#   PART=2: send/recv, all-to-all and MoE: their rank tests, `bench send-recv`, `all-to-all`,
#           `moe`; the all-reduce + RMSNorm benchmark; PyTorch's figures beside both.
#   PART=3: the runtime's paths between GPUs (pooled memory read and written by the peer), the rank
#           programs on GPUs of their own (distributed.test), two simulated hosts of one GPU each
#           (the hierarchy's both levels need 4 GPUs), and `symmkit tune` for auto's tables.
# Then: copy $OUT into bench/results/h200x2/, set auto's rules from the JSON (docs/perf-notes.md says which),
# and put the figures in the README. Writes logs and JSON under $OUT (default ./out); exits non-zero if any
# step failed.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
export NCCL_NVLS_ENABLE=0
here=$(dirname "$0")
case ${PART:-1} in
  1)
    step warm node bench/warm-kernels.mjs
    step fused env STEPS="tests bench torch" bash "$here/gpu-fused.sh"
    step ar-norm-tests env STEPS=tests bash "$here/gpu-ar-norm.sh"
    ;;
  2)
    step exchange bash "$here/gpu-exchange.sh"
    step ar-norm-bench env STEPS="bench torch" bash "$here/gpu-ar-norm.sh"
    ;;
  3)
    step warm node bench/warm-kernels.mjs
    step runtime bash -c "node --test --test-reporter=spec dist/test/gpu/runtime.test.js 2>&1 | tee '$out/runtime-tests.txt'; exit \${PIPESTATUS[0]}"
    step distributed bash -c "node --test --test-concurrency=1 --test-reporter=spec dist/test/gpu/distributed.test.js 2>&1 | tee '$out/distributed-tests.txt'; exit \${PIPESTATUS[0]}"
    step hosts bash -c "node --test --test-concurrency=1 --test-reporter=spec dist/test/gpu/hosts.test.js 2>&1 | tee '$out/hosts-tests.txt'; exit \${PIPESTATUS[0]}"
    step tune node dist/src/cli.js run -n 2 dist/src/cli.js tune --dir "$out/tune" --json "$out/tune.json"
    ;;
  *)
    echo "PART is 1, 2 or 3"
    exit 2
    ;;
esac
exit $status
