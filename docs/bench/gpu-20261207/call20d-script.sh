#!/bin/bash
# Call 20d (the same machine, warm, the 27B file still in /dev/shm): two more alternating rounds.
. scripts/gpu-call.sh; CUDALIB=$(dirname $(find /usr/local/cuda*/ /usr/lib -name 'libcublas.so*' 2>/dev/null | head -1)); export LD_LIBRARY_PATH=/tmp/ll/llama:$CUDALIB:$LD_LIBRARY_PATH; OUT=$OUT/b27 GEOMETRIES=qwen3.5-27b TYPES=q4_k_m N=32 R=2 LLAMA_BENCH=/tmp/ll/llama/llama-bench ROUNDS=2 timeout 110 scripts/bench-cuda.sh > $OUT/b27.txt 2>&1; log b27 rc=$?; tail -4 $OUT/b27/summary.md >> $P; cat $P
