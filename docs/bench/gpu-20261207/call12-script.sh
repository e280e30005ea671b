#!/bin/bash
# Call 12: fak 70473e5 (the delta rule on eight lanes a column) on an H200 against llama.cpp's CUDA build
# in the same run: the 1.5B Q8_0 and Q4_K_M files (pp512 / tg128, two rounds), then the 27B hybrid Q4_K_M
# (pp512 / tg32, one round, with b86b1e1 as the arm "base": the delta rule on four lanes), synthesized
# meanwhile on 14 of the host's 16 threads. Before them, sixteen lanes a column (fak-l16, with its own
# cuda_backend_test for the delta-rule layer against the CPU backend) against eight on the 2B hybrid,
# alternating.
# Carry: .cuda-run (`scripts/test-cuda.sh pack`, llamacpp-tiny removed, fak-base, fak-l16 and
# cuda_backend_test-l16 added) and .cuda-llama (llama.cpp 0c1e570's CUDA build, llama.tar.xz).
. scripts/gpu-call.sh
B=$PWD/.cuda-run/bin/fak-base
L16=$PWD/.cuda-run/bin/fak-l16
$F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > $OUT/synth-h2.txt 2>&1
log synth h2 $(tail -1 $OUT/synth-h2.txt)
( $F synth --geometry qwen3.5-27b --type q4_k_m --threads 14 -o $M/tmp27.gguf > $OUT/synth27.txt 2>&1 &&
  mv $M/tmp27.gguf $M/qwen3.5-27b-q4_k_m.gguf ) &
mkdir -p /tmp/ll
python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-llama/llama.tar.xz /tmp/ll
CUDALIB=$(dirname $(find /usr/local/cuda*/ /usr/lib -name 'libcublas.so*' 2>/dev/null | head -1))
LB=/tmp/ll/llama/llama-bench
timeout 60 .cuda-run/bin/cuda_backend_test-l16 --gtest_filter='CudaOps.DeltaNetLayerMatchesTheCpuBackend' > $OUT/tests-l16.txt 2>&1
log tests-l16 rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests-l16.txt | tr '\n' ' ')
for r in 1 2 3 4 5; do
  for b in $F $L16; do
    [ $(el) -gt $((L * 20 / 100)) ] && break 2
    timeout 25 $b bench -m $M/h2.gguf --backend cuda -p 512 -n 32 -r 2 > $OUT/h2-$(basename $b)-r$r.txt 2>&1
    log $(basename $b) r$r $(grep -E 'pp512|tg32' $OUT/h2-$(basename $b)-r$r.txt | awk -F'|' '{printf "%s;", $8}')
  done
done
export LD_LIBRARY_PATH=/tmp/ll/llama:$CUDALIB:$LD_LIBRARY_PATH
OUT=$OUT/b15 LLAMA_BENCH=$LB ROUNDS=2 timeout $((L * 30 / 100)) scripts/bench-cuda.sh > $OUT/b15.txt 2>&1
log b15 rc=$?; tail -12 $OUT/b15/summary.md >> $P
while [ ! -f $M/qwen3.5-27b-q4_k_m.gguf ] && [ $(el) -lt $((L * 75 / 100)) ]; do sleep 2; done
log synth27 $(tail -1 $OUT/synth27.txt)
[ -f $M/qwen3.5-27b-q4_k_m.gguf ] && OUT=$OUT/b27 GEOMETRIES=qwen3.5-27b TYPES=q4_k_m N=32 R=2 LLAMA_BENCH=$LB BASE_FAK=$B ROUNDS=1 timeout $((L - $(el) - 5)) scripts/bench-cuda.sh > $OUT/b27.txt 2>&1
log b27 rc=$?; tail -6 $OUT/b27/summary.md >> $P
log end
