#!/bin/bash
# Call 24 (call 23 without the 27B, for lack of device time): the CUDA op tests of 89af59a (the GEMM's
# closed pieces' sum in shared memory, Q6_K rows of four pieces on four warps), the GEMM's again with the
# sum in registers; the kernel bench at 512 rows against "old" (FAK_CUDA_GEMM_TOTAL=registers,
# FAK_CUDA_GEMM_WARPS=8: the code before, the same bits); then pp512 of the 2B hybrid and the 1.5B Q4_K_M
# file under both, alternating, as time allows. Carry: .cuda-run.
LIMIT=${LIMIT:-170}
. scripts/gpu-call.sh
OLD=FAK_CUDA_GEMM_TOTAL=registers,FAK_CUDA_GEMM_WARPS=8
( $F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > /dev/null 2>&1
  $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf > /dev/null 2>&1; echo done > $M/small.done ) &
timeout 100 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.*' > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|differ' $OUT/tests.txt | head -12 >> $P
FAK_CUDA_GEMM_TOTAL=registers timeout 40 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.MatMul*' > $OUT/tests-registers.txt 2>&1
log tests registers rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests-registers.txt | tr '\n' ' ')
SH="--shape 27b-gate-up:17408+17408x5120 --shape 27b-down:5120x17408 --shape 27b-dn-in:10240x5120 --shape 1.5b-down:1536x8960"
timeout 40 $F bench kernels --backend cuda --batch 512 --seconds 0.04 --rounds 2 --type q4_k --type q6_k --type q8_0 $SH \
  --setting $OLD > $OUT/kernels-512.txt 2>&1
log kernels rc=$?; grep -iE 'differ|error' $OUT/kernels-512.txt | head -3 >> $P
while [ ! -f $M/small.done ] && [ $(el) -lt $((L - 20)) ]; do sleep 1; done
for r in 1 2 3; do
  for m in h2 q4; do
    for v in new old; do
      [ $((r % 2)) = 0 ] && v=$([ $v = new ] && echo old || echo new)
      [ $(el) -gt $((L - 6)) ] && break 3
      env $([ $v = old ] && echo ${OLD/,/ }) timeout 6 $F bench -m $M/$m.gguf --backend cuda -p 512 -n 0 -r 3 > $OUT/pp-$m-$v-r$r.txt 2>&1
      log $m $v r$r $(grep -E 'pp512' $OUT/pp-$m-$v-r$r.txt | awk -F'|' '{printf "%s;", $8}')
    done
  done
done
log end
