#!/bin/bash
# Call 9 (next round, not yet run): d753e52 (one block more a multiprocessor for the one-warp-a-row Q4_K
# and Q6_K products) on an H200 against llama.cpp's CUDA build and against fak at d941398 (the commit
# before it, "base") in the same run: 1.5B Q8_0 and Q4_K_M pp512/tg128 (two rounds), 7B Q4_K_M (one
# round), the 27B hybrid Q4_K_M pp512/tg32 (one round; synthesized here meanwhile).
# Carry: .cuda-run (`scripts/test-cuda.sh pack`, then base.tar.xz beside payload.tar.xz: fak built at
# d941398, stripped, as `fak` in a tar; .cuda-run/shared/fixtures/llamacpp-tiny may go, no tests run
# here) and .cuda-llama (llama.cpp 0c1e570's CUDA build, llama.tar.xz). models/ and tests/fixtures/hf
# stay behind (size).
. scripts/gpu-call.sh
( $F synth --geometry qwen3.5-27b --type q4_k_m -o $M/tmp27.gguf > $OUT/synth27.txt 2>&1 &&
  mv $M/tmp27.gguf $M/qwen3.5-27b-q4_k_m.gguf ) &
mkdir -p /tmp/ll /tmp/base
python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-llama/llama.tar.xz /tmp/ll
python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-run/base.tar.xz /tmp/base
CUDALIB=$(dirname $(find /usr/local/cuda*/ /usr/lib -name 'libcublas.so*' 2>/dev/null | head -1))
LB=/tmp/ll/llama/llama-bench
export LD_LIBRARY_PATH=/tmp/ll/llama:$CUDALIB:$LD_LIBRARY_PATH
OUT=$OUT/b15 LLAMA_BENCH=$LB BASE_FAK=/tmp/base/fak ROUNDS=2 timeout $((L * 35 / 100)) scripts/bench-cuda.sh > $OUT/b15.txt 2>&1
log b15 rc=$?; tail -12 $OUT/b15/summary.md >> $P
OUT=$OUT/b7 GEOMETRIES=qwen2.5-7b TYPES=q4_k_m LLAMA_BENCH=$LB BASE_FAK=/tmp/base/fak ROUNDS=1 timeout $((L * 20 / 100)) scripts/bench-cuda.sh > $OUT/b7.txt 2>&1
log b7 rc=$?; tail -6 $OUT/b7/summary.md >> $P
while [ ! -f $M/qwen3.5-27b-q4_k_m.gguf ] && [ $(el) -lt $((L * 70 / 100)) ]; do sleep 2; done
log synth27 $(tail -1 $OUT/synth27.txt)
[ -f $M/qwen3.5-27b-q4_k_m.gguf ] && OUT=$OUT/b27 GEOMETRIES=qwen3.5-27b TYPES=q4_k_m N=32 R=2 LLAMA_BENCH=$LB BASE_FAK=/tmp/base/fak ROUNDS=1 timeout $((L - $(el) - 10)) scripts/bench-cuda.sh > $OUT/b27.txt 2>&1
log b27 rc=$?; tail -6 $OUT/b27/summary.md >> $P
log end
