#!/bin/bash
# (FAK_CUDA_GEMM_TOTAL, which this script sets for its "old" arm, was removed in 45ff158 after call 23:
# with a later binary that arm runs the current GEMM.)
# Call 22: two changes to the tensor-core GEMM, each against the loop before it.
#   Q4_K: the sub-block scales split into two mma chains (FAK_CUDA_Q4K_SPLIT=1, the default) and the
#   closed pieces' sum kept in shared memory (FAK_CUDA_GEMM_TOTAL=shared, the default); "old" is
#   FAK_CUDA_Q4K_SPLIT=0,FAK_CUDA_GEMM_TOTAL=registers in the same binary (the same bits).
#   Q8_0: the block term as one fused multiply-add and a product (other bits): the pack's fak against
#   fak-s22, the same code with the term before it.
# The CUDA op tests (defaults, and "old"); the kernel bench at 512 rows (the Q4_K settings with their bits
# compared, four warps a tile as one more setting; Q8_0 in both binaries); pp512 of the 1.5B files and the
# 2B hybrid, alternating; then the 27B hybrid Q4_K_M against llama.cpp's CUDA build with "old" as a third
# arm. The 27B is synthesized from the start on 12 threads.
# Carry: .cuda-run (scripts/test-cuda.sh pack, with fak-s22 added to its payload) and .cuda-llama
# (llama.cpp 0c1e570's CUDA build).
LIMIT=${LIMIT:-580}
. scripts/gpu-call.sh
OLD=FAK_CUDA_Q4K_SPLIT=0,FAK_CUDA_GEMM_TOTAL=registers
F22=$PWD/.cuda-run/bin/fak-s22
( $F synth --geometry qwen3.5-27b --type q4_k_m --threads 12 -o $M/tmp27.gguf > $OUT/synth27.txt 2>&1 &&
  mv $M/tmp27.gguf $M/qwen3.5-27b-q4_k_m.gguf ) &
( $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf > /dev/null 2>&1
  $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > /dev/null 2>&1
  $F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > /dev/null 2>&1; echo done > $M/small.done ) &
timeout 120 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.*' > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|differ' $OUT/tests.txt | head -12 >> $P
env ${OLD/,/ } timeout 90 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.*Gemm*:CudaOps.LargeMatrix*:CudaOps.MatMul*' > $OUT/tests-old.txt 2>&1
log tests old rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests-old.txt | tr '\n' ' ')
SH="--shape 27b-gate-up:17408+17408x5120 --shape 27b-down:5120x17408 --shape 27b-dn-in:16432x5120 --shape 1.5b-gate-up:8960+8960x1536"
timeout 100 $F bench kernels --backend cuda --batch 512 --seconds 0.05 --rounds 2 --type q4_k --type q6_k --type q8_0 $SH \
  --setting FAK_CUDA_Q4K_SPLIT=0 --setting FAK_CUDA_GEMM_TOTAL=registers --setting $OLD --setting FAK_CUDA_GEMM_WARPS=4 > $OUT/kernels-512.txt 2>&1
log kernels rc=$?; grep -iE 'differ|error' $OUT/kernels-512.txt | head -3 >> $P
for k in 1 2; do
  for b in $F22 $F; do
    timeout 40 $b bench kernels --backend cuda --batch 512 --seconds 0.05 --rounds 1 --type q8_0 $SH > $OUT/kernels-q8-$(basename $b)-$k.txt 2>&1
  done
done
log kernels-q8
while [ ! -f $M/small.done ] && [ $(el) -lt 240 ]; do sleep 1; done
for r in 1 2 3; do
  for m in q4 h2 q8; do
    for v in new old; do
      [ $((r % 2)) = 0 ] && v=$([ $v = new ] && echo old || echo new)
      [ $(el) -gt 330 ] && break 3
      if [ $m = q8 ]; then  # Q8_0: the binaries; the Q4_K settings do not touch it
        timeout 30 $([ $v = old ] && echo $F22 || echo $F) bench -m $M/$m.gguf --backend cuda -p 512 -n 64 -r 3 > $OUT/pp-$m-$v-r$r.txt 2>&1
      else
        env $([ $v = old ] && echo ${OLD/,/ }) timeout 30 $F bench -m $M/$m.gguf --backend cuda -p 512 -n 0 -r 3 > $OUT/pp-$m-$v-r$r.txt 2>&1
      fi
      log $m $v r$r $(grep -E 'pp512|tg64' $OUT/pp-$m-$v-r$r.txt | awk -F'|' '{printf "%s;", $8}')
    done
  done
done
rm -f $M/q4.gguf $M/q8.gguf $M/h2.gguf
mkdir -p /tmp/ll
python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-llama/llama.tar.xz /tmp/ll
CUDALIB=$(dirname $(find /usr/local/cuda*/ /usr/lib -name 'libcublas.so*' 2>/dev/null | head -1))
export LD_LIBRARY_PATH=/tmp/ll/llama:$CUDALIB:$LD_LIBRARY_PATH
while [ ! -f $M/qwen3.5-27b-q4_k_m.gguf ] && [ $(el) -lt $((L - 150)) ]; do sleep 2; done
log synth27 $(tail -1 $OUT/synth27.txt)
[ -f $M/qwen3.5-27b-q4_k_m.gguf ] && OUT=$OUT/b27 GEOMETRIES=qwen3.5-27b TYPES=q4_k_m N=32 R=3 LLAMA_BENCH=/tmp/ll/llama/llama-bench VARIANTS="fak= old=$OLD" ROUNDS=3 timeout $((L - $(el) - 30)) scripts/bench-cuda.sh > $OUT/b27.txt 2>&1
log b27 rc=$?; tail -12 $OUT/b27/summary.md >> $P
[ $(el) -lt $((L - 25)) ] && FAK_CUDA_PROFILE=1 FAK_LOG=debug timeout 20 $F bench -m $M/qwen3.5-27b-q4_k_m.gguf --backend cuda -p 512 -n 0 -r 1 > $OUT/prof-h27.txt 2>&1
log end
