#!/bin/bash
# Call 20: the 27B hybrid Q4_K_M (all 64 layers) with the plain-launch prompt steps and the
# convolution's prompt kernel against llama.cpp's CUDA build in the same run; pp512 / tg32, two rounds.
# (Planned with fak 735add3 as a third arm; it runs without it: the earlier ratios against llama.cpp
# in docs/bench/gpu.md are the comparison.) The 27B is synthesized from the start on 12 threads
# (~4.5 minutes); the 2B hybrid against llama.cpp runs meanwhile.
# Carry: .cuda-run (scripts/test-cuda.sh pack) and .cuda-llama (llama.cpp 0c1e570's CUDA build,
# llama.tar.xz).
. scripts/gpu-call.sh
( $F synth --geometry qwen3.5-27b --type q4_k_m --threads 12 -o $M/tmp27.gguf > $OUT/synth27.txt 2>&1 &&
  mv $M/tmp27.gguf $M/qwen3.5-27b-q4_k_m.gguf ) &
mkdir -p /tmp/ll
python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-llama/llama.tar.xz /tmp/ll
CUDALIB=$(dirname $(find /usr/local/cuda*/ /usr/lib -name 'libcublas.so*' 2>/dev/null | head -1))
export LD_LIBRARY_PATH=/tmp/ll/llama:$CUDALIB:$LD_LIBRARY_PATH
OUT=$OUT/b2 GEOMETRIES=qwen3.5-2b TYPES=q4_k_m N=64 R=3 LLAMA_BENCH=/tmp/ll/llama/llama-bench ROUNDS=2 timeout $((L * 35 / 100)) scripts/bench-cuda.sh > $OUT/b2.txt 2>&1
log b2 rc=$?; tail -6 $OUT/b2/summary.md >> $P
while [ ! -f $M/qwen3.5-27b-q4_k_m.gguf ] && [ $(el) -lt $((L - 200)) ]; do sleep 2; done
log synth27 $(tail -1 $OUT/synth27.txt)
[ -f $M/qwen3.5-27b-q4_k_m.gguf ] && OUT=$OUT/b27 GEOMETRIES=qwen3.5-27b TYPES=q4_k_m N=32 R=3 LLAMA_BENCH=/tmp/ll/llama/llama-bench ROUNDS=2 timeout $((L - $(el) - 40)) scripts/bench-cuda.sh > $OUT/b27.txt 2>&1
log b27 rc=$?; tail -6 $OUT/b27/summary.md >> $P
[ $(el) -lt $((L - 35)) ] && FAK_CUDA_PROFILE=1 FAK_LOG=debug timeout 30 $F bench -m $M/qwen3.5-27b-q4_k_m.gguf --backend cuda -p 512 -n 0 -r 1 > $OUT/prof-h27.txt 2>&1
log end
