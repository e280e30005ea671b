#!/bin/bash
# Call 26: the rules changed from call 25's measurements: one warp a row for one-row products whose
# pieces are shorter than a round (fewer than 32 segments), and Q6_K GEMM tiles on four warps only in
# grids of at least two waves. The CUDA op tests and the hybrid's alone-against-batch test; the kernel
# bench at 512 rows for the Q6_K products the GEMM rule moves (default against FAK_CUDA_GEMM_WARPS=4,
# the previous choice there); pp512 of the 2B hybrid and the 1.5B Q4_K_M file the same way,
# alternating; tg128 of the 2B hybrid against 45ff158 ("base", before call 25's shadow change too).
# Carry: .cuda-run (with fak-base.xz), .cuda-fixtures (qwen35-tiny only).
LIMIT=${LIMIT:-200}
. scripts/gpu-call.sh
python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
  .cuda-run/fak-base.xz .cuda-run/fak-base && chmod +x .cuda-run/fak-base
FB=$PWD/.cuda-run/fak-base
$FB --version | head -1 >> $P
( $F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > /dev/null 2>&1
  $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf > /dev/null 2>&1; touch $M/small.done ) &
timeout 100 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.*:CudaHost.*:CudaModel.HybridSequences*' \
  > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|differ' $OUT/tests.txt | head -12 >> $P
SH="--shape 2b-down:2048x6144 --shape 1.5b-down:1536x8960 --shape 7b-down:3584x18944 --shape 27b-v:2048x5120"
timeout 60 $F bench kernels --backend cuda --batch 512 --seconds 0.05 --rounds 2 --type q6_k $SH \
  --setting FAK_CUDA_GEMM_WARPS=4 > $OUT/kernels-512.txt 2>&1
log kernels rc=$?; grep -iE 'differ|error' $OUT/kernels-512.txt | head -3 >> $P
while [ ! -f $M/small.done ] && [ $(el) -lt $((L - 60)) ]; do sleep 1; done
for r in 1 2 3 4; do
  for m in h2 q4; do
    for v in new w4; do
      [ $((r % 2)) = 0 ] && v=$([ $v = new ] && echo w4 || echo new)
      [ $(el) -gt $((L - 45)) ] && break 3
      env $([ $v = w4 ] && echo FAK_CUDA_GEMM_WARPS=4) timeout 8 $F bench -m $M/$m.gguf --backend cuda -p 512 -n 0 -r 3 > $OUT/pp-$m-$v-r$r.txt 2>&1
      log pp $m $v r$r $(grep -E 'pp512' $OUT/pp-$m-$v-r$r.txt | awk -F'|' '{printf "%s;", $8}')
    done
  done
done
for r in 1 2 3 4; do
  for v in new base; do
    [ $((r % 2)) = 0 ] && v=$([ $v = new ] && echo base || echo new)
    [ $(el) -gt $((L - 5)) ] && break 2
    b=$([ $v = new ] && echo $F || echo $FB)
    timeout 12 $b bench -m $M/h2.gguf --backend cuda -p 0 -n 128 -r 3 > $OUT/tg-h2-$v-r$r.txt 2>&1
    log tg h2 $v r$r $(grep -E 'tg128' $OUT/tg-h2-$v-r$r.txt | awk -F'|' '{printf "%s;", $8}')
  done
done
log end
