set -u
export SYMMKIT_GIT_REVISION=$(cat .rev) NCCL_NVLS_ENABLE=0
mkdir -p $OUT/r
t0=$SECONDS
node bench/warm-kernels.mjs > $OUT/r/warm.txt 2>&1; echo "warm rc=$? $((SECONDS-t0))s"
node bench/gemm-overlap.mjs b-256x14336x8192,b-384x28672x4096,b-200x28672x4096,b-8192x8192x8192,f-256x14336x8192 > $OUT/r/overlap.txt 2>&1; echo "overlap rc=$? $((SECONDS-t0))s"; cat $OUT/r/overlap.txt | tail -8
timeout 200 node --test --test-concurrency=1 --test-reporter=spec dist/test/gpu/gemm.test.js dist/test/gpu/decode-gemm.test.js > $OUT/r/gemm-tests.txt 2>&1; echo "tests rc=$? $((SECONDS-t0))s"; grep -E "^# (pass|fail)" $OUT/r/gemm-tests.txt
for w in 2 4 3; do
  timeout 110 node dist/src/cli.js run -n $w --share-gpus dist/test/programs/gemm-ar.js cuda > $OUT/r/gemm-ar-w$w.txt 2>&1; echo "gemm-ar w$w rc=$? $((SECONDS-t0))s"; tail -2 $OUT/r/gemm-ar-w$w.txt
  ((SECONDS-t0 > 470)) && break
done
cd $OUT && tar czf results.tgz r && rm -rf r
