#!/bin/bash
# (FAK_CUDA_GEMM_TOTAL, which this script sets for its "old" arm, was removed in 45ff158 after call 23:
# with a later binary that arm runs the current GEMM.)
# Call 23: what call 22 kept. The GEMM's closed pieces' sum in shared memory for every format and Q6_K's
# rows of four pieces on four warps a tile, against the code before them ("old":
# FAK_CUDA_GEMM_TOTAL=registers,FAK_CUDA_GEMM_WARPS=8, the same bits). The CUDA op tests under both
# (the GEMM's with four and eight warps among them); the kernel bench at 512 rows; pp512 of the 2B hybrid
# and the 1.5B Q4_K_M file under both, alternating, while the host synthesizes the 27B hybrid Q4_K_M (16
# threads, ~390 s); then the 27B against llama.cpp's CUDA build with "old" as a third arm, and where a
# 27B decode step goes op by op (FAK_CUDA_PROFILE=1). LIMIT=590; NO27=1 leaves the 27B out (call 24).
# Carry: .cuda-run (scripts/test-cuda.sh pack), and for the 27B .cuda-llama (llama.cpp 0c1e570's CUDA build).
LIMIT=${LIMIT:-590}
. scripts/gpu-call.sh
OLD=FAK_CUDA_GEMM_TOTAL=registers,FAK_CUDA_GEMM_WARPS=8
B27=$M/qwen3.5-27b-q4_k_m.gguf
[ -z "${NO27:-}" ] && ( $F synth --geometry qwen3.5-27b --type q4_k_m -o $M/tmp27.gguf > $OUT/synth27.txt 2>&1 &&
  mv $M/tmp27.gguf $B27 ) &
timeout 100 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.*' > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|differ' $OUT/tests.txt | head -12 >> $P
FAK_CUDA_GEMM_TOTAL=registers timeout 60 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.*Gemm*:CudaOps.LargeMatrix*:CudaOps.MatMul*' > $OUT/tests-registers.txt 2>&1
log tests registers rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests-registers.txt | tr '\n' ' ')
SH="--shape 27b-gate-up:17408+17408x5120 --shape 27b-down:5120x17408 --shape 27b-dn-in:16432x5120 --shape 1.5b-down:1536x8960"
timeout 60 $F bench kernels --backend cuda --batch 512 --seconds 0.05 --rounds 2 --type q4_k --type q6_k --type q8_0 $SH \
  --setting $OLD > $OUT/kernels-512.txt 2>&1
log kernels rc=$?; grep -iE 'differ|error' $OUT/kernels-512.txt | head -3 >> $P
$F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > /dev/null 2>&1
$F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf > /dev/null 2>&1
log small models
# A/B rounds until the 27B file is there (or, without it, until the end).
for r in 1 2 3 4 5 6; do
  for m in h2 q4; do
    for v in new old; do
      [ $((r % 2)) = 0 ] && v=$([ $v = new ] && echo old || echo new)
      [ $(el) -gt $((L - 8)) ] && break 3
      [ -z "${NO27:-}" ] && [ -f $B27 ] && break 3
      env $([ $v = old ] && echo ${OLD/,/ }) timeout 8 $F bench -m $M/$m.gguf --backend cuda -p 512 -n 0 -r 3 > $OUT/pp-$m-$v-r$r.txt 2>&1
      log $m $v r$r $(grep -E 'pp512' $OUT/pp-$m-$v-r$r.txt | awk -F'|' '{printf "%s;", $8}')
    done
  done
done
if [ -z "${NO27:-}" ]; then
  llama_cuda
  while [ ! -f $B27 ] && [ $(el) -lt $((L - 120)) ]; do sleep 2; done
  log synth27 $(tail -1 $OUT/synth27.txt)
  if [ -f $B27 ]; then
    # Rounds of ~48 s each (three arms), as many as fit before the profile, at most three.
    n=$(( (L - $(el) - 70) / 48 )); [ $n -gt 3 ] && n=3; [ $n -lt 1 ] && n=1
    OUT=$OUT/b27 GEOMETRIES=qwen3.5-27b TYPES=q4_k_m N=32 R=3 VARIANTS="fak= old=$OLD" ROUNDS=$n \
      timeout $((L - $(el) - 45)) scripts/bench-cuda.sh > $OUT/b27.txt 2>&1
    log b27 rc=$?; tail -6 $OUT/b27/summary.md >> $P
    FAK_CUDA_PROFILE=1 FAK_LOG=debug timeout $((L - $(el) - 5)) $F bench -m $B27 --backend cuda -p 16 -n 6 -r 1 > $OUT/prof-h27-tg.txt 2>&1
    log prof27 rc=$?; grep 'step of 1 rows' $OUT/prof-h27-tg.txt | tail -1 | cut -c1-1500 >> $P
  fi
  rm -f $B27
fi
log end
