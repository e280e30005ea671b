#!/bin/bash
# First GPU run of the K-quant products over activations with one scale per 256 values (integer sums per
# super-block, qblock.cuh): CUDA tests (the HF fixtures stay behind: the tree that travels has a size
# limit; the new test against llama.cpp's outputs runs on the Q4_K_M file, a Q4_K and Q6_K mix), the
# kernel bench at 512 and 1 activation rows, then fak against llama.cpp's CUDA build and against fak's
# previous commit (01cce9e, per-32 activation scales; "base") in the same run: 1.5B Q8_0 and Q4_K_M
# pp512/tg128 (two rounds), the 27B hybrid Q4_K_M pp512/tg32 (one round).
set -u
FINAL=${OUT:-/tmp/out}; OUT=$FINAL/raw; mkdir -p $OUT
P=$FINAL/progress.txt
trap 'tar -C $FINAL -czf $FINAL/raw.tgz raw && rm -rf $FINAL/raw' EXIT
trap 'exit 1' TERM INT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
log() { echo "$(date -u +%T) +$(el)s $*" >> $P; }
log start
scripts/test-cuda.sh unpack > $OUT/unpack.txt 2>&1 || log unpack-failed
export FAK_SYNTH_TOKENIZER=$PWD/.cuda-run/shared/fixtures/tokenizers/qwen3
F=$PWD/.cuda-run/bin/fak
T=$PWD/.cuda-run/bin/cuda_backend_test
M=$(scripts/test-cuda.sh models-dir); mkdir -p $M
( LD_LIBRARY_PATH=$PWD/.cuda-run/lib $F synth --geometry qwen3.5-27b --type q4_k_m -o $M/tmp27.gguf > $OUT/synth27.txt 2>&1 \
  && mv $M/tmp27.gguf $M/qwen3.5-27b-q4_k_m.gguf ) &
mkdir -p /tmp/ll /tmp/base
python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-llama/llama.tar.xz /tmp/ll
python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-run/base.tar.xz /tmp/base
CUDALIB=$(dirname $(find /usr/local/cuda*/ /usr/lib -name 'libcublas.so*' 2>/dev/null | head -1))
L=/tmp/ll/llama/llama-bench
(
export LD_LIBRARY_PATH=$PWD/.cuda-run/lib
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
cat $OUT/gpu.txt >> $P; $F --version | head -1 >> $P
timeout 150 $T > $OUT/tests.txt 2>&1; log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|mode |step [0-9]|differ|on the GPU|missing' $OUT/tests.txt | head -30 >> $P
timeout 60 $F bench kernels --backend cuda --batch 512 --seconds 0.05 --rounds 2 > $OUT/kernels512.txt 2>&1
log kernels rc=$?
grep -E "^\|" $OUT/kernels512.txt | grep -v q8_0 | awk -F'|' '$6 ~ /1/' | head -30 >> $P
timeout 40 $F bench kernels --backend cuda --batch 1 --seconds 0.05 --rounds 2 > $OUT/kernels1.txt 2>&1
log kernels1 rc=$?
grep -E "^\|" $OUT/kernels1.txt | grep -v q8_0 | awk -F'|' '$6 ~ /1/' | head -30 >> $P
)
export LD_LIBRARY_PATH=/tmp/ll/llama:$CUDALIB
OUT=$OUT/b15 LLAMA_BENCH=$L BASE_FAK=/tmp/base/fak ROUNDS=2 timeout 200 scripts/bench-cuda.sh > $OUT/b15.txt 2>&1
log b15 rc=$?
tail -20 $OUT/b15/summary.md >> $P
while [ ! -f $M/qwen3.5-27b-q4_k_m.gguf ] && [ $(el) -lt 380 ]; do sleep 2; done
log synth27 $(tail -1 $OUT/synth27.txt)
[ -f $M/qwen3.5-27b-q4_k_m.gguf ] && OUT=$OUT/b27 GEOMETRIES=qwen3.5-27b TYPES=q4_k_m N=32 R=2 LLAMA_BENCH=$L BASE_FAK=/tmp/base/fak ROUNDS=1 timeout 150 scripts/bench-cuda.sh > $OUT/b27.txt 2>&1
log b27 rc=$?
tail -10 $OUT/b27/summary.md >> $P
log end
