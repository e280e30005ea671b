#!/bin/bash
# Call 16 (with SHORT=1: without the 27B): the GEMM loop with one barrier a segment (default) against two (FAK_CUDA_GEMM_SYNC=2), and the
# DeltaNet convolution's prompt kernel (default) against the serial one (FAK_CUDA_CONV_SERIAL=1). The
# 27B hybrid Q4_K_M is synthesized from the start on 12 threads. Meanwhile: the CUDA op tests (the GEMM
# bit tests, the new bit test of the two convolution kernels, the DeltaNet layer against the CPU; the HF
# fixtures stay behind for size, so their model tests run only with TESTS=* and .cuda-fixtures carried), the GEMM bit tests again under
# the two-barrier loop, the kernel bench at 512 rows (bits compared), pp512 of the 1.5B files and the 2B
# hybrid under each setting, alternating. Then the 27B's pp512 / tg32 against llama.cpp's CUDA build,
# with the arm "old" (both switches back: the code before this change), two rounds.
# Carry: .cuda-run (scripts/test-cuda.sh pack) and .cuda-llama (llama.cpp 0c1e570's CUDA build).
LIMIT=${LIMIT:-580}
. scripts/gpu-call.sh
[ -z "${SHORT:-}" ] && ( $F synth --geometry qwen3.5-27b --type q4_k_m --threads 12 -o $M/tmp27.gguf > $OUT/synth27.txt 2>&1 &&
  mv $M/tmp27.gguf $M/qwen3.5-27b-q4_k_m.gguf ) &
( $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf > /dev/null 2>&1
  $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > /dev/null 2>&1
  $F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > /dev/null 2>&1; echo done > $M/small.done ) &
timeout 120 .cuda-run/bin/cuda_backend_test --gtest_filter="${TESTS:-CudaOps.*}" > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|differ' $OUT/tests.txt | head -12 >> $P
FAK_CUDA_GEMM_SYNC=2 timeout 60 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.*Gemm*:CudaOps.LargeMatrix*:CudaOps.MatMul*' > $OUT/tests-sync2.txt 2>&1
log tests sync2 rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests-sync2.txt | tr '\n' ' ')
SH="--shape 27b-gate-up:17408+17408x5120 --shape 27b-down:5120x17408 --shape 1.5b-gate-up:8960+8960x1536"
timeout 80 $F bench kernels --backend cuda --batch 512 --seconds 0.05 --rounds ${KROUNDS:-2} --type q4_k --type q6_k --type q8_0 $SH --setting FAK_CUDA_GEMM_SYNC=2 > $OUT/kernels-512.txt 2>&1
log kernels rc=$?
while [ ! -f $M/small.done ] && [ $(el) -lt 200 ]; do sleep 1; done
for r in 1 2; do
  for m in ${PPMODELS:-q4 q8 h2}; do
    for v in new FAK_CUDA_GEMM_SYNC=2 FAK_CUDA_CONV_SERIAL=1; do
      [ $m != h2 ] && [ $v = FAK_CUDA_CONV_SERIAL=1 ] && continue
      [ $(el) -gt ${PPUNTIL:-290} ] && break 3
      env $([ $v = new ] || echo $v) timeout 30 $F bench -m $M/$m.gguf --backend cuda -p 512 -n 0 -r 3 > $OUT/pp-$m-${v##*_}-r$r.txt 2>&1
      log $m $v r$r $(grep -E 'pp512' $OUT/pp-$m-${v##*_}-r$r.txt | awk -F'|' '{printf "%s;", $8}')
    done
  done
done
FAK_CUDA_PROFILE=1 FAK_LOG=debug timeout 20 $F bench -m $M/h2.gguf --backend cuda -p 512 -n 0 -r 1 > $OUT/prof-h2.txt 2>&1
rm -f $M/q4.gguf $M/q8.gguf $M/h2.gguf
[ -n "${SHORT:-}" ] && { log end; exit 0; }
mkdir -p /tmp/ll
python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-llama/llama.tar.xz /tmp/ll
CUDALIB=$(dirname $(find /usr/local/cuda*/ /usr/lib -name 'libcublas.so*' 2>/dev/null | head -1))
export LD_LIBRARY_PATH=/tmp/ll/llama:$CUDALIB:$LD_LIBRARY_PATH
while [ ! -f $M/qwen3.5-27b-q4_k_m.gguf ] && [ $(el) -lt $((L - 150)) ]; do sleep 2; done
log synth27 $(tail -1 $OUT/synth27.txt)
[ -f $M/qwen3.5-27b-q4_k_m.gguf ] && OUT=$OUT/b27 GEOMETRIES=qwen3.5-27b TYPES=q4_k_m N=32 R=3 LLAMA_BENCH=/tmp/ll/llama/llama-bench VARIANTS="fak= old=FAK_CUDA_GEMM_SYNC=2,FAK_CUDA_CONV_SERIAL=1" ROUNDS=2 timeout $((L - $(el) - 8)) scripts/bench-cuda.sh > $OUT/b27.txt 2>&1
log b27 rc=$?; tail -8 $OUT/b27/summary.md >> $P
log end
