#!/usr/bin/env bash
# The GPU suite at one world size, in one call: every rank program of test/gpu/ranks, and collectives,
# fused, gemm-ar, ar-norm, exchange and moe (programs both backends run, test/programs, here on cuda), on
# the first WORLD GPUs (each timed, its output in $OUT), the fused ops' missing-rank timeouts, then the fault tests
# (faults, fault-matrix: their rank programs at this world). Run from the repo root, after building and
# staging, as
#   SYMMKIT_GIT_REVISION=<rev> WORLD=4 .gpustage/boot.sh bash bench/gpu-suite.sh
# PROGRAMS picks rank programs (default: all of them; empty: none); FAULTS picks the fault tests (default: faults
# fault-matrix; 0: none); TIMEOUTS=0 skips the fused timeouts; EXAMPLES=0 skips the shipped examples
# (dist/examples/*.js, each under symmkit run -n WORLD). The kernel cache is warmed first (many processes
# at once). Exits non-zero if any step failed; $OUT/suite-w$WORLD.txt is the summary (program, status,
# seconds). At world 4 the whole suite took about 640 s (the host references, faster since, should save about
# 30 s of it), more than one call may run: run it as
#   WORLD=4 FAULTS=faults ...gpu-suite.sh, then WORLD=4 PROGRAMS= TIMEOUTS=0 EXAMPLES=0 FAULTS=fault-matrix ...
set -uo pipefail
source "$(dirname "$0")/lib.sh"
export NCCL_NVLS_ENABLE=0
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
world=${WORLD:-$gpus}
if ((world > gpus)); then
  echo "WORLD=$world needs $world GPUs; this machine has $gpus"
  exit 2
fi
CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((world - 1)))
export CUDA_VISIBLE_DEVICES
programs=${PROGRAMS-symmetric collectives collectives-large fused gemm-ar ar-norm exchange moe}
summary="$out/suite-w$world.txt"
: >"$summary"
timed() {
  local name=$1
  shift
  local t0=$SECONDS
  step "$name" "$@"
  local rc=$?
  echo "$name $([ $rc = 0 ] && echo pass || echo FAIL) $((SECONDS - t0)) s" | tee -a "$summary"
}
ranks() {
  local name=$1
  shift
  local program="dist/test/gpu/ranks/$name.js"
  # A program both backends run lives in test/programs and takes its backend.
  [[ -f dist/test/programs/$name.js ]] && program="dist/test/programs/$name.js cuda"
  timed "$name-w$world" bash -c "$* node dist/src/cli.js run -n $world $program 2>&1 | tee '$out/$name-w$world.txt'; exit \${PIPESTATUS[0]}"
}
step gpu nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
timed warm node bench/warm-kernels.mjs
for p in $programs; do ranks "$p"; done
[[ ${TIMEOUTS:-1} == 0 ]] || for op in rs ar ar-staging ag; do
  timed "fused-timeout-$op-w$world" bash -c "SYMMKIT_SYNC_TIMEOUT_MS=3000 FUSED_OP=$op node dist/src/cli.js run -n $world dist/test/gpu/ranks/fused-timeout.js 2>&1 | tee -a '$out/fused-timeout-w$world.txt'; exit \${PIPESTATUS[0]}"
done
if [[ ${EXAMPLES:-1} != 0 ]]; then
  for js in dist/examples/*.js; do
    e=$(basename "$js" .js)
    timed "example-$e-w$world" bash -c "node dist/src/cli.js run -n $world $js 2>&1 | tee '$out/example-$e-w$world.txt'; exit \${PIPESTATUS[0]}"
  done
fi
if [[ ${FAULTS:-} != 0 ]]; then
  for t in ${FAULTS:-faults fault-matrix}; do
    timed "$t-test-w$world" bash -c "node --test --test-concurrency=1 --test-reporter=spec dist/test/gpu/$t.test.js 2>&1 | tee '$out/$t-tests-w$world.txt'; exit \${PIPESTATUS[0]}"
  done
fi
cat "$summary"
exit $status
